"""How one execution's events are built and sent, per dialect (`Emitter`, the interface; the
RFC's dialect here, the others in `legacy.py` and `plain.py`), and the A2A parts they share."""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf import struct_pb2  # type: ignore[import-untyped]

from devagent.a2a import client_tools as ct
from devagent.a2a import extension as ext

if TYPE_CHECKING:
    from a2a.server.events import EventQueue

    from devagent.agent.api import ToolCall, TurnView

WORKING = TaskState.TASK_STATE_WORKING
INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED
COMPLETED = TaskState.TASK_STATE_COMPLETED
FAILED = TaskState.TASK_STATE_FAILED
CANCELED = TaskState.TASK_STATE_CANCELED


_TEXT_IDS = uuid.UUID("0f1d6c52-2a1e-4a0e-9b8e-5c1b7e3d9a41")  # namespace of the text messageIds


def text_message_id(answer: str, segment: int) -> str:
    """The messageId of the `segment`-th text message (from 1) of a model answer (`answer`: the
    session's id and the answer's `StepBegin.answer`)."""
    return str(uuid.uuid5(_TEXT_IDS, f"{answer}/{segment}"))


def data_value(d: dict[str, Any]) -> struct_pb2.Value:
    v = struct_pb2.Value()
    v.struct_value.update(d)
    return v


def data_part(d: dict[str, Any], metadata: dict[str, Any]) -> Part:
    part = Part(data=data_value(d))
    part.metadata.update(metadata)
    return part


def tool_calls_part(calls: list[Any]) -> Part:
    """The calls the client must run, `{"tool_calls": [{id, name, args}]}`."""
    return data_part(ct.tool_calls_data(calls), {"type": ct.CALLS_TYPE, "format": ct.FORMAT})


