"""A write-behind front for the SDK's task store.

The SDK saves the whole task (history included) on every event: for a streamed answer of a few
hundred text pieces that is a few hundred growing writes per turn, the dominant cost of the event
path. While a task is `working`, this store keeps the latest snapshot in memory and writes it at most
every `delay` seconds (5); any other state (submitted, input-required, completed, failed, canceled)
is written at once, after any pending snapshot, so everything a client or a restart
needs (a pause waiting for a confirmation, the end of a turn) is on disk when the stream says so.
Reads see the pending snapshot. The conversation itself is the core's transcript, which the
core stores on its own. A save that holds a message whose turn waits for it (`awaiting_row`) is
written at once too, whatever the state.

Reads of stored tasks are cached: the SDK looks a task up many times per turn, and reading one
from the database parses its whole history through protobuf's json_format, which grows with every
turn of a task that is continued. The last tasks saved or read (an LRU of `CACHE_TASKS`, at most
`CACHE_BYTES` in all, none unused for longer than `cache_idle_seconds`: `drop_idle`) are kept
with their row's *signature*: `last_updated` and the text length of each JSON column, read by the
database in the transaction that wrote them (or in the query that read the whole row).
A `get` reads only the signature (one small SELECT, the same owner filter) and returns a copy of
the cached task when it is unchanged; any save by any process (a replica on the same database)
changes the status timestamp or the length of what it changed, so a changed row is read again in
full, never served stale.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from a2a.server.tasks import TaskStore
from a2a.types import Role, Task, TaskState
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]

from devagent.common.faults import crash_point
from devagent.common.lru import LRU
from devagent.store.direct import WriteConnection
from devagent.store.tasks import Signature, TaskRows

if TYPE_CHECKING:
    from a2a.server.context import ServerCallContext
    from a2a.server.tasks import DatabaseTaskStore
    from a2a.types import ListTasksRequest, ListTasksResponse
    from sqlalchemy.ext.asyncio import AsyncSession

log = logging.getLogger(__name__)

# The state a task is in while a turn runs: written behind. The task's creation (submitted) and
# every state a turn stops in (input-required, completed, failed, canceled, ...) are written at once.
_BUFFERED = frozenset((TaskState.TASK_STATE_WORKING,))
_UNSETTLED = frozenset((TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING))
# Ids of tasks created in this process and not saved yet, remembered at most
FRESH_IDS_IN_MEMORY = 10_000

# Stored tasks kept in memory after a save or a read: enough for every task a busy process is
# running, bounded in bytes (serialized size) so long histories cannot hold much memory.
CACHE_TASKS = 256
CACHE_BYTES = 64 * 1024 * 1024


@dataclass(slots=True)
class _Cached:
    task: Task  # a copy nobody else holds
    owner: str
    signature: Signature
    # The stored JSON of each history message and artifact (`MessageToDict`), aligned with
    # `task.history` and `task.artifacts`: the next save of the task converts only the entries that
    # differ, not the whole history again.
    history: list[dict[str, Any]]
    artifacts: list[dict[str, Any]]
    size: int
    used: float = field(default_factory=time.monotonic)  # when it was last saved or read


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


def drop_superseded(task: Task) -> None:
    """Of agent messages in the history that share a messageId made from a name (a version 5
    UUID: the text of one model answer, `Emitter.answer_begins`; a status derived from the
    conversation, `derive.derived_id`), only the last is kept. Such an id comes back
    on purpose: the answer a crash cut off is streamed again after the restart, a derived status
    is moved into the history again by a later continuation; the history shows it once. (Pieces
    of one message are joined as they come, `join_tail`: two entries with one id are never
    neighbours here.)"""
    h = task.history
    seen: set[str] = set()
    superseded: list[int] = []
    for i in range(len(h) - 1, -1, -1):
        m = h[i]
        if m.role != Role.ROLE_AGENT or not m.message_id:
            continue
        if m.message_id not in seen:
            seen.add(m.message_id)
        elif _named(m.message_id):
            superseded.append(i)
    for i in superseded:  # from the last to the first: the indices stay right
        del h[i]


def _named(message_id: str) -> bool:
    try:
        return uuid.UUID(message_id).version == 5
    except ValueError:
        return False


def join_reply(task: Task) -> None:
    """A plain client's reply streams as chunks of one `reply` artifact (plain.py), which the SDK
    appends as parts: consecutive text parts of a reply artifact are joined, so a task read later
    holds the answer as one text (and stays small)."""
    for artifact in task.artifacts:
        if artifact.name != "reply" or len(artifact.parts) < 2:
            continue
        parts = artifact.parts
        i = 1
        while i < len(parts):
            prev, part = parts[i - 1], parts[i]
            if prev.WhichOneof("content") == "text" and part.WhichOneof("content") == "text":
                prev.text += part.text
                del parts[i]
            else:
                i += 1


def _dicts(
    items: Sequence[Any], old_items: Sequence[Any], old_dicts: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """`MessageToDict` of each item (history messages, artifacts), reusing the conversion of every
    item equal to the one at the same place in the task as last saved or read."""
    known = old_dicts if len(old_dicts) == len(old_items) else []
    out: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        if i < len(known) and old_items[i] == item:
            out.append(known[i])
        else:
            out.append(MessageToDict(item))
    return out


def _stored_dicts(column: Any, count: int) -> list[dict[str, Any]]:
    """A JSON column read back (a list of dicts, aligned with the parsed items), or nothing."""
    if isinstance(column, list) and len(column) == count:
        return column
    return []


def _size(task: Task) -> int:
    """Roughly the memory a cached task holds: the message and its history as JSON dicts."""
    size: int = task.ByteSize()
    return 4 * size


class BufferedTaskStore(TaskStore):
    # 5 s rather than less: under load a turn lasts many seconds and every flush writes the whole
    # growing history; readers in this process see the live snapshot anyway, and a task left
    # `working` by a crash is settled as failed whatever its stored history.
    def __init__(
        self,
        inner: DatabaseTaskStore,
        delay: float = 5.0,
        begin: Callable[[], contextlib.AbstractAsyncContextManager[WriteConnection]] | None = None,
    ) -> None:
        """`begin`: the write transaction of the core's store (`Store.begin`: direct on SQLite,
        store/direct.py) on the same engine, for the task saves; else the engine's."""
        self.inner = inner
        self._delay = delay
        self._begin = begin or inner.engine.begin
        self._pending: dict[str, tuple[Task, ServerCallContext]] = {}
        self._timers: dict[str, asyncio.Task[None]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        # Ids of tasks this process just created (the SDK generated the id) and has not saved yet:
        # the SDK looks each up two or three times before its first save, and none can be stored.
        # Bounded: an id dropped is looked up in the database, which has no row.
        self._fresh: LRU[str, None] = LRU(FRESH_IDS_IN_MEMORY)
        self._cache: OrderedDict[str, _Cached] = OrderedDict()
        self._cache_bytes = 0
        self.cache_hits = 0
        self.cache_misses = 0
        self._rows = TaskRows(inner.task_model, inner.engine.dialect.name)
        # Per task: the message whose turn waits until a row holding it is written (`awaiting_row`).
        self._awaited: dict[str, tuple[str, asyncio.Future[bool]]] = {}
        # tasks whose end (or pause) a process of this store queued and this store has not yet
        # written: set once it is written, or failed to be (`settling`)
        self._settling: dict[str, asyncio.Event] = {}
        # tasks a save is writing at this moment (a read gets them, not the row they replace)
        self._writing: dict[str, tuple[Task, ServerCallContext]] = {}

    @contextlib.contextmanager
    def awaiting_row(self, task_id: str, message_id: str) -> Iterator[asyncio.Future[bool]]:
        """While open: a future resolved once a save of the task whose history holds the message
        `message_id` is written (True) or has failed (False). Such a save is written at once,
        whatever the task's state. The executor opens it before it sends the events that make the
        SDK store the message (the new task; a continuation's first status update), and begins the
        message's turn only once the row holds it."""
        waiting: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._awaited[task_id] = (message_id, waiting)
        try:
            yield waiting
        finally:
            if self._awaited.get(task_id, ("", None))[1] is waiting:
                del self._awaited[task_id]
            waiting.cancel()  # (nothing when resolved already)

    def _awaited_in(self, task: Task) -> asyncio.Future[bool] | None:
        """The future of the message awaited in this task (`awaiting_row`), if the task's history
        holds it and it is still awaited."""
        entry = self._awaited.get(task.id)
        if entry is None or entry[1].done():
            return None
        message_id, waiting = entry
        return waiting if any(m.message_id == message_id for m in task.history) else None

    def settling(self, task_id: str) -> asyncio.Event:
        """An event set once this store has written (or failed to write) the task's next state
        other than submitted or working: the end or pause its process has queued. Until then the
        task as stored lags what the turn's conversation says (handler.py reads it as stored)."""
        event = self._settling.get(task_id)
        if event is None:
            event = self._settling[task_id] = asyncio.Event()
        return event

    def _settled(self, task: Task) -> None:
        if task.status.state not in _UNSETTLED:
            event = self._settling.pop(task.id, None)
            if event is not None:
                event.set()

    def new_task(self, task_id: str) -> None:
        """`task_id` was generated for a new task in this process: not in the database yet."""
        self._fresh[task_id] = None  # (ids of requests that failed before their first save age out)

    async def initialize(self) -> None:
        await self.inner.initialize()

    def _lock(self, task_id: str) -> asyncio.Lock:
        lock = self._locks.get(task_id)
        if lock is None:
            lock = self._locks[task_id] = asyncio.Lock()
        return lock

    async def save(self, task: Task, context: ServerCallContext) -> None:
        self._fresh.pop(task.id)
        join_tail(task)
        join_reply(task)
        awaited = self._awaited_in(task)
        if task.status.state in _BUFFERED and awaited is None:
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
        drop_superseded(task)
        async with self._lock(task.id):
            self._writing[task.id] = (task, context)
            try:
                await self._save_stored(task, context)
            except BaseException:
                self._forget(task.id)
                if awaited is not None and not awaited.done():
                    awaited.set_result(False)
                raise
            finally:
                self._writing.pop(task.id, None)
                self._settled(task)
        self._locks.pop(task.id, None)
        if awaited is not None and not awaited.done():
            awaited.set_result(True)
        if task.status.state == TaskState.TASK_STATE_SUBMITTED:
            crash_point("a2a.task_created")  # kill tests: a new task stored, its turn not begun

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
        drop_superseded(entry[0])
        async with self._lock(task_id):
            try:
                await self._save_stored(entry[0], entry[1])
            except Exception:
                self._forget(task_id)
                log.exception("cannot save task %s", task_id)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        if task_id in self._fresh:
            return None
        # what is being written now, else what waits to be written, else the row
        entry = self._writing.get(task_id) or self._pending.get(task_id)
        if entry is not None and self.inner.owner_resolver(entry[1]) == self.inner.owner_resolver(context):
            copy = Task()
            copy.CopyFrom(entry[0])
            return copy
        return await self._get_stored(task_id, context)

    async def owner_of(self, task_id: str) -> str | None:
        """The identity that owns the task, or None where there is no such task."""
        entry = self._pending.get(task_id)
        if entry is not None:
            owner: str = self.inner.owner_resolver(entry[1])
            return owner
        await self.inner._ensure_initialized()
        async with self.inner.async_session_maker() as session:
            found = (await session.execute(self._rows.owner, {"b_id": task_id})).first()
        return None if found is None else str(found[0])

    # --- the stored tasks, through the cache ------------------------------------------------------

    async def _save_stored(self, task: Task, context: ServerCallContext) -> None:
        """The SDK's `DatabaseTaskStore.save` as one upsert statement (not the ORM's merge: a
        SELECT, then an INSERT or UPDATE) returning the signature of the row it wrote, so the
        copy cached is known to be exactly what the row holds."""
        inner = self.inner
        await inner._ensure_initialized()
        owner = inner.owner_resolver(context)
        history: list[dict[str, Any]] = []
        artifacts: list[dict[str, Any]] = []
        if inner.core_to_model_conversion is None:
            prev = self._cache.get(task.id)
            if prev is not None and prev.owner != owner:
                prev = None
            history = _dicts(task.history, prev.task.history if prev else (), prev.history if prev else [])
            artifacts = _dicts(
                task.artifacts, prev.task.artifacts if prev else (), prev.artifacts if prev else []
            )
            row = inner._to_orm(
                Task(id=task.id, context_id=task.context_id, status=task.status, metadata=task.metadata),
                owner,
            )
            # the columns hold the JSON form (the SDK's annotations name the protobuf types)
            row.history = history  # type: ignore[assignment]
            row.artifacts = artifacts  # type: ignore[assignment]
        else:
            row = inner._to_orm(task, owner)
        async with self._begin() as conn:
            signature = await self._rows.upsert(conn, row)
        if signature is None:  # cannot happen: the row was just written
            self._forget(task.id)
            return
        copy = Task()
        copy.CopyFrom(task)
        self._remember(task.id, _Cached(copy, owner, signature, history, artifacts, _size(copy)))

    async def _read_signature(self, session: AsyncSession, task_id: str, owner: str) -> Signature | None:
        found = (await session.execute(self._rows.signature, self._rows.params(task_id, owner))).first()
        return None if found is None else tuple(found)

    async def _get_stored(self, task_id: str, context: ServerCallContext) -> Task | None:
        inner = self.inner
        await inner._ensure_initialized()
        owner = inner.owner_resolver(context)
        cached = self._cache.get(task_id)
        async with inner.async_session_maker() as session:
            if cached is not None and cached.owner == owner:
                signature = await self._read_signature(session, task_id, owner)
                if signature is None:  # deleted (or never this owner's)
                    self._forget(task_id)
                    return None
                if signature == cached.signature:
                    self.cache_hits += 1
                    self._cache.move_to_end(task_id)
                    cached.used = time.monotonic()
                    copy = Task()
                    copy.CopyFrom(cached.task)
                    return copy
            self.cache_misses += 1
            found = (await session.execute(self._rows.row, self._rows.params(task_id, owner))).first()
        if found is None:
            return None
        *signature_cols, model = found
        task = inner._from_orm(model)
        copy = Task()
        copy.CopyFrom(task)
        history: list[dict[str, Any]] = []
        artifacts: list[dict[str, Any]] = []
        if model.protocol_version == "1.0" and inner.model_to_core_conversion is None:
            # the row's JSON is what the next save would write (older rows are another format)
            history = _stored_dicts(model.history, len(task.history))
            artifacts = _stored_dicts(model.artifacts, len(task.artifacts))
        self._remember(task_id, _Cached(copy, owner, tuple(signature_cols), history, artifacts, _size(copy)))
        return task

    def _remember(self, task_id: str, entry: _Cached) -> None:
        self._forget(task_id)
        if entry.size > CACHE_BYTES // 4:  # one huge task would evict everything else
            return
        self._cache[task_id] = entry
        self._cache_bytes += entry.size
        while len(self._cache) > CACHE_TASKS or self._cache_bytes > CACHE_BYTES:
            _, old = self._cache.popitem(last=False)
            self._cache_bytes -= old.size

    def _forget(self, task_id: str) -> None:
        old = self._cache.pop(task_id, None)
        if old is not None:
            self._cache_bytes -= old.size

    def drop_idle(self, cutoff: float) -> int:
        """Lets go of the cached tasks last saved or read before `cutoff` (`IdleSweeper`); how many."""
        dropped = 0
        while self._cache and next(iter(self._cache.values())).used < cutoff:
            _, old = self._cache.popitem(last=False)
            self._cache_bytes -= old.size
            dropped += 1
        return dropped

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        await self.flush_all()
        result: ListTasksResponse = await self.inner.list(params, context)
        return result

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        self._fresh.pop(task_id)
        timer = self._timers.pop(task_id, None)
        if timer is not None:
            timer.cancel()
        self._pending.pop(task_id, None)
        self._forget(task_id)
        await self.inner.delete(task_id, context)

    async def flush_all(self) -> None:
        for timer in list(self._timers.values()):
            timer.cancel()
        self._timers.clear()
        for task_id in list(self._pending):
            await self._flush(task_id)
