"""The `devagent_checkpoints` table: one row per checkpoint, keyed by (session_id, seq).

`devagent.agent.loop.checkpoints` decides what a checkpoint holds and how `/restore` uses it; this module
only stores rows: `data` is the checkpoint's JSON, which the store never reads. The table lives in
the session database, next to the transcript the checkpoints point into, but it is not part of
`db.metadata`: it is created on first use, once per engine, so a database that never saw an edit
has no such table.

Importing this module imports SQLAlchemy; the agent imports it only when a checkpoint is used.
"""

from __future__ import annotations

import asyncio
import weakref

from sqlalchemy import (
    Column,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    bindparam,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncEngine

from devagent.store.db import Store
from devagent.store.direct import WriteConnection

checkpoints_table = Table(
    "devagent_checkpoints",
    MetaData(),
    Column("session_id", String(64), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("created_at", Float, nullable=False),
    Column("data", Text, nullable=False),
)

# The engines whose database has the table (checked or created by this process).
_created: weakref.WeakSet[AsyncEngine] = weakref.WeakSet()
_locks: weakref.WeakKeyDictionary[AsyncEngine, asyncio.Lock] = weakref.WeakKeyDictionary()


async def _engine(store: Store) -> AsyncEngine:
    """The store's engine, its checkpoints table created if this process has not done so yet."""
    engine = store.engine
    if engine in _created:
        return engine
    lock = _locks.setdefault(engine, asyncio.Lock())
    async with lock:
        if engine not in _created:
            async with store.schema_lock(), engine.begin() as conn:
                await conn.run_sync(checkpoints_table.metadata.create_all)
            _created.add(engine)
    return engine


# The statements of every edit, built once (building one costs SQLAlchemy more than running it).
_t = checkpoints_table
# The next seq of the session and the row, in one statement (a SELECT and an INSERT were two
# trips to the database within the save's transaction).
_ADD = (
    insert(_t)
    .from_select(
        ["session_id", "seq", "created_at", "data"],
        select(
            bindparam("b_sid", type_=String),
            func.coalesce(func.max(_t.c.seq), 0) + 1,
            bindparam("b_at", type_=Float),
            bindparam("b_data", type_=Text),
        ).where(_t.c.session_id == bindparam("b_sid", type_=String)),
    )
    .returning(_t.c.seq)
)
_REPLACE = (
    update(_t)
    .where(_t.c.session_id == bindparam("b_sid"), _t.c.seq == bindparam("b_seq"))
    .values(data=bindparam("b_data"))
)
_DELETE_ONE = delete(_t).where(_t.c.session_id == bindparam("b_sid"), _t.c.seq == bindparam("b_seq"))


async def ensure_table(store: Store) -> None:
    """The table exists (created by this process if need be): before a write of it is passed to
    `Store.save(also=...)`, whose transaction creates no tables."""
    await _engine(store)


async def add_in(conn: WriteConnection, session_id: str, created_at: float, data: str) -> int:
    """`add` in the caller's transaction (a session save's): the checkpoint's seq."""
    seq = (await conn.execute(_ADD, {"b_sid": session_id, "b_at": created_at, "b_data": data})).scalar_one()
    return int(seq)


async def replace_data_in(conn: WriteConnection, session_id: str, seq: int, data: str) -> None:
    """`replace_data` in the caller's transaction."""
    await conn.execute(_REPLACE, {"b_sid": session_id, "b_seq": seq, "b_data": data})


async def delete_one_in(conn: WriteConnection, session_id: str, seq: int) -> None:
    """Deletes one checkpoint of the session, in the caller's transaction."""
    await conn.execute(_DELETE_ONE, {"b_sid": session_id, "b_seq": seq})


async def add(store: Store, session_id: str, created_at: float, data: str) -> int:
    """Stores a new checkpoint of the session and returns its seq (1, 2, … per session)."""
    engine = await _engine(store)
    async with engine.begin() as conn:
        return await add_in(conn, session_id, created_at, data)


async def replace_data(store: Store, session_id: str, seq: int, data: str) -> None:
    """Rewrites a checkpoint's JSON (its edit's outcome recorded)."""
    engine = await _engine(store)
    async with engine.begin() as conn:
        await replace_data_in(conn, session_id, seq, data)


async def delete_from(store: Store, session_id: str, seq: int) -> None:
    """Deletes the session's checkpoints from `seq` on (those a restore undid)."""
    t = checkpoints_table
    engine = await _engine(store)
    async with engine.begin() as conn:
        await conn.execute(delete(t).where(t.c.session_id == session_id, t.c.seq >= seq))


async def list_rows(store: Store, session_id: str) -> list[tuple[int, float, str]]:
    """The session's checkpoints as (seq, created_at, data), oldest first."""
    t = checkpoints_table
    engine = await _engine(store)
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(t.c.seq, t.c.created_at, t.c.data).where(t.c.session_id == session_id).order_by(t.c.seq)
        )
        return [(int(r[0]), float(r[1]), str(r[2])) for r in rows]
