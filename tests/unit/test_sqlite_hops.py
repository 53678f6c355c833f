"""Issue 14: SQLite statements through one trip to aiosqlite's thread give what SQLAlchemy's own
aiosqlite path gives (rows, rowcount, lastrowid, errors, transactions)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import create_async_engine

from devagent.patches.aiosqlite import OneHopCursor
from devagent.store.db import Store


async def run(url: str, one_hop: bool) -> list[Any]:
    engine = create_async_engine(url, pool_size=1, max_overflow=0)
    if one_hop:
        from devagent.patches.aiosqlite import one_hop_cursors

        event.listen(engine.sync_engine, "connect", lambda c, _r: one_hop_cursors(c._connection))
    seen: list[Any] = []
    try:
        async with engine.begin() as conn:
            await conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT UNIQUE, n INT)"))
            r = await conn.execute(text("INSERT INTO t (name, n) VALUES ('a', 1)"))
            seen += [r.rowcount, r.lastrowid]
            r = await conn.execute(
                text("INSERT INTO t (name, n) VALUES (:name, :n)"),
                [{"name": f"m{i}", "n": i} for i in range(5)],
            )
            seen.append(r.rowcount)
        async with engine.begin() as conn:
            r = await conn.execute(text("UPDATE t SET n = n + 1 WHERE n >= 2"))
            seen.append(r.rowcount)
            r = await conn.execute(text("SELECT id, name, n FROM t ORDER BY id"))
            seen.append([tuple(row) for row in r.all()])
            r = await conn.execute(text("SELECT name FROM t WHERE n > 100"))
            seen.append(r.all())
            r = await conn.execute(text("INSERT INTO t (name, n) VALUES ('z', 9) RETURNING id, n"))
            seen.append([tuple(row) for row in r.all()])
            seen.append((await conn.execute(text("SELECT count(*) FROM t"))).scalar_one())
            r = await conn.execute(text("SELECT id FROM t ORDER BY id"))
            seen.append([r.fetchone()[0], [x[0] for x in r.fetchmany(2)], [x[0] for x in r.fetchall()]])
        with pytest.raises(IntegrityError):
            async with engine.begin() as conn:
                await conn.execute(text("INSERT INTO t (name, n) VALUES ('q', 1)"))
                await conn.execute(text("INSERT INTO t (name, n) VALUES ('a', 2)"))  # duplicate: rolled back
        with pytest.raises(OperationalError):
            async with engine.connect() as conn:
                await conn.execute(text("SELECT nope FROM t"))
        async with engine.connect() as conn:
            seen.append((await conn.execute(text("SELECT count(*) FROM t WHERE name = 'q'"))).scalar_one())
    finally:
        await engine.dispose()
    return seen


async def test_one_hop_statements_match_sqlalchemys_own(tmp_path: Path) -> None:
    own = await run(f"sqlite+aiosqlite:///{tmp_path / 'own.db'}", one_hop=False)
    hop = await run(f"sqlite+aiosqlite:///{tmp_path / 'hop.db'}", one_hop=True)
    assert hop == own
    assert own[0:3] == [1, 1, 5] and own[-1] == 0


async def test_the_store_uses_one_hop_cursors(tmp_path: Path) -> None:
    store = await Store.open(f"sqlite:///{tmp_path / 'd.db'}")
    try:
        async with store.engine.connect() as conn:
            raw = await conn.get_raw_connection()
            assert isinstance(await raw.driver_connection.cursor(), OneHopCursor)
            assert (await conn.execute(text("PRAGMA journal_mode"))).scalar_one() == "wal"
    finally:
        await store.close()
