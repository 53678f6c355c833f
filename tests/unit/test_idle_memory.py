"""Idle caches let go and the heap trimmed (issue 37 item 9, common/memory.py): the core's idle
sessions and the task store's cached tasks unused for `cache_idle_seconds` are dropped by the
sweeper, which then gives the memory back; entries in use stay."""

from __future__ import annotations

import asyncio
import gc
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import TaskState
from sqlalchemy.ext.asyncio import create_async_engine

from devagent.a2a.store import BufferedTaskStore
from devagent.common import memory
from devagent.common.memory import IdleSweeper
from devagent.config import ConfigError, load_config
from tests.a2a.test_store_cache import _ctx, _task


async def test_issue37_item9_idle_sessions_let_go_in_use_kept(
    core_factory: Any, script: Any, workspace: Path
) -> None:
    core = await core_factory(script([[{"text": "a"}]]), cache_idle_seconds=3600)
    held = await core.create_session([workspace])
    idle_id = (await core.create_session([workspace])).id
    gc.collect()
    assert set(core._recent) == {held.id, idle_id}
    assert core._drop_idle(time.monotonic() - 60) == 0  # both used just now
    assert core._drop_idle(time.monotonic() + 1) == 2
    gc.collect()
    assert core._recent == {} and idle_id not in core._sessions
    assert await core.get_session(held.id) is held  # in use: still the same object
    again = await core.get_session(idle_id)  # let go: loaded from the store
    assert again is not None and again.id == idle_id


async def test_issue37_item9_idle_cached_tasks_let_go(tmp_path: Path) -> None:
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 't.db'}")
    try:
        store = BufferedTaskStore(DatabaseTaskStore(engine), delay=0.01)
        await store.initialize()
        old, new = str(uuid.uuid4()), str(uuid.uuid4())
        await store.save(_task(old, TaskState.TASK_STATE_COMPLETED, "one"), _ctx())
        await store.flush_all()
        middle = time.monotonic()
        await asyncio.sleep(0.01)
        await store.save(_task(new, TaskState.TASK_STATE_COMPLETED, "two"), _ctx())
        await store.flush_all()
        assert set(store._cache) == {old, new}
        assert store.drop_idle(middle) == 1
        assert list(store._cache) == [new] and store._cache_bytes == store._cache[new].size
        found = await store.get(old, _ctx())  # read from the table, cached again
        assert found is not None and found.history[0].parts[0].text == "one"
        assert set(store._cache) == {old, new}
    finally:
        await engine.dispose()


async def test_issue37_item9_sweeper_gives_memory_back_only_after_a_drop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trims: list[int] = []
    monkeypatch.setattr(memory, "give_back_memory", lambda: trims.append(1))
    held = {"a": time.monotonic() - 100, "b": time.monotonic()}

    def drop(cutoff: float) -> int:
        gone = [k for k, used in held.items() if used < cutoff]
        for k in gone:
            del held[k]
        return len(gone)

    sweeper = IdleSweeper(idle_seconds=50)
    sweeper.add(drop)
    assert await sweeper.sweep() == 1 and held.keys() == {"b"} and trims == [1]
    assert await sweeper.sweep() == 0 and trims == [1]  # nothing dropped: no trim
    sweeper.idle_seconds = 0.5
    sweeper.start()  # the loop sweeps by itself
    for _ in range(600):  # until the loop's sweep has dropped "b" and trimmed (a bound, not a timing)
        if sweeper.sweeps == 2:
            break
        await asyncio.sleep(0.1)
    await sweeper.close()
    assert held == {} and trims == [1, 1] and sweeper.sweeps == 2
    monkeypatch.undo()
    memory.give_back_memory()  # glibc's malloc_trim where there is one; never fails


def test_issue37_item9_cache_idle_seconds_setting(tmp_path: Path) -> None:
    home = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config")}  # not the user's
    assert load_config(environ=home).cache_idle_seconds == 300.0
    assert load_config(environ={**home, "DEVAGENT_CACHE_IDLE_SECONDS": "2"}).cache_idle_seconds == 2.0
    with pytest.raises(ConfigError, match="cache_idle_seconds"):
        load_config(environ={**home, "DEVAGENT_CACHE_IDLE_SECONDS": "-1"})
