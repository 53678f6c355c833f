"""Issue 42 item 5: tokens a server must refuse, each on every door in its protocol's own terms
(JSON-RPC's error, the HTTP+JSON binding's UNAUTHENTICATED, gRPC's status, the MCP door's 401
with the pointer to its resource metadata, the console's API and /metrics' 401), nothing reached,
and the server answering the next good token: another issuer, the wrong audience, expired, not
yet valid, `alg: none`, HMAC signed with the provider's public key, an unknown key id, a payload
changed under a valid signature, no expiry."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.a2a.helpers import TOKEN, auth, call, rpc, running_server, v03_message
from tests.a2a.test_bindings import client_for, ctx
from tests.conftest import Script
from tests.identity.conftest import CLIENTS
from tests.identity.idp import Idp, new_key, running_idp
from tests.identity.test_issue42_doors import server_kw


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned(header: dict[str, Any], claims: dict[str, Any], signature: bytes = b"") -> str:
    head = b64(json.dumps(header).encode()) + "." + b64(json.dumps(claims).encode())
    return head + "." + b64(signature)


def claims(idp: Idp, aud: str, **more: Any) -> dict[str, Any]:
    now = int(time.time())
    return {"iss": idp.issuer, "aud": aud, "sub": "mallory", "iat": now, "exp": now + 600, **more}


def hs256_with_public_key(idp: Idp, aud: str) -> str:
    """The classic confusion: HMAC keyed with the provider's public key (PEM), which anyone has."""
    pem = idp.key.as_pem(private=False)
    head = b64(json.dumps({"alg": "HS256", "kid": idp.key.kid}).encode())
    body = b64(json.dumps(claims(idp, aud)).encode())
    sig = hmac.new(pem, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64(sig)}"


def tampered(idp: Idp, aud: str) -> str:
    """A valid token of Bob's with its payload rewritten to name Alice, the signature kept."""
    head, _, sig = idp.token("bob", aud).split(".")
    return f"{head}.{b64(json.dumps(claims(idp, aud, sub='alice')).encode())}.{sig}"


BAD: dict[str, tuple[Callable[[Idp, str, Path], str], str]] = {
    "wrong_audience": (lambda idp, aud, _: idp.token("alice", "https://another.example/"), "'aud'"),
    "issuer_claim_of_another": (
        lambda idp, aud, _: idp.sign(claims(idp, aud, iss="https://evil.example")),
        "'iss'",
    ),
    "expired": (lambda idp, aud, _: idp.sign(claims(idp, aud, exp=int(time.time()) - 3600)), "expired"),
    "not_yet_valid": (
        lambda idp, aud, _: idp.sign(claims(idp, aud, nbf=int(time.time()) + 3600)),
        "not valid yet",
    ),
    "no_expiry": (
        lambda idp, aud, _: idp.sign({k: v for k, v in claims(idp, aud).items() if k != "exp"}),
        "exp",
    ),
    "alg_none": (
        lambda idp, aud, _: unsigned({"alg": "none", "kid": idp.key.kid}, claims(idp, aud)),
        "'none'",
    ),
    "hs256_with_the_public_key": (lambda idp, aud, _: hs256_with_public_key(idp, aud), "'HS256'"),
    "unknown_kid": (
        lambda idp, aud, _: idp.sign(claims(idp, aud), {"kid": "gone"}, new_key("gone")),
        "does not publish",
    ),
    "right_kid_wrong_key": (
        lambda idp, aud, _: idp.sign(claims(idp, aud), key=new_key(idp.key.kid)),
        "signature",
    ),
    "payload_changed": (lambda idp, aud, _: tampered(idp, aud), "signature"),
    "not_a_jwt": (lambda idp, aud, _: "not-a-jwt", "not a signed JWT"),
}


async def refused_everywhere(srv_url: str, token: str, reason: str) -> None:
    """Every door refuses `token` in its own terms, with `reason` said."""
    bad = auth(token, ext=False)
    async with httpx.AsyncClient(timeout=60) as c:
        r = await c.post(srv_url, json=rpc("message/send", {"message": v03_message("x")}), headers=bad)
        assert r.status_code == 401 and r.json()["error"]["code"] == -32600, r.text
        assert reason in r.json()["error"]["message"], r.text
        assert 'error="invalid_token"' in r.headers["www-authenticate"]
        r = await c.get(srv_url + "rest/tasks/x", headers={**bad, "A2A-Version": "1.0"})
        assert r.status_code == 401 and r.json()["error"]["status"] == "UNAUTHENTICATED", r.text
        r = await c.post(srv_url + "mcp/", json=rpc("tools/list", {}), headers=bad)
        assert r.status_code == 401, r.text
        assert (
            f'resource_metadata="{srv_url}.well-known/oauth-protected-resource/mcp"'
            in r.headers["www-authenticate"]
        )
        for path in ("ui/api/me", "metrics", "healthz"):
            assert (await c.get(srv_url + path, headers=bad)).status_code == 401, path
    async with client_for(srv_url, "GRPC", TOKEN) as client:  # the card read with the static token
        from a2a.types import GetTaskRequest

        with pytest.raises(Exception) as grpc_refused:
            await client.get_task(GetTaskRequest(id="x"), context=ctx(token=token))
    assert "UNAUTHENTICATED" in str(grpc_refused.value) and reason in str(grpc_refused.value), (
        grpc_refused.value
    )


async def test_issue42_item5_bad_tokens_refused_on_every_door_server_responsive(
    idp: Idp, script: Script, sqlite_url: str, workspace: Path, tmp_path: Path
) -> None:
    steps = [[{"text": "still here"}]]
    async with running_server(script(steps), sqlite_url, workspace, **server_kw(idp)) as srv:
        aud = srv.url.rstrip("/")
        for name, (make, reason) in BAD.items():
            try:
                await refused_everywhere(srv.url, make(idp, aud, tmp_path), reason)
            except AssertionError as e:
                raise AssertionError(f"{name}: {e}") from None
        with running_idp(tmp_path, CLIENTS, name="other") as other:  # a real provider, not ours
            foreign = other.token("alice", aud)
            await refused_everywhere(srv.url, foreign, "does not publish")
        async with httpx.AsyncClient(timeout=60) as c:  # nothing was reached; the next good token works
            good = idp.token("alice", aud)
            got = await call(
                c, srv.url, rpc("message/send", {"message": v03_message("hi")}), auth(good, ext=False)
            )
            assert got["result"]["status"]["state"] == "completed", got
            listed = (await c.get(srv.url + "ui/api/sessions", headers=auth(good, ext=False))).json()
            assert listed["total"] == 1, listed  # the one good request's session, nothing of the bad ones
