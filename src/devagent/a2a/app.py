"""The A2A server app: the SDK's JSON-RPC endpoint (v0.3 and 1.0 on one URL) behind devagent's own
(jsonrpc.py), the agent card on both well-known paths, the HTTP+JSON binding, Gemini CLI's REST
routes, the console, the MCP door; the task and push stores in the core's database; the bearer
authentication around it all (auth.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

# What `create_app` needs is imported with this module, so the server's boot thread
# (devagent.a2a.server) loads all of it off the event loop.
import httpx
from a2a.compat.v0_3.context_builders import V03ServerCallContextBuilder
from a2a.server.routes import DefaultServerCallContextBuilder, create_jsonrpc_routes
from a2a.server.tasks import DatabaseTaskStore
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route

import devagent
from devagent import telemetry
from devagent.a2a import extension as ext
from devagent.a2a.auth import RESOURCE_METADATA_PATHS, BearerAuth, Callers
from devagent.a2a.body_limit import BodyLimit
from devagent.a2a.card import CARD_PATHS, CardApp, build_card
from devagent.a2a.client_tools import plain_numbers
from devagent.a2a.dispatch_routes import DispatchDoor
from devagent.a2a.executor import DevagentExecutor, session_id_for
from devagent.a2a.extension_methods import ExtensionMethods
from devagent.a2a.handler import DevagentRequestHandler
from devagent.a2a.hygiene import ErrorHygiene
from devagent.a2a.jsonrpc import JsonRpcEndpoint
from devagent.a2a.legacy_rest import rest_routes
from devagent.a2a.observe import Metrics, RouteLog, quiet_client_mistakes
from devagent.a2a.push import QueuedPushSender, VersionedPushConfigStore
from devagent.a2a.rest_binding import RestContentType, rest_binding_routes
from devagent.a2a.store import BufferedTaskStore
from devagent.a2a.streams import StreamLimit, StreamSlots
from devagent.a2a.worker_routes import PREFIX as WORKERS_PREFIX
from devagent.a2a.worker_routes import WORKER_BODY_BYTES, WorkerDoor, parse_worker_tokens
from devagent.common import scrub
from devagent.console import console_routes
from devagent.console.signin import SignIn
from devagent.patches import a2a_sdk

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from a2a.types import AgentCard
    from starlette.requests import Request

    from devagent.a2a.settings import A2ASettings
    from devagent.agent.api import AgentCore
    from devagent.store.identity_groups import IdentityGroups


def _mcp_app(core: AgentCore, settings: A2ASettings) -> Any:
    """The MCP door (devagent/mcp/) over streamable HTTP, on this server's core: each caller's
    workspaces are its roots here (`roots_for`), and its sessions are its own."""
    from devagent.mcp.server import McpDoor, McpOptions, build_server  # late: the MCP SDK, with --mcp only

    opts = McpOptions(config=core.config, root=settings.workspace_roots[0], roots_for=settings.roots_for)
    server = build_server(McpDoor(opts, core=core))
    return server.streamable_http_app(streamable_http_path="/", host=settings.host)


def _mcp_owned(mcp_app: Any) -> Any:
    """The MCP app as mounted: each MCP session answers only the identity that opened it."""
    from devagent.mcp.owner import SessionOwners  # late: the MCP SDK, with --mcp only

    return SessionOwners(mcp_app)


@dataclass(slots=True)
class ServerParts:
    """What the app is made of: built once by `create_app`, shared by its routes and lifespan."""

    core: AgentCore
    settings: A2ASettings
    card: AgentCard
    card_version: str
    task_store: BufferedTaskStore
    push_store: VersionedPushConfigStore
    sender: QueuedPushSender
    executor: DevagentExecutor
    metrics: Metrics
    handler: DevagentRequestHandler
    streams: StreamLimit
    ctx_builder: V03ServerCallContextBuilder
    new_task: Callable[[str], None]  # a task is created: the stores learn it is new
    mcp_app: Any  # the MCP door's app, or None
    callers: Callers | None  # who tokens name (None: a server without tokens)


def _push_sender(
    core: AgentCore,
    settings: A2ASettings,
    push_store: VersionedPushConfigStore,
    task_store: BufferedTaskStore,
) -> QueuedPushSender:
    return QueuedPushSender(
        lambda: httpx.AsyncClient(timeout=settings.push_timeout, follow_redirects=False),
        push_store,
        task_store,
        allow_private=settings.allow_private_webhooks,
        allow=core.config.outbound_networks(),
        max_attempts=settings.push_max_attempts,
        backoff=settings.push_backoff,
        poll_interval=settings.push_poll_interval,
        lease=settings.push_lease,
        engine=core.store.engine,
    )


def build_parts(core: AgentCore, settings: A2ASettings) -> ServerParts:
    """The stores, the push sender, the executor and the SDK's request handler, with metrics."""
    card_version = getattr(devagent, "__version__", "0.1.0")
    card = build_card(settings, card_version)
    engine = core.store.engine
    task_store = BufferedTaskStore(DatabaseTaskStore(engine), begin=core.store.begin)
    core.sweeper.add(task_store.drop_idle)
    push_store = VersionedPushConfigStore(engine)
    sender = _push_sender(core, settings, push_store, task_store)
    executor = DevagentExecutor(core, settings)
    executor.task_store = task_store  # a turn begins once its task's row holds its message
    if settings.oidc is not None and settings.oidc.shared_groups:
        from devagent.store.identity_groups import IdentityGroups

        executor.identity_groups = IdentityGroups(engine)
    metrics = executor.metrics = Metrics()
    core.usage_listeners.append(metrics.count_usage)  # spend per caller
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
    streams = handler.streams  # open streams per token, on every binding
    metrics.count_open_streams(streams.total)
    return ServerParts(
        core=core,
        settings=settings,
        card=card,
        card_version=card_version,
        task_store=task_store,
        push_store=push_store,
        sender=sender,
        executor=executor,
        metrics=metrics,
        handler=handler,
        streams=streams,
        ctx_builder=V03ServerCallContextBuilder(DefaultServerCallContextBuilder()),
        new_task=new_task,
        mcp_app=_mcp_app(core, settings) if settings.mcp else None,
        callers=_callers(settings, executor.identity_groups),
    )


