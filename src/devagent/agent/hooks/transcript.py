"""The conversation a hook reads at `transcript_path`: the session's own messages as JSON lines in
Claude Code's transcript shape (`type` user or assistant, `message` with `role` and content blocks
of text, tool_use and tool_result, `uuid` and `parentUuid`, `sessionId`, `timestamp`, `cwd`,
`isSidechain`), so scripts written for Claude Code's transcripts (the last assistant message, the
tool calls made) read it unchanged.

Written before the event's hooks start, whole, to `data_dir/hook-transcripts/<session>/
transcript.jsonl` (folders 0700, file 0600, replaced at once: a reader never sees half a file):
outside every workspace, one folder per session, which is the only one a sandboxed hook is
shown (read-only). It holds what the session's client sees of its conversation: the prompts, the
answers, the calls and their results; never the system prompt or the operator's instructions."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from devagent import __version__
from devagent.agent.naming.claude import CLAUDE_NAMES
from devagent.agent.tools.saved_outputs import file_name

FOLDER = "hook-transcripts"
FILE = "transcript.jsonl"


def session_folder(base: Path, session_id: str) -> Path:
    return base / FOLDER / file_name(session_id)


def write(
    base: Path, session_id: str, messages: Sequence[Any], cwd: str, *, sidechain: bool, owner: int | None
) -> Path:
    """The session's transcript file under `base` (the data folder), written now; `owner` the
    uid that must read it (the sandbox user) when that is not the server's user."""
    folder = session_folder(base, session_id)
    base.mkdir(parents=True, exist_ok=True, mode=0o700)  # the data folder: private
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    (base / FOLDER).chmod(0o711)  # passable, not listable: a hook is shown its own folder only
    path = folder / FILE
    lines = transcript_lines(session_id, messages, cwd, sidechain=sidechain)
    text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    temp = folder / f".{FILE}.{uuid.uuid4().hex}"  # events of one session may fire at once
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    if owner is not None:
        for p in (folder, temp):
            os.chown(p, owner, -1, follow_symlinks=False)
    os.replace(temp, path)
    return path


def remove(base: Path, session_id: str) -> None:
    with contextlib.suppress(OSError):
        shutil.rmtree(session_folder(base, session_id))


def transcript_lines(
    session_id: str, messages: Sequence[Any], cwd: str, *, sidechain: bool
) -> list[dict[str, Any]]:
    """One line per message, each linked to the one before (`parentUuid`); ids stable across
    writes, so a hook may remember where it stopped reading."""
    out: list[dict[str, Any]] = []
    parent: str | None = None
    for index, message in enumerate(messages):
        line = _line(message, index)
        if line is None:
            continue
        kind, body, when = line
        uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"devagent:{session_id}:{index}"))
        out.append(
            {
                "parentUuid": parent,
                "isSidechain": sidechain,
                "userType": "external",
                "cwd": cwd,
                "sessionId": session_id,
                "version": __version__,
                "type": kind,
                "message": body,
                "uuid": uid,
                "timestamp": _when(when),
            }
        )
        parent = uid
    return out


def _line(message: Any, index: int) -> tuple[str, dict[str, Any], Any] | None:
    if getattr(message, "kind", "") == "response":
        blocks = [b for p in message.parts if (b := _response_block(p)) is not None]
        if not blocks:
            return None
        body = {
            "id": message.provider_response_id or f"msg_{index}",
            "type": "message",
            "role": "assistant",
            "model": message.model_name or "",
            "content": blocks,
        }
        return "assistant", body, message.timestamp
    blocks = [b for p in message.parts if (b := _request_block(p)) is not None]
    if not blocks:
        return None
    return "user", {"role": "user", "content": blocks}, getattr(message, "timestamp", None)


def _response_block(part: Any) -> dict[str, Any] | None:
    kind = getattr(part, "part_kind", "")
    if kind == "text":
        return {"type": "text", "text": part.content}
    if kind == "tool-call":
        name = CLAUDE_NAMES.get(part.tool_name, (part.tool_name,))[0]
        return {"type": "tool_use", "id": part.tool_call_id, "name": name, "input": part.args_as_dict()}
    return None


def _request_block(part: Any) -> dict[str, Any] | None:
    kind = getattr(part, "part_kind", "")
    if kind == "user-prompt":
        content = part.content
        text = content if isinstance(content, str) else "\n".join(c for c in content if isinstance(c, str))
        return {"type": "text", "text": text}
    if kind == "tool-return":
        return {"type": "tool_result", "tool_use_id": part.tool_call_id, "content": part.model_response_str()}
    if kind == "retry-prompt" and part.tool_name:
        return {
            "type": "tool_result",
            "tool_use_id": part.tool_call_id,
            "content": part.model_response(),
            "is_error": True,
        }
    return None


def _when(value: Any) -> str:
    moment = value if isinstance(value, datetime) else datetime.now(UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
