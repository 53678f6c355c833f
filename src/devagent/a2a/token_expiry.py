"""A stream opened with an access token that expires while it is open ends then, with the
protocol's own authentication error as its last event, rather than running on past the token
or being cut off: an SSE response of the JSON-RPC binding and of the MCP door gets a JSON-RPC
error for its request, one of the HTTP+JSON binding that binding's UNAUTHENTICATED error. A
response that is not a stream, begun while the token was valid, is left to finish."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import TYPE_CHECKING, Any

from devagent.a2a.settings import REST_PREFIX

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

EXPIRED = "invalid token: the token has expired"
_BODY_KEPT = 1 << 20  # what is kept of a request's body to find its JSON-RPC id


def _request_id(body: bytes) -> Any:
    try:
        request = json.loads(body)
    except ValueError:
        return None
    return request.get("id") if isinstance(request, dict) else None


def expiry_event(path: str, body: bytes) -> bytes:
    """The last event of a stream whose token expired, in the terms of the path's protocol."""
    if path.startswith(REST_PREFIX + "/"):
        payload: dict[str, Any] = {"error": {"code": 401, "status": "UNAUTHENTICATED", "message": EXPIRED}}
        return b"data: " + json.dumps(payload).encode() + b"\n\n"
    error = {"jsonrpc": "2.0", "id": _request_id(body), "error": {"code": -32600, "message": EXPIRED}}
    event = b"event: message\n" if path == "/mcp" or path.startswith("/mcp/") else b""
    return event + b"data: " + json.dumps(error).encode() + b"\n\n"


class _Stream:
    """One response's state, shared by the app's `send`, its `receive` and the watchdog."""

    def __init__(self, scope: Scope, send: Send) -> None:
        self.path: str = scope["path"]
        self.send = send
        self.lock = asyncio.Lock()
        self.sse = False
        self.ended = False
        self.expired = False
        self.gone = asyncio.Event()  # the app is told the client went away
        self.body = bytearray()

    async def end_expired(self) -> None:
        """Ends the stream with the expiry event (under the lock)."""
        self.ended = True
        await self.send({"type": "http.response.body", "body": expiry_event(self.path, bytes(self.body))})
        self.gone.set()


async def serve_until(app: ASGIApp, scope: Scope, receive: Receive, send: Send, deadline: float) -> None:
    """Serves the request with `app`; an event stream still open at `deadline` (epoch seconds)
    ends then with the expiry event, and the app is told its client went away."""
    s = _Stream(scope, send)

    async def receive_watched() -> Message:
        if s.gone.is_set():
            return {"type": "http.disconnect"}
        real = asyncio.ensure_future(receive())
        gone = asyncio.ensure_future(s.gone.wait())
        try:
            await asyncio.wait((real, gone), return_when=asyncio.FIRST_COMPLETED)
        finally:  # neither left pending, however this ends (the app's task cancelled too)
            gone.cancel()
            if not real.done():
                real.cancel()
        if real.cancelled() or not real.done():
            return {"type": "http.disconnect"}
        message: Message = real.result()
        if message["type"] == "http.request" and len(s.body) < _BODY_KEPT:
            s.body += message.get("body", b"")[: _BODY_KEPT - len(s.body)]
        return message

    async def send_watched(message: Message) -> None:
        async with s.lock:
            if s.ended:
                return  # the stream was ended at the expiry: the rest is not the client's
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers") or [])
                s.sse = headers.get(b"content-type", b"").startswith(b"text/event-stream")
            elif message["type"] == "http.response.body":
                if s.sse and s.expired:
                    await s.end_expired()
                    return
                s.ended = not message.get("more_body", False)
            await send(message)

    async def watchdog() -> None:
        await asyncio.sleep(max(0.0, deadline - time.time()))
        async with s.lock:
            s.expired = True
            if s.sse and not s.ended:
                await s.end_expired()

    watching = asyncio.create_task(watchdog())
    try:
        await app(scope, receive_watched, send_watched)
    finally:
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching
