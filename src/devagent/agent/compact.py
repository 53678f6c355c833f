"""`/compact`: summarise the conversation through the model and continue from the summary."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pydantic_ai import messages as pm

from devagent.agent.events import Event, Notice, StatusUpdate, TextDelta, Usage

if TYPE_CHECKING:
    from devagent.agent.session import Session

COMPACT_PROMPT = """Summarise our conversation so far for your own later use: the user's goals, what was
done (files read and changed, commands run, results), decisions and their reasons, open problems and
the next steps. Be specific (paths, names, numbers) and concise. Reply with the summary only."""

# How many of the latest messages stay verbatim after the summary.
KEEP_TAIL = 2


async def compact(session: Session, emit: Callable[[Event], None], keep_instructions: str = "") -> None:
    from pydantic_ai.direct import model_request_stream
    from pydantic_ai.models import ModelRequestParameters

    if session.state.pending:
        emit(Notice("Cannot compact while tool calls wait for an answer.", "error"))
        return
    messages = await session.messages()
    if len(messages) <= KEEP_TAIL + 1:
        emit(TextDelta("Nothing to compact yet.\n"))
        return
    prompt = COMPACT_PROMPT + (f"\nKeep in particular: {keep_instructions}" if keep_instructions else "")
    request = [*messages, pm.ModelRequest(parts=[pm.UserPromptPart(content=prompt)])]
    model = session.core.model_for(session.state.model)
    async with model_request_stream(
        model, request, model_request_parameters=ModelRequestParameters(allow_text_output=True)
    ) as stream:
        async for _ in stream:
            pass
        response = stream.get()
    usage = Usage.of_response(response.usage)
    session.state.usage.add(usage)
    emit(StatusUpdate(usage, usage.input_tokens))
    summary = "".join(p.content for p in response.parts if isinstance(p, pm.TextPart)).strip()
    if not summary:
        emit(Notice("The model returned an empty summary; the history was left as it was.", "error"))
        return
    tail = _safe_tail(messages)
    new = [
        pm.ModelRequest(parts=[pm.UserPromptPart(content=f"Summary of the conversation so far:\n{summary}")]),
        pm.ModelResponse(parts=[pm.TextPart(content="Understood; I will continue from this summary.")]),
        *tail,
    ]
    before = len(messages)
    await session.replace_messages(new)
    emit(TextDelta(f"Compacted {before} messages into a summary ({len(summary)} characters).\n"))


def _safe_tail(messages: list[pm.ModelMessage]) -> list[pm.ModelMessage]:
    """The last messages, starting at a user prompt so no tool return loses its call."""
    for i in range(max(len(messages) - KEEP_TAIL, 0), len(messages)):
        m = messages[i]
        if isinstance(m, pm.ModelRequest) and any(isinstance(p, pm.UserPromptPart) for p in m.parts):
            return list(messages[i:])
    return []
