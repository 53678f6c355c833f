"""The transcript: pydantic-ai's messages as the session keeps them, and the few ways it grows.

A session's conversation is the list of pydantic-ai `ModelMessage`s sent to the model: user
prompts, the model's responses, and one request of tool returns per step. These functions are
the only ways devagent adds to it besides appending a model response, so that requests and
responses keep alternating (some providers require it) and a reader can tell what became of each
call (`timeline.py`).

When a turn's process died, the session that settles it closes the transcript with a short note
in the model's place (`record.recover`). The note is marked (`ModelResponse.metadata`, never sent
to a model): it is not an answer of the model. The step the crash cut off has not been answered,
and the next request asks for it again: a scripted model plays that step again, and the answer
streamed then is the same message (the same messageId in an A2A task's history) as the one the
crash cut off.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from pydantic_ai import messages as pm
from pydantic_ai.messages import ModelMessagesTypeAdapter

from devagent.agent.events import ToolErrorType
from devagent.agent.state import CallResult, PendingCall

# Sizes are estimated at four characters a token (what the providers' tokenizers give for English
# and code, within a margin the thresholds absorb): a request is never sent to learn its size.
CHARS_PER_TOKEN = 4
RESULT_SHARE = 0.25  # a tool result is cut to this share of the window

# A failed call's result in the transcript: "Error (TYPE): message".
ERROR_PREFIX = "Error ("


def dump(message: pm.ModelMessage) -> str:
    """One message as the JSON row the store keeps."""
    return ModelMessagesTypeAdapter.dump_json([message])[1:-1].decode()


def load(rows: list[str]) -> list[pm.ModelMessage]:
    """The messages of the store's rows, in order."""
    if not rows:
        return []
    return list(ModelMessagesTypeAdapter.validate_json("[" + ",".join(rows) + "]"))


def json_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def append_prompt(messages: list[pm.ModelMessage], text: str, context: Sequence[str] = ()) -> None:
    """The user's prompt, and beside it (parts of the same request) context the hooks gave."""
    parts = [pm.UserPromptPart(content=text), *(pm.UserPromptPart(content=c) for c in context)]
    messages.append(pm.ModelRequest(parts=list(parts)))


def close_request(messages: list[pm.ModelMessage], note: str, *, interrupted: bool = False) -> None:
    """After a model error, a cancel or a stop mid-request the transcript ends with our request;
    a short response saying what happened keeps requests and responses alternating and tells the
    model next time. `interrupted`: a crash cut the turn off, and the note is marked as not the
    model's answer."""
    if messages and isinstance(messages[-1], pm.ModelRequest):
        if interrupted:
            messages.append(interruption_note(note))
        else:
            messages.append(pm.ModelResponse(parts=[pm.TextPart(content=note)]))


def append_tool_returns(
    messages: list[pm.ModelMessage], calls: list[PendingCall], context_tokens: int
) -> None:
    """A finished step's results as the tool-return request the model reads next (each result
    cut to fit the model's context window)."""
    calls = [p for p in calls if not p.via]  # a subagent's questions are not the model's calls
    if not calls:
        return
    parts: list[pm.ModelRequestPart] = []
    for p in calls:
        r = p.result or CallResult.error("no result", ToolErrorType.INTERNAL)
        content = fit_result(r.text, context_tokens)
        if r.is_error:
            content = f"{ERROR_PREFIX}{r.error_type or ToolErrorType.TOOL_ERROR.value}): {content}"
        # An edit's diff rides along for readers (`timeline`); metadata is never sent to a model.
        shown = {"diff": shown_diff(r.diff)} if r.diff and not r.is_error else None
        body: Any = content
        if r.files and not r.is_error:  # an image or a PDF to look at, after the text
            body = [content, *(_binary(f) for f in r.files)]
        name = p.called_as or p.name  # the tool the model called
        parts.append(pm.ToolReturnPart(tool_name=name, content=body, tool_call_id=p.id, metadata=shown))
    messages.append(pm.ModelRequest(parts=parts))


def _binary(file: dict[str, str]) -> pm.BinaryContent:
    return pm.BinaryContent(base64.b64decode(file["data"]), media_type=file["media_type"])


# In place of a file a tool attached, once the model has answered the request that carried it.
FILE_SHOWN = (
    "[The file attached to this result was shown to the model in the request that followed it and "
    "is not kept in the conversation: read it again to look at it again.]"
)


def drop_shown_files(messages: list[pm.ModelMessage]) -> list[int]:
    """A file a tool attached (an image, a PDF) is sent in the one request that follows it: once
    the model has answered, it is replaced by a note in the transcript, so later requests and the
    stored conversation do not carry it again. Such a request is replaced by a new object (a
    message object stands for fixed content: `patches/pydantic_ai.py` remembers its mapping on
    it). Returns the indexes of the requests replaced."""
    last = max((i for i, m in enumerate(messages) if isinstance(m, pm.ModelResponse)), default=0)
    changed: list[int] = []
    for i, m in enumerate(messages[:last]):
        if not isinstance(m, pm.ModelRequest) or not any(_has_files(p) for p in m.parts):
            continue
        messages[i] = dataclasses.replace(m, parts=[_shown_once(p) for p in m.parts])
        changed.append(i)
    return changed


def _has_files(part: pm.ModelRequestPart) -> bool:
    return isinstance(part, pm.ToolReturnPart) and isinstance(part.content, list) and bool(part.files)


def _shown_once(part: pm.ModelRequestPart) -> pm.ModelRequestPart:
    """A tool return without its files, the note in their place; any other part as it is."""
    if not isinstance(part, pm.ToolReturnPart) or not _has_files(part):
        return part
    text = f"{part.model_response_str()}\n{FILE_SHOWN}"
    return pm.ToolReturnPart(
        tool_name=part.tool_name,
        content=text,
        tool_call_id=part.tool_call_id,
        metadata=part.metadata,
        timestamp=part.timestamp,
    )


def fit_result(text: str, context_tokens: int) -> str:
    """A tool result the model can read in its window: one larger than a quarter of it keeps its
    beginning and end, with a note of what was cut (the model can ask for a part)."""
    cap = int(context_tokens * RESULT_SHARE) * CHARS_PER_TOKEN
    if cap <= 0 or len(text) <= cap:
        return text
    head, tail = text[: cap * 3 // 4], text[-(cap // 4) :]
    cut = len(text) - len(head) - len(tail)
    note = (
        f"\n[... {cut} characters cut here: the whole result did not fit the model's context window. "
        "Ask for a smaller part (a line range, a narrower search) if the cut part matters.]\n"
    )
    return head + note + tail


def shown_diff(diff: dict[str, Any]) -> dict[str, Any]:
    """An edit's FileDiff as the transcript keeps it for readers: its names and unified diff; the
    old and new contents are left out (the diff is what a reader shows, at a fraction the size).
    A change of several files keeps each file's so."""
    if isinstance(diff.get("files"), list):
        return {"files": [shown_diff(f) for f in diff["files"] if isinstance(f, dict)]}
    keep = ("file_name", "file_path", "formatted_diff")
    return {**{k: str(diff.get(k) or "") for k in keep}, "old_content": None, "new_content": ""}


# --- the model's answers, and the notes that are not ------------------------------------------

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
