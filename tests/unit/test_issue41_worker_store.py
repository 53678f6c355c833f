"""Issue 41: the workers' tables (devagent/store/workers.py) as replicas share them. Two replicas
granting sessions at the same moment never give a worker more sessions than its capacity (on
PostgreSQL, where they count a worker's leases at once); a store's bells wake the waiters of
stores on its own database only."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, text

from devagent.store.db import Store
from devagent.store.tables import worker_leases_table
from tests.conftest import fresh_pg_database, pg_available

TTL = 60.0


@pytest.fixture
async def pg_replicas() -> AsyncIterator[tuple[Store, Store]]:
    """Two stores (two replicas, each with its own connections) on one fresh PostgreSQL database."""
    if not pg_available():
        pytest.skip("PostgreSQL is not running on 127.0.0.1:5432")
    async with fresh_pg_database("devagent_h_grants") as url:
        a, b = await Store.open(url), await Store.open(url)
        try:
            yield a, b
        finally:
            await a.close()
            await b.close()


async def _live_leases(store: Store) -> dict[str, int]:
    le = worker_leases_table
    now = time.time()
    async with store.engine.connect() as conn:
        rows = (
            await conn.execute(
                select(le.c.worker, func.count()).where(le.c.until >= now).group_by(le.c.worker)
            )
        ).all()
    return {r[0]: int(r[1]) for r in rows}


async def _waiting_on_a_lock(store: Store) -> bool:
    """Whether a connection to the store's (fresh, the test's own) database waits for a lock."""
    query = text(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    async with store.engine.connect() as conn:
        return bool((await conn.execute(query)).scalar_one())


def _gated(
    pick: Callable[..., Awaitable[str | None]], picked: asyncio.Event, gate: Callable[[], Awaitable[None]]
) -> Any:
    async def gated_pick(*args: Any) -> str | None:
        worker = await pick(*args)
        picked.set()
        await gate()
        return worker

    return gated_pick


@pytest.mark.postgres
async def test_issue41_grants_at_once_on_two_replicas_never_fill_a_worker_over_its_capacity(
    pg_replicas: tuple[Store, Store],
) -> None:
    """Replica A has counted the worker's leases and picked it (one free slot); replica B grants
    another session now, to its end or until it waits for A. A then takes its grant: of the two,
    exactly one session holds the worker."""
    a, b = pg_replicas
    await a.workers.hello("w1", "t", "pods", ["default"], 1, "local")
    picked = asyncio.Event()
    b_grant: asyncio.Future[asyncio.Task[Any]] = asyncio.get_running_loop().create_future()

    async def until_b_ended_or_waits() -> None:
        b = await b_grant
        async with asyncio.timeout(30):  # a guard against a hang only: either comes at once
            while not b.done() and not await _waiting_on_a_lock(a):
                await asyncio.wait({b}, timeout=0.01)  # its end, or a look at the locks again

    a.workers._pick = _gated(a.workers._pick, picked, until_b_ended_or_waits)  # type: ignore[method-assign]
    a_grant = asyncio.create_task(a.workers.grant("s-a", "pods", "", TTL))
    await picked.wait()
    b_grant.set_result(asyncio.create_task(b.workers.grant("s-b", "pods", "", TTL)))
    grants = await asyncio.gather(a_grant, b_grant.result())
    assert await _live_leases(a) == {"w1": 1}
    assert sorted(g is None for g in grants) == [False, True]


@pytest.mark.postgres
async def test_issue41_many_grants_at_once_on_two_replicas_fill_each_worker_to_its_capacity(
    pg_replicas: tuple[Store, Store],
) -> None:
    a, b = pg_replicas
    workers = [f"w{i}" for i in range(6)]
    for w in workers:
        await a.workers.hello(w, "t", "pods", ["default"], 1, "local")
    grants = await asyncio.gather(
        *((a if i % 2 else b).workers.grant(f"s{i}", "pods", "", TTL) for i in range(4 * len(workers)))
    )
    assert await _live_leases(a) == dict.fromkeys(workers, 1)
    assert sum(g is not None for g in grants) == len(workers)


async def test_issue41_bells_ring_for_the_stores_of_one_database_only(tmp_path: Path) -> None:
    """The server's sandboxes open a store of their own on the server's database: a call they
    queue wakes the worker's poll held by the server's store at once. A store of another database
    (another server in the same process) wakes nobody there."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'one.db'}"
    server, sandboxes, elsewhere = (
        await Store.open(url),
        await Store.open(url),
        await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'other.db'}"),
    )
    try:
        for s in (sandboxes, elsewhere):
            await s.workers.hello("w1", "t", "pods", ["default"], 1, "local")
        with server.workers.listening("w:w1") as bell:
            assert await elsewhere.workers.grant("s1", "pods", "", TTL) is not None
            assert not bell.is_set()
            assert await sandboxes.workers.grant("s1", "pods", "", TTL) is not None
            assert bell.is_set()
    finally:
        for s in (server, sandboxes, elsewhere):
            await s.close()
