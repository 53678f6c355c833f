"""The A2A server: the SDK's JSON-RPC endpoint (v0.3 and 1.0 on one URL) behind devagent's own
endpoint, which authenticates, answers the extension's methods (`commands/get`,
`command/execute`, B12-B13) and mends the SDK's v0.3 quirks; the agent card on both well-known
paths; the task and push stores in the core's database.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

# What `create_app` needs is imported with this module, so the server's boot thread
# (devagent.a2a.server) loads all of it off the event loop.
import httpx
from a2a.compat.v0_3.context_builders import V03ServerCallContextBuilder
from a2a.server.routes import (
    DefaultServerCallContextBuilder,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import Message, Part, Role, SendMessageRequest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

import devagent
from devagent.a2a import extension as ext
from devagent.a2a.card import CardApp, build_card
from devagent.a2a.executor import DevagentExecutor, session_id_for
from devagent.a2a.handler import DevagentRequestHandler
from devagent.a2a.hygiene import ErrorHygiene
from devagent.a2a.legacy_rest import rest_routes
from devagent.a2a.observe import _STATE as _STATE_IN_BODY
from devagent.a2a.observe import Metrics, RouteLog, _state_name, quiet_client_mistakes
from devagent.a2a.push import QueuedPushSender, VersionedPushConfigStore
from devagent.a2a.request import handoff
from devagent.a2a.settings import REST_PREFIX, A2ASettings
from devagent.a2a.store import BufferedTaskStore
from devagent.a2a.streams import STREAM_METHODS, TOO_MANY_STREAMS, StreamSlots
from devagent.common import scrub
from devagent.common.jsonlimits import depth_message, too_deep
from devagent.console import console_routes, is_public_path

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.types import ASGIApp, Receive, Scope, Send

    from devagent.agent.core import AgentCore

log = logging.getLogger(__name__)

CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
# A5: only the card is public (a health probe authenticates like any client).
PUBLIC_PATHS = frozenset(CARD_PATHS)
CUSTOM_METHODS = ("commands/get", "command/execute", "workspaces/get")

_V03_METHODS = frozenset(
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


# The user of the metrics token (`--metrics-token`); no caller can have this name (identity names
# have no spaces), and it is given the auth scope "metrics" rather than "authenticated".
METRICS_READER = "metrics reader"


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


class BearerAuth:
    """Every route but the public card needs `Authorization: Bearer <token>` (A5). The token's
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
        header = None
        for k, v in scope["headers"]:
            if k == b"authorization":
                header = v
                break
        name = self._user(header)
        reader = name is None and scope["path"] == "/metrics" and self._metrics(header) is not None
        if reader:
            name = METRICS_READER
        if name is None:
            if header and header[:7].lower() == b"bearer ":
                message = "invalid token: the bearer token is not one this server accepts"
            else:
                message = "authentication required: send Authorization: Bearer <token>"
            if scope["path"].startswith(REST_PREFIX + "/"):  # the HTTP+JSON binding's error shape
                error = {"code": 401, "status": "UNAUTHENTICATED", "message": message}
                body = json.dumps({"error": error}).encode()
            else:
                body = json.dumps(
                    {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
                ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b'Bearer realm="devagent"'),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        from starlette.authentication import AuthCredentials, SimpleUser

        scope["user"] = SimpleUser(name)
        scope["auth"] = AuthCredentials(["metrics"] if reader else ["authenticated"])
        await self.app(scope, receive, send)


class _BodyTooLarge(Exception):
    pass


class BodyLimit:
    """Requests whose body is larger than `limit` bytes get HTTP 413 with a JSON-RPC error
    (issue 12 item 2), before the body is read: at once when Content-Length says so, else as soon
    as the streamed body grows past the limit (the app's reading stops there and whatever it would
    have answered is dropped)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def _refuse(self, send: Send) -> None:
        message = f"request body larger than {self.limit} bytes"
        body = json.dumps(_rpc_error(None, -32600, message)).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for k, v in scope["headers"]:
            if k == b"content-length":
                if v.strip().isdigit() and int(v) > self.limit:
                    await self._refuse(send)
                    return
                break
        received = 0
        refused = started = False

        async def limited_receive() -> Any:
            nonlocal received, refused
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
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
            await self._refuse(send)


class RestContentType:
    """The HTTP+JSON binding answers `Content-Type: application/json`, as A2A 1.0 says (11.1)
    and its TCK checks (HTTP_JSON-SVC-001); a2a-sdk 1.3.0 labels its REST responses
    `application/a2a+json`, the media type of the spec's examples."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(REST_PREFIX + "/"):
            await self.app(scope, receive, send)
            return

        async def relabel(message: Any) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    (k, b"application/json" if k == b"content-type" and v == b"application/a2a+json" else v)
                    for k, v in message.get("headers", [])
                ]
            await send(message)

        await self.app(scope, receive, relabel)


