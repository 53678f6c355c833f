"""The core's spans: a turn, each model request and each tool call run here, with attribute names
from OpenTelemetry's GenAI semantic conventions (tracing itself is set up by `devagent.telemetry`).

The loop calls three wrappers, each around a coroutine it already runs; with tracing off each
hands back the coroutine it was given, untouched:

    task = asyncio.create_task(traces.turn(session, inp, turn_work))
    response = await traces.model_request(session, model_step)
    await traces.tool_call(session.id, pending_call, run_one)

A turn is the span `invoke_agent devagent`; each model request a child `chat <model>`, each tool
call run here a child `execute_tool <name>`. A subagent's turn runs inside its `task` call, so its
span is a child of that call's `execute_tool task` (the current span where its task starts). A
turn that pauses for a permission ends its span there; the turn that applies the answer (perhaps
in another process, much later) is a span of its own, with a link to the span of the part before
the pause (its W3C traceparent is stored with the session's state).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from devagent import telemetry
from devagent.agent.events import ToolErrorType, Usage
from devagent.common.scrub import scrub

if TYPE_CHECKING:
    from devagent.agent.events import ToolCall
    from devagent.agent.state import PendingCall, SessionState

T = TypeVar("T")


class TracedTurn(Protocol):
    """What a turn's span reads of its session (`Session` is the one implementation)."""

    id: str
    state: SessionState

    @property
    def model_name(self) -> str: ...

    @property
    def revision(self) -> int:
        """The stored revision the state is at (-1: another process changed it under a turn)."""
        ...

    def waiting_calls(self) -> list[ToolCall]: ...


class TracedRequest(Protocol):
    """What a model request's span reads of its session (`Session` is the one implementation)."""

    id: str
    state: SessionState

    @property
    def model_name(self) -> str:
        """The session's model spec, the server's default when the session names none."""
        ...

    def model(self) -> Any:
        """The pydantic-ai model of the session."""
        ...

    async def messages(self) -> list[Any]: ...


# pydantic-ai's provider names -> the GenAI conventions' `gen_ai.provider.name` values
_PROVIDERS = {
    "google-gla": "gcp.gemini",
    "google-vertex": "gcp.vertex_ai",
    "mistral": "mistral_ai",
    "bedrock": "aws.bedrock",
    "x-ai": "x_ai",
}
_INPUTS = {"UserPrompt": "prompt", "Resume": "resume", "RunCommand": "command", "CancelWaiting": "cancel"}
_span = telemetry.span
_cap = telemetry.cap


def turn(
    session: TracedTurn, inp: object, label: str | None, work: Coroutine[Any, Any, None]
) -> Coroutine[Any, Any, None]:
    """A turn's coroutine, run inside its `invoke_agent` span when tracing is on."""
    if not telemetry.tracing():
        return work
    return _traced_turn(session, inp, label, work)


def model_request(
    session: TracedRequest, work: Coroutine[Any, Any, T], *, purpose: str = ""
) -> Coroutine[Any, Any, T]:
    """A model request's coroutine (returning pydantic-ai's ModelResponse), inside a `chat` span
    when tracing is on. `purpose`: why, when it is not the turn's next step ("compaction")."""
    if not telemetry.tracing():
        return work
    return _traced_model_request(session, work, purpose)


def tool_call(session_id: str, call: PendingCall, work: Coroutine[Any, Any, T]) -> Coroutine[Any, Any, T]:
    """A tool call's coroutine (which sets `call.status` and `call.result`), inside an
    `execute_tool` span when tracing is on."""
    if not telemetry.tracing():
        return work
    return _traced_tool_call(session_id, call, work)


# --- the spans ----------------------------------------------------------------------------------


async def _traced_turn(
    session: TracedTurn, inp: object, label: str | None, work: Coroutine[Any, Any, None]
) -> None:
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode

    state = session.state
    kind = _INPUTS.get(type(inp).__name__, type(inp).__name__)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "devagent",
        "gen_ai.conversation.id": session.id,
        "gen_ai.request.model": session.model_name,
        "devagent.session.id": session.id,
        "devagent.caller": state.identity,  # the token's name ("" for the local user), never a token
        "devagent.turn.input": kind,
    }
    if label:
        attributes["devagent.task.id"] = label
    context_id = _context_id(state.extra)
    if context_id:
        attributes["devagent.context.id"] = context_id
    link = state.subagent_of
    if link is not None:  # a subagent's turn: its span is a child of its task call's
        attributes["devagent.subagent.type"] = link.agent
        attributes["devagent.parent.session.id"] = link.session
        attributes["devagent.parent.tool_call.id"] = link.call
    text = getattr(inp, "text", None)
    if telemetry.content() and isinstance(text, str):
        attributes["gen_ai.input.messages"] = _json([_message("user", [_text_part(text)])])
    links = []
    if kind == "resume":  # the part of this turn before its pause
        before = telemetry.span_context(state.trace_context)
        if before is not None:
            links.append(Link(before, {"devagent.link": "paused_turn"}))
    with _span("invoke_agent devagent", SpanKind.INTERNAL, attributes, links) as span:
        if kind in ("prompt", "resume"):  # stored with the turn's first save
            state.trace_context = telemetry.traceparent(span.get_span_context())
        try:
            await work
        finally:
            state = session.state  # a turn may have adopted a newer stored state
            usage = state.turn_usage
            span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
            _describe_cost(span, usage)
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


