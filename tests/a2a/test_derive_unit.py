"""Issue 39 item 4: an A2A task reads as a translation of its conversation's read model
(`TurnView`, what the core's `read_turn` returns), checked without a server: the stored copy of the
task is brought to what the view says, whatever the task store had written, and the same view
gives the same task again (`derive.py`). The kill tests (test_crash.py) show the same through real
processes."""

from __future__ import annotations

import time
from typing import Any

from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
from pydantic_ai import messages as pm

from devagent.a2a.derive import derive_task, needs_transcript
from devagent.a2a.emitter import RfcEmitter, data_value
from devagent.agent.events import (
    ConfirmationRequest,
    GenericDetails,
    PermissionOption,
    ToolCall,
    ToolKind,
)
from devagent.agent.turn_view import TurnView

LEASE = 30.0
OPTS = [PermissionOption("proceed_once", "Allow once", "Run it"), PermissionOption("cancel", "Cancel", "")]


def _task(state: TaskState, history: list[Message], *, age: float = 0) -> Task:
    status = TaskStatus(state=state)
    status.timestamp.FromSeconds(int(time.time() - age))
    return Task(id="t1", context_id="c1", status=status, history=history)


def _user(text: str = "", data: dict[str, Any] | None = None) -> Message:
    parts = [Part(text=text)] if text else [Part(data=data_value(data or {}))]
    return Message(message_id=f"u-{text}", role=Role.ROLE_USER, parts=parts)


def _agent_data(data: dict[str, Any]) -> Message:
    return Message(message_id="a-data", role=Role.ROLE_AGENT, parts=[Part(data=data_value(data))])


def _view(**given: Any) -> TurnView:
    fields: dict[str, Any] = {
        "session_id": "s1",
        "label": "t1",
        "status": "idle",
        "outcome": "finished",
        "outcome_message": "",
        "revision": 7,
        "model": "",
        "waiting": [],
    }
    return TurnView(**{**fields, **given})


def _read(task: Task, view: TurnView | None) -> Task:
    copy = Task()
    copy.CopyFrom(task)
    return derive_task(copy, view, _em(task), LEASE)


def _em(task: Task) -> RfcEmitter:
    return RfcEmitter(None, task.id, task.context_id, "scripted")  # type: ignore[arg-type]


def _texts(task: Task) -> list[str]:
    return [p.text for m in task.history if m.role == Role.ROLE_AGENT for p in m.parts if p.text]


def _datas(message: Message) -> list[dict[str, Any]]:
    return [MessageToDict(p.data) for p in message.parts if p.WhichOneof("content") == "data"]


def test_issue39_item4_A6_a_conversation_waiting_reads_input_required_showing_its_request() -> None:
    call = ToolCall("w1", "write_file", {"path": "w.txt"}, ToolKind.EDIT)
    call.confirmation = ConfirmationRequest(OPTS, GenericDetails("write w.txt"))
    stored = _task(TaskState.TASK_STATE_WORKING, [_user("write w")])
    view = _view(status="awaiting_input", outcome="", waiting=[call])
    got = _read(stored, view)
    assert got.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    shown = _datas(got.status.message)
    assert [d["tool_call_id"] for d in shown] == ["w1"] and "confirmation_request" in shown[0], shown
    again = _read(stored, view)  # derived from the same view: the same message
    assert again.status.message == got.status.message
    assert _read(got, view) == got  # a task that already says so is left as it is


def test_issue39_item4_A6_a_finished_turn_the_task_store_missed_reads_with_its_answers_once() -> None:
    """The task was written as the turn began (its prompt only); the conversation holds two
    answers since that prompt: both texts are added to the history, once, and the last is the
    reply (status message and artifact)."""
    messages = [
        pm.ModelRequest(parts=[pm.UserPromptPart("two")]),
        pm.ModelResponse(
            parts=[pm.TextPart("Let me look."), pm.ToolCallPart("read_file", {"path": "a"}, "r1")]
        ),
        pm.ModelRequest(parts=[pm.ToolReturnPart("read_file", "a's text", "r1")]),
        pm.ModelResponse(parts=[pm.TextPart("Both "), pm.TextPart("ran.")]),
    ]
    stored = _task(TaskState.TASK_STATE_WORKING, [_user("two")])
    view = _view(_messages=messages)
    got = _read(stored, view)
    assert got.status.state == TaskState.TASK_STATE_COMPLETED
    assert _texts(got) == ["Let me look.", "Both ran."], _texts(got)
    assert [p.text for p in got.status.message.parts] == ["Both ran."]
    assert [(a.name, a.parts[0].text) for a in got.artifacts] == [("reply", "Both ran.")]
    again = _read(got, view)  # read again (or by another reader): nothing twice
    assert _texts(again) == _texts(got) and len(again.artifacts) == 1


