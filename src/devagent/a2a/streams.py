"""Open streams per token: every streaming door of the A2A server counts.

A stream counts from when it is accepted until it ends, whatever ends it (its last event, the
client going away, an error, the server stopping). On the HTTP bindings the count is tied to the
request itself: `StreamSlots`, an ASGI middleware, gives each request a place to put the slot
it takes and releases it as the response's last bytes are sent, or when the app's call returns
(the response was cut off, or failed). Nothing that happens inside the stream (a generator left
suspended, an exception) can keep a slot. The gRPC binding releases in the call's own `finally`.

A refused stream is refused before anything else happens (no task is created, no turn runs),
with each binding's own error: a JSON-RPC error object, HTTP 429 with the HTTP+JSON error body,
gRPC RESOURCE_EXHAUSTED, and the Gemini CLI routes' `{"error": ...}` with 429.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from devagent.a2a.json_response import send_json
from devagent.a2a.settings import REST_PREFIX
from devagent.common.asgi import HttpMiddleware

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

# The JSON-RPC methods that answer with a stream (v0.3 and 1.0 names)
STREAM_METHODS = frozenset(("message/stream", "tasks/resubscribe", "SendStreamingMessage", "SubscribeToTask"))
# JSON-RPC's range for errors an implementation defines; A2A's own codes count down from -32001.
TOO_MANY_STREAMS = -32000
_SCOPE_KEY = "devagent.stream_slots"


class StreamSlot:
    """One open stream of one key; `release` is safe to call more than once."""

    __slots__ = ("_key", "_limit")

    def __init__(self, limit: StreamLimit, key: str) -> None:
        self._limit: StreamLimit | None = limit
        self._key = key

    def release(self) -> None:
        limit, self._limit = self._limit, None
        if limit is not None:
            limit._release(self._key)


class StreamLimit:
    """How many streams each key (a token's user name) has open; at most `limit` (0: no limit).
    Tokens given the same user name share one count: they are one user to the server."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._open: dict[str, int] = {}

    def open_count(self, key: str) -> int:
        return self._open.get(key, 0)

    def total(self) -> int:
        return sum(self._open.values())

    def acquire(self, key: str) -> StreamSlot | None:
        """A slot for one more stream of `key`, or None when it has `limit` open already."""
        n = self._open.get(key, 0)
        if self.limit and n >= self.limit:
            return None
        self._open[key] = n + 1
        return StreamSlot(self, key)

    def _release(self, key: str) -> None:
        n = self._open.get(key, 0) - 1
        if n > 0:
            self._open[key] = n
        else:
            self._open.pop(key, None)  # no entry for a user with nothing open

    def message(self) -> str:
        return f"too many open streams: at most {self.limit} per token; close one and try again"

    # --- on the HTTP bindings ----------------------------------------------------------------

    def enter(self, scope: Scope) -> bool:
        """Takes a slot for the request of `scope` (released when the request ends, by
        `StreamSlots`); False when the request's user has none left."""
        held = scope.get(_SCOPE_KEY)
        if held is None:  # not under StreamSlots (cannot happen in create_app's app): not counted
            return True
        slot = self.acquire(user_key(scope))
        if slot is None:
            return False
        held.append(slot)
        return True


def user_key(scope: Scope) -> str:
    """The user the bearer token named (BearerAuth); "" on an app without tokens."""
    user = scope.get("user")
    name = getattr(user, "username", "") if user is not None else ""
    return name if isinstance(name, str) else ""


def is_rest_stream(scope: Scope) -> bool:
    """The HTTP+JSON binding's streaming routes (1.0 under REST_PREFIX, v0.3 under
    REST_PREFIX/v1): `message:stream` and `tasks/{id}:subscribe`."""
    path: str = scope.get("path", "")
    return path.startswith(REST_PREFIX + "/") and path.endswith((":stream", ":subscribe"))


class StreamSlots(HttpMiddleware):
    """Gives every HTTP request a place for the stream slot it takes and releases it when the
    request ends; refuses the HTTP+JSON binding's streaming routes over the limit (HTTP 429 with
    that binding's error body) before they are routed."""

    def __init__(self, app: ASGIApp, limit: StreamLimit) -> None:
        super().__init__(app)
        self.limit = limit

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        held: list[StreamSlot] = []
        scope[_SCOPE_KEY] = held

        def release() -> None:
            for slot in held:
                slot.release()

        async def send_releasing(message: Any) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                # Released before the last bytes go out: a client that opens its next stream
                # as soon as this one ends finds the slot free.
                release()
            await send(message)

        try:
            if is_rest_stream(scope) and not self.limit.enter(scope):
                error = {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": self.limit.message()}
                await send_json(send, 429, {"error": error})
                return
            await self.app(scope, receive, send_releasing)
        finally:
            release()  # cut off (the client went away), or failed before its last bytes