async def _traced_model_request(session: TracedRequest, work: Coroutine[Any, Any, T], purpose: str) -> T:
    import asyncio

    from opentelemetry.trace import SpanKind, Status, StatusCode

    spec = session.model_name
    try:
        model = session.model()
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
    if telemetry.content() and not purpose:
        attributes["gen_ai.input.messages"] = _json(_since_last_response(await session.messages()))
    # the request's cost: what it added to the session's (the loop prices it as it counts it)
    before = dataclasses.replace(session.state.usage)
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
            span.set_status(
                Status(
                    StatusCode.ERROR, scrub(telemetry.brief(e)) if telemetry.content() else type(e).__name__
                )
            )
            raise
        _describe_response(span, response)
        after = session.state.usage
        _describe_cost(
            span,
            Usage(
                requests=after.requests - before.requests,
                cost_usd=after.cost_usd - before.cost_usd,
                unpriced_requests=after.unpriced_requests - before.unpriced_requests,
            ),
        )
        return response


def _describe_cost(span: Any, usage: Usage) -> None:
    """The cost in USD of the span's requests (`devagent.cost.usd`), and whether some had no
    known price (`devagent.cost.unknown`: then the cost given is only the priced part)."""
    if not usage.requests:
        return
    span.set_attribute("devagent.cost.usd", round(usage.cost_usd, 9))
    if usage.unpriced_requests:
        span.set_attribute("devagent.cost.unknown", True)


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
    if telemetry.content():
        span.set_attribute("gen_ai.output.messages", _json([_message("assistant", _parts(response))]))


async def _traced_tool_call(session_id: str, call: PendingCall, work: Coroutine[Any, Any, T]) -> T:
    from opentelemetry.trace import SpanKind, Status, StatusCode

    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.id,
        "gen_ai.tool.type": "function",
        "gen_ai.conversation.id": session_id,
        "devagent.tool.kind": call.kind,
    }
    if telemetry.content():
        attributes["gen_ai.tool.call.arguments"] = _json(call.args)
    with _span(f"execute_tool {call.name}", SpanKind.INTERNAL, attributes) as span:
        try:
            return await work
        finally:
            span.set_attribute("devagent.tool.status", call.status.lower())
            result = call.result
            if result is not None and result.is_error:
                kind = result.error_type or ToolErrorType.TOOL_ERROR.value
                span.set_attribute("error.type", kind)
                span.set_status(Status(StatusCode.ERROR, _cap(result.text) if telemetry.content() else kind))
            if telemetry.content() and result is not None:
                span.set_attribute("gen_ai.tool.call.result", _cap(result.text))


def not_run(call: PendingCall, outcome: str) -> None:
    """A call that ends without running here: `refused` (unknown tool, invalid arguments, denied
    by policy, failed to prepare), `declined` (by the user), `cancelled` (while it waited: the
    turn was cancelled or the conversation moved on) or `client` (run by the client, whose result
    came back). An event `devagent.tool_call` on the current span (the turn's): the call
    has no `execute_tool` span, since nothing executed here. A no-op when tracing is off."""
    if not telemetry.tracing():
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
        attributes["error.type"] = result.error_type or ToolErrorType.TOOL_ERROR.value
        if telemetry.content():
            attributes["devagent.tool.message"] = _cap(result.text)
    trace.get_current_span().add_event("devagent.tool_call", attributes)


# --- helpers ------------------------------------------------------------------------------------


def _context_id(extra: Mapping[str, Any]) -> str:
    """The conversation's id in its door's protocol (an A2A contextId), which a door notes in its
    part of the session's `extra`."""
    for value in extra.values():
        if isinstance(value, Mapping) and isinstance(value.get("context_id"), str):
            return str(value["context_id"])
    return ""


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
