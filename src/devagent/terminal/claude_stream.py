"""Claude Code's stream-json message shapes for `devagent run`, and its stream-json input.

A tool built on Claude Code's headless stream (its SDKs, their parsers) reads devagent's: the
model's text and thinking come as `assistant` messages of content blocks (one message a block, as
Claude Code writes them, each block whole), each tool call as a `tool_use` block when it first
shows and a `user` message with its `tool_result` when it ends. devagent's own fields stay beside
Claude Code's on the same line (an assistant line also has `subtype` and `text`), and devagent's
own line types (`tool_call`, `step`, `usage`, `notice`, `permission_request`) come as well: a
reader of Claude Code's stream skips a type it does not know.

`--input-format stream-json` reads the turns from standard input, a JSON object a line, as Claude
Code does: `{"type": "user", "message": {"role": "user", "content": "..."}}` (the content a string
or a list of text blocks). Each line is a turn of the same session.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import uuid
from collections.abc import AsyncIterator
from typing import Any

from devagent.agent.api import (
    StatusUpdate,
    StepBegin,
    TextDelta,
    ThoughtDelta,
    ToolCall,
    ToolCallStatus,
    ToolCallUpdate,
    Usage,
)

# devagent's approval modes under Claude Code's names for them
PERMISSION_MODES = {"ask": "default", "auto-edit": "acceptEdits", "yolo": "bypassPermissions", "plan": "plan"}


def new_uuid() -> str:
    return str(uuid.uuid4())


def usage_json(u: Usage) -> dict[str, Any]:
    """devagent's usage with Claude Code's names for the prompt cache beside its own
    (`input_tokens` stays devagent's: the whole prompt, cache reads included)."""
    return {
        **u.to_json(),
        "cache_read_input_tokens": u.cache_read_tokens,
        "cache_creation_input_tokens": u.cache_write_tokens,
    }


def tool_result_text(c: ToolCall) -> str:
    if c.output is not None:
        return c.output.text
    if c.error is not None:
        return c.error.message
    return str(c.status).lower()


def block_of(kind: str, text: str) -> dict[str, Any]:
    """A text or thinking content block (Claude Code's thinking blocks carry a signature: devagent
    has none to give)."""
    if kind == "text":
        return {"type": "text", "text": text}
    return {"type": "thinking", "thinking": text, "signature": ""}


class MessageShaper:
    """The turn's events as Claude Code's `assistant` and `user` messages. Text and thinking
    deltas are gathered into one block until something else comes (the block is then whole).
    `partial` (Claude Code's `--include-partial-messages`): each delta also goes out as it comes,
    a `stream_event` line holding the model API's streaming event for it."""

    def __init__(self, session_id: str, model: str, partial: bool = False) -> None:
        self.session_id = session_id
        self.model = model
        self.partial = partial
        self.index = -1  # the streamed block's index in the model step's message
        self.answering = False  # a model step's answer is streaming (a message_start went out)
        self.kind = ""  # the block being gathered: "text", "thinking" or none
        self.text = ""
        self.subject = ""
        self.message_id = "msg_" + uuid.uuid4().hex  # one model step's blocks share it
        self.shown: set[str] = set()  # calls whose tool_use went out
        self.ended: set[str] = set()  # calls whose tool_result went out

    def lines(self, event: Any) -> list[dict[str, Any]]:
        """The Claude Code lines an event completes (before devagent's own line for it)."""
        if isinstance(event, TextDelta):
            return self._gather("text", event.text, "")
        if isinstance(event, ThoughtDelta):
            return self._gather("thinking", event.text, event.subject)
        out = self.flush(event.usage if isinstance(event, StatusUpdate) else None)
        if isinstance(event, StepBegin):
            self.message_id, self.index, self.answering = "msg_" + uuid.uuid4().hex, -1, True
            start = {"id": self.message_id, "type": "message", "role": "assistant", "model": self.model}
            out += self._stream_event({"type": "message_start", "message": {**start, "content": []}})
        elif isinstance(event, StatusUpdate) and self.answering:  # the step's answer ended
            self.answering = False
            out += self._stream_event({"type": "message_stop"})
        elif isinstance(event, ToolCallUpdate):
            out += self._call(event.call)
        return out

    def flush(self, usage: Usage | None = None) -> list[dict[str, Any]]:
        """The gathered block as an assistant message (none when nothing is gathered)."""
        if not self.kind:
            return []
        kind, text, subject = self.kind, self.text, self.subject
        self.kind, self.text, self.subject = "", "", ""
        line = self._assistant(block_of(kind, text), None, usage)
        line.update(subtype=kind, text=text)  # devagent's own fields, as before
        if kind == "thinking":
            line["subject"] = subject
        return [*self._stream_event({"type": "content_block_stop", "index": self.index}), line]

    def _gather(self, kind: str, text: str, subject: str) -> list[dict[str, Any]]:
        out = self.flush() if self.kind and self.kind != kind else []
        if not self.kind:
            self.index += 1
            start = {"type": "content_block_start", "index": self.index, "content_block": block_of(kind, "")}
            out += self._stream_event(start)
        self.kind = kind
        self.text += text
        self.subject = self.subject or subject
        delta = (
            {"type": "text_delta", "text": text}
            if kind == "text"
            else {"type": "thinking_delta", "thinking": text}
        )
        return out + self._stream_event({"type": "content_block_delta", "index": self.index, "delta": delta})

    def _stream_event(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        if not self.partial:
            return []
        line = {"type": "stream_event", "event": event, "parent_tool_use_id": None}
        return [{**line, "session_id": self.session_id, "uuid": new_uuid()}]

    def _call(self, c: ToolCall) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if c.id not in self.shown:
            self.shown.add(c.id)
            block = {"type": "tool_use", "id": c.id, "name": c.name, "input": c.args}
            out.append({**self._assistant(block, c.parent_call_id, None), "subtype": "tool_use"})
        if c.status.terminal and c.id not in self.ended:
            self.ended.add(c.id)
            result = {
                "type": "tool_result",
                "tool_use_id": c.id,
                "content": tool_result_text(c),
                "is_error": c.status != ToolCallStatus.SUCCEEDED,
            }
            out.append(
                {
                    "type": "user",
                    "message": {"role": "user", "content": [result]},
                    "parent_tool_use_id": c.parent_call_id,
                    "session_id": self.session_id,
                    "uuid": new_uuid(),
                }
            )
        return out

    def _assistant(self, block: dict[str, Any], parent: str | None, usage: Usage | None) -> dict[str, Any]:
        message: dict[str, Any] = {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [block],
            "stop_reason": None,
            "stop_sequence": None,
        }
        if usage is not None:
            message["usage"] = usage_json(usage)
        return {
            "type": "assistant",
            "message": message,
            "parent_tool_use_id": parent,
            "session_id": self.session_id,
            "uuid": new_uuid(),
        }


def prompt_of(line: str, number: int) -> str | None:
    """The prompt a stream-json input line gives (None: a blank line). Raises ValueError on a line
    that is not a user message of text."""
    if not line.strip():
        return None
    where = f"standard input line {number}"
    try:
        data = json.loads(line)
    except json.JSONDecodeError as e:
        raise ValueError(f"{where} is not JSON: {e}") from None
    if not isinstance(data, dict) or data.get("type") != "user":
        kind = str(data.get("type")) if isinstance(data, dict) else type(data).__name__
        raise ValueError(f'{where}: expected a {{"type": "user", ...}} message, got {kind[:60]!r}')
    message = data.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        text = content
    elif isinstance(content, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in content):
        text = "\n".join(str(b.get("text", "")) for b in content)
    else:
        raise ValueError(f"{where}: message.content must be a string or a list of text blocks")
    if not text.strip():
        raise ValueError(f"{where}: the prompt is empty")
    return text


async def stdin_lines() -> AsyncIterator[str]:
    """Standard input's lines as they come (a pipe a client writes a turn at a time, or a file).
    A daemon thread reads: a blocked read never holds the process open at its end."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    def put(item: str | None) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, item)
        except RuntimeError:  # the loop is closed: the run is over
            pass

    def pump() -> None:
        for line in sys.stdin:
            put(line)
        put(None)

    threading.Thread(target=pump, name="stdin-lines", daemon=True).start()
    while (line := await queue.get()) is not None:
        yield line
