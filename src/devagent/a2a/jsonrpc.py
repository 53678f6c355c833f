"""devagent's JSON-RPC endpoint at `/`, in front of the SDK's (v0.3 and 1.0 on one URL).

It checks the request object itself (depth, JSON, JSON-RPC 2.0 shape), counts open streams per
token, answers the extension's own methods (`extension_methods.py`), mends what v0.3 clients
send and get, echoes the activated extension, and counts and logs each request (observe.py).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse, Response

from devagent.a2a import extension as ext
from devagent.a2a.extension_methods import METHODS as EXTENSION_METHODS
from devagent.a2a.observe import _STATE as _STATE_IN_BODY
from devagent.a2a.observe import _state_name
from devagent.a2a.streams import STREAM_METHODS, TOO_MANY_STREAMS
from devagent.common.jsonlimits import depth_message, too_deep
from devagent.common.rpcerrors import rpc_error

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from starlette.requests import Request

    from devagent.a2a.extension_methods import ExtensionMethods
    from devagent.a2a.observe import Metrics
    from devagent.a2a.streams import StreamLimit

V03_METHODS = frozenset(
    (
        "message/send",
        "message/stream",
        "tasks/get",
        "tasks/cancel",
        "tasks/resubscribe",
        "tasks/pushNotificationConfig/set",
        "tasks/pushNotificationConfig/get",
        "tasks/pushNotificationConfig/list",
        "tasks/pushNotificationConfig/delete",
        "agent/getAuthenticatedExtendedCard",
    )
)
SEND_METHODS = frozenset(("message/send", "message/stream", "SendMessage", "SendStreamingMessage"))


def mend_send_params(body: dict[str, Any]) -> None:
    """Clients written after the client-tools design's sample call `sendMessage(message)`
    and leave out `messageId`: params that are a message are read as `{"message": params}`, and a
    message without an id gets one, instead of a validation error."""
    params = body.get("params")
    if not isinstance(params, dict):
        return
    if "message" not in params and "parts" in params and "role" in params:
        params = body["params"] = {"message": params}
    msg = params.get("message")
    if isinstance(msg, dict) and not msg.get("messageId"):
        msg["messageId"] = str(uuid.uuid4())


def invalid_request(body: dict[str, Any]) -> str | None:
    """Why a request object is not a JSON-RPC 2.0 request (-32600, whatever its method), or None.
    Checked before the SDK sees it: its v0.3 layer reports these as invalid params, and a
    non-string `method` would not even reach it."""
    if body.get("jsonrpc") != "2.0":
        return "Invalid request: 'jsonrpc' must be exactly \"2.0\""
    method = body.get("method")
    if not isinstance(method, str) or not method:
        return "Invalid request: 'method' must be a non-empty string"
    rid = body.get("id")
    if isinstance(rid, bool) or not isinstance(rid, str | int | None):
        return "Invalid request: 'id' must be a string, an integer or null"
    return None


def reply_id(body: dict[str, Any]) -> str | int | None:
    rid = body.get("id")
    return rid if isinstance(rid, str | int) and not isinstance(rid, bool) else None


def json_content_type(value: str | None) -> bool:
    """Whether a Content-Type names JSON (`application/json`, `...+json`), or is absent."""
    if not value:
        return True
    media = value.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def mend_v03(response: JSONResponse) -> JSONResponse:
    """-32600 for invalid v0.3 params becomes -32602 (the request object itself was checked
    before: what the SDK's v0.3 layer still calls an invalid request is its params failing
    validation); a successful delete gets its result."""
    data = json.loads(bytes(response.body))
    changed = False
    err = data.get("error")
    if isinstance(err, dict) and err.get("code") == -32600 and data.get("jsonrpc") == "2.0":
        err["code"] = -32602
        err["message"] = "Invalid params"
        changed = True
    elif "error" not in data and "result" not in data:
        data["result"] = None
        changed = True
    return JSONResponse(data, status_code=response.status_code) if changed else response


def _echo_extension(request: Request, response: Response) -> None:
    """The extension's activation echoed: v0.3 SDKs read the activated extensions from this header."""
    asked = ",".join(request.headers.getlist("x-a2a-extensions") + request.headers.getlist("a2a-extensions"))
    if ext.EXTENSION_URI in asked:
        response.headers["X-A2A-Extensions"] = ext.EXTENSION_URI
        response.headers["A2A-Extensions"] = ext.EXTENSION_URI


