"""Traces (issue 24 item 4): OpenTelemetry spans of turns, model requests and tool calls, sent to
a collector over OTLP/HTTP.

Off unless something asks for it: the `traces` setting (`DEVAGENT_TRACES`) is `on`, or it is
`auto` (the default) and the standard `OTEL_EXPORTER_OTLP_ENDPOINT` or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` names a collector. `OTEL_SDK_DISABLED=true` or
`OTEL_TRACES_EXPORTER=none` keeps it off. The OpenTelemetry SDK and its exporter are imported
only then (they cost ~100 ms and ~150 modules); off, this module imports nothing and every
wrapper below hands back the coroutine it was given, untouched.

The core calls three wrappers, each around a coroutine it already runs:

    task = asyncio.create_task(telemetry.turn(session, inp, session._turn(...)))
    response = await telemetry.model_request(session, session._model_step(emit))
    await telemetry.tool_call(session, pending_call, session._run_one(...))

A turn is the span `invoke_agent devagent`; each model request a child `chat <model>`, each tool
call run here a child `execute_tool <name>` (attribute names from OpenTelemetry's GenAI semantic
conventions). The turn's parent is whatever context is current where the turn starts: a door
that knows its caller's trace makes it current first: the A2A server from a `traceparent` header
(`TraceContext`, gRPC metadata: `adopt`), ACP from the prompt request's `_meta` (`caller`); on
MCP the SDK itself makes a `tools/call`'s `_meta` trace context current. A turn that pauses for
a permission ends its span there; the turn that applies the answer (perhaps in another process,
much later) is a span of its own, parented by the answering request, with a link to the span of
the part before the pause (its W3C traceparent is stored with the session's state).

Prompts, answers, tool arguments and results are left out of spans unless `trace_content`
(`DEVAGENT_TRACE_CONTENT`) is on.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Coroutine, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from devagent.common.scrub import scrub

if TYPE_CHECKING:
    from devagent.agent.session import Session
    from devagent.agent.settings import CoreConfig
    from devagent.agent.state import PendingCall

log = logging.getLogger(__name__)

T = TypeVar("T")

TRACE_MODES = ("auto", "on", "off")
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
PROTOCOL_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
TRACER_NAME = "devagent"
CONTENT_LIMIT = 32 * 1024  # characters of one content attribute (trace_content), at most

# pydantic-ai's provider names -> the GenAI conventions' `gen_ai.provider.name` values
_PROVIDERS = {
    "google-gla": "gcp.gemini",
    "google-vertex": "gcp.vertex_ai",
    "mistral": "mistral_ai",
    "bedrock": "aws.bedrock",
    "x-ai": "x_ai",
}
_INPUTS = {"UserPrompt": "prompt", "Resume": "resume", "RunCommand": "command", "_CancelWaiting": "cancel"}

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


def setup(config: CoreConfig) -> None:
    """`configure` from the core's settings, then `start` when on. Called by `AgentCore.open`."""
    if configure(config.traces, config.trace_content):
        start()


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
                log.warning("traces are off: the OpenTelemetry setup failed: %s", _brief(e))
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

    import devagent

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


class TraceContext:
    """ASGI middleware (used only when tracing is on): while the app handles a request, the trace
    context its headers carry (W3C `traceparent` and `tracestate`, or what `OTEL_PROPAGATORS`
    names) is the current context, so the spans it causes (a turn's, the a2a SDK's) are in the
    caller's trace, children of the caller's span. Plain ASGI: a streamed body passes through."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
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


# --- the wrappers the core calls ----------------------------------------------------------------


def turn(session: Session, inp: object, work: Coroutine[Any, Any, None]) -> Coroutine[Any, Any, None]:
    """A turn's coroutine, run inside its `invoke_agent` span when tracing is on."""
    if _tracer is None:
        return work
    return _traced_turn(session, inp, work)


def model_request(
    session: Session, work: Coroutine[Any, Any, T], *, purpose: str = ""
) -> Coroutine[Any, Any, T]:
    """A model request's coroutine (returning pydantic-ai's ModelResponse), inside a `chat` span
    when tracing is on. `purpose`: why, when it is not the turn's next step ("compaction")."""
    if _tracer is None:
        return work
    return _traced_model_request(session, work, purpose)


def tool_call(session: Session, call: PendingCall, work: Coroutine[Any, Any, T]) -> Coroutine[Any, Any, T]:
    """A tool call's coroutine (which sets `call.status` and `call.result`), inside an
    `execute_tool` span when tracing is on."""
    if _tracer is None:
        return work
    return _traced_tool_call(session, call, work)


# --- the spans ----------------------------------------------------------------------------------


