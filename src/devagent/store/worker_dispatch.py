"""What a dispatcher (`devagent dispatcher`, which starts one pod per session on Kubernetes) asks
of the workers' tables: the sessions of its pool that wait for a sandbox, whether the sessions it
started a pod for still need one, and a token for each such pod that opens the workers' door for
that one session only (a row of the workers' tokens, role "session", kept hashed like the others;
it lives while its session waits for a sandbox or holds one, and is deleted when the dispatcher
lets the session's pod go)."""

from __future__ import annotations

import secrets
import time
from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from devagent.store.tables import worker_leases_table, worker_tokens_table, worker_wants_table
from devagent.store.workers import token_digest

__all__ = ["DispatchQueue", "session_token_name"]


def session_token_name(session_id: str) -> str:
    return f"session:{session_id}"


class DispatchQueue:
    def __init__(self, engine: AsyncEngine, now: Any) -> None:
        self._engine = engine
        self._now = now

    async def waiting(self, pool: str) -> list[dict[str, str]]:
        """The sessions of `pool` whose replica waits for a worker now (a live want, no live lease)."""
        wa, le = worker_wants_table, worker_leases_table
        leased = select(le.c.session_id).where(le.c.session_id == wa.c.session_id, le.c.until >= self._now)
        query = (
            select(wa.c.session_id, wa.c.template)
            .where(wa.c.pool == pool, wa.c.until >= self._now, ~leased.exists())
            .order_by(wa.c.session_id)
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [{"session": r[0], "template": r[1]} for r in rows]

    async def ended(self, pool: str, sessions: list[str]) -> list[str]:
        """Those of `sessions` (the ones the dispatcher started pods for) whose pods are to go:
        the session neither waits for a sandbox of `pool` nor holds one, or its pod's token is
        gone (its worker gave the session back: that pod serves nobody any more)."""
        if not sessions:
            return []
        wa, le, t = worker_wants_table, worker_leases_table, worker_tokens_table
        async with self._engine.connect() as conn:
            wanted = select(wa.c.session_id).where(
                wa.c.session_id.in_(sessions), wa.c.pool == pool, wa.c.until >= self._now
            )
            held = select(le.c.session_id).where(
                le.c.session_id.in_(sessions), le.c.pool == pool, le.c.until >= self._now
            )
            live = {r[0] for r in (await conn.execute(wanted.union(held))).all()}
            tokens = select(t.c.session_id).where(
                t.c.session_id.in_(sessions),
                t.c.role == "session",
                t.c.pool == pool,
                t.c.revoked_at.is_(None),
            )
            minted = {r[0] for r in (await conn.execute(tokens)).all()}
        return [s for s in sessions if s not in live or s not in minted]

    async def mint(self, pool: str, session_id: str) -> str | None:
        """A new token for a one-session worker of `session_id` (replacing any earlier one), if the
        session waits for a sandbox of `pool` now; else None."""
        if session_id not in {w["session"] for w in await self.waiting(pool)}:
            return None
        token = secrets.token_urlsafe(32)
        t = worker_tokens_table
        name = session_token_name(session_id)
        values = {"digest": token_digest(token), "pool": pool, "role": "session", "session_id": session_id}
        async with self._engine.begin() as conn:
            await conn.execute(delete(t).where(t.c.name == name))
            await conn.execute(insert(t).values(name=name, **values, created_at=time.time(), revoked_at=None))
        return token

    async def retire(self, pool: str, session_id: str) -> None:
        """The session's pod is gone: its token with it."""
        t = worker_tokens_table
        mine = (t.c.name == session_token_name(session_id), t.c.role == "session", t.c.pool == pool)
        async with self._engine.begin() as conn:
            await conn.execute(delete(t).where(*mine))