_PATCHED = False


def _patch_v03_final() -> None:
    """v0.3 clients get `final: true` on input-required (B9); the SDK sets it for terminal
    states only. The conversion is a module-level function the compat layer looks up per call."""
    global _PATCHED
    if _PATCHED:
        return
    from a2a.compat.v0_3 import conversions
    from a2a.compat.v0_3 import types as t03

    original = conversions.to_compat_task_status_update_event

    def to_compat(core_event: Any) -> Any:
        ev = original(core_event)
        if ev.status.state in (t03.TaskState.input_required, t03.TaskState.auth_required):
            ev.final = True
        return ev

    conversions.to_compat_task_status_update_event = to_compat

    # Protobuf `Struct` holds every number as a float: v0.3 DataParts (a client tool call's args,
    # a ToolCall's input_parameters) would go out as `3.0`. Whole numbers go out as integers.
    from devagent.a2a.client_tools import plain_numbers

    original_part = conversions.to_compat_part

    def to_compat_part(core_part: Any) -> Any:
        part = original_part(core_part)
        if isinstance(part.root, t03.DataPart):
            part.root.data = plain_numbers(part.root.data)
        return part

    conversions.to_compat_part = to_compat_part
    _PATCHED = True


_SEND_METHODS = frozenset(("message/send", "message/stream", "SendMessage", "SendStreamingMessage"))