async def _traced_turn(session: Session, inp: object, work: Coroutine[Any, Any, None]) -> None:
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode

    state = session.state
    kind = _INPUTS.get(type(inp).__name__, type(inp).__name__)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "devagent",
        "gen_ai.conversation.id": session.id,
        "gen_ai.request.model": state.model or session.core.default_model,
        "devagent.session.id": session.id,
        "devagent.caller": state.identity,  # the token's name ("" for the local user), never a token
        "devagent.turn.input": kind,
    }
    label = getattr(session, "_label", None)
    if label:
        attributes["devagent.task.id"] = label
    context_id = _context_id(state.extra)
    if context_id:
        attributes["devagent.context.id"] = context_id
    text = getattr(inp, "text", None)
    if _content and isinstance(text, str):
        attributes["gen_ai.input.messages"] = _json([_message("user", [_text_part(text)])])
    links = []
    if kind == "resume":  # the part of this turn before its pause
        before = _span_context(state.trace_context)
        if before is not None:
            links.append(Link(before, {"devagent.link": "paused_turn"}))
    with _span("invoke_agent devagent", SpanKind.INTERNAL, attributes, links) as span:
        if kind in ("prompt", "resume"):  # stored with the turn's first save
            state.trace_context = _traceparent(span.get_span_context())
        try:
            await work
        finally:
            state = session.state  # a turn may have adopted a newer stored state
            usage = state.turn_usage
            span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
            span.set_attribute("devagent.turn.steps", state.turn_steps)
            if state.status == "awaiting_input":
                outcome = "input_required"
                span.set_attribute("devagent.turn.waiting_calls", len(session.waiting_calls()))
            elif session.revision == -1:
                outcome = "stale"  # another process took the session over
            else:
                outcome = state.outcome or "unknown"
            span.set_attribute("devagent.turn.outcome", outcome)
            if outcome in ("error", "interrupted", "stale"):
                span.set_status(Status(StatusCode.ERROR, outcome))


async def _traced_model_request(session: Session, work: Coroutine[Any, Any, T], purpose: str) -> T:
    import asyncio

    from opentelemetry.trace import SpanKind, Status, StatusCode

    spec = session.state.model or session.core.default_model
    try:
        model = session.core.model_for(session.state.model)
        name = str(getattr(model, "model_name", "") or spec)
        system = str(getattr(model, "system", "") or "")
        base_url = str(getattr(model, "base_url", "") or "")
    except Exception:  # the request itself reports a bad model
        name, system, base_url = spec, "", ""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": name,
        "gen_ai.conversation.id": session.id,
        "devagent.turn.step": session.state.turn_steps,
    }
    if system:
        attributes["gen_ai.provider.name"] = _PROVIDERS.get(system, system)
        attributes["gen_ai.system"] = system
    if base_url:
        from urllib.parse import urlsplit

        url = urlsplit(base_url)
        if url.hostname:
            attributes["server.address"] = url.hostname
            attributes["server.port"] = url.port or (443 if url.scheme == "https" else 80)
    if purpose:
        attributes["devagent.request.purpose"] = purpose
    if _content and not purpose:
        attributes["gen_ai.input.messages"] = _json(_since_last_response(await session.messages()))
    with _span(f"chat {name}", SpanKind.CLIENT, attributes) as span:
        try:
            response = await work
        except asyncio.CancelledError:
            span.set_attribute("devagent.cancelled", True)
            raise
        except Exception as e:
            # The provider's message may quote the request (its key): only with trace content,
            # and scrubbed; the error's type and HTTP status always.
            span.set_attribute("error.type", type(e).__qualname__)
            status = getattr(e, "status_code", None)
            if isinstance(status, int):
                span.set_attribute("http.response.status_code", status)
            span.set_status(Status(StatusCode.ERROR, scrub(_brief(e)) if _content else type(e).__name__))
            raise
        _describe_response(span, response)
        return response


def _describe_response(span: Any, response: Any) -> None:
    usage = getattr(response, "usage", None)
    if usage is not None:
        span.set_attribute("gen_ai.usage.input_tokens", int(getattr(usage, "input_tokens", 0) or 0))
        span.set_attribute("gen_ai.usage.output_tokens", int(getattr(usage, "output_tokens", 0) or 0))
        cached = int(getattr(usage, "cache_read_tokens", 0) or 0)
        if cached:
            span.set_attribute("gen_ai.usage.cache_read.input_tokens", cached)
        written = int(getattr(usage, "cache_write_tokens", 0) or 0)
        if written:
            span.set_attribute("gen_ai.usage.cache_creation.input_tokens", written)
    for attribute, value in (
        ("gen_ai.response.model", getattr(response, "model_name", None)),
        ("gen_ai.response.id", getattr(response, "provider_response_id", None)),
    ):
        if value:
            span.set_attribute(attribute, str(value))
    finish = getattr(response, "finish_reason", None)
    if finish:
        span.set_attribute("gen_ai.response.finish_reasons", [str(finish)])
    if _content:
        span.set_attribute("gen_ai.output.messages", _json([_message("assistant", _parts(response))]))


