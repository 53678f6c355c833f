"""Bearer tokens: which user a token names, on every binding, and the HTTP middleware that
refuses a request without one (every route but the public agent card and console page)."""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING, Any

from a2a.auth.user import User

from devagent.a2a.card import CARD_PATHS
from devagent.a2a.json_response import send_json
from devagent.a2a.settings import REST_PREFIX
from devagent.common.rpcerrors import rpc_error
from devagent.console import is_public_path

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

# Only the card is public (a health probe authenticates like any client).
PUBLIC_PATHS = frozenset(CARD_PATHS)

# The user of the metrics token (`--metrics-token`); no caller can have this name (identity names
# have no spaces), and it is given the auth scope "metrics" rather than "authenticated".
METRICS_READER = "metrics reader"


class NamedUser(User):
    """The A2A user a name stands for: a token's, or the stored owner of a task ("" is no one)."""

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def is_authenticated(self) -> bool:
        return bool(self._name)

    @property
    def user_name(self) -> str:
        return self._name


class TokenCheck:
    """The user a bearer `Authorization` header names, or None (every binding checks alike)."""

    def __init__(self, tokens: dict[str, str]) -> None:
        self._tokens = [(t.encode(), name) for t, name in tokens.items()]

    def __call__(self, header: bytes | str | None) -> str | None:
        if isinstance(header, str):
            header = header.encode("latin-1", "replace")
        if not header or header[:7].lower() != b"bearer ":
            return None
        given = header[7:].strip()
        found = None
        for tok, name in self._tokens:  # compare with every token: constant time
            if hmac.compare_digest(given, tok):
                found = name
        return found


def _authorization(scope: Scope) -> bytes | None:
    for k, v in scope["headers"]:
        if k == b"authorization":
            return bytes(v)
    return None


async def _refuse(scope: Scope, send: Send, header: bytes | None) -> None:
    """HTTP 401 in the error shape of the binding the path belongs to."""
    if header and header[:7].lower() == b"bearer ":
        message = "invalid token: the bearer token is not one this server accepts"
    else:
        message = "authentication required: send Authorization: Bearer <token>"
    if scope["path"].startswith(REST_PREFIX + "/"):  # the HTTP+JSON binding's error shape
        payload: dict[str, Any] = {"error": {"code": 401, "status": "UNAUTHENTICATED", "message": message}}
    else:
        payload = rpc_error(None, -32600, message)
    await send_json(send, 401, payload, (b"www-authenticate", b'Bearer realm="devagent"'))


class BearerAuth:
    """Every route but the public card needs `Authorization: Bearer <token>`. The token's
    name becomes the A2A user, which owns the tasks it creates."""

    def __init__(self, app: ASGIApp, tokens: dict[str, str], metrics_token: str = "") -> None:
        self.app = app
        self._user = TokenCheck(tokens)
        # The operator's metrics reader: /metrics alone, with each caller's spend (METRICS_READER).
        self._metrics = TokenCheck({metrics_token: METRICS_READER} if metrics_token else {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in PUBLIC_PATHS or is_public_path(scope["path"]):
            await self.app(scope, receive, send)
            return
        header = _authorization(scope)
        name = self._user(header)
        reader = name is None and scope["path"] == "/metrics" and self._metrics(header) is not None
        if reader:
            name = METRICS_READER
        if name is None:
            await _refuse(scope, send, header)
            return
        from starlette.authentication import AuthCredentials, SimpleUser

        scope["user"] = SimpleUser(name)
        scope["auth"] = AuthCredentials(["metrics"] if reader else ["authenticated"])
        await self.app(scope, receive, send)
