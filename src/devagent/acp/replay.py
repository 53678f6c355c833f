"""A stored transcript as the `session/update`s that show it again (`session/load`).

User prompts become `user_message_chunk`s, the model's text and thinking `agent_message_chunk`s
and `agent_thought_chunk`s, each tool call a `tool_call` with its final status and the result the
model read. System prompts and the core's internal notes are not shown.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic_ai import messages as pm

from devagent.acp import translate as t
from devagent.agent.api import call_results, replayed_call

if TYPE_CHECKING:
    from devagent.agent.api import Session


def history(messages: list[Any], session: Session, root: Path) -> Iterator[dict[str, Any]]:
    tools = session.tools()
    client = {c.name for c in session.state.client_tools}
    results = call_results(messages)
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
                    yield t.tool_call_update(replayed_call(part, tools, client, results), root, first=True)
