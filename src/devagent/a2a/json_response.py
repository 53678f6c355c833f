"""A JSON response sent straight through ASGI's `send`, by the middleware that answers a request
itself (a refusal, a limit reached, an unhandled error) instead of the app."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from starlette.types import Send


async def send_json(send: Send, status: int, payload: Any, *extra: tuple[bytes, bytes]) -> None:
    """`payload` as the whole JSON body of a `status` response; `extra` headers follow its
    Content-Type and Content-Length."""
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