async def _traced_tool_call(session: Session, call: PendingCall, work: Coroutine[Any, Any, T]) -> T:
    from opentelemetry.trace import SpanKind, Status, StatusCode

    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.id,
        "gen_ai.tool.type": "function",
        "gen_ai.conversation.id": session.id,
        "devagent.tool.kind": call.kind,
    }
    if _content:
        attributes["gen_ai.tool.call.arguments"] = _json(call.args)
    with _span(f"execute_tool {call.name}", SpanKind.INTERNAL, attributes) as span:
        try:
            return await work
        finally:
            span.set_attribute("devagent.tool.status", call.status.lower())
            result = call.result
            if result is not None and result.is_error:
                kind = result.error_type or "tool_error"
                span.set_attribute("error.type", kind)
                span.set_status(Status(StatusCode.ERROR, _cap(result.text) if _content else kind))
            if _content and result is not None:
                span.set_attribute("gen_ai.tool.call.result", _cap(result.text))


def not_run(call: PendingCall, outcome: str) -> None:
    """A call that ends without running here: `refused` (unknown tool, invalid arguments, denied
    by policy, failed to prepare), `declined` (by the user), `cancelled` (while it waited: the
    turn was cancelled or the conversation moved on) or `client` (run by the client, whose result
    came back). An event `devagent.tool_call` on the current span (the turn's): the call
    has no `execute_tool` span, since nothing executed here. A no-op when tracing is off."""
    if _tracer is None:
        return
    from opentelemetry import trace

    attributes: dict[str, Any] = {
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.id,
        "devagent.tool.kind": call.kind,
        "devagent.tool.outcome": outcome,
        "devagent.tool.status": call.status.lower(),
    }
    result = call.result
    if result is not None and result.is_error:
        attributes["error.type"] = result.error_type or "tool_error"
        if _content:
            attributes["devagent.tool.message"] = _cap(result.text)
    trace.get_current_span().add_event("devagent.tool_call", attributes)


# --- helpers ------------------------------------------------------------------------------------


def _span(name: str, kind: Any, attributes: dict[str, Any], links: list[Any] | None = None) -> Any:
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


def _context_id(extra: Mapping[str, Any]) -> str:
    """The conversation's id in its door's protocol (an A2A contextId), which a door notes in its
    part of the session's `extra`."""
    for value in extra.values():
        if isinstance(value, Mapping) and isinstance(value.get("context_id"), str):
            return str(value["context_id"])
    return ""


def _traceparent(ctx: Any) -> str:
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def _span_context(traceparent: str) -> Any:
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


def _brief(e: BaseException) -> str:
    first = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {first}"[:300]


def _cap(text: str) -> str:
    return text if len(text) <= CONTENT_LIMIT else text[:CONTENT_LIMIT] + f"... [{len(text):,} characters]"


def _json(value: Any) -> str:
    return _cap(json.dumps(value, ensure_ascii=False, default=str))


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "content": text}


def _message(role: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {"role": role, "parts": parts}


def _parts(message: Any) -> list[dict[str, Any]]:
    """A pydantic-ai message's parts in the GenAI conventions' message shape."""
    from pydantic_ai import messages as pm

    out: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, pm.UserPromptPart):
            content = part.content
            out.append(_text_part(content if isinstance(content, str) else json.dumps(content, default=str)))
        elif isinstance(part, pm.TextPart):
            out.append(_text_part(part.content))
        elif isinstance(part, pm.ThinkingPart):
            out.append({"type": "reasoning", "content": part.content})
        elif isinstance(part, pm.ToolCallPart):
            out.append(
                {"type": "tool_call", "id": part.tool_call_id, "name": part.tool_name, "arguments": part.args}
            )
        elif isinstance(part, pm.ToolReturnPart):
            out.append(
                {"type": "tool_call_response", "id": part.tool_call_id, "response": part.model_response_str()}
            )
    return out


def _since_last_response(messages: list[Any]) -> list[dict[str, Any]]:
    """What a request sends that the previous request did not: the messages after the model's
    last response (a prompt, tool results). The whole history is not repeated in every span."""
    from pydantic_ai import messages as pm

    tail: list[Any] = []
    for m in reversed(messages):
        if isinstance(m, pm.ModelResponse):
            break
        tail.append(m)
    out = []
    for m in reversed(tail):
        parts = _parts(m)
        tool = parts and all(p["type"] == "tool_call_response" for p in parts)
        out.append(_message("tool" if tool else "user", parts))
    return out
