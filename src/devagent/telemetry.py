"""Traces: OpenTelemetry spans of turns, model requests and tool calls, sent to a collector over
OTLP/HTTP.

Off unless something asks for it: the `traces` setting (`DEVAGENT_TRACES`) is `on`, or it is
`auto` (the default) and the standard `OTEL_EXPORTER_OTLP_ENDPOINT` or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` names a collector. `OTEL_SDK_DISABLED=true` or
`OTEL_TRACES_EXPORTER=none` keeps it off. The OpenTelemetry SDK and its exporter are imported
only then (they cost ~100 ms and ~150 modules); off, this module imports nothing, and the core's
wrappers (`devagent.agent.loop.traces`) hand back the coroutines they are given, untouched.

This module sets tracing up and offers what spans are made with; the core makes its own spans
(`devagent.agent.loop.traces`: a turn, each model request, each tool call). A turn's parent is
whatever context is current where the turn starts: a door that knows its caller's trace makes it
current first: the A2A server from a `traceparent` header (`TraceContext`, gRPC metadata:
`adopt`), ACP from the prompt request's `_meta` (`caller`); on MCP the SDK itself makes a
`tools/call`'s `_meta` trace context current.

Prompts, answers, tool arguments and results are left out of spans unless `trace_content`
(`DEVAGENT_TRACE_CONTENT`) is on.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import devagent
from devagent.common.asgi import HttpMiddleware

log = logging.getLogger(__name__)

TRACE_MODES = ("auto", "on", "off")
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
PROTOCOL_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
TRACER_NAME = "devagent"
CONTENT_LIMIT = 32 * 1024  # characters of one content attribute (trace_content), at most

_lock = threading.Lock()
_wanted: bool | None = None  # configure()'s decision; None: not configured (the environment decides)
_content = False
_tracer: Any = None  # the OpenTelemetry tracer, once started


def wanted_by(mode: str, environ: Mapping[str, str]) -> bool:
    """Whether traces are on for the `traces` setting `mode` in this environment."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    mode = (mode or "auto").strip().lower()
    if mode == "off":
        return False
    if mode == "on":
        return True
    return any(environ.get(v, "").strip() for v in ENDPOINT_VARIABLES)


def configure(mode: str, content: bool, environ: Mapping[str, str] | None = None) -> bool:
    """Decide (without importing anything) whether this process traces; True if it does. A door
    calls it as soon as it read its settings, before the a2a SDK is imported (which asks
    `wanted`). Tracing once started stays on."""
    global _wanted, _content
    _wanted = wanted_by(mode, os.environ if environ is None else environ) or _tracer is not None
    _content = bool(content)
    return _wanted


def wanted() -> bool:
    """Whether this process traces: as configured, else as the environment says."""
    if _wanted is not None:
        return _wanted
    return wanted_by(os.environ.get("DEVAGENT_TRACES", "auto"), os.environ)


def active() -> bool:
    """Whether spans are being made now (the SDK is loaded and the exporter set up)."""
    return _tracer is not None


def start() -> None:
    """Load the SDK and the OTLP/HTTP exporter and make the tracer (once; a no-op when off). May
    run in a thread (the server's preload). A setup that fails is a warning, and the agent runs
    untraced. (The SDK itself tolerates malformed OTEL_* values, with a warning of its own.)"""
    global _tracer, _wanted
    if _tracer is not None or not wanted():
        return
    with _lock:
        if _tracer is None:
            try:
                _tracer = _make_tracer()
            except Exception as e:
                log.warning("traces are off: the OpenTelemetry setup failed: %s", brief(e))
                _wanted = False


def description() -> str:
    """Where spans go, for a start-up line."""
    url = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if not url:
        base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or "http://localhost:4318"
        url = base.rstrip("/") + "/v1/traces"
    content = " (with prompts, answers and tool data: trace_content)" if _content else ""
    return f"traces: OpenTelemetry over OTLP/HTTP to {url}{content}"


