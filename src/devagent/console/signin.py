"""The console's sign-in through the operator's identity provider: OpenID Connect's authorization
code flow with PKCE, devagent as a relying party (authlib's OAuth 2 client makes the requests).

Nothing is kept on the server between the redirect to the IdP and the way back: the sign-in's
state, nonce and PKCE verifier travel in a short-lived cookie of the callback's path, and the
signed-in session is the IdP's access token (for devagent's audience) in an HttpOnly cookie,
checked on every request like any bearer token; so any replica answers any step, and a restart
signs nobody out. Both cookies are SameSite=Lax (sent on the IdP's top-level redirect back, never
on another site's request) and Secure where the server's URL is https. The `state` compared
with the cookie's defeats a forged callback (CSRF); the `nonce` in the ID token, a replayed one."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from devagent.common.identity import IdpUnavailable, OidcVerifier, TokenRefused

if TYPE_CHECKING:
    from starlette.requests import Request

    from devagent.common.identity import OidcSettings

SESSION_COOKIE = "devagent_console"  # the IdP's access token of a signed-in person
LOGIN_COOKIE = "devagent_login"  # one sign-in's state, nonce and PKCE verifier
# The header the page sends with every request: a request carrying the session cookie is
# accepted only with it (another site's page cannot send it without a CORS preflight, which this
# server never grants), besides SameSite.
CONSOLE_HEADER = "x-devagent-console"
LOGIN_SECONDS = 600
PREFIX = "/ui"
PATHS = (PREFIX + "/auth", PREFIX + "/login", PREFIX + "/callback", PREFIX + "/logout")


@dataclass(frozen=True, slots=True)
class SignIn:
    """What the sign-in needs: the IdP's settings (with the console's client), this server's URL,
    and the verifier that checks the IdP's tokens for every door."""

    oidc: OidcSettings
    base_url: str
    verifier: OidcVerifier

    @property
    def redirect_uri(self) -> str:
        return self.base_url + PREFIX + "/callback"

    @property
    def secure(self) -> bool:
        return self.base_url.startswith("https://")

    def client(self) -> Any:
        from authlib.integrations.httpx_client import (  # type: ignore[import-untyped]  # late: sign-in only
            AsyncOAuth2Client,
        )

        return AsyncOAuth2Client(
            self.oidc.client_id,
            self.oidc.client_secret,
            scope=" ".join(dict.fromkeys(("openid", *self.oidc.scopes))),
            redirect_uri=self.redirect_uri,
            code_challenge_method="S256",
            timeout=self.oidc.timeout,
            follow_redirects=False,
        )


def _mac(secret: str, body: str) -> str:
    return hmac.new(secret.encode(), body.encode(), hashlib.sha256).hexdigest()


def _pack(data: dict[str, str], secret: str) -> str:
    """The sign-in cookie: its data, and a MAC keyed with the console's client secret (which every
    replica holds), so that a cookie set by anyone else (a sibling domain's page) is not taken."""
    body = base64.urlsafe_b64encode(json.dumps(data).encode()).decode()
    return body + "." + _mac(secret, body)


def _unpack(value: str, secret: str) -> dict[str, str]:
    body, _, mac = value.rpartition(".")
    if not body or not hmac.compare_digest(mac.encode(), _mac(secret, body).encode()):
        return {}
    try:
        data = json.loads(base64.urlsafe_b64decode(body.encode()))
    except (ValueError, UnicodeError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, str)} if isinstance(data, dict) else {}


def _failed(message: str, status: int = 400) -> Response:
    body = f"Sign-in failed: {message[:300]}. Go back to the console to try again."
    headers = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}
    return Response(body, status_code=status, media_type="text/plain; charset=utf-8", headers=headers)


