"""The gRPC binding of A2A 1.0 (`lf.a2a.v1.A2AService`) on its own port.

The SDK's `GrpcHandler` maps the service onto the same request handler the JSON-RPC and
HTTP+JSON bindings use, so dialects and behaviour are the same on all three. What devagent adds:
the bearer tokens (a call without a valid `authorization` metadata entry is refused
UNAUTHENTICATED before the handler sees it), the token's user as the task owner, and the call's
metadata as the request headers (`A2A-Version` 1.0 when absent: this service is the 1.0 one).

Imported only when `serve --grpc-port` asks for gRPC: grpcio adds to the cold start otherwise.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import TYPE_CHECKING, Any

from devagent.patches import a2a_sdk

if a2a_sdk.grpc_handler_deferred():  # by devagent.a2a: loaded now
    a2a_sdk.allow_grpc_handler()

# grpcio with its fork handlers off, unless the operator says otherwise: devagent forks only to
# exec (shell commands, MCP servers), and gRPC's handlers, on by default in its C core, would run
# in each such child before its exec (and may log there). The environment variable is grpcio's
# only documented switch for them (doc/fork_support.md; no Python API), read once when grpc is
# imported: it is set for that moment only, so the agent's commands do not inherit it.
if "GRPC_ENABLE_FORK_SUPPORT" not in os.environ:
    os.environ["GRPC_ENABLE_FORK_SUPPORT"] = "false"
    try:
        import grpc  # type: ignore[import-untyped]
    finally:
        del os.environ["GRPC_ENABLE_FORK_SUPPORT"]

import grpc  # type: ignore[import-untyped]
import grpc.aio  # type: ignore[import-untyped]
from a2a.auth.user import UnauthenticatedUser, User
from a2a.server.request_handlers.grpc_handler import (
    DefaultGrpcServerCallContextBuilder,
    GrpcHandler,
)
from a2a.types import a2a_pb2_grpc
from a2a.utils.errors import (
    A2A_ERROR_REASONS,
    A2AError,
    PushNotificationNotSupportedError,
    UnsupportedOperationError,
    VersionNotSupportedError,
)
from a2a.utils.grpc_status import status_to_grpc
from google.protobuf import any_pb2  # type: ignore[import-untyped]
from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]

from devagent import telemetry
from devagent.a2a.auth import Callers, NamedUser
from devagent.a2a.streams import StreamLimit
from devagent.a2a.token_expiry import EXPIRED
from devagent.common.identity import TokenRefused

if TYPE_CHECKING:
    from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable

    from a2a.server.context import ServerCallContext
    from a2a.server.request_handlers import RequestHandler

    from devagent.a2a.settings import A2ASettings


def _metadata(context: grpc.aio.ServicerContext) -> dict[str, str]:
    return {
        k.lower(): v if isinstance(v, str) else v.decode("latin-1")
        for k, v in (context.invocation_metadata() or ())
    }


def _credentials(check: Callers, header: str | None) -> Any:
    """The role and shared groups the call's IdP token gives, as BearerAuth gives them on the HTTP
    bindings (the interceptor checked the token first)."""
    from starlette.authentication import AuthCredentials

    scopes = ["authenticated"]
    if check.known_operator(header):
        scopes += ["operator", "metrics"]
    scopes += check.group_scopes(header)
    return AuthCredentials(scopes)


class _ContextBuilder(DefaultGrpcServerCallContextBuilder):
    def __init__(self, check: Callers | None) -> None:
        self._check = check

    def build(self, context: grpc.aio.ServicerContext) -> ServerCallContext:
        call_context = super().build(context)
        headers = _metadata(context)
        headers.setdefault("a2a-version", "1.0")
        if headers["a2a-version"].strip().split(".", 1)[0] != "1":  # as the SDK's HTTP bindings
            raise VersionNotSupportedError(
                message=f"A2A version '{headers['a2a-version']}' is not supported: this service is 1.0"
            )
        call_context.state["headers"] = headers
        if self._check is not None:
            call_context.state["auth"] = _credentials(self._check, headers.get("authorization"))
        telemetry.adopt(headers)  # the call's `traceparent` metadata: its turn's parent
        return call_context

    def build_user(self, context: grpc.aio.ServicerContext) -> User:
        # the interceptor checked the call's token first: this finds what it found
        name = self._check.known(_metadata(context).get("authorization")) if self._check else None
        return NamedUser(name) if name is not None else UnauthenticatedUser()


class _BearerInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Refuses a call without a valid bearer token, whatever its method's shape."""

    def __init__(self, check: Callers) -> None:
        self._check = check

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        header = None
        for k, v in details.invocation_metadata or ():
            if k.lower() == "authorization":
                header = v
        if handler is None:
            return handler
        try:
            await self._check.identify(header)
            return handler
        except TokenRefused as e:
            message = (
                f"invalid token: {e}"
                if header
                else "authentication required: send the metadata authorization: Bearer <token>"
            )

        async def deny_unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

        async def deny_stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)
            yield  # pragma: no cover - abort raises

        kw = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(deny_stream, **kw)
        return grpc.unary_unary_rpc_method_handler(deny_unary, **kw)