def _method_and_task(body: Any) -> tuple[str, str | None]:
    """A request's method and task id as the metrics and the log name them."""
    method = task = None
    if isinstance(body, dict):
        method = body.get("method")
        params = body.get("params")
        if isinstance(params, dict):
            msg = params.get("message")
            msg = msg if isinstance(msg, dict) else {}
            task = params.get("id") or params.get("taskId") or msg.get("taskId")
    name = method if isinstance(method, str) and len(method) <= 64 else "?"
    return name, task if isinstance(task, str) else None


@dataclass(eq=False, slots=True)
class JsonRpcEndpoint:
    """The Starlette endpoint of `POST /`: devagent's checks and methods, then the SDK's."""

    sdk_endpoint: Callable[[Request], Awaitable[Response]]
    extension_methods: ExtensionMethods
    streams: StreamLimit
    metrics: Metrics
    max_json_depth: int

    async def handle(self, request: Request) -> Response:
        """Counted and logged, one info line per JSON-RPC request (observe.py): method, task id,
        HTTP status, the task state it answered, and its duration (a stream's: until it closes)."""
        start = time.monotonic()
        response, body = await self.dispatch(request)
        name, task = _method_and_task(body)
        if hasattr(response, "body_iterator"):  # a stream (sse-starlette's or Starlette's)
            response.body_iterator = self.metrics.stream(
                response.body_iterator, name, task, response.status_code, start
            )
        else:
            found = _STATE_IN_BODY.search(bytes(getattr(response, "body", b""))[:4096])
            state = _state_name(found.group(1).decode()) if found else ""
            self.metrics.request(name, task, response.status_code, start, state)
        return response

    async def dispatch(self, request: Request) -> tuple[Response, Any]:
        """The response, and the request's body as parsed (None when it is not JSON)."""
        if too_deep(await request.body(), self.max_json_depth):  # before json.loads recurses
            return JSONResponse(rpc_error(None, -32600, depth_message(self.max_json_depth))), None
        try:
            body = await request.json()  # cached on the request: the SDK reads the same object
        except Exception:
            if not json_content_type(request.headers.get("content-type")):
                # ContentTypeNotSupportedError: a body that is not JSON, sent as something else
                return JSONResponse(rpc_error(None, -32005, "Content-Type must be application/json")), None
            # not JSON, or not even text (the SDK reports bytes that are not UTF-8 as -32603)
            return JSONResponse(rpc_error(None, -32700, "Parse error: the body is not valid JSON")), None
        if not isinstance(body, dict):
            return await self.sdk_endpoint(request), body
        return await self._request(request, body), body

    async def _request(self, request: Request, body: dict[str, Any]) -> Response:
        """One JSON-RPC request object."""
        invalid = invalid_request(body)
        if invalid is not None:
            return JSONResponse(rpc_error(reply_id(body), -32600, invalid))
        method = body.get("method")
        rid = body.get("id")
        params = body.get("params")
        if method in STREAM_METHODS and not self.streams.enter(request.scope):
            return JSONResponse(rpc_error(rid, TOO_MANY_STREAMS, self.streams.message()))
        if method in SEND_METHODS:
            mend_send_params(body)
        if method in EXTENSION_METHODS:
            p = params if isinstance(params, dict) else {}
            return JSONResponse(await self.extension_methods.answer(str(method), request, rid, p))
        if method == "tasks/pushNotificationConfig/get" and isinstance(params, dict):
            # v0.3 allows omitting the config id: the default config's id is the task id
            if "id" in params and not params.get("pushNotificationConfigId"):
                params["pushNotificationConfigId"] = params["id"]
        response = await self.sdk_endpoint(request)
        if method in V03_METHODS and isinstance(response, JSONResponse):
            response = mend_v03(response)
        _echo_extension(request, response)
        return response
