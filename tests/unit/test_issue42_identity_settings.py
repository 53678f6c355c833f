"""Issue 42 item 1: the identity provider's settings from the environment, and how an IdP's
identity sits beside static tokens' names: never the same identity, never the same folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from devagent.a2a.settings import A2ASettings, identity_folder
from devagent.common.identity import OidcSettings, oidc_settings_from_env


def test_issue42_item1_settings_from_the_environment() -> None:
    assert oidc_settings_from_env({}) is None
    s = oidc_settings_from_env(
        {
            "DEVAGENT_OIDC_ISSUER": "https://kc.example.com/realms/team/",
            "DEVAGENT_OIDC_AUDIENCE": "https://devagent.example.com, other",
            "DEVAGENT_OIDC_ROLES_CLAIM": "realm_access.roles",
            "DEVAGENT_OIDC_CLIENT_ID": "devagent-console",
            "DEVAGENT_OIDC_CLIENT_SECRET": "s3cret",
            "DEVAGENT_OIDC_TIMEOUT": "2.5",
        }
    )
    assert s is not None
    assert s.issuer == "https://kc.example.com/realms/team"
    assert s.discovery_url == "https://kc.example.com/realms/team/.well-known/openid-configuration"
    assert s.audiences == ("https://devagent.example.com", "other")
    assert (s.identity_claim, s.roles_claim, s.operator_role) == ("sub", "realm_access.roles", "operator")
    assert (s.client_id, s.client_secret, s.timeout) == ("devagent-console", "s3cret", 2.5)
    assert "s3cret" not in repr(s)
    for bad in (
        {"DEVAGENT_OIDC_ISSUER": "kc.example.com"},
        {"DEVAGENT_OIDC_ISSUER": "https://x", "DEVAGENT_OIDC_TIMEOUT": "0"},
    ):
        with pytest.raises(ValueError):
            oidc_settings_from_env(bad)


def test_issue42_item1_the_audience_defaults_to_the_servers_url() -> None:
    settings = A2ASettings(port=8123, oidc=OidcSettings(issuer="https://kc"))
    assert settings.oidc_resolved is not None
    assert settings.oidc_resolved.audiences == ("http://127.0.0.1:8123",)
    settings = A2ASettings(
        public_url="https://d.example/", oidc=OidcSettings(issuer="https://kc", audiences=("a",))
    )
    assert settings.oidc_resolved is not None and settings.oidc_resolved.audiences == ("a",)


def test_issue42_item1_idp_identities_have_folders_apart_from_static_names(tmp_path: Path) -> None:
    assert identity_folder("ci") == "ci"
    assert identity_folder("oidc:alice") == ".oidc/alice"
    assert identity_folder("oidc:ci") == ".oidc/ci"  # an IdP user named like a token: elsewhere
    odd = identity_folder("oidc:Alice Smith/../x")
    assert odd.startswith(".oidc/@") and "/" not in odd.removeprefix(".oidc/")
    assert identity_folder("oidc:Alice Smith/../y") != odd
    settings = A2ASettings(
        workspace_roots=[tmp_path], tokens={"t": "ci"}, oidc=OidcSettings(issuer="https://kc")
    )
    assert settings.per_identity  # one static token, but the IdP's callers are many
    assert settings.roots_for("oidc:alice") == [tmp_path.resolve() / ".oidc" / "alice"]
    assert (tmp_path / ".oidc" / "alice").is_dir()
    assert settings.ensure_token() is None  # no token generated: the IdP's callers come
    settings.check_bind()  # an IdP is credentials enough beyond loopback too
    with pytest.raises(ValueError):  # a static token may not take an IdP identity's name
        A2ASettings(workspace_roots=[tmp_path], tokens={"t": "oidc:alice"}).check_identities()
    A2ASettings(workspace_roots=[tmp_path], workspace_for={"oidc:alice": [tmp_path]}).check_identities()
