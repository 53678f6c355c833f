"""Over HTTP (`devagent serve --mcp`), an MCP session belongs to the identity that opened it.

The MCP SDK's session manager binds a session to the credential that opened it when the request
carries the SDK's own authenticated user (`scope["user"]`, an `AuthenticatedUser`): a request of
another credential with that `Mcp-Session-Id` (a tool call, the answer to an elicitation, a GET
stream, a DELETE) is answered exactly as for an unknown session (HTTP 404), and nothing of it
reaches the session. devagent's bearer check names the caller with a plain user; this layer, in
front of the SDK's app, presents that identity to the SDK as its authenticated user, and sets the
SDK's authentication context for the request (which also binds a 2026-07-28 `requestState` to its
caller). The bearer token itself is not passed on: the identity's name is the principal.
"""

from __future__ import annotations

from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.types import ASGIApp, Receive, Scope, Send


class SessionOwners:
    """The SDK's streamable-HTTP app with each caller's identity as the SDK's principal."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = AuthContextMiddleware(app)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        user = scope.get("user")
        name = str(getattr(user, "username", "") or "")
        if name and not isinstance(user, AuthenticatedUser):
            token = AccessToken(token="", client_id=name, scopes=[])
            scope = {**scope, "user": AuthenticatedUser(token)}
        await self.app(scope, receive, send)
