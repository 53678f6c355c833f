"""Turn slots: how many turns a caller has running at once, on every replica (budgets).

A caller with a limit of N turns has N numbered slots; a turn takes one before it starts (or goes
on after a pause) and gives it back when it ends or pauses. Taking a slot is an insert of the row
`(identity, slot number)`, whose primary key makes it atomic on SQLite and PostgreSQL alike: of
two replicas inserting the same number, one gets it and the other tries the next. A slot holds
until `until`, renewed with the session's lease while the turn runs, so the slots of a process
that died are free once they expire (at once when it ran on this host, as for leases).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, delete, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from devagent.store.leases import owner_is_dead
from devagent.store.tables import turn_slots_table

__all__ = ["TurnSlots"]


class TurnSlots:
    def __init__(self, engine: AsyncEngine, now: Any, owner: str) -> None:
        self._engine = engine
        self._now = now  # the database's clock (seconds since the epoch)
        self._owner = owner  # this store's lease owner name
        if engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            self._insert: Any = pg_insert(turn_slots_table).on_conflict_do_nothing()
        else:
            from sqlalchemy.dialects.sqlite import insert as sqlite_insert

            self._insert = sqlite_insert(turn_slots_table).on_conflict_do_nothing()

    async def take(self, identity: str, session_id: str, limit: int, ttl: float) -> bool:
        """Take one of the caller's `limit` slots for the session's turn (or renew the one it
        holds already). False: all are held by live turns."""
        t = turn_slots_table
        async with self._engine.begin() as conn:
            rows = (
                await conn.execute(
                    select(t.c.slot, t.c.session_id, t.c.owner, t.c.until >= self._now).where(
                        t.c.identity == identity
                    )
                )
            ).all()
            held: set[int] = set()
            for slot, sid, owner, live in rows:
                if not live or owner_is_dead(owner):
                    await self._free(conn, identity, slot, owner)
                elif sid == session_id:
                    await self._renew(conn, and_(t.c.identity == identity, t.c.slot == slot), ttl)
                    return True
                else:
                    held.add(slot)
            for slot in range(limit):
                if slot in held:
                    continue
                res = await conn.execute(
                    self._insert.values(
                        identity=identity,
                        slot=slot,
                        session_id=session_id,
                        owner=self._owner,
                        until=self._now + ttl,
                    )
                )
                if res.rowcount == 1:
                    return True
        return False

    async def renew(self, session_id: str, ttl: float) -> None:
        async with self._engine.begin() as conn:
            await self._renew(conn, self._mine(session_id), ttl)

    async def release(self, session_id: str) -> None:
        async with self._engine.begin() as conn:
            await conn.execute(delete(turn_slots_table).where(self._mine(session_id)))

    async def held(self, identity: str) -> int:
        """How many of the caller's slots live turns hold now."""
        t = turn_slots_table
        async with self._engine.connect() as conn:
            rows = (
                await conn.execute(select(t.c.owner).where(t.c.identity == identity, t.c.until >= self._now))
            ).all()
        return sum(1 for (owner,) in rows if not owner_is_dead(owner))

    def _mine(self, session_id: str) -> Any:
        t = turn_slots_table
        return and_(t.c.session_id == session_id, t.c.owner == self._owner)

    async def _renew(self, conn: AsyncConnection, where: Any, ttl: float) -> None:
        t = turn_slots_table
        await conn.execute(update(t).where(where).values(owner=self._owner, until=self._now + ttl))

    @staticmethod
    async def _free(conn: AsyncConnection, identity: str, slot: int, owner: str) -> None:
        """An expired slot, or one of a process that died: free (if it is still that one's)."""
        t = turn_slots_table
        await conn.execute(
            delete(t).where(and_(t.c.identity == identity, t.c.slot == slot, t.c.owner == owner))
        )