# A2A 1.0's table of error mappings (5.4) says UNIMPLEMENTED for these three; a2a-sdk 1.3.0 maps
# them to FAILED_PRECONDITION.
UNIMPLEMENTED_ERRORS = (
    UnsupportedOperationError,
    PushNotificationNotSupportedError,
    VersionNotSupportedError,
)


async def _abort_unimplemented(error: A2AError, context: grpc.aio.ServicerContext) -> None:
    """Ends the call with UNIMPLEMENTED and the rich status the SDK gives its other errors: the
    error's reason in a google.rpc.ErrorInfo, in the `grpc-status-details-bin` trailer."""
    info = any_pb2.Any()
    info.Pack(
        error_details_pb2.ErrorInfo(
            reason=A2A_ERROR_REASONS.get(type(error), "UNKNOWN_ERROR"), domain="a2a-protocol.org"
        )
    )
    message = getattr(error, "message", None) or str(error)
    status = status_pb2.Status(code=grpc.StatusCode.UNIMPLEMENTED.value[0], message=message, details=[info])
    rich = status_to_grpc(status)
    context.set_trailing_metadata((*(context.trailing_metadata() or ()), *rich.trailing_metadata))
    await context.abort(rich.code, rich.details)


def _loop_time(epoch: float) -> float:
    """An epoch time on the running loop's clock (what asyncio.timeout_at takes)."""
    return asyncio.get_running_loop().time() + (epoch - time.time())


async def _aclose(stream: AsyncIterable[Any]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()


class _Servicer(GrpcHandler):
    """The SDK's servicer, with A2A 1.0's error codes (`abort_context`) and its two streaming
    methods counted against the open streams per token: refused RESOURCE_EXHAUSTED before the
    handler is called, released in the call's own `finally` however the stream ends (a cancelled
    call included). The methods write with `context.write` instead of being generators, so that
    a cancellation always lands in this frame (a generator left suspended at a `yield` would be
    closed only when collected)."""

    def __init__(
        self,
        handler: RequestHandler,
        builder: _ContextBuilder,
        streams: StreamLimit,
        check: Callers | None,
    ) -> None:
        super().__init__(handler, builder)
        self._streams = streams
        self._check = check

    async def _counted(self, stream: AsyncIterable[Any], context: grpc.aio.ServicerContext) -> None:
        header = _metadata(context).get("authorization")
        name = self._check.known(header) if self._check else None
        slot = self._streams.acquire(name or "")
        if slot is None:
            await _aclose(stream)  # never started: nothing ran
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, self._streams.message())
            return
        # a stream opened with an IdP token ends when the token expires, UNAUTHENTICATED
        expires = self._check.expires(header) if self._check else None
        deadline = asyncio.timeout_at(_loop_time(expires) if expires else None)
        try:
            async with deadline:
                async for item in stream:
                    await context.write(item)
        except TimeoutError:
            pass  # the stream's deadline (said below)
        finally:
            slot.release()
            await _aclose(stream)
        # expired() also where the stream swallowed the cancellation and ended as if done
        if deadline.expired():
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, EXPIRED)

    async def abort_context(self, error: A2AError, context: grpc.aio.ServicerContext) -> None:
        """The SDK's error mapping, with A2A 1.0's code for the errors it maps otherwise."""
        if type(error) in UNIMPLEMENTED_ERRORS:
            await _abort_unimplemented(error, context)
        else:
            await super().abort_context(error, context)

    async def SendStreamingMessage(self, request: Any, context: grpc.aio.ServicerContext) -> None:  # type: ignore[override]
        await self._counted(GrpcHandler.SendStreamingMessage(self, request, context), context)

    async def SubscribeToTask(self, request: Any, context: grpc.aio.ServicerContext) -> None:  # type: ignore[override]
        await self._counted(GrpcHandler.SubscribeToTask(self, request, context), context)


async def start_grpc(
    handler: RequestHandler, settings: A2ASettings, check: Callers | None
) -> grpc.aio.Server:
    """Serves `handler` over gRPC on `settings.grpc_port` (already resolved, not 0); `check`: the
    server's callers (None: no authentication)."""
    server = grpc.aio.server(interceptors=[_BearerInterceptor(check)] if check else [])
    streams = getattr(handler, "streams", None) or StreamLimit(settings.max_streams_per_token)
    servicer = _Servicer(handler, _ContextBuilder(check), streams, check)
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
    host = settings.host if ":" not in settings.host else f"[{settings.host}]"
    server.add_insecure_port(f"{host}:{settings.grpc_port}")
    await server.start()
    return server
