"""Live events of a turn for the replicas that do not run it (scale-out).

The replica that runs a task's execution writes what it sends to its own subscribers into the
store's task event log as well: first a snapshot of the task as the execution begins (the task
with the request's message in its history, as the SDK keeps it), then every event, in order, each
in the protocol's serialized form (`StreamResponse`). Writing is batched: events that arrive while
a write is under way go out together in the next one, so an idle stream writes each event at once
and a busy process writes fewer, larger batches. Each write notifies the other replicas
(PostgreSQL NOTIFY, in the same transaction).

A replica asked to follow a task that runs elsewhere (`tasks/resubscribe`) reads the log: the
snapshot with every event after it folded in is the task as its subscribers have it now, which
is sent first; then each new event as its notification arrives (or, if notifications are lost,
when it looks again a second later). Nothing is missed or sent twice: the log's ids order the
events, and the follower reads strictly after the last id it sent.

Only with PostgreSQL: SQLite serves one process, whose own subscribers need no log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from a2a.server.agent_execution.active_task import INTERRUPTED_TASK_STATES, TERMINAL_TASK_STATES
from a2a.types import Message, Task, TaskArtifactUpdateEvent, TaskStatusUpdateEvent
from a2a.types.a2a_pb2 import StreamResponse

from devagent.store.tables import EVENTS_CHANNEL

if TYPE_CHECKING:
    from a2a.server.events import Event, EventQueue

    from devagent.store.db import Store

log = logging.getLogger(__name__)

SNAPSHOT, EVENT = 1, 0
_STOP = TERMINAL_TASK_STATES | INTERRUPTED_TASK_STATES
PRUNE_AFTER = 3600.0  # seconds a finished execution's log is kept


def _serialize(event: Event) -> bytes:
    from a2a.utils.proto_utils import to_stream_response

    data: bytes = to_stream_response(event).SerializeToString()
    return data


def _event_of(data: bytes) -> Event:
    r = StreamResponse()
    r.ParseFromString(data)
    which = r.WhichOneof("payload")
    if which == "task":
        return r.task
    if which == "status_update":
        return r.status_update
    if which == "artifact_update":
        return r.artifact_update
    return r.message


def fold(task: Task, event: Event) -> None:
    """Apply an event to a task as the SDK's task manager does (for the snapshot sent first)."""
    if isinstance(event, Task):
        task.CopyFrom(event)
    elif isinstance(event, TaskStatusUpdateEvent):
        if task.status.HasField("message"):
            task.history.append(task.status.message)
        if event.metadata:
            task.metadata.MergeFrom(event.metadata)
        task.status.CopyFrom(event.status)
    elif isinstance(event, TaskArtifactUpdateEvent):
        from a2a.server.tasks.task_manager import append_artifact_to_task

        append_artifact_to_task(task, event)


def ends_stream(event: Event) -> bool:
    return isinstance(event, Message) or (
        isinstance(event, Task | TaskStatusUpdateEvent) and event.status.state in _STOP
    )


class Fanout:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._buf: list[tuple[str, int, bytes]] = []
        self._writer: asyncio.Task[None] | None = None
        self._pruned = 0.0

    # --- the replica that runs the execution ---------------------------------------------------

    def begin(self, task: Task, message: Message | None) -> None:
        """An execution of `task` begins (with the request's `message`): log its snapshot."""
        snap = Task()
        snap.CopyFrom(task)
        if message is not None and not any(m.message_id == message.message_id for m in snap.history):
            if snap.status.HasField("message"):
                snap.history.append(snap.status.message)
                snap.status.ClearField("message")
            snap.history.append(message)
        self._push(task.id, SNAPSHOT, snap)

    def publish(self, task_id: str, event: Event) -> None:
        self._push(task_id, EVENT, event)

    def _push(self, task_id: str, kind: int, event: Event) -> None:
        self._buf.append((task_id, kind, _serialize(event)))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write())

    async def _write(self) -> None:
        while self._buf:
            rows, self._buf = self._buf, []
            try:
                await self.store.append_task_events(rows)
            except Exception:
                log.exception("could not log %d task events for other replicas", len(rows))
        loop = asyncio.get_running_loop()
        if loop.time() - self._pruned > PRUNE_AFTER / 4:
            self._pruned = loop.time()
            try:
                await self.store.prune_task_events(PRUNE_AFTER)
            except Exception:
                log.warning("could not prune the task event log", exc_info=True)

    async def flush(self) -> None:
        """Wait until everything published so far is written (at shutdown)."""
        while self._writer is not None and not self._writer.done():
            await asyncio.shield(self._writer)

    def queue(self, queue: EventQueue, task_id: str) -> Any:
        return _TeeQueue(queue, self, task_id)

    # --- a replica following an execution that runs elsewhere ----------------------------------

    async def follow(
        self, task: Task, *, settled: Callable[[], Awaitable[Event | None]], poll: float = 1.0
    ) -> AsyncIterator[Event]:
        """The task as its subscribers have it now, then its live events until the stream ends
        (terminal or interrupted state). `task` is what the task store has, sent alone when no
        execution of it is logged. When nothing new came for `poll` seconds, `settled()` says
        whether the turn stopped without a final event (its replica died): that ends it."""
        listener = self.store.listener()
        await listener.start()
        wake = listener.watch(EVENTS_CHANNEL, task.id)
        try:
            rows = await self.store.read_task_events(task.id)
            first = next((i for i in range(len(rows) - 1, -1, -1) if rows[i][1] == SNAPSHOT), None)
            if first is None:
                yield task
                return
            current = Task()
            last = 0
            for row_id, _kind, data in rows[first:]:
                fold(current, _event_of(data))
                last = row_id
            yield current
            if current.status.state in _STOP:
                return
            while True:
                idle = False
                try:
                    await asyncio.wait_for(wake.wait(), poll)
                except TimeoutError:
                    idle = True
                wake.clear()
                rows = await self.store.read_task_events(task.id, last)
                if not rows and idle:
                    final = await settled()
                    if final is not None:
                        yield final
                        return
                for row_id, kind, data in rows:
                    last = row_id
                    if kind == SNAPSHOT:  # a newer execution began: this one's stream is over
                        return
                    event = _event_of(data)
                    yield event
                    if ends_stream(event):
                        return
        finally:
            listener.unwatch(EVENTS_CHANNEL, task.id, wake)


class _TeeQueue:
    """The SDK's event queue for one execution, also logging each event for other replicas."""

    __slots__ = ("_fanout", "_queue", "_task_id")

    def __init__(self, queue: EventQueue, fanout: Fanout, task_id: str) -> None:
        self._queue = queue
        self._fanout = fanout
        self._task_id = task_id

    async def enqueue_event(self, event: Event) -> None:
        self._fanout.publish(self._task_id, event)
        await self._queue.enqueue_event(event)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)