def test_issue39_item4_A6_B10_a_call_a_crash_left_open_gets_its_final_update() -> None:
    """The history's last update of c1 is PENDING; the conversation settled it as interrupted."""
    messages = [
        pm.ModelRequest(parts=[pm.UserPromptPart("count")]),
        pm.ModelResponse(parts=[pm.ToolCallPart("run_shell_command", {"command": "true"}, "c1")]),
        pm.ModelRequest(
            parts=[pm.ToolReturnPart("run_shell_command", "Error (interrupted): the server stopped", "c1")]
        ),
    ]
    pending = _agent_data({"tool_call_id": "c1", "status": "PENDING", "tool_name": "run_shell_command"})
    stored = _task(TaskState.TASK_STATE_WORKING, [_user("count"), pending])
    view = _view(outcome="interrupted", outcome_message="The turn was interrupted", _messages=messages)
    got = _read(stored, view)
    assert got.status.state == TaskState.TASK_STATE_FAILED
    assert [p.text for p in got.status.message.parts] == ["The turn was interrupted"]
    updates = [d for m in got.history for d in _datas(m) if d.get("tool_call_id") == "c1"]
    assert [d["status"] for d in updates] == ["PENDING", "FAILED"], updates
    assert updates[-1]["error"]["type"] == "interrupted"


def test_issue39_item4_A6_a_task_the_conversation_left_while_it_waited_reads_canceled() -> None:
    stored = _task(TaskState.TASK_STATE_INPUT_REQUIRED, [_user("first")])
    got = _read(stored, _view(label="t2", status="running", outcome=""))
    assert got.status.state == TaskState.TASK_STATE_CANCELED
    assert "went on in another task" in got.status.message.parts[0].text


def test_issue39_item4_A6_a_message_no_process_took_up_reads_failed() -> None:
    """No conversation: failed once the lease time has passed, never before; a conversation whose
    lease holder is gone: failed at once."""
    old = _task(TaskState.TASK_STATE_SUBMITTED, [_user("hello")], age=LEASE + 60)
    new = _task(TaskState.TASK_STATE_SUBMITTED, [_user("hello")])
    failed = _read(old, None)
    assert failed.status.state == TaskState.TASK_STATE_FAILED
    assert "send it again" in failed.status.message.parts[0].text
    assert _read(new, None).status.state == TaskState.TASK_STATE_SUBMITTED
    gone = _view(label="", outcome="", lease_lapsed=True)
    assert _read(new, gone).status.state == TaskState.TASK_STATE_FAILED
    assert _read(new, _view(label="", outcome="")).status.state == TaskState.TASK_STATE_SUBMITTED


def test_issue39_item4_only_a_task_that_changes_to_a_stopped_state_reads_the_transcript() -> None:
    """The reader reads the conversation's transcript only when the derivation looks in it: a
    task that already says what its conversation says, or whose turn runs, costs no such read."""
    finished = _view()
    working = _task(TaskState.TASK_STATE_WORKING, [_user("hi")])
    assert needs_transcript(working, finished, _em(working))
    done = _read(working, _view(_messages=[pm.ModelRequest(parts=[pm.UserPromptPart("hi")])]))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert not needs_transcript(done, finished, _em(done))
    assert not needs_transcript(working, _view(status="running", outcome=""), _em(working))
    assert not needs_transcript(working, None, _em(working))
    waiting = _task(TaskState.TASK_STATE_INPUT_REQUIRED, [_user("hi")])
    assert needs_transcript(waiting, _view(label="t2"), _em(waiting))  # left behind: calls to settle
