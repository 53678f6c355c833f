"""A stored transcript as the `session/update`s that show it again (`session/load`).

User prompts become `user_message_chunk`s, the model's text and thinking `agent_message_chunk`s
and `agent_thought_chunk`s, each tool call a `tool_call` with its final status and the result the
model read. System prompts and the core's internal notes are not shown.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devagent.acp import translate as t
from devagent.agent.events import ToolCall, ToolCallStatus, ToolError, ToolKind, ToolOutput

if TYPE_CHECKING:
    from devagent.agent.session import Session


def history(messages: list[Any], session: Session, root: Path) -> Iterator[dict[str, Any]]:
    from pydantic_ai import messages as pm

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
    for m in messages:
        if isinstance(m, pm.ModelRequest):
            for p in m.parts:
                if isinstance(p, pm.UserPromptPart):
                    text = (
                        p.content
                        if isinstance(p.content, str)
                        else " ".join(c for c in p.content if isinstance(c, str))
                    )
                    if text:
                        yield t.text_chunk("user_message_chunk", text)
        elif isinstance(m, pm.ModelResponse):
            for part in m.parts:
                if isinstance(part, pm.TextPart) and part.content:
                    yield t.text_chunk("agent_message_chunk", part.content)
                elif isinstance(part, pm.ThinkingPart) and part.content:
                    yield t.text_chunk("agent_thought_chunk", part.content)
                elif isinstance(part, pm.ToolCallPart):
                    yield t.tool_call_update(_call(part, tools, client, results), root, first=True)


def _call(
    part: Any, tools: dict[str, Any], client: set[str], results: dict[str, tuple[str, bool]]
) -> ToolCall:
    args = part.args_as_dict() if part.args else {}
    tool = tools.get(part.tool_name)
    kind = tool.kind if tool is not None else ToolKind.CLIENT if part.tool_name in client else ToolKind.MCP
    try:
        description = tool.describe(args) if tool is not None else part.tool_name
    except Exception:
        description = part.tool_name
    text, is_error = results.get(part.tool_call_id, ("", True))
    return ToolCall(
        id=part.tool_call_id,
        name=part.tool_name,
        args=args,
        kind=kind,
        description=description,
        status=ToolCallStatus.FAILED if is_error else ToolCallStatus.SUCCEEDED,
        output=None if is_error else ToolOutput(text),
        error=ToolError(text or "no result") if is_error else None,
    )
