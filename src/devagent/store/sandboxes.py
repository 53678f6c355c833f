"""What the container sandbox's sweep (`devagent.agent.sandbox.sweep`) keeps in devagent's own
database: the installation's id, and the sessions whose workspace volume it removed.

The installation's id is made once per database by the first process that asks and read by every
other: replicas on one database share it, a server on another database has its own. The container
backend labels what it creates with it, so two servers on one engine never remove each other's
containers. A removed workspace is remembered so that the session's next command is told its files
are gone rather than given an empty workspace.

Both tables are this module's own (not `db.metadata`): created on first use, once per engine, as
the checkpoints' table is. The sessions' last activity is read from the sessions table itself.
"""

from __future__ import annotations

import asyncio
import uuid
import weakref
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import Column, Float, MetaData, String, Table, delete, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from devagent.store.db import Store
from devagent.store.leases import owner_is_dead
from devagent.store.tables import sessions_table

_metadata = MetaData()
installation_table = Table(
    "devagent_installation",
    _metadata,
    Column("key", String(32), primary_key=True),
    Column("value", String(64), nullable=False),
)
removed_table = Table(
    "devagent_sandbox_removed",
    _metadata,
    Column("session_id", String(64), primary_key=True),
    Column("removed_at", Float, nullable=False),  # seconds since the epoch, the sweeper's clock
    Column("idle_seconds", Float, nullable=False),  # the keep period that had passed
)
INSTALLATION_KEY = "installation"
CHUNK = 500  # session ids per query: well under any database's limit on bound parameters

_created: weakref.WeakSet[AsyncEngine] = weakref.WeakSet()
_locks: weakref.WeakKeyDictionary[AsyncEngine, asyncio.Lock] = weakref.WeakKeyDictionary()


@dataclass(frozen=True, slots=True)
class Activity:
    """A stored session as the sweep judges it: when it was last saved (the writer's clock), and
    whether a live process holds its lease (a turn of it runs somewhere)."""

    last_active: float
    busy: bool


@dataclass(frozen=True, slots=True)
class Removed:
    at: float
    idle_seconds: float


class SandboxRecords:
    """The sweep's reads and writes of one store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def _engine(self) -> AsyncEngine:
        engine = self.store.engine
        if engine in _created:
            return engine
        async with _locks.setdefault(engine, asyncio.Lock()):
            if engine not in _created:
                async with self.store.schema_lock(), engine.begin() as conn:
                    await conn.run_sync(_metadata.create_all)
                _created.add(engine)
        return engine

    async def installation(self) -> str:
        """The database's installation id, made now if no process made it before (two processes
        making it at once: the second's insert fails and it reads the first's)."""
        engine = await self._engine()
        t = installation_table
        query = select(t.c.value).where(t.c.key == INSTALLATION_KEY)
        async with engine.connect() as conn:
            found = (await conn.execute(query)).scalar()
        if found:
            return str(found)
        try:
            async with engine.begin() as conn:
                await conn.execute(insert(t).values(key=INSTALLATION_KEY, value=uuid.uuid4().hex))
        except IntegrityError:
            pass
        async with engine.connect() as conn:
            return str((await conn.execute(query)).scalar_one())

    async def activity(self, session_ids: Iterable[str]) -> dict[str, Activity]:
        """The stored sessions among `session_ids`; one missing from the answer is not stored."""
        t = sessions_table
        ids = sorted(set(session_ids))
        out: dict[str, Activity] = {}
        async with self.store.engine.connect() as conn:
            for at in range(0, len(ids), CHUNK):
                rows = await conn.execute(
                    select(t.c.id, t.c.updated_at, t.c.lease_owner, t.c.lease_until >= self.store._now).where(
                        t.c.id.in_(ids[at : at + CHUNK])
                    )
                )
                for sid, updated, owner, unexpired in rows:
                    busy = bool(owner) and bool(unexpired) and not owner_is_dead(owner)
                    out[str(sid)] = Activity(float(updated), busy)
        return out

    async def session_ids(self) -> list[str]:
        """Every stored session's id (for container names that only a hash of the id names)."""
        async with self.store.engine.connect() as conn:
            return [str(r[0]) for r in await conn.execute(select(sessions_table.c.id))]

    async def mark_removed(self, session_id: str, at: float, idle_seconds: float) -> None:
        engine = await self._engine()
        t = removed_table
        async with engine.begin() as conn:
            await conn.execute(delete(t).where(t.c.session_id == session_id))
            await conn.execute(
                insert(t).values(session_id=session_id, removed_at=at, idle_seconds=idle_seconds)
            )

    async def removed(self, session_id: str) -> Removed | None:
        """When the sweep removed the session's workspace volume, or None if it never did."""
        engine = await self._engine()
        t = removed_table
        async with engine.connect() as conn:
            row = (
                await conn.execute(
                    select(t.c.removed_at, t.c.idle_seconds).where(t.c.session_id == session_id)
                )
            ).first()
        return None if row is None else Removed(float(row[0]), float(row[1]))