def signin_routes(signin: SignIn | None) -> list[Route]:
    """/ui/auth (whether the IdP's sign-in is offered), and with it /ui/login, /ui/callback and
    /ui/logout."""

    async def auth(request: Request) -> Response:
        return JSONResponse({"idp": signin is not None}, headers={"Cache-Control": "no-store"})

    if signin is None:
        return [Route(PREFIX + "/auth", auth, methods=["GET"])]

    async def login(request: Request) -> Response:
        try:
            endpoint = str((await signin.verifier.keys.document())["authorization_endpoint"])
        except (IdpUnavailable, KeyError) as e:
            return _failed(f"the identity provider cannot be reached ({e})", 502)
        state, nonce, verifier = (secrets.token_urlsafe(32) for _ in range(3))
        async with signin.client() as client:
            url, _ = client.create_authorization_url(
                endpoint, state=state, code_verifier=verifier, nonce=nonce, resource=signin.oidc.audiences[0]
            )
        response = RedirectResponse(url, status_code=302)
        response.set_cookie(
            LOGIN_COOKIE,
            _pack({"state": state, "nonce": nonce, "verifier": verifier}, signin.oidc.client_secret),
            max_age=LOGIN_SECONDS,
            path=PREFIX + "/callback",
            secure=signin.secure,
            httponly=True,
            samesite="lax",
        )
        return response

    async def callback(request: Request) -> Response:
        return await _callback(signin, request)

    async def logout(request: Request) -> Response:
        if not request.headers.get(CONSOLE_HEADER):
            return _failed("a sign-out comes from the console's page", 403)
        response = Response(status_code=204)
        response.delete_cookie(SESSION_COOKIE, path="/", secure=signin.secure, httponly=True, samesite="lax")
        return response

    return [
        Route(PREFIX + "/auth", auth, methods=["GET"]),
        Route(PREFIX + "/login", login, methods=["GET"]),
        Route(PREFIX + "/callback", callback, methods=["GET"]),
        Route(PREFIX + "/logout", logout, methods=["POST"]),
    ]


async def _callback(signin: SignIn, request: Request) -> Response:
    """The IdP's redirect back: the state checked against the sign-in's cookie, the code exchanged
    (with the PKCE verifier), the ID token's nonce and the access token checked; the session
    cookie set."""
    saved = _unpack(request.cookies.get(LOGIN_COOKIE, ""), signin.oidc.client_secret)
    given = request.query_params.get("state", "")
    if not saved.get("state") or not hmac.compare_digest(given.encode(), saved["state"].encode()):
        return _failed("this sign-in was not started here, or took too long")
    if request.query_params.get("error"):
        return _failed(f"the identity provider said {request.query_params['error']!r}", 401)
    try:
        endpoint = str((await signin.verifier.keys.document())["token_endpoint"])
        async with signin.client() as client:
            tokens = await client.fetch_token(
                endpoint,
                code=request.query_params.get("code", ""),
                code_verifier=saved["verifier"],
                resource=signin.oidc.audiences[0],
            )
        access, id_token = str(tokens.get("access_token", "")), str(tokens.get("id_token", ""))
        person = await signin.verifier.id_token_subject(id_token, signin.oidc.client_id, saved["nonce"])
        caller = await signin.verifier.verify(access)
    except (IdpUnavailable, KeyError) as e:
        return _failed(f"the identity provider cannot be reached ({e})", 502)
    except TokenRefused as e:
        return _failed(str(e), 401)
    except Exception as e:  # authlib's OAuth errors (a refused code): said, nothing else
        return _failed(f"the identity provider refused the sign-in ({type(e).__name__})", 401)
    if not caller.subject or caller.subject != person:
        return _failed("the access token and the ID token name different people", 401)
    response = RedirectResponse(PREFIX + "/", status_code=302)
    response.set_cookie(
        SESSION_COOKIE,
        access,
        max_age=max(1, int(caller.expires - time.time())),
        path="/",
        secure=signin.secure,
        httponly=True,
        samesite="lax",
    )
    response.delete_cookie(LOGIN_COOKIE, path=PREFIX + "/callback", secure=signin.secure, httponly=True)
    return response