def _callers(settings: A2ASettings, groups: IdentityGroups | None) -> Callers | None:
    """The static tokens and the IdP's verifier (with its audience defaulting to this server's URL,
    known by now: the port is bound), or None for a server that has neither."""
    oidc = settings.oidc_resolved
    if not settings.tokens and oidc is None:
        return None
    from devagent.common.identity import OidcVerifier

    return Callers(settings.tokens, OidcVerifier(oidc) if oidc is not None else None, groups)


def _discovered(parts: ServerParts) -> Callable[[], Any] | None:
    """How the card learns the IdP's discovery document, once the server has read it."""
    oidc = parts.callers.oidc if parts.callers is not None else None
    return (lambda: oidc.keys.known_document) if oidc is not None else None


async def _discover_idp(parts: ServerParts) -> None:
    """The IdP's discovery document read at start (in bounded time), so that the card declares
    what it offers from the first request (the device code flow) and the extended card too. An
    IdP that cannot be read is no reason not to start: its tokens are refused until it can be
    (the card then declares the flow once a token's check has read the document)."""
    oidc = parts.callers.oidc if parts.callers is not None else None
    if oidc is None:
        return
    from devagent.common.identity import IdpUnavailable

    try:
        async with asyncio.timeout(2 * oidc.settings.timeout):
            document = await oidc.keys.document()
    except (IdpUnavailable, TimeoutError) as e:
        log.warning("the identity provider's discovery document could not be read at start: %s", e)
        return
    parts.card = build_card(parts.settings, parts.card_version, document)
    parts.handler.extended_agent_card = parts.card


