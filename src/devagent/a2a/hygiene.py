"""Every JSON-RPC error the A2A server sends goes through `devagent.common.rpcerrors.clean_error`,
whichever layer built it: the SDK's dispatcher and its v0.3 adapter put
`str(exception)` and pydantic's reports into their errors, and devagent's own handlers raise
the SDK's errors. Checking the answers at the one door they all leave by is what makes the rule
hold for code paths nobody thought of; the SDK's builders are not patched one by one.

A plain JSON answer is held until its body is complete, cleaned, and sent with its new length;
a stream's events are cleaned one by one as they go. An exception that escapes the app answers
HTTP 500 with a JSON-RPC error naming a reference, never Starlette's plain-text page.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from devagent.a2a.json_response import send_json
from devagent.common.asgi import HttpMiddleware
from devagent.common.rpcerrors import (
    INTERNAL_ERROR,
    clean_error,
    data_leaks,
    internal_error,
    leaks,
    rpc_error,
)

if TYPE_CHECKING:
    from starlette.types import Message, Receive, Scope, Send

log = logging.getLogger(__name__)


def _header(message: Message, name: bytes) -> bytes:
    for k, v in message.get("headers", []):
        if k.lower() == name:
            return bytes(v)
    return b""


def _clean_payload(payload: Any, what: str) -> Any:
    """A JSON-RPC response, or an HTTP+JSON (REST) error body, with its error cleaned; None if it
    has none. A REST error keeps its own shape (`code`, `status`, `message`, `details`): only a
    message or details that leak are replaced."""
    if not isinstance(payload, dict) or "error" not in payload:
        return None
    err = payload["error"]
    if payload.get("jsonrpc") == "2.0":
        return {**payload, "error": clean_error(err, what=what)}
    if not isinstance(err, dict):
        return None
    message = err.get("message")
    status = err.get("code")
    internal = isinstance(status, int) and status >= 500
    if not internal and not (isinstance(message, str) and leaks(message)) and not data_leaks(err):
        return None
    cleaned = {k: v for k, v in err.items() if not data_leaks(v)}
    cleaned["message"] = internal_error(f"{status}: {message!r} ({err!r})", what=what)
    return {**payload, "error": cleaned}


def _cleaned_json(raw: bytes, what: str) -> bytes | None:
    """The JSON text `raw` with its error cleaned, compact; None when it is not JSON or needs
    no cleaning."""
    try:
        payload = json.loads(raw)
    except ValueError:
        return None
    cleaned = _clean_payload(payload, what)
    if cleaned is None:
        return None
    return json.dumps(cleaned, ensure_ascii=False, separators=(",", ":")).encode()


def clean_json_body(body: bytes, what: str) -> bytes:
    if b'"error"' not in body:
        return body
    cleaned = _cleaned_json(body, what)
    return body if cleaned is None else cleaned


def clean_sse_chunk(chunk: bytes, what: str) -> bytes:
    """The `data:` lines of server-sent events that hold a JSON-RPC error, cleaned."""
    if b'"error"' not in chunk:
        return chunk
    lines = chunk.split(b"\n")
    for i, line in enumerate(lines):
        if not line.startswith(b"data:"):
            continue
        cleaned = _cleaned_json(line[5:].strip(), what)
        if cleaned is not None:
            lines[i] = b"data: " + cleaned + (b"\r" if line.endswith(b"\r") else b"")
    return b"\n".join(lines)


class ErrorHygiene(HttpMiddleware):
    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        what = f"{scope.get('method', '')} {scope.get('path', '')}".strip()
        mode = ""
        held: Message | None = None
        parts: list[bytes] = []
        started = False

        async def hygienic_send(message: Message) -> None:
            nonlocal mode, held, started
            kind = message["type"]
            if kind == "http.response.start":
                ctype = _header(message, b"content-type").lower()
                if ctype.startswith(b"application/json"):
                    mode, held = "json", message
                    return
                mode = "sse" if ctype.startswith(b"text/event-stream") else "other"
                started = True
                await send(message)
                return
            if kind == "http.response.body" and mode == "json":
                parts.append(message.get("body", b""))
                if message.get("more_body", False):
                    return
                body = clean_json_body(b"".join(parts), what)
                assert held is not None
                headers = [(k, v) for k, v in held.get("headers", []) if k.lower() != b"content-length"]
                headers.append((b"content-length", str(len(body)).encode()))
                started = True
                await send({**held, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
            if kind == "http.response.body" and mode == "sse":
                body = message.get("body", b"")
                if body:
                    message = {**message, "body": clean_sse_chunk(body, what)}
            await send(message)

        try:
            await self.app(scope, receive, hygienic_send)
        except Exception:
            text = internal_error("unhandled exception", what=what, exc_info=True)
            if started:
                raise  # the answer is under way: the server closes the connection
            await send_json(send, 500, rpc_error(None, INTERNAL_ERROR, text))
