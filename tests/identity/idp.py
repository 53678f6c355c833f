"""A real OpenID Connect provider on loopback for the identity tests: panva's `oidc-provider`
(npm, installed in tests/identity/js by `scripts/test`, or here on first use) run by `js/idp.mjs`
in a process of its own. The test holds the provider's signing key too, so that it can also make
the tokens a provider would never issue (expired, `alg: none`, HMAC with the public key...)."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urljoin, urlsplit

import httpx
from joserfc import jwt
from joserfc.jwk import RSAKey

from tests.npm import ensure_installed
from tests.process_stop import stop_process

JS = Path(__file__).parent / "js"
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
START_WITHIN = 60.0  # seconds for node to load the provider (2 shared cores): a safety net


def new_key(kid: str) -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": kid, "alg": "RS256", "use": "sig"})


@dataclass
class Idp:
    issuer: str
    key: RSAKey
    proc: subprocess.Popen[bytes]
    secrets: dict[str, str] = field(default_factory=dict)

    def token(self, client_id: str, resource: str) -> str:
        """An access token (a JWT for `resource`) from the client-credentials grant."""
        r = httpx.post(
            self.issuer + "/token",
            data={"grant_type": "client_credentials", "resource": resource, "scope": "openid"},
            auth=(client_id, self.secrets[client_id]),
            timeout=30,
        )
        assert r.status_code == 200, r.text
        return str(r.json()["access_token"])

    def log_in(self, authorization_url: str, user: str, redirect_uri: str) -> dict[str, str]:
        """A user agent at the provider: follows `authorization_url` to the provider's login page,
        signs in as `user`, and follows the redirects until the one to `redirect_uri` (not
        followed): its query parameters (`code`, `state`, `iss`)."""
        with httpx.Client(timeout=30) as ua:
            r = ua.get(authorization_url)
            for _ in range(20):  # the provider's pages: login, then maybe consent
                if r.is_redirect:
                    if r.headers["location"].startswith(redirect_uri):
                        return dict(parse_qsl(urlsplit(r.headers["location"]).query))
                    r = ua.get(urljoin(str(r.url), r.headers["location"]))
                    continue
                action = re.search(r'<form[^>]*action="([^"]+)"', r.text)
                prompt = re.search(r'name="prompt" value="([a-z]+)"', r.text)
                assert r.status_code == 200 and action and prompt, r.text
                form = {"prompt": prompt.group(1)}
                if form["prompt"] == "login":
                    form.update(login=user, password="x")
                r = ua.post(urljoin(str(r.url), html.unescape(action.group(1))), data=form)
        raise AssertionError("the provider never redirected back")

    def approve_device(self, verification_uri: str, user: str) -> None:
        """The user at the provider's device page (`verification_uri_complete`, the code in it):
        each of the provider's forms submitted as a browser would (the code, the login as `user`,
        the confirmation), until its success page."""
        with httpx.Client(timeout=30) as ua:
            r = ua.get(verification_uri)
            for _ in range(20):
                if r.is_redirect:
                    r = ua.get(urljoin(str(r.url), r.headers["location"]))
                    continue
                assert r.status_code == 200, r.text
                if "<title>Sign-in Success</title>" in r.text:
                    return
                form = re.search(r"<form[^>]*action=\"([^\"]+)\"[^>]*>(.*?)</form>", r.text, re.S)
                assert form, r.text
                fields = {
                    html.unescape(n): html.unescape(v)
                    for n, v in re.findall(r'<input[^>]*name="([^"]+)"[^>]*value="([^"]*)"', form.group(2))
                }
                if 'name="login"' in form.group(2):
                    fields.update(login=user, password="x")
                r = ua.post(urljoin(str(r.url), html.unescape(form.group(1))), data=fields)
        raise AssertionError("the provider never said the device was signed in")

    def sign(self, claims: dict[str, Any], header: dict[str, Any] | None = None, key: Any = None) -> str:
        """A token signed with the provider's own key (or `key`), as the provider never would."""
        head = {"alg": "RS256", "kid": self.key.kid, "typ": "at+jwt", **(header or {})}
        return jwt.encode(head, claims, key or self.key)


@contextmanager
def running_idp(
    tmp_path: Path,
    clients: dict[str, str],
    roles: dict[str, list[str]] | None = None,
    *,
    console: tuple[str, str, str] | None = None,
    ttl: int = 600,
    name: str = "idp",
    groups: dict[str, list[str]] | None = None,
    device: str = "",
) -> Iterator[Idp]:
    """The provider with these client-credentials clients (id -> secret), `roles` and `groups`
    per client or user, maybe the console's client (id, secret, redirect URI) and a public client
    of the device authorization grant (`device`, its id); stopped after the block."""
    ensure_installed(JS, JS / "node_modules" / "oidc-provider", "oidc-provider")
    key = new_key(f"{name}-key")
    registered: list[dict[str, Any]] = [
        {
            "client_id": cid,
            "client_secret": secret,
            "grant_types": ["client_credentials"],
            "redirect_uris": [],
            "response_types": [],
        }
        for cid, secret in clients.items()
    ]
    if console is not None:
        cid, secret, redirect = console
        registered.append(
            {
                "client_id": cid,
                "client_secret": secret,
                "grant_types": ["authorization_code"],
                "redirect_uris": [redirect],
                "response_types": ["code"],
                # RFC 8252 7.3: a loopback redirect of any port (the server's is chosen at start)
                "application_type": "native",
                "token_endpoint_auth_method": "client_secret_basic",
            }
        )
    if device:
        registered.append(
            {
                "client_id": device,
                "grant_types": [DEVICE_GRANT],
                "redirect_uris": [],
                "response_types": [],
                "token_endpoint_auth_method": "none",
            }
        )
    cfg = tmp_path / f"{name}.json"
    cfg.write_text(
        json.dumps(
            {
                "jwks": {"keys": [key.as_dict(private=True)]},
                "resource": "http://127.0.0.1/",
                "clients": registered,
                "roles": roles or {},
                "groups": groups or {},
                "ttl": ttl,
            }
        )
    )
    log = (tmp_path / f"{name}.log").open("wb")
    proc = subprocess.Popen(
        ["node", str(JS / "idp.mjs"), str(cfg)],
        cwd=JS,
        stdout=subprocess.PIPE,
        stderr=log,
        env={**os.environ, "NODE_ENV": "development"},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()  # "issuer <url>", or "" if it died
        assert line.startswith("issuer "), (tmp_path / f"{name}.log").read_text()
        yield Idp(issuer=line.split()[1], key=key, proc=proc, secrets=dict(clients))
    finally:
        stop_process(proc, 15)
        log.close()
