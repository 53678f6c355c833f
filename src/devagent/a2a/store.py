"""A write-behind front for the SDK's task store.

The SDK saves the whole task (history included) on every event: for a streamed answer of a few
hundred text pieces that is a few hundred growing writes per turn, the dominant cost of the event
path. While a task is `working`, this store keeps the latest snapshot in memory and writes it at most
every `delay` seconds (5); any other state (submitted, input-required, completed, failed, canceled)
is written at once, after any pending snapshot, so everything a client or a restart
needs (a pause waiting for a confirmation, the end of a turn) is on disk when the stream says so.
Reads see the pending snapshot. The conversation itself is the core's transcript, which the
core stores on its own.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from a2a.server.tasks import TaskStore
from a2a.types import Task, TaskState

if TYPE_CHECKING:
    from a2a.server.context import ServerCallContext
    from a2a.server.tasks import DatabaseTaskStore
    from a2a.types import ListTasksRequest, ListTasksResponse

log = logging.getLogger(__name__)

# The state a task is in while a turn runs: written behind. The task's creation (submitted) and
# every state a turn stops in (input-required, completed, failed, canceled, ...) are written at once.
_BUFFERED = frozenset((TaskState.TASK_STATE_WORKING,))


def join_tail(task: Task) -> None:
    """One history message per model reply, not one per streamed piece: the SDK moves every
    status message into the history, and the pieces of one reply share a messageId; the newest
    entries with the same id and role as the one before are joined into it (text onto text).
    Called on every save, so the history never holds more than one piece of a reply."""
    h = task.history
    while (
        len(h) >= 2 and h[-1].message_id and h[-1].message_id == h[-2].message_id and h[-1].role == h[-2].role
    ):
        prev, last = h[-2], h[-1]
        for part in last.parts:
            tail = prev.parts[-1] if prev.parts else None
            if (
                tail is not None
                and tail.WhichOneof("content") == "text"
                and part.WhichOneof("content") == "text"
            ):
                tail.text += part.text
            else:
                prev.parts.append(part)
        del h[-1]


class BufferedTaskStore(TaskStore):
    # 5 s rather than less: under load a turn lasts many seconds and every flush writes the whole
    # growing history; readers in this process see the live snapshot anyway, and a task left
    # `working` by a crash is settled as failed whatever its stored history.
    def __init__(self, inner: DatabaseTaskStore, delay: float = 5.0) -> None:
        self.inner = inner
        self._delay = delay
        self._pending: dict[str, tuple[Task, ServerCallContext]] = {}
        self._timers: dict[str, asyncio.Task[None]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        # Ids of tasks this process just created (the SDK generated the id) and has not saved yet:
        # the SDK looks each up two or three times before its first save, and none can be stored.
        self._fresh: set[str] = set()

    def new_task(self, task_id: str) -> None:
        """`task_id` was generated for a new task in this process: not in the database yet."""
        if len(self._fresh) > 10_000:  # ids of requests that failed before their first save
            self._fresh.clear()
        self._fresh.add(task_id)

    async def initialize(self) -> None:
        await self.inner.initialize()

    def _lock(self, task_id: str) -> asyncio.Lock:
        lock = self._locks.get(task_id)
        if lock is None:
            lock = self._locks[task_id] = asyncio.Lock()
        return lock

    async def save(self, task: Task, context: ServerCallContext) -> None:
        self._fresh.discard(task.id)
        join_tail(task)
        if task.status.state in _BUFFERED:
            # The SDK passes the task object it keeps mutating; holding the reference means the
            # flush writes whatever is latest then.
            self._pending[task.id] = (task, context)
            if task.id not in self._timers:
                self._timers[task.id] = asyncio.create_task(self._flush_later(task.id))
            return
        timer = self._timers.pop(task.id, None)
        if timer is not None:
            timer.cancel()
        self._pending.pop(task.id, None)
        async with self._lock(task.id):
            await self.inner.save(task, context)
        self._locks.pop(task.id, None)

    async def _flush_later(self, task_id: str) -> None:
        try:
            await asyncio.sleep(self._delay)
        finally:
            if self._timers.get(task_id) is asyncio.current_task():
                del self._timers[task_id]
        await self._flush(task_id)

    async def _flush(self, task_id: str) -> None:
        entry = self._pending.pop(task_id, None)
        if entry is None:
            return
        async with self._lock(task_id):
            try:
                await self.inner.save(entry[0], entry[1])
            except Exception:
                log.exception("cannot save task %s", task_id)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        if task_id in self._fresh:
            return None
        entry = self._pending.get(task_id)
        if entry is not None and self.inner.owner_resolver(entry[1]) == self.inner.owner_resolver(context):
            copy = Task()
            copy.CopyFrom(entry[0])
            return copy
        task: Task | None = await self.inner.get(task_id, context)
        return task

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        await self.flush_all()
        result: ListTasksResponse = await self.inner.list(params, context)
        return result

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        self._fresh.discard(task_id)
        timer = self._timers.pop(task_id, None)
        if timer is not None:
            timer.cancel()
        self._pending.pop(task_id, None)
        await self.inner.delete(task_id, context)

    async def flush_all(self) -> None:
        for timer in list(self._timers.values()):
            timer.cancel()
        self._timers.clear()
        for task_id in list(self._pending):
            await self._flush(task_id)
