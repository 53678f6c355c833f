"""How an A2A task reads: the task as stored, translated from its conversation's read model.

A task's status is what its conversation's stored state says, at every read, whichever process
wrote what and whoever crashed where. The core reads the conversation (`read_turn`: how its turn
stands, the answers the model gave since an input, what became of calls); `derive_task` turns
that view into the task a client reads, without I/O and deciding nothing about the conversation.
The task of the conversation's current turn reads input-required exactly while the conversation
waits for answers the server will accept (its status message shows the requests), working while
a live process runs the turn, and how the turn ended after it (failed "interrupted" when its
process died); its history gains the answers the task store had not written, and the final
updates of calls a crash left open. A task the conversation left while it waited reads canceled;
one whose message no process took up reads failed.

A derived task is reported, never written back: the process that runs or ran the turn writes the
task, and a reader's write, made from a copy read a moment earlier, could overwrite that
process's newer one (a lost update). Reads stay right because every read derives again. What is
derived is named by what it derives from (`derived_id`: the conversation's revision), so read
again, or moved into the history by a continuation, it is the same message."""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

from a2a.server.agent_execution.active_task import TERMINAL_TASK_STATES
from a2a.types import Artifact, Message, Part, Role, Task, TaskState, TaskStatus
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]

from devagent.a2a import extension as ext
from devagent.a2a import legacy
from devagent.a2a.emitter import (
    CANCELED,
    COMPLETED,
    FAILED,
    INPUT_REQUIRED,
    WORKING,
    Emitter,
    RfcEmitter,
    text_message_id,
)
from devagent.a2a.store import join_tail
from devagent.agent.api import TurnInput

if TYPE_CHECKING:
    from devagent.agent.api import TurnView

RUNNING_STATES = frozenset((TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING))

_DERIVED_IDS = uuid.UUID("7d0c2a4e-51b3-4f8e-a0e2-3c9b6d1f5e27")  # namespace of derived statuses


def derived_id(task_id: str, named: str) -> str:
    """The messageId of a status message derived for a task from `named` (what it derives from)."""
    return str(uuid.uuid5(_DERIVED_IDS, f"{task_id}/{named}"))


def text_of(parts: Any) -> str:
    return "".join(p.text for p in parts if p.WhichOneof("content") == "text")


def to_history(task: Task) -> None:
    """Moves the status message into the history, as the SDK does on a status change; a piece of
    streamed text is joined onto the pieces before it (`join_tail`). A final status message that
    says again what the history ends with is dropped instead (`_restates`)."""
    if task.status.HasField("message"):
        if not _restates(task):
            task.history.append(task.status.message)
        task.status.ClearField("message")
        join_tail(task)


def _restates(task: Task) -> bool:
    """Whether the status message of a task that stopped only says again the text its history
    ends with: the reply, streamed as the turn's text and then restated as its final status; a
    notice the turn ended with, sent as text and then as the status; a status derived again from
    an unchanged conversation. Its words are in the history already, under another messageId:
    moved there too (a continuation), they would read twice. (Only a stopped task's status: the
    status message of a working task is a piece of the streamed text, joined onto the others.)"""
    status = task.status
    if status.state not in TERMINAL_TASK_STATES or not status.message.parts:
        return False
    if any(p.WhichOneof("content") != "text" for p in status.message.parts):
        return False
    text = text_of(status.message.parts)
    said = ""
    for m in reversed(task.history):
        if m.role != Role.ROLE_AGENT:
            return False  # the turn's input: nothing of the turn says it
        if not m.parts or any(p.WhichOneof("content") != "text" for p in m.parts):
            continue  # a tool call's update or a thought, between the reply's texts
        said = text_of(m.parts) + said
        if len(said) >= len(text):
            return said == text
    return False


def may_be_untaken(task: Task) -> bool:
    """Whether the task may hold a message no process took up (`_not_taken_up`): the reader asks
    the conversation's lease then."""
    return task.status.state in RUNNING_STATES and bool(task.history) and not legacy.is_legacy_task(task)


