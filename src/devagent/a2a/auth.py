"""Bearer tokens: which user a token names, on every binding, and the HTTP middleware that
refuses a request without one (every route but the public agent card, the MCP door's resource
metadata and the console page). A token is a static one of the operator's (`--token NAME=T`) or
an access token of the operator's identity provider (devagent.common.identity)."""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING, Any

from a2a.auth.user import User

from devagent.a2a.card import CARD_PATHS
from devagent.a2a.json_response import send_json
from devagent.a2a.settings import REST_PREFIX
from devagent.a2a.token_expiry import serve_until
from devagent.common.identity import OidcVerifier, TokenRefused
from devagent.common.rpcerrors import rpc_error
from devagent.console import is_public_path
from devagent.console.signin import CONSOLE_HEADER as _CONSOLE_HEADER
from devagent.console.signin import SESSION_COOKIE as _SESSION_COOKIE

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from devagent.store.identity_groups import IdentityGroups

# The MCP door's protected-resource metadata (RFC 9728), at the well-known path for the resource
# `/mcp` (RFC 9728 3.1: the resource's path after the well-known name) and at the bare one.
RESOURCE_METADATA_PATHS = (
    "/.well-known/oauth-protected-resource/mcp",
    "/.well-known/oauth-protected-resource",
)
# Only the card and the resource metadata are public (a health probe authenticates like any
# client).
PUBLIC_PATHS = frozenset((*CARD_PATHS, *RESOURCE_METADATA_PATHS))
CONSOLE_HEADER = _CONSOLE_HEADER.encode()
SESSION_COOKIE = _SESSION_COOKIE.encode()
CONSOLE_API = "/ui/api/"
WORKERS_PREFIX = "/workers/v1/"

# The user of the metrics token (`--metrics-token`); no caller can have this name (identity names
# have no spaces), and it is given the auth scope "metrics" rather than "authenticated".
METRICS_READER = "metrics reader"
# The auth scope of a caller in a group that shares (OidcSettings.shared_groups): "group:NAME".
GROUP_SCOPE = "group:"
# The auth scope of a caller in a group whose members also answer each other's permission
# requests (OidcSettings.approving_groups): "approve:NAME", beside its "group:NAME".
APPROVE_SCOPE = "approve:"


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


def _bearer(header: bytes | str | None) -> str:
    """The token of a bearer `Authorization` header ("" for none)."""
    if isinstance(header, bytes):
        header = header.decode("latin-1")
    if not header or header[:7].lower() != "bearer ":
        return ""
    return header[7:].strip()


class Callers:
    """Who a bearer token names, on every binding: a static token's name, else the identity an
    access token of the operator's IdP names (`oidc:<claim>`). `identify` checks; `known` is its
    synchronous look-up of a token already checked (gRPC's per-call user)."""

    def __init__(
        self, tokens: dict[str, str], oidc: OidcVerifier | None = None, groups: IdentityGroups | None = None
    ) -> None:
        self._static = TokenCheck(tokens)
        self.oidc = oidc
        self._groups = groups  # where each IdP identity's shared groups are kept, when groups share

    async def identify(self, header: bytes | str | None) -> tuple[str, bool, float | None]:
        """(identity, whether an operator, when its token expires: None for a static token);
        TokenRefused says why not."""
        name = self._static(header)
        if name is not None:
            return name, False, None
        token = _bearer(header)
        if not token:
            raise TokenRefused("authentication required")
        if self.oidc is None:
            raise TokenRefused("the bearer token is not one this server accepts")
        caller = await self.oidc.verify(token)
        if self._groups is not None:  # its groups as this token says (the IdP may have changed them)
            await self._groups.record(caller.name, caller.groups)
        return caller.name, caller.operator, caller.expires + self.oidc.settings.leeway

    def expires(self, header: bytes | str | None) -> float | None:
        """When the IdP token of a call already checked expires (None: a static token)."""
        if self.oidc is None or self._static(header) is not None or not (token := _bearer(header)):
            return None
        caller = self.oidc.known(token)
        return caller.expires + self.oidc.settings.leeway if caller is not None else None

    def known_groups(self, header: bytes | str | None) -> frozenset[str]:
        """The shared groups of the caller of an IdP token already checked (none for a static one)."""
        if self.oidc is None or self._static(header) is not None or not (token := _bearer(header)):
            return frozenset()
        caller = self.oidc.known(token)
        return caller.groups if caller is not None else frozenset()

    def group_scopes(self, header: bytes | str | None) -> list[str]:
        """The auth scopes of the shared groups of a call's IdP token already checked: "group:NAME"
        for each, and "approve:NAME" for those whose members answer each other's requests."""
        groups = sorted(self.known_groups(header))
        approving = self.oidc.settings.approving_groups if self.oidc is not None else frozenset()
        return [GROUP_SCOPE + g for g in groups] + [APPROVE_SCOPE + g for g in groups if g in approving]

    def known_operator(self, header: bytes | str | None) -> bool:
        """Whether the call's IdP token, already checked, gave its caller the operator's role."""
        if self.oidc is None or self._static(header) is not None or not (token := _bearer(header)):
            return False
        caller = self.oidc.known(token)
        return caller is not None and caller.operator

    def known(self, header: bytes | str | None) -> str | None:
        name = self._static(header)
        if name is None and self.oidc is not None and (token := _bearer(header)):
            caller = self.oidc.known(token)
            name = caller.name if caller is not None else None
        return name