def _lifespan(parts: ServerParts) -> Callable[[Any], contextlib.AbstractAsyncContextManager[None]]:
    """Start-up: the stores' tables, the push sender, the MCP door, gRPC when asked for; shut-down:
    each stopped, buffered tasks and pushes written."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        async with parts.core.store.schema_lock():  # replicas starting together create tables once
            await parts.task_store.initialize()
            await parts.push_store.initialize()
            if parts.executor.identity_groups is not None:
                await parts.executor.identity_groups.initialize()
        await _discover_idp(parts)
        parts.sender.start()
        parts.core.sweeper.start()
        mcp_running = contextlib.AsyncExitStack()
        mcp_app = parts.mcp_app
        if mcp_app is not None:  # the MCP SDK's session manager runs in its app's lifespan
            await mcp_running.enter_async_context(mcp_app.router.lifespan_context(mcp_app))
        grpc_server = None
        if parts.settings.grpc_port is not None:
            from devagent.a2a.grpc_server import start_grpc  # late: grpcio, with --grpc-port only

            grpc_server = await start_grpc(parts.handler, parts.settings, parts.callers)
        try:
            yield
        finally:
            await mcp_running.aclose()
            if grpc_server is not None:
                await grpc_server.stop(grace=1)
            await parts.handler.aclose()
            await parts.task_store.flush_all()
            if parts.executor.fanout is not None:
                await parts.executor.fanout.flush()
            await parts.sender.aclose()

    return lifespan


def _resource_metadata(settings: A2ASettings) -> Callable[[Request], Any]:
    """The MCP door's OAuth 2.0 protected-resource metadata (RFC 9728): the resource (the audience
    its tokens must name), the IdP that issues them, how they are sent, the scopes to ask for.
    An MCP host reads it from the 401's pointer and logs its user in by itself."""
    oidc = settings.oidc_resolved
    assert oidc is not None
    body = {
        "resource": oidc.audiences[0],
        "authorization_servers": [oidc.issuer],
        "bearer_methods_supported": ["header"],
        "scopes_supported": list(oidc.scopes),
        "resource_name": settings.agent_name,
    }

    async def resource_metadata(request: Request) -> Response:
        return JSONResponse(body, headers={"Cache-Control": "public, max-age=300"})

    return resource_metadata


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


def _metrics_endpoint(metrics: Metrics, core: AgentCore) -> Callable[[Request], Any]:
    async def metrics_endpoint(request: Request) -> Response:
        """Prometheus exposition (behind the bearer auth, like every route but the card): each
        caller's spend only for the operator's metrics token, the totals for callers' tokens;
        the workers as the store has them."""
        reader = "metrics" in getattr(request.scope.get("auth"), "scopes", ())
        metrics.count_workers(await core.store.workers.overview(core.config.worker_lease_seconds))
        data, content_type = metrics.exposition(per_identity=reader)
        return Response(data, media_type=content_type)

    return metrics_endpoint


def _jsonrpc_endpoint(parts: ServerParts) -> JsonRpcEndpoint:
    sdk_route = create_jsonrpc_routes(
        parts.handler,
        rpc_url="/",
        context_builder=parts.ctx_builder,  # type: ignore[arg-type]
        enable_v0_3_compat=True,
    )[0]
    assert isinstance(sdk_route, Route)
    return JsonRpcEndpoint(
        sdk_route.endpoint,
        ExtensionMethods(parts.handler, parts.settings, parts.ctx_builder),
        parts.streams,
        parts.metrics,
        parts.settings.max_json_depth,
    )


def _signin(parts: ServerParts) -> SignIn | None:
    """The console's sign-in through the IdP, where the operator registered the console with it."""
    oidc = parts.settings.oidc_resolved
    callers = parts.callers
    if oidc is None or not oidc.client_id or callers is None or callers.oidc is None:
        return None
    return SignIn(oidc, parts.settings.base_url, callers.oidc)


