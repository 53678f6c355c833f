"""The earlier conversation of a resumed local session, as the core's events the renderer draws for
live turns: each prompt with the model's text, thoughts and tool calls (in their final state, with
the first line of the result the model read)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from devagent.agent.api import Event, TextDelta, ThoughtDelta, ToolCallUpdate

if TYPE_CHECKING:
    from devagent.agent.api import Session


@dataclass(slots=True)
class PastTurn:
    """A prompt ("" for what came before any: a conversation's summary) and what answered it."""

    prompt: str
    events: list[Event] = field(default_factory=list)


async def past_turns(session: Session) -> list[PastTurn]:
    # late: pydantic-ai, which a remote chat (remote.py imports PastTurn from here) never needs
    from pydantic_ai import messages as pm

    from devagent.agent.api import call_results, replayed_call

    messages = await session.messages()
    tools = session.tools()
    client = {c.name for c in session.state.client_tools}
    results = call_results(messages)
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
                events.append(ToolCallUpdate(replayed_call(part, tools, client, results)))
    return turns
