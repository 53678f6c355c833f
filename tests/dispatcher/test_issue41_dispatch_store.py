"""Issue 41 item 4: the store's side of the dispatcher, on SQLite and on PostgreSQL (where one
runs): a session that finds no worker is listed as waiting; a token minted for it registers a
worker for that session only (another session is never granted to it); once the session lets its
sandbox go it is listed as ended and its token is refused; a pod that gave its session back is
spent (never granted again), so the session, waiting again, is listed as ended until the
dispatcher's next claim for it. The want of a session whose replica died does not stay forever."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import insert, select

from devagent.store.db import Store
from devagent.store.tables import worker_wants_table
from tests.conftest import fresh_pg_database, pg_available


@pytest.fixture(params=["sqlite", "postgresql"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "sqlite":
        s = await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'd.db'}")
        try:
            yield s
        finally:
            await s.close()
        return
    if not pg_available():
        pytest.skip("PostgreSQL is not running on 127.0.0.1:5432")
    async with fresh_pg_database("devagent_h_dispatch") as url:
        s = await Store.open(url)
        try:
            yield s
        finally:
            await s.close()


async def test_issue41_item4_waiting_sessions_session_tokens_and_their_end(store: Store) -> None:
    q, d = store.workers, store.dispatch
    assert await q.grant("s1", "pods", "", 30.0) is None  # no worker: s1 waits
    assert await q.grant("s2", "pods", "", 30.0) is None
    assert await q.grant("s3", "other", "", 30.0) is None
    assert [w["session"] for w in await d.waiting("pods")] == ["s1", "s2"]
    assert await d.mint("pods", "s3") is None  # another pool's session
    token = await d.mint("pods", "s1")
    assert token is not None
    assert await q.token_named(token) == ("session:s1", "pods", "session", "s1")

    await q.hello("pod-1", "session:s1", "pods", ["default"], 1, "local", "s1")
    assert await q.grant("s2", "pods", "", 30.0) is None  # never another session's worker
    grant = await q.grant("s1", "pods", "", 30.0)
    assert grant is not None and grant.worker == "pod-1"
    assert [w["session"] for w in await d.waiting("pods")] == ["s2"]
    assert await d.ended("pods", ["s1", "gone"]) == ["gone"]

    await q.give_back("pod-1", "s1")
    assert await d.ended("pods", ["s1"]) == ["s1"]
    assert await q.token_named(token) is None
    assert await q.grant("s1", "pods", "", 30.0) is None  # the pod that gave it back is done
    assert await d.ended("pods", ["s1"]) == ["s1"]  # waiting again, but its pod is spent
    assert (await q.worker_of("pod-1") or ("", "", 0))[2] == 1
    token2 = await d.mint("pods", "s1")  # the dispatcher's next claim for it
    assert token2 is not None and await q.token_named(token2) is not None
    await d.retire("pods", "s1")
    assert all(r["name"] != "session:s1" for r in await q.tokens())
    assert await q.token_named(token2) is None


async def test_issue41_wants_whose_replica_died_are_swept_when_a_session_starts_waiting(store: Store) -> None:
    wa = worker_wants_table
    async with store.engine.begin() as conn:  # wants of replicas that died an hour ago
        for session_id, pool in (("dead", "pods"), ("other-pool", "x")):
            await conn.execute(
                insert(wa).values(session_id=session_id, pool=pool, template="", until=time.time() - 3600)
            )
    assert await store.workers.grant("waits", "pods", "", 30.0) is None  # no worker: it waits
    assert await store.workers.grant("waits", "pods", "", 30.0) is None  # ... and says so again
    assert [w["session"] for w in await store.dispatch.waiting("pods")] == ["waits"]
    async with store.engine.connect() as conn:
        left = {r[0] for r in (await conn.execute(select(wa.c.session_id))).all()}
    assert left == {"waits"}