def turn_input(task: Task) -> TurnInput | None:
    """The input of the task's last message from its client, as the core names a turn's input:
    its text, and the calls whose answers or results it carried. None if it has none."""
    told = next((m for m in reversed(task.history) if m.role == Role.ROLE_USER), None)
    if told is None:
        return None
    ids: set[str] = set()
    for part in told.parts:
        if part.WhichOneof("content") == "data":
            d = MessageToDict(part.data)
            if isinstance(d, dict) and isinstance(d.get("tool_call_id"), str):
                ids.add(d["tool_call_id"])
    text = "\n".join(p.text for p in told.parts if p.WhichOneof("content") == "text")
    return TurnInput(text, frozenset(ids))


def derive_task(task: Task, view: TurnView | None, em: Emitter, lease_seconds: float) -> Task:
    """`task` (the stored copy, changed in place) as its conversation's `view` says (None: no
    conversation exists; its transcript read when `needs_transcript`); `em` speaks the task's
    dialect. Not called while this process runs the turn: it writes the task as it goes."""
    if view is None or not view.label:
        # No turn of this conversation ever began: a first message no process took up.
        return _not_taken_up(task, em, view, lease_seconds)
    if view.label != task.id:
        return _left_behind(task, em, view, lease_seconds)
    new_state, parts, error = em.status_of(view)
    if new_state == WORKING:
        if task.status.state != new_state:
            # Running in another process: reported, never stored (that process writes it).
            to_history(task)
            task.status.CopyFrom(TaskStatus(state=new_state))
        return task
    if _says_already(task, new_state, parts):
        return task
    if isinstance(em, RfcEmitter):
        reply = _complete_history(task, view)
        if new_state == COMPLETED and view.outcome == "finished" and reply:
            parts = [Part(text=reply)]  # the reply, as the end of the turn says it
            _add_reply(task, reply, derived_id(task.id, f"{view.revision}/reply"))
    if new_state != INPUT_REQUIRED:
        _settle_open_calls(task, em, view)
    named = f"{view.revision}/{TaskState.Name(new_state)}"
    return _derived(task, em, new_state, parts, error, derived_id(task.id, named))


def needs_transcript(task: Task, view: TurnView | None, em: Emitter) -> bool:
    """Whether deriving `task` from `view` looks in the conversation's transcript (which the reader
    then reads, `TurnView.read_transcript`): the task changes to a state its turn stopped in (the
    answers its history lacks, the calls a crash left open), or its conversation left it while it
    waited (the calls left open)."""
    if view is None or not view.label:
        return False
    if view.label != task.id:
        return task.status.state == INPUT_REQUIRED and not legacy.is_legacy_task(task)
    new_state, parts, _ = em.status_of(view)
    return new_state != WORKING and not _says_already(task, new_state, parts)


def _says_already(task: Task, state: TaskState, parts: list[Part] | None) -> bool:
    """Whether the task's status is already this one (a pause: showing the same requests)."""
    if state != task.status.state:
        return False
    have = list(task.status.message.parts) if task.status.HasField("message") else []
    return state != INPUT_REQUIRED or have == list(parts or [])


def _add_reply(task: Task, text: str, named: str) -> None:
    """The reply artifact the end of a turn sends, for a task whose process died before sending it."""
    if any(a.name == "reply" and text_of(a.parts) == text for a in task.artifacts):
        return
    task.artifacts.append(Artifact(artifact_id=f"reply-{named[:12]}", name="reply", parts=[Part(text=text)]))


def _complete_history(task: Task, view: TurnView) -> str:
    """A stored task its process stopped writing may lack text the conversation holds: the
    task store writes a running turn behind (`store.py`), the conversation each answer at
    once. The text of each answer given since the message the task's history ends with (the
    input of the turn that stopped) that the history lacks is added, with the messageId it
    was streamed with (`Emitter.answer_begins`). Returns the text of the last of these
    answers (the turn's reply, when it finished)."""
    to_history(task)
    given = turn_input(task)
    answers = view.answers_since(given) if given is not None else None
    if answers is None:
        return ""
    told = [i for i, m in enumerate(task.history) if m.role == Role.ROLE_USER][-1]
    have = {m.message_id: m for m in task.history[told:] if m.role == Role.ROLE_AGENT}
    shown = {text_of(m.parts) for m in have.values()}
    reply = ""
    for answer in answers:
        for n, text in enumerate(answer.texts, 1):
            message_id = text_message_id(f"{view.session_id}/{answer.key}", n)
            if message_id in have and text_of(have[message_id].parts) != text:
                del have[message_id].parts[:]
                have[message_id].parts.append(Part(text=text))  # the whole of what was cut
            elif message_id not in have and text not in shown:
                task.history.append(
                    Message(
                        message_id=message_id,
                        role=Role.ROLE_AGENT,
                        parts=[Part(text=text)],
                        task_id=task.id,
                        context_id=task.context_id,
                    )
                )
        reply = "".join(answer.texts)
    return reply


