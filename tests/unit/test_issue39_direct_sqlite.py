"""Issue 39 item 7: a store's SQLite writes run directly on the pooled sqlite3 connection
(store/direct.py) and give what SQLAlchemy's engine gives; a lock held by another connection is
waited for off the event loop; the WAL is checkpointed although SQLite's own checkpoint is off."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import (
    JSON,
    Column,
    DateTime,
    Float,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    bindparam,
    delete,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError

from devagent.store import direct
from devagent.store.db import Store

md = MetaData()
items = Table(
    "items",
    md,
    Column("id", Integer, primary_key=True),
    Column("name", String(20), unique=True, nullable=False),
    Column("n", Integer, nullable=False, default=7),
    Column("x", Float),
    Column("blob", LargeBinary),
    Column("doc", JSON),
    Column("at", DateTime),
)
AT = dt.datetime(2026, 11, 28, 18, 30, 1, 250000)
ADD = insert(items).returning(items.c.id, items.c.n, items.c.at, items.c.doc)
BUMP = update(items).where(items.c.n >= bindparam("b_min")).values(n=items.c.n + 1, x=bindparam("b_x"))
DROP = delete(items).where(items.c.name == bindparam("b_name"))
ALL = select(items.c.id, items.c.name, items.c.n, items.c.x, items.c.blob, items.c.doc, items.c.at).order_by(
    items.c.id
)


async def scenario(store: Store, direct_writes: bool) -> list[Any]:
    """The same writes through the store's direct transactions or SQLAlchemy's engine."""
    begin = store.begin if direct_writes else store.engine.begin
    seen: list[Any] = []
    async with store.engine.begin() as conn:
        await conn.run_sync(md.create_all)
    async with begin() as conn:
        # a column default left out, JSON and DateTime through their processors, RETURNING
        r = await conn.execute(
            ADD, {"name": "a", "x": 1.5, "blob": b"\x00\x01", "doc": {"k": [1, "2"]}, "at": AT}
        )
        seen.append(r.all())
        r = await conn.execute(insert(items), [{"name": f"m{i}", "n": i} for i in range(4)])
        seen.append(r.rowcount)
    async with begin() as conn:
        seen.append((await conn.execute(BUMP, {"b_min": 2, "b_x": 0.25})).rowcount)
        seen.append((await conn.execute(DROP, {"b_name": "m0"})).rowcount)
        seen.append((await conn.execute(select(items.c.at).where(items.c.name == "a"))).scalar_one())
    with pytest.raises(IntegrityError):
        async with begin() as conn:
            await conn.execute(insert(items), {"name": "q"})
            await conn.execute(insert(items), {"name": "a"})  # a duplicate: the whole block undone
    async with store.engine.connect() as conn:
        seen.append([tuple(r) for r in await conn.execute(ALL)])
    return seen


@pytest.mark.asyncio
async def test_issue39_item7_direct_writes_give_what_sqlalchemy_gives(tmp_path: Path) -> None:
    a = await Store.open(f"sqlite:///{tmp_path / 'a.db'}")
    b = await Store.open(f"sqlite:///{tmp_path / 'b.db'}")
    try:
        through_engine = await scenario(a, direct_writes=False)
        directly = await scenario(b, direct_writes=True)
    finally:
        await a.close()
        await b.close()
    assert directly == through_engine
    assert through_engine[0] == [(1, 7, AT, {"k": [1, "2"]})]
    assert [r[1] for r in through_engine[-1]] == ["a", "m1", "m2", "m3"]  # "q" rolled back


@pytest.mark.asyncio
async def test_issue39_item7_a_locked_database_is_waited_for(tmp_path: Path) -> None:
    """Another connection holds the write lock, and gives it up from a coroutine of this event
    loop while the store's write is under way: the write (refused at once on the loop's thread,
    where the busy timeout is 0) waits for the lock on aiosqlite's thread and goes through."""
    path = tmp_path / "s.db"
    store = await Store.open(f"sqlite:///{path}")
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        await store.create_session("s1", {"n": 0})
        other.execute("BEGIN IMMEDIATE")
        other.execute("UPDATE devagent_sessions SET state = '{\"n\": 1}' WHERE id = 's1'")
        write = asyncio.create_task(store.save("s1", {"n": 2}, expected=0))
        await asyncio.sleep(0.2)
        assert not write.done()  # the lock is still held: the write cannot have gone through
        other.execute("COMMIT")
        assert await asyncio.wait_for(write, 60) == 1
        stored = await store.load_session("s1")
        assert stored == (1, {"n": 2})
    finally:
        other.close()
        await store.close()


@pytest.mark.asyncio
async def test_issue39_item7_the_wal_is_checkpointed_by_the_store(tmp_path: Path) -> None:
    """SQLite's automatic checkpoint is off on the store's connection (it would fsync inside a
    commit on the event loop's thread): the store checkpoints every CHECKPOINT_EVERY direct
    commits, so the WAL is reused from its start and stays the size of that many commits."""
    path = tmp_path / "w.db"
    store = await Store.open(f"sqlite:///{path}")
    commits = 3 * direct.CHECKPOINT_EVERY
    try:
        async with store.engine.connect() as conn:
            raw = await conn.get_raw_connection()
            sqlite_conn: Any = raw.driver_connection
            assert sqlite_conn._conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        await store.create_session("s1", {"n": 0})
        for i in range(commits):
            await store.save("s1", {"n": i, "pad": "x" * 8000}, expected=i)
        wal = os.path.getsize(f"{path}-wal")
    finally:
        await store.close()
    # each commit appends the row's pages (8 KB of state: at least two 4 KB pages)
    assert wal < commits * 8000 / 2