def _authorization(scope: Scope) -> bytes | None:
    """The request's `Authorization`; else, from the console's page (its header present), the
    console's sign-in cookie as a bearer token (console/signin.py): on the console's API and A2A's
    JSON-RPC (the page's actions) only."""
    cookie = b""
    from_console = False
    for k, v in scope["headers"]:
        if k == b"authorization":
            return bytes(v)
        if k == b"cookie":
            cookie = bytes(v)
        elif k == CONSOLE_HEADER:
            from_console = True
    path = scope["path"]
    if not (cookie and from_console and (path == "/" or path.startswith(CONSOLE_API))):
        return None
    for part in cookie.split(b";"):
        name, _, value = part.strip().partition(b"=")
        if name == SESSION_COOKIE and value:
            return b"Bearer " + value
    return None


def _challenge(scope: Scope, header: bytes | None, metadata_url: str) -> bytes:
    """The `WWW-Authenticate` of a 401 (RFC 6750 3): on the MCP door, with the pointer to its
    protected-resource metadata (RFC 9728 5.1) through which an MCP host finds the IdP."""
    challenge = 'Bearer realm="devagent"'
    if metadata_url and (scope["path"] == "/mcp" or scope["path"].startswith("/mcp/")):
        challenge += f', resource_metadata="{metadata_url}"'
    if header:
        challenge += ', error="invalid_token"'
    return challenge.encode()


async def _refuse(
    scope: Scope, send: Send, header: bytes | None, reason: str, metadata_url: str = ""
) -> None:
    """HTTP 401 in the error shape of the binding the path belongs to."""
    if header and header[:7].lower() == b"bearer ":
        message = f"invalid token: {reason}"
    else:
        message = "authentication required: send Authorization: Bearer <token>"
    if scope["path"].startswith(REST_PREFIX + "/"):  # the HTTP+JSON binding's error shape
        payload: dict[str, Any] = {"error": {"code": 401, "status": "UNAUTHENTICATED", "message": message}}
    else:
        payload = rpc_error(None, -32600, message)
    await send_json(send, 401, payload, (b"www-authenticate", _challenge(scope, header, metadata_url)))


def _unguarded(path: str) -> bool:
    """The public paths, and the workers' door, which checks the workers' own tokens
    (worker_routes.py) and accepts no caller's."""
    return path in PUBLIC_PATHS or is_public_path(path) or path.startswith(WORKERS_PREFIX)


class BearerAuth:
    """Every route but the public ones needs `Authorization: Bearer <token>`. The token's
    identity becomes the A2A user, which owns the tasks it creates; an operator of the IdP's
    roles also gets the scopes "operator" and "metrics" (each caller's spend on /metrics)."""

    def __init__(
        self, app: ASGIApp, callers: Callers, metrics_token: str = "", metadata_url: str = ""
    ) -> None:
        self.app = app
        self._callers = callers
        # The operator's metrics reader: /metrics alone, with each caller's spend (METRICS_READER).
        self._metrics = TokenCheck({metrics_token: METRICS_READER} if metrics_token else {})
        self._metadata_url = metadata_url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _unguarded(scope["path"]):
            await self.app(scope, receive, send)
            return
        header = _authorization(scope)
        scopes, expires = ["authenticated"], None
        if scope["path"] == "/metrics" and self._metrics(header) is not None:
            name, scopes = METRICS_READER, ["metrics"]
        else:
            try:
                name, operator, expires = await self._callers.identify(header)
            except TokenRefused as e:
                await _refuse(scope, send, header, str(e), self._metadata_url)
                return
            if operator:
                scopes += ["operator", "metrics"]
            scopes += self._callers.group_scopes(header)
        from starlette.authentication import AuthCredentials, SimpleUser

        scope["user"] = SimpleUser(name)
        scope["auth"] = AuthCredentials(scopes)
        if expires is None:
            await self.app(scope, receive, send)
        else:  # a stream ends when its token does
            await serve_until(self.app, scope, receive, send, expires)