def _settle_open_calls(task: Task, em: Emitter, view: TurnView) -> None:
    """Issue 21 item 3: a call whose last ToolCall update in the task's history is PENDING or
    EXECUTING, but which the conversation has settled (the process that ran or was to run it
    died before writing its update), gets its final update appended: SUCCEEDED, FAILED
    "interrupted" or CANCELLED, as the conversation says. So a client replaying the history
    shows no permission prompt that no longer exists."""
    last: dict[str, str] = {}
    messages = [*task.history, task.status.message] if task.status.HasField("message") else task.history
    for msg in messages:
        for part in msg.parts:
            if part.WhichOneof("content") != "data":
                continue
            d = MessageToDict(part.data)
            if isinstance(d, dict) and isinstance(d.get("tool_call_id"), str) and "status" in d:
                last[d["tool_call_id"]] = str(d["status"])
    open_ids = {i for i, status in last.items() if status in ("PENDING", "EXECUTING")}
    if not open_ids:
        return
    settled = em.settled_message(view.settled(open_ids))
    if settled is None:
        return
    settled.message_id = derived_id(task.id, f"{view.revision}/settled")
    to_history(task)
    task.history.append(settled)


def _left_behind(task: Task, em: Emitter, view: TurnView, lease_seconds: float) -> Task:
    """A task that is not its conversation's current turn."""
    if legacy.is_legacy_task(task):
        return task
    if task.status.state == INPUT_REQUIRED:
        # Its pause ended when the conversation went on in another task.
        text = "the conversation went on in another task; the calls this task waited for were cancelled"
        _settle_open_calls(task, em, view)
        named = f"left for {view.label}"
        return _derived(task, em, CANCELED, [Part(text=text)], "", derived_id(task.id, named))
    return _not_taken_up(task, em, view, lease_seconds)


def _not_taken_up(task: Task, em: Emitter, view: TurnView | None, lease_seconds: float) -> Task:
    """A submitted or working task whose message no process took up (the one that had it
    stopped before its turn began: never `submitted` for ever): failed as soon as that is
    known. The process that takes a message up holds its conversation's lease from the
    conversation's creation or its turn's claim: a lease whose holder is gone says so at once.
    Else (the process stopped before it held anything) once the lease time has passed since
    the task was written, so a live process starting it is never overtaken."""
    if (
        may_be_untaken(task)  # (a task without a message, from POST /tasks, has no turn)
        and (view is None or view.status != "running")
        and (
            time.time() - task.status.timestamp.ToSeconds() > lease_seconds
            or (view is not None and view.lease_lapsed)
        )
    ):
        text = "the server process handling this message stopped before it began; send it again"
        named = f"not taken up {task.status.timestamp.ToMicroseconds()}"
        return _derived(task, em, FAILED, [Part(text=text)], text, derived_id(task.id, named))
    return task


def _derived(
    task: Task, em: Emitter, state: TaskState, parts: list[Part] | None, error: str, message_id: str
) -> Task:
    """`task` with the status its conversation says (the stored copy is not changed); the
    status message's id is `message_id`."""
    if task.status.message.message_id == message_id:
        task.status.ClearField("message")  # derived before and stored: replaced, not moved
    to_history(task)
    message = (
        Message(
            message_id=message_id,
            role=Role.ROLE_AGENT,
            parts=parts,
            task_id=task.id,
            context_id=task.context_id,
        )
        if parts
        else None
    )
    status = TaskStatus(state=state, message=message) if message is not None else TaskStatus(state=state)
    status.timestamp.GetCurrentTime()
    task.status.CopyFrom(status)
    md = em.metadata_of(ext.STATE_CHANGE, error or None)
    if isinstance(md, dict):
        task.metadata.update(md)
    elif md is not None:
        task.metadata.MergeFrom(md)
    return task
