"""The HTTP+JSON binding of A2A 1.0 under `/rest` (v0.3 under `/rest/v1`): the SDK's routes over
the same request handler as JSON-RPC, answered as `application/json`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from a2a.server.routes import create_rest_routes
from starlette.routing import BaseRoute, Mount, Route

from devagent.a2a.settings import REST_PREFIX

if TYPE_CHECKING:
    from a2a.compat.v0_3.context_builders import V03ServerCallContextBuilder
    from a2a.server.request_handlers import RequestHandler
    from starlette.types import ASGIApp, Receive, Scope, Send


def rest_binding_routes(handler: RequestHandler, ctx_builder: V03ServerCallContextBuilder) -> list[BaseRoute]:
    """The SDK's routes of the binding. Its catch-all `/{tenant}` Mount is left out: it would
    hide every two-segment route listed after it, and devagent's tenants are its identities,
    named only to list another's tasks. That one route is kept, last, as the binding writes it
    (`GET /{tenant}/tasks`, the SDK's client putting `tenant` in the path): the request handler
    reads the tenant from the call's context, as it does on JSON-RPC and gRPC."""
    routes = create_rest_routes(
        handler,
        context_builder=ctx_builder,  # type: ignore[arg-type]
        enable_v0_3_compat=True,
        path_prefix=REST_PREFIX,
    )
    kept = [r for r in routes if not isinstance(r, Mount)]
    listing = next(
        r
        for r in kept
        if isinstance(r, Route) and r.path == REST_PREFIX + "/tasks" and "GET" in (r.methods or ())
    )
    return [*kept, Route(REST_PREFIX + "/{tenant}/tasks", listing.endpoint, methods=["GET"])]


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
