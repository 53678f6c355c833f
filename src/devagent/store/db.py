"""Durable storage of sessions through SQLAlchemy async: a SQLite file by default, PostgreSQL by URL.

Two tables:
- `devagent_sessions`: one row per session; `state` is the JSON of `SessionState` (settings,
  grants, pending calls, usage…), `revision` counts saves.
- `devagent_messages`: the transcript, one row per model message (pydantic-ai's JSON form), in
  `seq` order. A step appends rows; `/clear` and `/compact` replace them.

A step's state and its new messages are written in one transaction, so a crash leaves either the
step before or the step after, never half of one.
"""

from __future__ import annotations

import json
import time
from typing import Any

from sqlalchemy import (
    Column,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    delete,
    insert,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

metadata = MetaData()

sessions_table = Table(
    "devagent_sessions",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("revision", Integer, nullable=False, default=0),
    Column("state", Text, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
)

messages_table = Table(
    "devagent_messages",
    metadata,
    Column("session_id", String(64), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("data", Text, nullable=False),
)


def normalise_url(url: str) -> str:
    """Accept plain `sqlite:///` and `postgresql://` URLs and pick the async drivers."""
    if url.startswith("sqlite:"):
        return "sqlite+aiosqlite:" + url[len("sqlite:") :]
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url[len(prefix) :]
    return url


class Store:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    @classmethod
    async def open(cls, url: str) -> Store:
        url = normalise_url(url)
        kwargs: dict[str, Any] = {}
        if url.startswith("sqlite"):
            kwargs["connect_args"] = {"timeout": 30}
            from sqlalchemy.engine import make_url

            database = make_url(url).database or ""
            if database and database != ":memory:" and "mode=memory" not in url:
                # One connection for the whole process: SQLite has one writer at a time anyway,
                # and with a pool of 5 + 10 connections (one aiosqlite thread each) concurrent
                # turns spent their time in SQLite's busy-wait and in threads contending for
                # the GIL. One connection serves the operations in turn, in order; no code path
                # holds a connection while it asks for another. (In-memory databases keep
                # SQLAlchemy's own single-connection pool.)
                kwargs["pool_size"] = 1
                kwargs["max_overflow"] = 0
        engine = create_async_engine(url, **kwargs)
        if url.startswith("sqlite"):
            from sqlalchemy import event

            @event.listens_for(engine.sync_engine, "connect")
            def _pragmas(dbapi_conn: Any, _record: Any) -> None:
                cur = dbapi_conn.cursor()
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA synchronous=NORMAL")
                cur.close()

        async with engine.begin() as conn:
            await conn.run_sync(metadata.create_all)
        return cls(engine)

    async def close(self) -> None:
        await self.engine.dispose()

    async def create_session(self, session_id: str, state: dict[str, Any]) -> None:
        now = time.time()
        async with self.engine.begin() as conn:
            await conn.execute(
                insert(sessions_table).values(
                    id=session_id, revision=0, state=json.dumps(state), created_at=now, updated_at=now
                )
            )

    async def load_session(self, session_id: str) -> dict[str, Any] | None:
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(select(sessions_table.c.state).where(sessions_table.c.id == session_id))
            ).first()
        return None if row is None else dict(json.loads(row[0]))

    async def load_messages(self, session_id: str) -> list[str]:
        async with self.engine.connect() as conn:
            rows = await conn.execute(
                select(messages_table.c.data)
                .where(messages_table.c.session_id == session_id)
                .order_by(messages_table.c.seq)
            )
            return [r[0] for r in rows]

    async def save(
        self,
        session_id: str,
        state: dict[str, Any],
        *,
        append: list[tuple[int, str]] | None = None,
        replace: list[str] | None = None,
    ) -> None:
        """Write the state and, in the same transaction, append messages `(seq, json)` or replace
        the whole transcript."""
        async with self.engine.begin() as conn:
            await conn.execute(
                update(sessions_table)
                .where(sessions_table.c.id == session_id)
                .values(
                    state=json.dumps(state),
                    revision=sessions_table.c.revision + 1,
                    updated_at=time.time(),
                )
            )
            if replace is not None:
                await conn.execute(delete(messages_table).where(messages_table.c.session_id == session_id))
                append = list(enumerate(replace))
            if append:
                await conn.execute(
                    insert(messages_table),
                    [{"session_id": session_id, "seq": seq, "data": data} for seq, data in append],
                )

    async def list_sessions(self, limit: int = 50) -> list[tuple[str, dict[str, Any], float]]:
        async with self.engine.connect() as conn:
            rows = await conn.execute(
                select(sessions_table.c.id, sessions_table.c.state, sessions_table.c.updated_at)
                .order_by(sessions_table.c.updated_at.desc())
                .limit(limit)
            )
            return [(r[0], json.loads(r[1]), r[2]) for r in rows]
