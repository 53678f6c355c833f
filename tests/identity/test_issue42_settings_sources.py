"""Issue 42 item 1: a real `devagent serve` process whose identity provider (a real OpenID Connect
provider on loopback) is set in the settings file, one of its settings overridden by the
environment and another by a flag: the provider's tokens are accepted and the roles read as the
winning settings say."""

from __future__ import annotations

import os
from pathlib import Path

import httpx

from tests.a2a.helpers import auth
from tests.a2a.procs import serve_argv, serving
from tests.conftest import Script
from tests.identity.idp import Idp


def test_issue42_item1_serve_takes_the_idp_from_its_settings_file(
    idp: Idp, script: Script, sqlite_url: str, workspace: Path, tmp_path: Path
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        "[devagent]\n"
        f'oidc_issuer = "{idp.issuer}"\n'
        'oidc_roles_claim = "no_such_claim"\n'  # the flag's "roles" wins
        'oidc_operator_role = "no-such-role"\n'  # the environment's "operator" wins
    )
    env = {
        **os.environ,
        "DEVAGENT_CONFIG": str(config),
        "DEVAGENT_OIDC_OPERATOR_ROLE": "operator",
        "DEVAGENT_OIDC_ROLES_CLAIM": "also_not_it",  # the flag is over it
    }
    args = serve_argv(sqlite_url, workspace.parent, script([]), "--oidc-roles-claim", "roles")
    with serving(args, tmp_path / "serve.log", env=env) as srv:
        base = srv.url.rstrip("/")
        ops, alice = idp.token("ops", base), idp.token("alice", base)
        with httpx.Client(timeout=60) as c:
            me_ops = c.get(srv.url + "ui/api/me", headers=auth(ops, ext=False))
            me_alice = c.get(srv.url + "ui/api/me", headers=auth(alice, ext=False))
            forged = idp.sign({"iss": "https://elsewhere", "aud": base, "sub": "x", "exp": 2**31})
            refused = c.get(srv.url + "ui/api/me", headers=auth(forged, ext=False))
    assert me_ops.status_code == 200, srv.stderr()
    assert (me_ops.json()["identity"], me_ops.json()["operator"]) == ("oidc:ops", True), me_ops.json()
    assert (me_alice.json()["identity"], me_alice.json()["operator"]) == ("oidc:alice", False)
    assert refused.status_code == 401 and "iss" in refused.text, refused.text
