"""The earlier conversation of a resumed local session, as the core's events the renderer draws for
live turns: each prompt with the model's text, thoughts and tool calls (in their final state, with
the first line of the result the model read)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from devagent.agent.events import (
    Event,
    TextDelta,
    ThoughtDelta,
    ToolCall,
    ToolCallStatus,
    ToolCallUpdate,
    ToolError,
    ToolKind,
    ToolOutput,
)

if TYPE_CHECKING:
    from devagent.agent.session import Session


@dataclass(slots=True)
class PastTurn:
    """A prompt ("" for what came before any: a conversation's summary) and what answered it."""

    prompt: str
    events: list[Event] = field(default_factory=list)


async def past_turns(session: Session) -> list[PastTurn]:
    from pydantic_ai import messages as pm

    messages = await session.messages()
    tools = session.tools()
    client = {c.name for c in session.state.client_tools}
    results: dict[str, tuple[str, bool]] = {}
    for m in messages:
        if isinstance(m, pm.ModelRequest):
            for p in m.parts:
                if isinstance(p, pm.ToolReturnPart):
                    results[p.tool_call_id] = (p.model_response_str(), False)
                elif isinstance(p, pm.RetryPromptPart) and p.tool_call_id:
                    results[p.tool_call_id] = (p.model_response(), True)
    turns: list[PastTurn] = []
    for m in messages:
        if isinstance(m, pm.ModelRequest):
            for p in m.parts:
                if isinstance(p, pm.UserPromptPart):
                    text = p.content if isinstance(p.content, str) else " ".join(str(c) for c in p.content)
                    turns.append(PastTurn(text))
            continue
        if not isinstance(m, pm.ModelResponse):
            continue
        if not turns:
            turns.append(PastTurn(""))
        events = turns[-1].events
        for part in m.parts:
            if isinstance(part, pm.TextPart) and part.content:
                events.append(TextDelta(part.content))
            elif isinstance(part, pm.ThinkingPart) and part.content:
                events.append(ThoughtDelta(part.content))
            elif isinstance(part, pm.ToolCallPart) and part.tool_call_id in results:
                # (a call with no result yet waits for an answer: it is asked again after this)
                events.append(ToolCallUpdate(_call(part, tools, client, results)))
    return turns


def _call(
    part: Any, tools: dict[str, Any], client: set[str], results: dict[str, tuple[str, bool]]
) -> ToolCall:
    args = part.args_as_dict() if part.args else {}
    tool = tools.get(part.tool_name)
    kind = tool.kind if tool is not None else ToolKind.CLIENT if part.tool_name in client else ToolKind.MCP
    try:
        description = tool.describe(args) if tool is not None else part.tool_name
    except Exception:  # a description from arguments the tool would refuse
        description = part.tool_name
    text, failed = results[part.tool_call_id]
    return ToolCall(
        id=part.tool_call_id,
        name=part.tool_name,
        args=args,
        kind=kind,
        description=description,
        status=ToolCallStatus.FAILED if failed else ToolCallStatus.SUCCEEDED,
        output=None if failed else ToolOutput(text),
        error=ToolError(text) if failed else None,
    )