def _make_tracer() -> Any:
    from opentelemetry import trace

    version = getattr(devagent, "__version__", "")
    provider: Any = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        for var in PROTOCOL_VARIABLES:
            protocol = os.environ.get(var, "").strip()
            if protocol and protocol != "http/protobuf":
                log.warning("%s=%s: devagent sends traces as OTLP over HTTP (http/protobuf)", var, protocol)
                break
        resource = Resource.create({"service.version": version})
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            # the standard OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES name it otherwise
            resource = resource.merge(Resource({"service.name": "devagent"}))
        provider = TracerProvider(resource=resource)  # flushed and shut down at exit
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
    # else: the program that runs devagent set a provider up already (opentelemetry-instrument, an
    # embedding application): devagent's spans go where its spans go.
    return provider.get_tracer(TRACER_NAME, version)


def flush(timeout_ms: int = 5000) -> None:
    """Send the spans not sent yet (blocking; for the end of a process)."""
    if _tracer is None:
        return
    from opentelemetry import trace

    provider: Any = trace.get_tracer_provider()
    force_flush = getattr(provider, "force_flush", None)
    if force_flush is not None:
        force_flush(timeout_ms)


# --- a caller's trace context ---------------------------------------------------------------------


class TraceContext(HttpMiddleware):
    """ASGI middleware (used only when tracing is on): while the app handles a request, the trace
    context its headers carry (W3C `traceparent` and `tracestate`, or what `OTEL_PROPAGATORS`
    names) is the current context, so the spans it causes (a turn's, the a2a SDK's) are in the
    caller's trace, children of the caller's span. Plain ASGI: a streamed body passes through."""

    async def http(self, scope: Any, receive: Any, send: Any) -> None:
        from opentelemetry import context, propagate

        carrier = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or ()}
        token = context.attach(propagate.extract(carrier))
        try:
            await self.app(scope, receive, send)
        finally:
            context.detach(token)


# The keys of a JSON-RPC request's `_meta` that carry W3C trace context (MCP's SEP-414; ACP keeps
# the same root keys for it).
META_KEYS = ("traceparent", "tracestate", "baggage")


@contextlib.contextmanager
def caller(meta: Mapping[str, Any] | None) -> Iterator[None]:
    """While it lasts, the trace context a request's `_meta` carries is current, so a turn started
    inside is in the caller's trace, a child of the caller's span. A no-op when tracing is off or
    `meta` carries none; a malformed `traceparent` is ignored (the turn starts a trace of its own)."""
    fields = {k: v for k, v in (meta or {}).items() if k in META_KEYS and isinstance(v, str)}
    if _tracer is None or "traceparent" not in fields:
        yield
        return
    from opentelemetry import context, propagate

    token = context.attach(propagate.extract(fields))
    try:
        yield
    finally:
        context.detach(token)


def adopt(headers: Mapping[str, str]) -> None:
    """Make the trace context of these request headers (lower-case names) current for the rest of
    the running task (a gRPC call's, which ends with the call); a no-op when tracing is off."""
    if _tracer is None:
        return
    from opentelemetry import context, propagate

    context.attach(propagate.extract(headers))


# --- what the core's spans are made with -----------------------------------------------------


def tracing() -> bool:
    """Whether spans are made now (the same as `active`, for the wrappers' fast path)."""
    return _tracer is not None


def content() -> bool:
    """Whether spans may carry prompts, answers, tool arguments and results (`trace_content`)."""
    return _content


def span(name: str, kind: Any, attributes: dict[str, Any], links: list[Any] | None = None) -> Any:
    """One of devagent's spans, current while it lasts. Its status and error attributes are set
    by the caller from what the work reports (a failed call is a result, not an exception), so
    the SDK records no exception and sets no status of its own."""
    return _tracer.start_as_current_span(
        name,
        kind=kind,
        attributes=attributes,
        links=links,
        record_exception=False,
        set_status_on_exception=False,
    )


def traceparent(ctx: Any) -> str:
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def span_context(traceparent: str) -> Any:
    """The span context a stored W3C traceparent names, or None."""
    parts = traceparent.split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    from opentelemetry.trace import SpanContext, TraceFlags

    try:
        trace_id, span_id, flags = int(parts[1], 16), int(parts[2], 16), int(parts[3], 16)
    except ValueError:
        return None
    if not trace_id or not span_id:
        return None
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(flags & 1))


def brief(e: BaseException) -> str:
    first = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {first}"[:300]


def cap(text: str) -> str:
    return text if len(text) <= CONTENT_LIMIT else text[:CONTENT_LIMIT] + f"... [{len(text):,} characters]"
