"""What the core writes into a transcript besides the model's own responses, and how readers tell.

When a turn's process died, the session that settles it closes the transcript with a short note
in the model's place (`Session._recover`), so requests and responses keep alternating. The note
is marked (`ModelResponse.metadata`, never sent to a model): it is not an answer of the model.
The step the crash cut off has not been answered, and the next request asks for it again: a
scripted model plays that step again, and the answer streamed then is the same message (the same
messageId in an A2A task's history) as the one the crash cut off.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic_ai import messages as pm

_NOTE_KEY = "devagent_note"
INTERRUPTED = "interrupted"


def interruption_note(text: str) -> pm.ModelResponse:
    """The response that closes a transcript whose turn a crash cut off."""
    return pm.ModelResponse(parts=[pm.TextPart(content=text)], metadata={_NOTE_KEY: INTERRUPTED})


def is_interruption_note(message: pm.ModelMessage) -> bool:
    return isinstance(message, pm.ModelResponse) and (message.metadata or {}).get(_NOTE_KEY) == INTERRUPTED


def answers(messages: Sequence[pm.ModelMessage]) -> int:
    """How many responses the model has given in these messages: every response but the notes of
    turns a crash cut off. The next response is the model's answer number `answers(messages)`
    (from 0), whether it is the first request for that step or one asked again after a crash."""
    return sum(1 for m in messages if isinstance(m, pm.ModelResponse) and not is_interruption_note(m))


def answer_key(messages: Sequence[pm.ModelMessage]) -> str:
    """A name for the answer the next request asks the model for: how many answers come before
    it, and when the last of them (or, before the first, the conversation) began. The same when a
    step a crash cut off is asked again (its note is not an answer, and nothing before it
    changed); different for any other request, also after `/clear` or `/compact` rewrote the
    conversation."""
    anchor = next(
        (m for m in reversed(messages) if isinstance(m, pm.ModelResponse) and not is_interruption_note(m)),
        messages[0] if messages else None,
    )
    return f"{answers(messages)}@{_when(anchor)}"


def _when(message: pm.ModelMessage | None) -> str:
    """When a message was made: its own time, or its first part's (a request's may be unset)."""
    if message is None:
        return ""
    when = message.timestamp or next(
        (t for p in message.parts if (t := getattr(p, "timestamp", None)) is not None), None
    )
    return when.isoformat() if when is not None else ""


def answers_from(messages: Sequence[pm.ModelMessage], start: int) -> list[tuple[str, list[str]]]:
    """The model's answers at `start` or after it: each answer's `answer_key` and the texts an
    adapter streamed of it as messages of their own (its text parts, a thought between two of
    them starting another)."""
    out: list[tuple[str, list[str]]] = []
    count, anchor = 0, messages[0] if messages else None
    for i, m in enumerate(messages):
        if not isinstance(m, pm.ModelResponse) or is_interruption_note(m):
            continue
        if i >= start:
            runs: list[str] = []
            joined = False  # whether the next text joins the last run
            for part in m.parts:
                if isinstance(part, pm.TextPart) and part.content:
                    if joined:
                        runs[-1] += part.content
                    else:
                        runs.append(part.content)
                    joined = True
                elif isinstance(part, pm.ThinkingPart) and part.content:
                    joined = False
            out.append((f"{count}@{_when(anchor)}", runs))
        count += 1
        anchor = m
    return out