class Emitter:
    """The events of one execution in one dialect: the one interface the executor and the request
    handler use for all three dialects (the RFC's, `RfcEmitter`; Gemini CLI's `coderAgent`,
    `legacy.LegacyEmitter`; plain A2A, `plain.PlainEmitter`).

    What a dialect decides: `metadata_of` (an event's metadata), `tool_json` (what a tool call
    update carries, read once per update), `data` (how such an update or a thought goes out),
    `pause_parts` (the status message of a pause). Shared here and overridden where a dialect
    differs: `task_state` and `message_id` (the state a status update shows, the message it
    adds to), `text` (a piece of the reply), `reply` (the reply as an artifact and the final
    status text) and `status_of` (the status a session's stored state means)."""

    __slots__ = ("_answer", "_reply_id", "_segment", "context_id", "model", "queue", "task_id")

    def __init__(self, queue: EventQueue, task_id: str, context_id: str, model: str) -> None:
        self.queue = queue
        self.task_id = task_id
        self.context_id = context_id
        self.model = model
        # The messageId the text pieces of one model response share (the task store joins them
        # into one history message); a new one after anything else was sent.
        self._reply_id: str | None = None
        # The model answer being streamed (`answer_begins`) and how many of its text messages began
        self._answer = ""
        self._segment = 0

    # --- what each dialect decides --------------------------------------------------------------

    def metadata_of(
        self, kind: str, error: str | None = None, extra: dict[str, Any] | None = None
    ) -> dict[str, Any] | struct_pb2.Struct | None:
        """An event's (or a derived task status's) metadata in this dialect."""
        raise NotImplementedError

    def tool_json(self, c: ToolCall) -> dict[str, Any]:
        """What an update of tool call `c` carries, taken when the update happens."""
        raise NotImplementedError

    async def data(self, kind: str, data: dict[str, Any]) -> None:
        """A tool call update (`tool_json`'s value) or a thought, as this dialect sends it."""
        raise NotImplementedError

    def pause_parts(self, calls: list[ToolCall]) -> list[Part] | None:
        """The status message of a pause (input-required), live and on every later read."""
        raise NotImplementedError

    async def reannounce(self, calls: list[ToolCall], edits: dict[str, str]) -> None:
        """Gemini CLI's modify-with-editor answer: the waiting calls told again (legacy only)."""
        raise NotImplementedError

    def settled_message(self, calls: list[ToolCall]) -> Message | None:
        """The final updates of calls a crash left open in a task's history, as
        one history message: each call as this dialect's ToolCall update. None for a dialect that
        sends no ToolCall updates (plain)."""
        if not calls:
            return None
        return self._message([Part(data=data_value(self.tool_json(c))) for c in calls])

    # --- shared ---------------------------------------------------------------------------------

    def _message(self, parts: list[Part], message_id: str | None = None) -> Message:
        return Message(
            message_id=message_id or str(uuid.uuid4()),
            role=Role.ROLE_AGENT,
            parts=parts,
            task_id=self.task_id,
            context_id=self.context_id,
        )

    async def emit(
        self,
        state: TaskState,
        kind: str,
        part: Part | list[Part] | None = None,
        error: str | None = None,
        extra: dict[str, Any] | None = None,
        message_id: str | None = None,
    ) -> None:
        parts = [part] if isinstance(part, Part) else part
        await self._status_update(
            self.task_state(state),
            parts,
            self.message_id(kind, message_id),
            self.metadata_of(kind, error, extra),
        )

    def task_state(self, state: TaskState) -> TaskState:
        """The task state this dialect shows for a turn's `state`."""
        return state

    def message_id(self, kind: str, given: str | None) -> str | None:
        """The messageId of an event's status message (None: a new one)."""
        if given is None:  # anything but a piece of the reply ends the reply's message
            self._reply_id = None
        return given

    async def _status_update(
        self, state: TaskState, parts: list[Part] | None, message_id: str | None, metadata: Any
    ) -> None:
        status = (
            TaskStatus(state=state, message=self._message(parts, message_id))
            if parts
            else TaskStatus(state=state)
        )
        # GetCurrentTime's value (microseconds), without its detour through datetime
        status.timestamp.FromMicroseconds(time.time_ns() // 1000)
        if metadata is None:
            ev = TaskStatusUpdateEvent(task_id=self.task_id, context_id=self.context_id, status=status)
        else:
            ev = TaskStatusUpdateEvent(
                task_id=self.task_id, context_id=self.context_id, status=status, metadata=metadata
            )
        await self.queue.enqueue_event(ev)

    async def reply(self, text: str) -> list[Part] | None:
        """The turn's final reply where A2A clients look for it: a task artifact holding the whole
        reply (sent now), and the parts of the final status message (returned)."""
        if not text:
            return None
        artifact_id = f"reply-{uuid.uuid4().hex[:12]}"
        artifact = Artifact(artifact_id=artifact_id, name="reply", parts=[Part(text=text)])
        await self.queue.enqueue_event(
            TaskArtifactUpdateEvent(
                task_id=self.task_id, context_id=self.context_id, artifact=artifact, last_chunk=True
            )
        )
        return [Part(text=text)]

    async def artifact(self, name: str, parts: list[Part]) -> None:
        """A task artifact of its own (a repository session's result), sent now."""
        artifact = Artifact(artifact_id=f"{name}-{uuid.uuid4().hex[:12]}", name=name, parts=parts)
        await self.queue.enqueue_event(
            TaskArtifactUpdateEvent(
                task_id=self.task_id, context_id=self.context_id, artifact=artifact, last_chunk=True
            )
        )

    def answer_begins(self, key: str) -> None:
        """A model answer begins (`key`: the session's id and `StepBegin.answer`): the messageIds of
        its text messages are made from `key` and their order in it. An answer a crash cut off and
        the same answer asked for again after the restart have the same ids, so the task store
        keeps one of each (`store.join_tail`): the text is in the history once."""
        self._answer = key
        self._segment = 0
        self._reply_id = None

    async def text(self, text: str) -> None:
        if self._reply_id is None:
            self._segment += 1
            self._reply_id = (
                text_message_id(self._answer, self._segment) if self._answer else str(uuid.uuid4())
            )
        await self.emit(WORKING, ext.TEXT_CONTENT, Part(text=text), message_id=self._reply_id)

    def status_of(self, turn: TurnView) -> tuple[TaskState, list[Part] | None, str]:
        """The task status a session's current turn means (its read model, `TurnView`), for the
        task of that turn: (state, status message parts, error text)."""
        if turn.status == "awaiting_input":
            return INPUT_REQUIRED, self.pause_parts(turn.waiting), ""
        if turn.status == "running":
            return WORKING, None, ""
        outcome, message = turn.outcome, turn.outcome_message
        if outcome == "cancelled":
            return CANCELED, None, ""
        if outcome in ("error", "interrupted"):
            return FAILED, [Part(text=message)] if message else None, message or outcome
        if outcome == "max_steps_reached":
            return COMPLETED, [Part(text=message)] if message else None, "maximum number of steps reached"
        return COMPLETED, None, ""


class RfcEmitter(Emitter):
    """The development-tool extension's dialect, as its RFC writes it."""

    __slots__ = ("_metadata",)
    tool_json = staticmethod(ext.tool_call_json)  # type: ignore[assignment]

    def __init__(self, queue: EventQueue, task_id: str, context_id: str, model: str) -> None:
        super().__init__(queue, task_id, context_id, model)
        # The metadata Struct of plain events, built once per (kind, model): building it from a
        # dict costs more than the rest of the event, and a turn sends hundreds of the same.
        self._metadata: dict[tuple[str, str], struct_pb2.Struct] = {}

    def metadata_of(
        self, kind: str, error: str | None = None, extra: dict[str, Any] | None = None
    ) -> dict[str, Any] | struct_pb2.Struct | None:
        """An event's metadata in this dialect (the RFC's: `{URI: DevelopmentToolEvent}`)."""
        if error or extra:
            return ext.event_metadata(kind, self.model, error, extra)
        key = (kind, self.model)
        cached = self._metadata.get(key)
        if cached is None:
            cached = self._metadata[key] = struct_pb2.Struct()
            cached.update(ext.event_metadata(kind, self.model))
        return cached  # copied into the event

    def pause_parts(self, calls: list[ToolCall]) -> list[Part] | None:
        """The status message of a pause (input-required), live and on every later read: each
        permission request as its ToolCall with `confirmation_request` (RFC: "its message
        contains a ConfirmationRequest"), and the calls the client runs."""
        parts = [Part(data=data_value(self.tool_json(c))) for c in calls if not c.awaiting_client]
        client_calls = [c for c in calls if c.awaiting_client]
        if client_calls:
            parts.append(tool_calls_part(client_calls))
        return parts or None

    async def data(self, kind: str, data: dict[str, Any]) -> None:
        # a subagent's call says which call it runs under in the event's metadata too
        parent = data.get("parent_tool_call_id")
        extra = {"parent_tool_call_id": parent} if parent else None
        await self.emit(WORKING, kind, Part(data=data_value(data)), extra=extra)
