"""The transcript: pydantic-ai's messages as the session keeps them, and the few ways it grows.

A session's conversation is the list of pydantic-ai `ModelMessage`s sent to the model: user
prompts, the model's responses, and one request of tool returns per step. These functions are
the only ways devagent adds to it besides appending a model response, so that requests and
responses keep alternating (some providers require it) and a reader can tell what became of each
call (`timeline.py`).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_ai import messages as pm
from pydantic_ai.messages import ModelMessagesTypeAdapter

from devagent.agent.compact import fit_result
from devagent.agent.state import CallResult, PendingCall

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


def append_prompt(messages: list[pm.ModelMessage], text: str) -> None:
    messages.append(pm.ModelRequest(parts=[pm.UserPromptPart(content=text)]))


def close_request(messages: list[pm.ModelMessage], note: str) -> None:
    """After a model error, a cancel or a stop mid-request the transcript ends with our request;
    a short response saying what happened keeps requests and responses alternating and tells the
    model next time."""
    if messages and isinstance(messages[-1], pm.ModelRequest):
        messages.append(pm.ModelResponse(parts=[pm.TextPart(content=note)]))


def append_tool_returns(
    messages: list[pm.ModelMessage], calls: list[PendingCall], context_tokens: int
) -> None:
    """A finished step's results as the tool-return request the model reads next (each result
    cut to fit the model's context window)."""
    if not calls:
        return
    parts: list[pm.ModelRequestPart] = []
    for p in calls:
        r = p.result or CallResult.error("no result", "internal")
        content = fit_result(r.text, context_tokens)
        if r.is_error:
            content = f"{ERROR_PREFIX}{r.error_type or 'tool_error'}): {content}"
        # An edit's diff rides along for readers (`timeline`); metadata is never sent to a model.
        shown = {"diff": shown_diff(r.diff)} if r.diff and not r.is_error else None
        parts.append(pm.ToolReturnPart(tool_name=p.name, content=content, tool_call_id=p.id, metadata=shown))
    messages.append(pm.ModelRequest(parts=parts))


def shown_diff(diff: dict[str, Any]) -> dict[str, Any]:
    """An edit's FileDiff as the transcript keeps it for readers: its names and unified diff; the
    old and new contents are left out (the diff is what a reader shows, at a fraction the size)."""
    keep = ("file_name", "file_path", "formatted_diff")
    return {**{k: str(diff.get(k) or "") for k in keep}, "old_content": None, "new_content": ""}
