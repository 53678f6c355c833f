"""Issue 42 item 5: an identity provider that hangs or lies. Its discovery document and JWKS are
served here by a small loopback HTTP server told how to misbehave; each time devagent refuses the
token (fail closed) with the protocol's error, and goes on serving every other caller meanwhile:
a JWKS endpoint that never answers (the fetch's timeout), one that sends garbage, an empty key
set, a key set holding only an HMAC key (whose secret anyone reading it knows), a discovery
document naming another issuer."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from devagent.common.identity import OidcSettings
from tests.a2a.helpers import TOKEN, auth, rpc, running_server, v03_message
from tests.conftest import Script
from tests.identity.idp import new_key

SECRET = b"everyone-reads-this-jwks"
KEY = new_key("k1")


class LyingIdp:
    def __init__(self) -> None:
        self.mode = ""
        self.release = threading.Event()  # a hanging answer waits for this (the test's end)
        self.hanging = threading.Event()  # set once a request for the keys hangs
        self.key = KEY  # the key it publishes (rotated by a test)
        self.jwks_requests = 0
        self.url = ""

    def document(self, path: str) -> bytes | None:
        if path == "/.well-known/openid-configuration":
            issuer = "https://evil.example" if self.mode == "other_issuer" else self.url
            return json.dumps({"issuer": issuer, "jwks_uri": self.url + "/jwks"}).encode()
        if path != "/jwks":
            return None
        self.jwks_requests += 1
        if self.mode == "hang":
            self.hanging.set()
            self.release.wait()
            return b"{}"
        if self.mode == "garbage":
            return b"\x00<html>not json"
        if self.mode == "empty":
            return b'{"keys": []}'
        if self.mode == "hmac_only":
            k = base64.urlsafe_b64encode(SECRET).rstrip(b"=").decode()
            return json.dumps({"keys": [{"kty": "oct", "kid": "k1", "k": k, "alg": "HS256"}]}).encode()
        return json.dumps({"keys": [self.key.as_dict(private=False)]}).encode()


@contextmanager
def lying_idp() -> Iterator[LyingIdp]:
    idp = LyingIdp()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = idp.document(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    idp.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield idp
    finally:
        idp.release.set()
        server.shutdown()
        server.server_close()
        thread.join()


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hs256(claims: dict[str, object]) -> str:
    head = b64(json.dumps({"alg": "HS256", "kid": "k1"}).encode()) + "." + b64(json.dumps(claims).encode())
    return head + "." + b64(hmac.new(SECRET, head.encode(), hashlib.sha256).digest())


MODES = {
    "hang": "did not answer in time",
    "garbage": "did not send JSON",
    "empty": "holds no signing key",
    "hmac_only": "holds no signing key",
    "other_issuer": "names another issuer",
}


@pytest.mark.parametrize("mode", list(MODES))
async def test_issue42_item5_an_idp_that_hangs_or_lies_fails_closed(
    mode: str, script: Script, sqlite_url: str, workspace: Path
) -> None:
    with lying_idp() as idp:
        idp.mode = mode
        # a short timeout for the fetch of the keys (the operator's DEVAGENT_OIDC_TIMEOUT)
        oidc = OidcSettings(issuer=idp.url, timeout=0.5)
        kw = {"tokens": {TOKEN: "ci"}, "a2a_kw": {"oidc": oidc, "mcp": True}}
        async with (
            running_server(script([[{"text": "served"}]]), sqlite_url, workspace, **kw) as srv,
            httpx.AsyncClient(timeout=60) as c,
        ):
            now = int(time.time())
            claims = {"iss": idp.url, "aud": srv.url.rstrip("/"), "sub": "mallory", "exp": now + 600}
            from joserfc import jwt

            token = (
                hs256(claims)
                if mode == "hmac_only"
                else jwt.encode({"alg": "RS256", "kid": "k1"}, claims, KEY)
            )
            body = rpc("message/send", {"message": v03_message("x")})
            waiting = asyncio.create_task(c.post(srv.url, json=body, headers=auth(token, ext=False)))
            if mode == "hang":  # devagent is now waiting for the keys
                await asyncio.to_thread(idp.hanging.wait)
            # meanwhile, another caller is served (a static token: no IdP needed)
            served = await c.post(srv.url, json=body, headers=auth(TOKEN, ext=False))
            assert served.json()["result"]["status"]["state"] == "completed", served.text
            refused = await waiting
            assert refused.status_code == 401, refused.text
            error = refused.json()["error"]
            assert error["code"] == -32600 and "cannot be checked now" in error["message"], error
            assert MODES[mode] in error["message"], error
            # the MCP door: its 401, pointing to its resource metadata, the reason said
            mcp = await c.post(srv.url + "mcp/", json=rpc("tools/list", {}), headers=auth(token, ext=False))
            assert mcp.status_code == 401, mcp.text
            assert "cannot be checked now" in mcp.json()["error"]["message"], mcp.text
            challenge = mcp.headers["www-authenticate"]
            assert 'resource_metadata="' in challenge and 'error="invalid_token"' in challenge, challenge
            # and the door still serves a static token meanwhile
            tools = await c.post(
                srv.url + "mcp/",
                json=rpc(
                    "initialize",
                    {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "t", "version": "1"},
                    },
                ),
                headers={**auth(TOKEN, ext=False), "Accept": "application/json, text/event-stream"},
            )
            assert tools.status_code == 200, tools.text


def rs256(key: Any, claims: dict[str, object]) -> str:
    from joserfc import jwt

    return jwt.encode({"alg": "RS256", "kid": key.kid}, claims, key)


async def test_issue42_item1_rotated_keys_followed_and_unknown_kids_refetched_at_a_bounded_rate(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """The IdP rotates its key: a token of the new key is accepted (the keys fetched again for
    its unknown `kid`). Then a flood of tokens naming keys nobody publishes: each refused, the
    keys fetched at most once for all of them (DEVAGENT_OIDC_REFETCH_INTERVAL, an hour here)."""
    with lying_idp() as idp:
        oidc = OidcSettings(issuer=idp.url, refetch_interval=3600)
        kw: dict[str, Any] = {"tokens": {TOKEN: "ci"}, "a2a_kw": {"oidc": oidc}}
        async with (
            running_server(script([]), sqlite_url, workspace, **kw) as srv,
            httpx.AsyncClient(timeout=60) as c,
        ):
            claims = {"iss": idp.url, "aud": srv.url.rstrip("/"), "sub": "gus", "exp": int(time.time()) + 600}
            body = rpc("tasks/get", {"id": "nope"})
            first = await c.post(srv.url, json=body, headers=auth(rs256(KEY, claims), ext=False))
            assert first.json()["error"]["code"] == -32001, first.text  # accepted: the task is unknown
            assert idp.jwks_requests == 1
            idp.key = new_key("k2")  # rotation: k1 is gone, k2 signs
            # the first interval has not passed: this one unknown kid may not refetch yet...
            held = await c.post(srv.url, json=body, headers=auth(rs256(idp.key, claims), ext=False))
            assert held.status_code == 401 and "does not publish" in held.text, held.text
            assert idp.jwks_requests == 1
        # ...a server whose interval allows it follows the rotation at once
        oidc = OidcSettings(issuer=idp.url, refetch_interval=0)
        kw = {"tokens": {TOKEN: "ci"}, "a2a_kw": {"oidc": oidc}}
        idp.key = KEY
        async with (
            running_server(script([]), sqlite_url, workspace, **kw) as srv,
            httpx.AsyncClient(timeout=60) as c,
        ):
            claims["aud"] = srv.url.rstrip("/")
            assert (
                await c.post(srv.url, json=body, headers=auth(rs256(KEY, claims), ext=False))
            ).status_code == 200
            idp.key = new_key("k2")
            rotated = await c.post(srv.url, json=body, headers=auth(rs256(idp.key, claims), ext=False))
            assert rotated.json()["error"]["code"] == -32001, rotated.text  # accepted, with the new key
            assert idp.jwks_requests == 3
        # the flood, on a server with the default bound
        oidc = OidcSettings(issuer=idp.url, refetch_interval=3600)
        kw = {"tokens": {TOKEN: "ci"}, "a2a_kw": {"oidc": oidc}}
        async with (
            running_server(script([]), sqlite_url, workspace, **kw) as srv,
            httpx.AsyncClient(timeout=60) as c,
        ):
            claims["aud"] = srv.url.rstrip("/")
            before = idp.jwks_requests
            forged = [rs256(new_key(f"nobody-{n}"), claims) for n in range(12)]
            answers = await asyncio.gather(
                *(c.post(srv.url, json=body, headers=auth(t, ext=False)) for t in forged)
            )
            assert [a.status_code for a in answers] == [401] * 12
            assert idp.jwks_requests - before == 1, idp.jwks_requests - before
