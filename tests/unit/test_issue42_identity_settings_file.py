"""Issue 42 item 1: the identity provider's settings in the settings file and as `devagent serve`
flags, beside the environment: the flag over the variable over the file, as every setting; a
bad value or a mistyped key named as the operator wrote it; no flag for the client secret."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from devagent.a2a.cli import ServeFlags, serve_settings
from devagent.common.identity.settings import oidc_settings
from devagent.config import ConfigError, load_config, serve_file_settings

FILE = """
[devagent]
model = "scripted:x"
oidc_issuer = "https://kc.example.com/realms/team/"
oidc_audience = ["https://devagent.example.com", "other"]
oidc_roles_claim = "realm_access.roles"
oidc_operator_role = "admins"
oidc_client_id = "from-file"
oidc_client_secret = "file-secret"
oidc_scopes = ["openid", "profile"]
oidc_timeout = 2.5
oidc_leeway = 10
"""


def test_issue42_item1_oidc_settings_from_the_settings_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(FILE)
    config = load_config(environ={"DEVAGENT_CONFIG": str(path)})  # the core's reader accepts the keys
    file = serve_file_settings(config.config_path)
    s = oidc_settings({}, file)
    assert s is not None
    assert s.issuer == "https://kc.example.com/realms/team"
    assert s.audiences == ("https://devagent.example.com", "other")
    assert (s.identity_claim, s.roles_claim, s.operator_role) == ("sub", "realm_access.roles", "admins")
    assert (s.client_id, s.client_secret) == ("from-file", "file-secret")
    assert (s.scopes, s.timeout, s.leeway) == (("openid", "profile"), 2.5, 10)


def test_issue42_item1_flag_over_environment_over_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(FILE)
    env = {
        "DEVAGENT_OIDC_ROLES_CLAIM": "roles",
        "DEVAGENT_OIDC_CLIENT_ID": "from-env",
        "DEVAGENT_OIDC_CLIENT_SECRET": "env-secret",
    }
    flags = ServeFlags(
        workspace_roots=[tmp_path], oidc={"client_id": "from-flag", "issuer": None, "identity_claim": "email"}
    )
    settings = serve_settings(env, flags, path)
    s = settings.oidc
    assert s is not None
    assert s.issuer == "https://kc.example.com/realms/team"  # the file's: no flag, no variable
    assert s.roles_claim == "roles"  # the variable over the file
    assert s.client_id == "from-flag"  # the flag over both
    assert s.identity_claim == "email"
    assert s.client_secret == "env-secret"
    # the flag turns the IdP on without file or variable
    only_flag = serve_settings(
        {}, ServeFlags(workspace_roots=[tmp_path], oidc={"issuer": "http://127.0.0.1:9"})
    )
    assert only_flag.oidc is not None and only_flag.oidc.issuer == "http://127.0.0.1:9"
    assert serve_settings({}, ServeFlags(workspace_roots=[tmp_path]), None).oidc is None


def test_issue42_item1_bad_values_are_named_where_written(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    cases = {
        'oidc_issuer = "kc.example.com"': "oidc_issuer in",
        'oidc_issuer = "https://kc"\noidc_timeout = "soon"': "oidc_timeout in",
        'oidc_issuer = "https://kc"\noidc_timeout = true': "oidc_timeout in",
        'oidc_issuer = "https://kc"\noidc_roles_claim = ["roles"]': "oidc_roles_claim in",
    }
    for text, said in cases.items():
        path.write_text(text)
        with pytest.raises(ValueError) as e:
            serve_settings({}, ServeFlags(workspace_roots=[tmp_path]), path)
        assert said in str(e.value) and str(path) in str(e.value), e.value
    with pytest.raises(ValueError, match="--oidc-issuer"):
        oidc_settings({}, {}, {"issuer": "ftp://kc"})
    with pytest.raises(ValueError, match="DEVAGENT_OIDC_LEEWAY"):
        oidc_settings({"DEVAGENT_OIDC_ISSUER": "https://kc", "DEVAGENT_OIDC_LEEWAY": "-1"})
    # a mistyped key is an error with the nearest known one, never silently ignored
    path.write_text('oidc_isuser = "https://kc"')
    with pytest.raises(ConfigError, match="did you mean 'oidc_issuer'"):
        load_config(environ={"DEVAGENT_CONFIG": str(path)})


def test_issue42_item1_the_client_secret_has_no_flag(tmp_path: Path) -> None:
    """A command line is readable by every user of the host: `serve` has no such flag, and says so
    before anything starts."""
    done = subprocess.run(
        [sys.executable, "-m", "devagent", "serve", "--oidc-client-secret", "s3cret"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done
    assert "No such option" in done.stderr and "--oidc-client-secret" in done.stderr, done.stderr
    shown = subprocess.run(
        [sys.executable, "-m", "devagent", "serve", "--help"], capture_output=True, text=True, timeout=120
    )
    assert "--oidc-client-id" in shown.stdout and "--oidc-client-secret" not in shown.stdout, shown.stdout
