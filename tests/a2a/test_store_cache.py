"""BufferedTaskStore's read cache: stored tasks served from memory while their row is unchanged,
read again when another process (a replica on the same database) wrote them."""

from __future__ import annotations

import uuid
from typing import Any

from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus
from sqlalchemy.ext.asyncio import create_async_engine

from devagent.a2a.store import BufferedTaskStore


class _User(User):
    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self._name


def _ctx(name: str = "alice") -> ServerCallContext:
    return ServerCallContext(user=_User(name))


def _task(task_id: str, state: Any, *texts: str, ts: int = 1) -> Task:
    t = Task(id=task_id, context_id=str(uuid.uuid4()), status=TaskStatus(state=state))
    t.status.timestamp.FromMicroseconds(1_700_000_000_000_000 + ts)
    for i, text in enumerate(texts):
        t.history.append(Message(message_id=f"m{i}", role=Role.ROLE_AGENT, parts=[Part(text=text)]))
    return t


def _url(db_url: str) -> str:
    return db_url.replace("postgresql://", "postgresql+asyncpg://", 1)


async def test_cached_reads_and_other_writers(db_url: str) -> None:
    engine = create_async_engine(_url(db_url))
    try:
        a = BufferedTaskStore(DatabaseTaskStore(engine), delay=0.01)
        b = BufferedTaskStore(DatabaseTaskStore(engine), delay=0.01)
        await a.initialize()
        await b.initialize()
        tid = str(uuid.uuid4())
        done = TaskState.TASK_STATE_COMPLETED
        await a.save(_task(tid, done, "one"), _ctx())

        # served from the cache: the same task, a copy of its own
        first = await a.get(tid, _ctx())
        assert first is not None and first.history[0].parts[0].text == "one"
        assert (a.cache_hits, a.cache_misses) == (1, 0)
        first.history[0].parts[0].text = "changed by the caller"
        again = await a.get(tid, _ctx())
        assert again is not None and again.history[0].parts[0].text == "one"
        assert a.cache_hits == 2

        # another owner does not see it
        assert await a.get(tid, _ctx("mallory")) is None
        assert a.cache_misses == 1

        # another replica writes the task: a reads it again, never the stale copy
        await b.save(_task(tid, done, "one", "two", ts=2), _ctx())
        seen = await a.get(tid, _ctx())
        assert seen is not None and [m.parts[0].text for m in seen.history] == ["one", "two"]
        assert a.cache_misses == 2
        # same timestamp, other content of another length: still read again
        await b.save(_task(tid, done, "one", "three!", ts=2), _ctx())
        seen = await a.get(tid, _ctx())
        assert seen is not None and seen.history[1].parts[0].text == "three!"
        assert a.cache_misses == 3
        # then cached again
        await a.get(tid, _ctx())
        assert a.cache_misses == 3

        # a task written behind: reads see the pending snapshot, the flush updates the cache
        working = _task(tid, TaskState.TASK_STATE_WORKING, "one", "three!", "four", ts=3)
        await a.save(working, _ctx())
        seen = await a.get(tid, _ctx())
        assert seen is not None and len(seen.history) == 3
        await a.flush_all()
        seen = await b.get(tid, _ctx())
        assert seen is not None and len(seen.history) == 3
        misses = a.cache_misses
        seen = await a.get(tid, _ctx())
        assert seen is not None and len(seen.history) == 3 and a.cache_misses == misses

        # deleted by the other replica: gone for this one too
        await b.delete(tid, _ctx())
        assert await a.get(tid, _ctx()) is None
        assert await a.get(tid, _ctx()) is None
    finally:
        await engine.dispose()


async def test_cache_is_bounded(sqlite_url: str, monkeypatch: Any) -> None:
    import devagent.a2a.store as store

    monkeypatch.setattr(store, "CACHE_TASKS", 3)
    engine = create_async_engine(sqlite_url)
    try:
        s = BufferedTaskStore(DatabaseTaskStore(engine))
        await s.initialize()
        for i in range(5):
            await s.save(_task(f"t{i}", TaskState.TASK_STATE_COMPLETED, f"text {i}"), _ctx())
        assert list(s._cache) == ["t2", "t3", "t4"]
        got = await s.get("t0", _ctx())
        assert got is not None and got.history[0].parts[0].text == "text 0"
        assert list(s._cache) == ["t3", "t4", "t0"]
    finally:
        await engine.dispose()