def _worker_door(parts: ServerParts) -> WorkerDoor:
    """The workers' routes (/workers/v1/), behind the workers' own tokens."""
    config = parts.core.config
    return WorkerDoor(
        lambda: parts.core.store.workers,
        parse_worker_tokens(config.worker_tokens),
        config.worker_lease_seconds,
        config.worker_poll_seconds,
        parts.settings.stopping,
    )


def _routes(parts: ServerParts) -> list[BaseRoute]:
    settings = parts.settings
    card_app = CardApp(settings, parts.card_version, discovered=_discovered(parts))
    return [
        *([Mount("/mcp", app=_mcp_owned(parts.mcp_app))] if parts.mcp_app is not None else []),
        *(
            Route(path, _resource_metadata(settings), methods=["GET"])
            for path in (RESOURCE_METADATA_PATHS if settings.mcp and settings.oidc else ())
        ),
        # the card per protocol version, with caching headers
        *(Route(path, card_app) for path in CARD_PATHS),
        Route("/healthz", healthz, methods=["GET"]),
        *_worker_door(parts).routes(),
        *DispatchDoor(
            lambda: parts.core.store.workers,
            lambda: parts.core.store.dispatch,
            parse_worker_tokens(parts.core.config.worker_tokens),
        ).routes(),
        Route("/metrics", _metrics_endpoint(parts.metrics, parts.core), methods=["GET"]),
        *(
            console_routes(
                parts.core,
                settings,
                session_id_for,
                ext.tool_call_json,
                _signin(parts),
                parts.executor.identity_groups.groups_of if parts.executor.identity_groups else None,
            )
            if settings.console
            else []
        ),
        Route("/", _jsonrpc_endpoint(parts).handle, methods=["POST"]),
        # the REST routes of Gemini CLI's a2a-server (behind the same authentication)
        *rest_routes(parts.handler, parts.executor, parts.ctx_builder, parts.new_task),
        # the HTTP+JSON binding, through the same handler
        *rest_binding_routes(parts.handler, parts.ctx_builder),
    ]


def _middleware(parts: ServerParts) -> list[Middleware]:
    return [
        Middleware(RouteLog, metrics=parts.metrics),  # a line per request of the other routes
        Middleware(ErrorHygiene),  # no internals in any error
        Middleware(BodyLimit, limit=parts.settings.max_body_bytes, wider=(WORKERS_PREFIX, WORKER_BODY_BYTES)),
        Middleware(RestContentType),
        Middleware(StreamSlots, limit=parts.streams),  # open streams per token
    ]


def create_app(core: AgentCore, settings: A2ASettings) -> Any:
    """The ASGI app serving A2A for `core` (a Starlette app wrapped in the auth middleware)."""
    a2a_sdk.mend_v03_conversions(plain_numbers)
    settings.resolve_grpc_port()
    worker_tokens = parse_worker_tokens(core.config.worker_tokens)
    scrub.remember([*settings.tokens, settings.metrics_token, *worker_tokens])  # never quoted in error text
    parts = build_parts(core, settings)
    app = Starlette(routes=_routes(parts), lifespan=_lifespan(parts), middleware=_middleware(parts))
    app.state.handler = parts.handler
    app.state.executor = parts.executor
    app.state.push_sender = parts.sender
    app.state.card = parts.card
    app.state.streams = parts.streams
    served: Any = app
    if parts.callers is not None:
        metadata_url = (
            settings.base_url + RESOURCE_METADATA_PATHS[0] if settings.oidc and settings.mcp else ""
        )
        served = BearerAuth(app, parts.callers, settings.metrics_token, metadata_url)
    if telemetry.active():  # a request's trace context (`traceparent`) is its turn's parent
        served = telemetry.TraceContext(served)
    return served