def _mend_send_params(body: dict[str, Any]) -> None:
    """Clients written after the client-tools design's sample (C4) call `sendMessage(message)`
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


def _rpc_error(rid: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


def _invalid_request(body: dict[str, Any]) -> str | None:
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


def _reply_id(body: dict[str, Any]) -> str | int | None:
    rid = body.get("id")
    return rid if isinstance(rid, str | int) and not isinstance(rid, bool) else None


def _json_content_type(value: str | None) -> bool:
    """Whether a Content-Type names JSON (`application/json`, `...+json`), or is absent."""
    if not value:
        return True
    media = value.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def _mcp_app(core: AgentCore, settings: A2ASettings) -> Any:
    """The MCP door (devagent/mcp/) over streamable HTTP, on this server's core: each caller's
    workspaces are its roots here (`roots_for`), and its sessions are its own."""
    from devagent.mcp.server import Door, McpOptions, build_server

    opts = McpOptions(config=core.config, root=settings.workspace_roots[0], roots_for=settings.roots_for)
    server = build_server(Door(opts, core=core))
    return server.streamable_http_app(streamable_http_path="/", host=settings.host)


def _mcp_owned(mcp_app: Any) -> Any:
    """The MCP app as mounted: each MCP session answers only the identity that opened it."""
    from devagent.mcp.owner import SessionOwners

    return SessionOwners(mcp_app)


def create_app(core: AgentCore, settings: A2ASettings) -> Any:
    """The ASGI app serving A2A for `core` (a Starlette app wrapped in the auth middleware)."""
    _patch_v03_final()
    settings.resolve_grpc_port()
    scrub.remember([*settings.tokens, settings.metrics_token])  # never quoted in error text
    card_version = getattr(devagent, "__version__", "0.1.0")
    card = build_card(settings, card_version)
    engine = core.store.engine
    task_store = BufferedTaskStore(DatabaseTaskStore(engine))
    push_store = VersionedPushConfigStore(engine)
    sender = QueuedPushSender(
        lambda: httpx.AsyncClient(timeout=settings.push_timeout, follow_redirects=False),
        push_store,
        task_store,
        allow_private=settings.allow_private_webhooks,
        allow=core.config.outbound_networks(),
        max_attempts=settings.push_max_attempts,
        backoff=settings.push_backoff,
        poll_interval=settings.push_poll_interval,
        lease=settings.push_lease,
        engine=engine,
    )
    executor = DevagentExecutor(core, settings)
    metrics = executor.metrics = Metrics()  # issue 13 item 4
    core.usage_listeners.append(metrics.count_usage)  # issue 24 item 3: spend per caller
    quiet_client_mistakes()  # a client's malformed request: one warning line, no traceback

    def new_task(task_id: str) -> None:
        push_store.new_task(task_id)
        task_store.new_task(task_id)

    handler = DevagentRequestHandler(
        executor,
        task_store=task_store,
        agent_card=card,
        push_config_store=push_store,
        on_new_task=new_task,
        push_sender=sender,
        push_url_validator=sender.validate_url,
        extended_agent_card=card,
        interrupted_task_timeout=settings.interrupted_task_timeout,
    )
    streams = handler.streams  # issue 12 item 2: open streams per token, on every binding
    metrics.count_open_streams(streams.total)
    ctx_builder = V03ServerCallContextBuilder(DefaultServerCallContextBuilder())
    sdk_endpoint = create_jsonrpc_routes(
        handler,
        rpc_url="/",
        context_builder=ctx_builder,  # type: ignore[arg-type]
        enable_v0_3_compat=True,
    )[0].endpoint

    async def commands_get(rid: Any, params: dict[str, Any]) -> dict[str, Any]:
        try:
            from devagent.agent.commands import registry
        except ImportError:
            return {"jsonrpc": "2.0", "id": rid, "result": {"commands": []}}
        cmds = [ext.slash_command_json(c) for c in registry().list()]
        return {"jsonrpc": "2.0", "id": rid, "result": {"commands": cmds}}

    def workspaces_get(request: Request, rid: Any, params: dict[str, Any]) -> dict[str, Any]:
        """The caller's workspace roots (the first is its workspace when a message names none), and
        with `workspace_path` whether that one is allowed: a client asks before its first message."""
        from devagent.a2a.executor import owner_of

        roots = settings.roots_for(owner_of(ctx_builder.build(request)))
        result: dict[str, Any] = {"workspaces": [str(r) for r in roots]}
        path = params.get("workspace_path")
        if path is None:
            return {"jsonrpc": "2.0", "id": rid, "result": result}
        if not isinstance(path, str):
            return _rpc_error(rid, -32602, "workspace_path must be a string")
        try:
            result["workspace_path"] = ext.validate_workspace(path, roots)
        except ext.SettingsError as e:
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": str(e), "data": result}}
        return {"jsonrpc": "2.0", "id": rid, "result": result}

    def _known_command(path: list[str]) -> bool:
        try:
            from devagent.agent.commands import registry
        except ImportError:
            return False
        return registry().find(path) is not None

    async def command_execute(request: Request, rid: Any, params: dict[str, Any]) -> dict[str, Any]:
        path = params.get("command_path")
        args = params.get("args", "")
        if (
            not isinstance(path, list)
            or not path
            or not all(isinstance(p, str) and p for p in path)
            or not isinstance(args, str)
        ):
            return _rpc_error(rid, -32602, "command_path must be a non-empty list of names and args a string")
        if not _known_command(path):
            return {
                "jsonrpc": "2.0",
                "id": rid,
                "result": {
                    "execution_id": "",
                    "status": "FAILED_TO_START",
                    "message": f"unknown command /{' '.join(path)}",
                },
            }
        text = "/" + " ".join(path) + (f" {args}" if args else "")
        msg = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
        cid = params.get("context_id") or params.get("contextId")
        if isinstance(cid, str) and cid:
            msg.context_id = cid
        md = params.get("metadata")
        if isinstance(md, dict) and md:
            msg.metadata.update(md)
        req = SendMessageRequest(message=msg)
        req.configuration.return_immediately = True
        call_context = ctx_builder.build(request)
        call_context.state["method"] = "command/execute"
        handoff(call_context).command = (list(path), args)
        from a2a.utils.errors import A2AError

        try:
            task = await handler.on_message_send(req, call_context)
        except A2AError as e:
            return _rpc_error(rid, -32602, e.message or type(e).__name__)
        task_id = getattr(task, "id", "")
        return {
            "jsonrpc": "2.0",
            "id": rid,
            "result": {
                "execution_id": task_id,
                "status": "STARTED",
                "message": "",
                "context_id": getattr(task, "context_id", ""),
            },
        }

    async def rpc(request: Request) -> Response:
        """Counted and logged, one info line per JSON-RPC request (observe.py): method, task id,
        HTTP status, the task state it answered, and its duration (a stream's: until it closes)."""
        start = time.monotonic()
        response = await _rpc(request)
        body = getattr(request, "_json", None)
        method = task = None
        if isinstance(body, dict):
            method = body.get("method")
            params = body.get("params")
            if isinstance(params, dict):
                msg = params.get("message")
                msg = msg if isinstance(msg, dict) else {}
                task = params.get("id") or params.get("taskId") or msg.get("taskId")
        name = method if isinstance(method, str) and len(method) <= 64 else "?"
        task = task if isinstance(task, str) else None
        if hasattr(response, "body_iterator"):  # a stream (sse-starlette's or Starlette's)
            response.body_iterator = metrics.stream(
                response.body_iterator, name, task, response.status_code, start
            )
        else:
            found = _STATE_IN_BODY.search(bytes(getattr(response, "body", b""))[:4096])
            state = _state_name(found.group(1).decode()) if found else ""
            metrics.request(name, task, response.status_code, start, state)
        return response

    async def _rpc(request: Request) -> Response:
        if too_deep(await request.body(), settings.max_json_depth):  # before json.loads recurses
            return JSONResponse(_rpc_error(None, -32600, depth_message(settings.max_json_depth)))
        try:
            body = await request.json()  # cached on the request: the SDK reads the same object
        except Exception:
            body = None
            if not _json_content_type(request.headers.get("content-type")):
                # ContentTypeNotSupportedError: a body that is not JSON, sent as something else
                return JSONResponse(_rpc_error(None, -32005, "Content-Type must be application/json"))
            # not JSON, or not even text (the SDK reports bytes that are not UTF-8 as -32603)
            return JSONResponse(_rpc_error(None, -32700, "Parse error: the body is not valid JSON"))
        if not isinstance(body, dict):
            resp: Response = await sdk_endpoint(request)
            return resp
        invalid = _invalid_request(body)
        if invalid is not None:
            return JSONResponse(_rpc_error(_reply_id(body), -32600, invalid))
        method = body.get("method")
        rid = body.get("id")
        params = body.get("params")
        if method in STREAM_METHODS and not streams.enter(request.scope):
            return JSONResponse(_rpc_error(rid, TOO_MANY_STREAMS, streams.message()))
        if method in _SEND_METHODS:
            _mend_send_params(body)
        if method in CUSTOM_METHODS:
            p = params if isinstance(params, dict) else {}
            if method == "commands/get":
                return JSONResponse(await commands_get(rid, p))
            if method == "workspaces/get":
                return JSONResponse(workspaces_get(request, rid, p))
            return JSONResponse(await command_execute(request, rid, p))
        if method == "tasks/pushNotificationConfig/get" and isinstance(params, dict):
            # v0.3 allows omitting the config id: the default config's id is the task id
            if "id" in params and not params.get("pushNotificationConfigId"):
                params["pushNotificationConfigId"] = params["id"]
        response: Response = await sdk_endpoint(request)
        if method in _V03_METHODS and isinstance(response, JSONResponse):
            response = _mend_v03(response, method)
        # Activation echo (B1): v0.3 SDKs read the activated extensions from this header.
        asked = ",".join(
            request.headers.getlist("x-a2a-extensions") + request.headers.getlist("a2a-extensions")
        )
        if ext.EXTENSION_URI in asked:
            response.headers["X-A2A-Extensions"] = ext.EXTENSION_URI
            response.headers["A2A-Extensions"] = ext.EXTENSION_URI
        return response

    def _mend_v03(response: JSONResponse, method: str) -> JSONResponse:
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

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def metrics_endpoint(request: Request) -> Response:
        """Prometheus exposition (behind the bearer auth, like every route but the card): each
        caller's spend only for the operator's metrics token, the totals for callers' tokens."""
        reader = "metrics" in getattr(request.scope.get("auth"), "scopes", ())
        data, content_type = metrics.exposition(per_identity=reader)
        return Response(data, media_type=content_type)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        async with core.store.schema_lock():  # replicas starting together create tables once
            await task_store.initialize()
            await push_store.initialize()
        sender.start()
        mcp_running = contextlib.AsyncExitStack()
        if mcp_app is not None:  # the MCP SDK's session manager runs in its app's lifespan
            await mcp_running.enter_async_context(mcp_app.router.lifespan_context(mcp_app))
        grpc_server = None
        if settings.grpc_port is not None:
            from devagent.a2a.grpc_server import start_grpc  # grpcio only when asked for

            grpc_server = await start_grpc(handler, settings)
        try:
            yield
        finally:
            await mcp_running.aclose()
            if grpc_server is not None:
                await grpc_server.stop(grace=1)
            await handler.aclose()
            await task_store.flush_all()
            if executor.fanout is not None:
                await executor.fanout.flush()
            await sender.aclose()

    mcp_app = _mcp_app(core, settings) if settings.mcp else None
    routes = [
        *([Mount("/mcp", app=_mcp_owned(mcp_app))] if mcp_app is not None else []),
        # the card per protocol version, with caching headers (issue 11 item 3)
        *(Route(path, CardApp(settings, card_version)) for path in CARD_PATHS),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", metrics_endpoint, methods=["GET"]),
        *(console_routes(core, settings, session_id_for, ext.tool_call_json) if settings.console else []),
        Route("/", rpc, methods=["POST"]),
        # B16: the REST routes of Gemini CLI's a2a-server (behind the same authentication)
        *rest_routes(handler, executor, ctx_builder, new_task),
        # The HTTP+JSON binding (issue 11 item 4), through the same handler. The SDK's catch-all
        # `/{tenant}` Mount is left out: it would hide every two-segment route listed after it,
        # and devagent has no tenants.
        *(
            r
            for r in create_rest_routes(
                handler,
                context_builder=ctx_builder,  # type: ignore[arg-type]
                enable_v0_3_compat=True,
                path_prefix=REST_PREFIX,
            )
            if not isinstance(r, Mount)
        ),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[
            Middleware(RouteLog, metrics=metrics),  # a line per request of the other routes
            Middleware(ErrorHygiene),  # issue 12 item 3: no internals in any error
            Middleware(BodyLimit, limit=settings.max_body_bytes),  # issue 12 item 2
            Middleware(RestContentType),
            Middleware(StreamSlots, limit=streams),  # issue 12 item 2: open streams per token
        ],
    )
    app.state.handler = handler
    app.state.executor = executor
    app.state.push_sender = sender
    app.state.card = card
    app.state.streams = streams
    served: Any = BearerAuth(app, settings.tokens, settings.metrics_token) if settings.tokens else app
    from devagent import telemetry

    if telemetry.active():  # a request's trace context (`traceparent`) is its turn's parent
        served = telemetry.TraceContext(served)
    return served
