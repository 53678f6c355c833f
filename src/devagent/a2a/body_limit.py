"""The request body limit of the HTTP bindings (`max_body_bytes`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from devagent.a2a.json_response import send_json
from devagent.common.asgi import HttpMiddleware
from devagent.common.errors import DevagentError
from devagent.common.rpcerrors import rpc_error

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send


class _BodyTooLarge(DevagentError):
    pass


class BodyLimit(HttpMiddleware):
    """Requests whose body is larger than `limit` bytes get HTTP 413 with a JSON-RPC error,
    before the body is read: at once when Content-Length says so, else as soon as the streamed
    body grows past the limit (the app's reading stops there and whatever it would have answered
    is dropped)."""

    def __init__(self, app: ASGIApp, limit: int, wider: tuple[str, int] | None = None) -> None:
        super().__init__(app)
        self.limit = limit
        # (path prefix, limit): the workers' door, whose results carry workspaces' snapshots
        self.wider = wider

    def _limit(self, scope: Scope) -> int:
        if self.wider is not None and scope["path"].startswith(self.wider[0]):
            return self.wider[1]
        return self.limit

    async def _refuse(self, send: Send, limit: int) -> None:
        message = f"request body larger than {limit} bytes"
        await send_json(send, 413, rpc_error(None, -32600, message), (b"connection", b"close"))

    def _declared_too_large(self, scope: Scope, limit: int) -> bool:
        for k, v in scope["headers"]:
            if k == b"content-length":
                return bool(v.strip().isdigit() and int(v) > limit)
        return False

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self._limit(scope)
        if self._declared_too_large(scope, limit):
            await self._refuse(send, limit)
            return
        received = 0
        refused = started = False

        async def limited_receive() -> Any:
            nonlocal received, refused
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    refused = True
                    raise _BodyTooLarge
            return message

        async def guarded_send(message: Any) -> None:
            nonlocal started
            if refused:
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except Exception:
            if not refused:
                raise
        if refused and not started:
            await self._refuse(send, limit)
