"""remote_status.StatusReader on a2a-sdk's own event objects: Gemini CLI's coderAgent dialect
(answer pieces, an approval the remote waits for, an error) and plain A2A progress lines. The
whole path with the real Gemini CLI a2a-server is tests/remote/test_gemini_a2a_server.py."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types import Message, Part, Role, TaskState, TaskStatus, TaskStatusUpdateEvent
from google.protobuf.json_format import ParseDict
from google.protobuf.struct_pb2 import Struct, Value

from devagent.agent.events import Notice
from devagent.agent.state import SessionState
from devagent.agent.subagents.remote_status import StatusReader
from devagent.agent.tools.base import ToolContext
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.workspace import Workspace


def _update(state: int, text: str = "", meta: dict[str, Any] | None = None, data: Any = None) -> Any:
    parts = [Part(text=text)] if text else []
    if data is not None:
        parts.append(Part(data=ParseDict(data, Value())))
    status = TaskStatus(state=state)  # type: ignore[arg-type]
    if parts:
        status.message.CopyFrom(Message(message_id="m", role=Role.ROLE_AGENT, parts=parts))
    event = TaskStatusUpdateEvent(task_id="t", context_id="c", status=status)
    if meta is not None:
        event.metadata.CopyFrom(ParseDict(meta, Struct()))
    return event


class _Seen:
    def __init__(self, tmp_path: Any) -> None:
        self.live: list[str] = []
        self.events: list[Any] = []

        async def live(text: str) -> None:
            self.live.append(text)

        state = SessionState(workspace_roots=[str(tmp_path)])
        self.ctx = ToolContext(Workspace([tmp_path]), state, live=live, emit=self.events.append)


async def _read(reader: StatusReader, seen: _Seen, *updates: Any) -> list[str]:
    out = []
    for u in updates:
        text = "".join(p.text for p in u.status.message.parts if p.HasField("text"))
        out.append(await reader.take(u, text, seen.ctx))
    return out


WORKING, ASKING = TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_INPUT_REQUIRED


def coder(kind: str, **more: Any) -> dict[str, Any]:
    return {"coderAgent": {"kind": kind}, "model": "gemini-2.5-pro", **more}


async def test_issue38_item6_coder_agent_pieces_are_the_answer_and_the_turns_end_is_not_a_question(
    tmp_path: Any,
) -> None:
    seen, reader = _Seen(tmp_path), StatusReader("gemini")
    said = await _read(
        reader,
        seen,
        _update(WORKING, meta=coder("state-change")),
        _update(WORKING, "Hello ", coder("text-content")),
        _update(WORKING, "world.", coder("text-content")),
        _update(ASKING, meta=coder("state-change")),
    )
    assert said == ["", "", "", ""]
    assert seen.live == ["Hello ", "Hello world."] and seen.events == []
    assert reader.turn_answer(ASKING, "") == "Hello world."


async def test_issue38_item6_coder_agent_waiting_for_approval_or_failing_fails_the_call(
    tmp_path: Any,
) -> None:
    seen, reader = _Seen(tmp_path), StatusReader("gemini")
    call = {"request": {"callId": "c1", "name": "run_shell_command"}, "status": "awaiting_approval"}
    await _read(reader, seen, _update(WORKING, meta=coder("tool-call-confirmation"), data=call))
    with pytest.raises(ToolFailure) as info:
        reader.turn_answer(ASKING, "")
    assert info.value.type == "remote_agent_approval" and "run_shell_command" in info.value.message
    done = {**call, "status": "success"}
    await _read(reader, seen, _update(WORKING, meta=coder("tool-call-update"), data=done))
    assert reader.turn_answer(ASKING, "") == ""

    failing = StatusReader("gemini")
    await _read(failing, seen, _update(WORKING, "Agent Error", coder("state-change", error="quota exceeded")))
    with pytest.raises(ToolFailure) as info:
        failing.turn_answer(ASKING, "")
    assert info.value.type == "remote_agent_error" and "quota exceeded" in info.value.message


async def test_issue38_item6_plain_progress_is_one_notice_per_line(tmp_path: Any) -> None:
    seen, reader = _Seen(tmp_path), StatusReader("stepper")
    said = await _read(
        reader,
        seen,
        _update(WORKING, "step 1/3"),
        _update(WORKING, "step 2/3\n\nstep 3/3"),
        _update(ASKING, "Go on?"),
    )
    assert said == ["step 1/3", "step 2/3\n\nstep 3/3", "Go on?"]
    assert seen.events == [
        Notice("stepper: step 1/3"),
        Notice("stepper: step 2/3"),
        Notice("stepper: step 3/3"),
    ]
    assert seen.live[-1] == "step 1/3\nstep 2/3\nstep 3/3\n"
    assert reader.turn_answer(ASKING, "Go on?") is None  # a plain remote's question stays one
