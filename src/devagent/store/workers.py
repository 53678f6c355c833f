"""Workers' state, shared by every replica: which workers are connected, which session's sandbox
each holds (a lease with an epoch), the calls queued for them, their output and the workspaces'
snapshots. A replica routes a session's call to its worker by writing a row; the worker takes it
through whichever replica it is connected to; its output and result come back as rows. Every
result is checked against the lease it was taken under (fencing): a worker whose lease expired or
moved to another worker writes nothing.

A waiter listens for a bell ("w:<worker>": a call was queued or a session granted to that worker;
"c:<call>": that call's output or end arrived), rung once the transaction that stored the fact is
committed: at once for this process's queues on the same database, and on PostgreSQL in every
replica through a NOTIFY sent inside that transaction (store/notify.py). A notification can be
lost (the listening connection dropped), so a waiter looks at the tables again after FALLBACK
seconds anyway, or every POLL seconds where no notification can reach it (SQLite, one process; or
not listening yet).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import random
import time
import weakref
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, delete, func, insert, select, text, update
from sqlalchemy.engine import Row
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from devagent.store.notify import Listener
from devagent.store.tables import (
    WORKERS_CHANNEL,
    worker_calls_table,
    worker_leases_table,
    worker_output_table,
    worker_snapshots_table,
    worker_tokens_table,
    worker_wants_table,
    workers_table,
)

__all__ = ["CallRow", "Grant", "WorkerQueue", "token_digest"]

OPEN = ("queued", "taken")
POLL = 0.2  # seconds between looks at the tables where nothing wakes a waiter sooner
FALLBACK = 2.0  # ... and where notifications do (one may be lost)
NOTIFY_BYTES = 7000  # a NOTIFY's payload is at most 8000 bytes: more bells go in several
_NOTIFY = text("SELECT pg_notify(:c, :p)")
WANT_SECONDS = 5.0  # a session's want of a sandbox, renewed while its replica waits for a grant
WANT_KEPT = 60.0  # seconds an expired want stays (its replica died, or stopped waiting) till swept
_GRANTS_LOCK = text("SELECT pg_advisory_xact_lock(:k)")


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _grants_key(pool: str) -> int:
    """The advisory lock of a pool's grants: a signed 64-bit number of its name."""
    return int.from_bytes(hashlib.sha256(f"devagent worker grants {pool}".encode()).digest()[:8], signed=True)


@dataclass(frozen=True, slots=True)
class Grant:
    """A session's lease as a replica routes its calls: the worker and the grant's epoch."""

    worker: str
    epoch: int


@dataclass(slots=True)
class CallRow:
    id: int
    session_id: str
    epoch: int
    kind: str
    spec: dict[str, Any]
    data: bytes | None
    state: str
    code: int | None
    result: bytes | None
    error: str | None


class _Bells:
    """In-process wake-ups by key ("w:<worker>", "c:<call>"). A waiter listens before it reads
    the rows, so a ring between its read and its wait is not lost."""

    def __init__(self) -> None:
        self._events: dict[str, set[asyncio.Event]] = {}

    def ring(self, key: str) -> None:
        for ev in self._events.get(key, ()):
            ev.set()

    def ring_all(self, prefix: str) -> None:
        for key, waiters in self._events.items():
            if key.startswith(prefix):
                for ev in waiters:
                    ev.set()

    @contextlib.contextmanager
    def listening(self, key: str) -> Iterator[asyncio.Event]:
        ev = asyncio.Event()
        self._events.setdefault(key, set()).add(ev)
        try:
            yield ev
        finally:
            waiters = self._events.get(key)
            if waiters is not None:
                waiters.discard(ev)
                if not waiters:
                    del self._events[key]


# The bells of each database this process has queues on, by its URL: the server's sandboxes
# open a store of their own on the server's database, and a call they queue wakes the worker's poll
# that the server's store holds; a store of another database wakes nobody there.
_DATABASES_BELLS: weakref.WeakValueDictionary[str, _Bells] = weakref.WeakValueDictionary()


def _bells_of(engine: AsyncEngine) -> _Bells:
    key = engine.url.render_as_string(hide_password=True)
    bells = _DATABASES_BELLS.get(key)
    if bells is None:
        bells = _DATABASES_BELLS[key] = _Bells()
    return bells


def _payloads(keys: list[str]) -> list[str]:
    """The bells (each once, in order) as NOTIFY payloads of at most NOTIFY_BYTES each."""
    out: list[str] = []
    for key in dict.fromkeys(keys):
        if out and len(out[-1]) + 1 + len(key) <= NOTIFY_BYTES:
            out[-1] += "\n" + key
        else:
            out.append(key)
    return out


def _call(row: Row[Any]) -> CallRow:
    m = row._mapping
    return CallRow(
        id=int(m["id"]),
        session_id=m["session_id"],
        epoch=int(m["epoch"]),
        kind=m["kind"],
        spec=json.loads(m["spec"]),
        data=m["data"],
        state=m["state"],
        code=m["code"],
        result=m["result"],
        error=m["error"],
    )


class WorkerQueue:
    """The workers' tables through one engine (`Store.workers()`)."""

    def __init__(self, engine: AsyncEngine, now: Any, listener: Listener | None = None) -> None:
        self._engine = engine
        self._now = now  # the database's clock (seconds since the epoch)
        self._listener = listener  # PostgreSQL: other replicas' bells reach this process
        self._hearing = False
        self._renewals: AsyncEngine | None = None
        self._bells = _bells_of(engine)  # this process's waiters on the rows of this database

    def _renewing(self) -> AsyncEngine:
        """The engine lease renewals use: on PostgreSQL connections of their own, so a renewal
        never waits behind the sessions' work for one of the shared pool's."""
        if self._engine.dialect.name != "postgresql":
            return self._engine
        if self._renewals is None:
            self._renewals = create_async_engine(self._engine.url, pool_size=2, max_overflow=0)
        return self._renewals

    async def close(self) -> None:
        renewals, self._renewals = self._renewals, None
        if renewals is not None:
            await renewals.dispose()

    async def _clock(self, conn: AsyncConnection) -> float:
        return float((await conn.execute(select(self._now))).scalar_one())

    @contextlib.asynccontextmanager
    async def _tx(self, engine: AsyncEngine | None = None) -> AsyncIterator[AsyncConnection]:
        """A transaction whose bells (`_notify`) ring once it is committed: a waiter woken
        before would read the rows as they were."""
        bells: list[str] = []
        async with (engine or self._engine).begin() as conn:
            conn.info["worker_bells"] = bells
            yield conn
            conn.info.pop("worker_bells", None)
            if self._listener is not None:  # other replicas': sent on commit, with the rows
                for payload in _payloads(bells):
                    await conn.execute(_NOTIFY, {"c": WORKERS_CHANNEL, "p": payload})
        for key in bells:
            self._bells.ring(key)  # this process's waiters; another replica's look again within POLL

    async def _notify(self, conn: AsyncConnection, key: str) -> None:
        conn.info.setdefault("worker_bells", []).append(key)

    def listening(self, key: str) -> contextlib.AbstractContextManager[asyncio.Event]:
        """A bell for `key`, listened to from now on (before the rows are read)."""
        return self._bells.listening(key)

    def wake_polls(self) -> None:
        """Every worker's long poll held in this process looks again now (the server stops)."""
        self._bells.ring_all("w:")

    async def doze(self, bell: asyncio.Event, seconds: float) -> None:
        """Until the bell rang (since it was last cleared), `seconds` passed, or it is time to
        look anyway (FALLBACK where notifications arrive, else POLL)."""
        longest = FALLBACK if await self._hears() else POLL
        try:
            await asyncio.wait_for(bell.wait(), min(seconds, longest))
        except TimeoutError:
            pass
        bell.clear()

    async def _hears(self) -> bool:
        """Whether other processes' bells reach this one now (the listener started on first need)."""
        if self._listener is None:
            return False
        if not self._hearing:
            self._hearing = True
            self._listener.on(WORKERS_CHANNEL, self._ring_notified)
            await self._listener.start()
        return self._listener.connected

    def _ring_notified(self, payload: str) -> None:
        """Another process's bells, notified on WORKERS_CHANNEL: rung here too."""
        for key in payload.split("\n"):
            if key:
                self._bells.ring(key)

    # --- tokens kept hashed in the store (`devagent workers token ...`) ---------------------------

    async def add_token(
        self, name: str, token: str, pool: str = "", role: str = "worker", session_id: str = ""
    ) -> None:
        """A token kept hashed; `role` worker, dispatcher, or session (`session_id`'s only)."""
        t = worker_tokens_table
        values = {"digest": token_digest(token), "pool": pool, "role": role, "session_id": session_id}
        async with self._tx() as conn:
            await conn.execute(delete(t).where(t.c.name == name))
            await conn.execute(insert(t).values(name=name, **values, created_at=time.time(), revoked_at=None))

    async def revoke_token(self, name: str) -> bool:
        t = worker_tokens_table
        async with self._tx() as conn:
            done = await conn.execute(
                update(t).where(t.c.name == name, t.c.revoked_at.is_(None)).values(revoked_at=time.time())
            )
            if done.rowcount:  # its workers stop now: their leases are void
                ids = select(workers_table.c.id).where(workers_table.c.token_name == name)
                await conn.execute(update(workers_table).where(workers_table.c.id.in_(ids)).values(gone=1))
                await conn.execute(
                    update(worker_leases_table).where(worker_leases_table.c.worker.in_(ids)).values(until=0.0)
                )
        return bool(done.rowcount)

    async def token_named(self, token: str) -> tuple[str, str, str, str] | None:
        """(name, pool or "", role, session or "") of a live stored token, else None. A session's
        token lives only while its session waits for a sandbox or holds one."""
        t = worker_tokens_table
        async with self._engine.connect() as conn:
            row = (
                await conn.execute(
                    select(t.c.name, t.c.pool, t.c.role, t.c.session_id).where(
                        t.c.digest == token_digest(token), t.c.revoked_at.is_(None)
                    )
                )
            ).first()
            if row is None or (row[2] == "session" and not await self._in_play(conn, row[3])):
                return None
        return (row[0], row[1], row[2], row[3])

    async def _in_play(self, conn: AsyncConnection, session_id: str) -> bool:
        """Whether the session waits for a sandbox (a live want) or holds one (a live lease)."""
        wa, le = worker_wants_table, worker_leases_table
        wanted = select(wa.c.session_id).where(wa.c.session_id == session_id, wa.c.until >= self._now)
        held = select(le.c.session_id).where(le.c.session_id == session_id, le.c.until >= self._now)
        return (await conn.execute(wanted.union_all(held).limit(1))).first() is not None

    async def tokens(self) -> list[dict[str, Any]]:
        t = worker_tokens_table
        async with self._engine.connect() as conn:
            rows = (
                await conn.execute(select(t.c.name, t.c.pool, t.c.role, t.c.created_at, t.c.revoked_at))
            ).all()
        return [dict(r._mapping) for r in rows]

    # --- the worker's side ------------------------------------------------------------------------

    async def hello(
        self,
        worker: str,
        token_name: str,
        pool: str,
        templates: list[str],
        capacity: int,
        backend: str,
        session_id: str = "",
    ) -> None:
        w = workers_table
        values = {
            "token_name": token_name,
            "pool": pool,
            "templates": json.dumps(templates),
            "capacity": capacity,
            "backend": backend,
            "session_id": session_id,
        }
        async with self._tx() as conn:
            now = await self._clock(conn)
            done = await conn.execute(
                update(w)
                .where(w.c.id == worker, w.c.token_name == token_name)
                .values(**values, last_seen=now)
            )
            if not done.rowcount:
                await conn.execute(
                    insert(w).values(id=worker, **values, started_at=now, last_seen=now, gone=0)
                )

    async def worker_of(self, worker: str) -> tuple[str, str, int] | None:
        """(token name, pool, gone) of a registered worker."""
        w = workers_table
        async with self._engine.connect() as conn:
            row = (
                await conn.execute(select(w.c.token_name, w.c.pool, w.c.gone).where(w.c.id == worker))
            ).first()
        return (row[0], row[1], int(row[2])) if row is not None else None

    async def heartbeat(
        self, worker: str, ttl: float, token_name: str | None = None
    ) -> dict[str, int] | None:
        """The worker is alive: its live leases renewed; the sessions it holds now, by epoch
        (a session missing there is no longer its own). With `token_name`: None, nothing
        renewed, unless the worker is registered under that token and not stopped (the check
        and the renewal in one transaction, the first thing a poll does)."""
        le, w = worker_leases_table, workers_table
        async with self._tx(self._renewing()) as conn:
            mine = [w.c.id == worker]
            if token_name is not None:
                mine += [w.c.token_name == token_name, w.c.gone == 0]
            seen = await conn.execute(update(w).where(*mine).values(last_seen=self._now))
            if token_name is not None and not seen.rowcount:
                return None
            live = and_(le.c.worker == worker, le.c.until >= self._now)
            await conn.execute(update(le).where(live).values(until=self._now + ttl))
            rows = (await conn.execute(select(le.c.session_id, le.c.epoch).where(live))).all()
        return {r[0]: int(r[1]) for r in rows}

    async def take(self, worker: str) -> list[CallRow]:
        """The calls queued for `worker` under leases it holds, marked taken (in order)."""
        c, le = worker_calls_table, worker_leases_table
        held = select(le.c.session_id).where(
            le.c.worker == worker,
            le.c.epoch == c.c.epoch,
            le.c.session_id == c.c.session_id,
            le.c.until >= self._now,
        )
        async with self._tx() as conn:
            rows = (
                await conn.execute(
                    select(c)
                    .where(c.c.worker == worker, c.c.state == "queued", held.exists())
                    .order_by(c.c.id)
                )
            ).all()
            taken: list[CallRow] = []
            for row in rows:
                done = await conn.execute(
                    update(c)
                    .where(c.c.id == row.id, c.c.state == "queued")
                    .values(state="taken", updated_at=self._now)
                )
                if done.rowcount:
                    taken.append(_call(row))
        return taken

    async def _held_call(self, conn: AsyncConnection, worker: str, call_id: int) -> Any:
        """The call if `worker` took it under the lease it still holds (fencing), else None."""
        c, le = worker_calls_table, worker_leases_table
        query = (
            select(c.c.id, c.c.session_id, c.c.kind)
            .select_from(c.join(le, le.c.session_id == c.c.session_id))
            .where(
                c.c.id == call_id,
                c.c.worker == worker,
                c.c.state == "taken",
                le.c.worker == worker,
                le.c.epoch == c.c.epoch,
                le.c.until >= self._now,
            )
        )
        return (await conn.execute(query)).first()

    async def output(
        self, worker: str, call_id: int, seq: int, data: bytes, ttl: float | None = None
    ) -> bool:
        """A chunk of a taken call's output; False when the call is not the worker's to write.
        With `ttl`, the session's lease is renewed too (its worker is evidently alive)."""
        async with self._tx() as conn:
            held = await self._held_call(conn, worker, call_id)
            if held is None:
                return False
            await self._renew_one(conn, worker, held.session_id, ttl)
            try:
                async with conn.begin_nested():
                    await conn.execute(
                        insert(worker_output_table).values(call_id=call_id, seq=seq, data=data)
                    )
            except IntegrityError:
                pass  # sent again after a lost answer: already here
            await self._notify(conn, f"c:{call_id}")
        return True

    async def finish(
        self,
        worker: str,
        call_id: int,
        code: int,
        result: bytes | None,
        error: str | None,
        snapshot: bytes | None,
        ttl: float | None = None,
    ) -> bool:
        """A taken call's end, with the workspace as it left it when it changed (one transaction:
        the snapshot is as of the last finished call); False when not the worker's to write.
        With `ttl`, the session's lease is renewed too."""
        c = worker_calls_table
        async with self._tx() as conn:
            held = await self._held_call(conn, worker, call_id)
            if held is None:
                return False
            await self._renew_one(conn, worker, held.session_id, ttl)
            values = {
                "state": "done",
                "code": code,
                "result": result,
                "error": error,
                "updated_at": self._now,
            }
            await conn.execute(update(c).where(c.c.id == call_id, c.c.state == "taken").values(**values))
            if snapshot is not None:
                await self._keep_snapshot(conn, held.session_id, call_id, snapshot)
            await self._notify(conn, f"c:{call_id}")
        return True

    async def _renew_one(
        self, conn: AsyncConnection, worker: str, session_id: str, ttl: float | None
    ) -> None:
        """The worker's live lease of the session (just checked in this transaction) runs `ttl`
        seconds from now."""
        if ttl is None:
            return
        le = worker_leases_table
        await conn.execute(
            update(le)
            .where(le.c.session_id == session_id, le.c.worker == worker, le.c.until >= self._now)
            .values(until=self._now + ttl)
        )

    async def _keep_snapshot(self, conn: AsyncConnection, session_id: str, call_id: int, data: bytes) -> None:
        s = worker_snapshots_table
        values = {"call_id": call_id, "size": len(data), "data": data, "updated_at": self._now}
        done = await conn.execute(update(s).where(s.c.session_id == session_id).values(**values))
        if not done.rowcount:
            await conn.execute(insert(s).values(session_id=session_id, **values))

    async def snapshot_for(self, worker: str, session_id: str) -> tuple[bool, bytes | None]:
        """(whether `worker` holds the session, its last snapshot or None)."""
        le, s = worker_leases_table, worker_snapshots_table
        async with self._engine.connect() as conn:
            holds = (
                await conn.execute(
                    select(le.c.epoch).where(
                        le.c.session_id == session_id, le.c.worker == worker, le.c.until >= self._now
                    )
                )
            ).first()
            if holds is None:
                return False, None
            row = (await conn.execute(select(s.c.data).where(s.c.session_id == session_id))).first()
        return True, (row[0] if row is not None else None)

    async def seed_snapshot(self, session_id: str, data: bytes) -> bool:
        """The workspace a session starts from (its clone), kept as its snapshot before any
        worker is granted it, so the first worker restores it; False once a grant was made (a
        worker may already hold the workspace: it is not replaced under it)."""
        le = worker_leases_table
        async with self._tx() as conn:
            granted = (await conn.execute(select(le.c.epoch).where(le.c.session_id == session_id))).first()
            if granted is not None:
                return False
            await self._keep_snapshot(conn, session_id, 0, data)
        return True

    async def stored_snapshot(self, session_id: str) -> bytes | None:
        """The session's last snapshot (the workspace as of its last finished call), or None."""
        s = worker_snapshots_table
        async with self._engine.connect() as conn:
            row = (await conn.execute(select(s.c.data).where(s.c.session_id == session_id))).first()
        return bytes(row[0]) if row is not None else None

    async def give_back(self, worker: str, session_id: str) -> None:
        """The worker lets the session go: its open calls are interrupted, the lease ends. A
        one-session worker (a dispatcher's pod) is done for good: it is stopped and its token
        deleted, so the session's next call waits for a new pod."""
        le = worker_leases_table
        async with self._tx() as conn:
            await self._retire_one_session_worker(conn, worker)
            row = (
                await conn.execute(
                    select(le.c.epoch).where(le.c.session_id == session_id, le.c.worker == worker)
                )
            ).first()
            if row is None:
                return
            await conn.execute(update(le).where(le.c.session_id == session_id).values(until=0.0))
            await self._end_open(conn, session_id, int(row[0]))

    async def _retire_one_session_worker(self, conn: AsyncConnection, worker: str) -> None:
        w, t = workers_table, worker_tokens_table
        row = (await conn.execute(select(w.c.token_name, w.c.session_id).where(w.c.id == worker))).first()
        if row is None or not row[1]:
            return
        await conn.execute(update(w).where(w.c.id == worker).values(gone=1))
        await conn.execute(delete(t).where(t.c.name == row[0], t.c.role == "session"))

    async def leave(self, worker: str) -> None:
        """The worker stops: every lease it holds ends, its row says gone."""
        le = worker_leases_table
        async with self._tx() as conn:
            rows = (
                await conn.execute(select(le.c.session_id, le.c.epoch).where(le.c.worker == worker))
            ).all()
            await conn.execute(update(le).where(le.c.worker == worker).values(until=0.0))
            for session_id, epoch in rows:
                await self._end_open(conn, session_id, int(epoch))
            await conn.execute(update(workers_table).where(workers_table.c.id == worker).values(gone=1))

    async def _end_open(self, conn: AsyncConnection, session_id: str, epoch: int) -> None:
        """The open calls of an ended grant: a taken one interrupted (it may have run: never again),
        a queued one cancelled (it never ran)."""
        c = worker_calls_table
        mine = and_(c.c.session_id == session_id, c.c.epoch <= epoch)
        ids = [r[0] for r in (await conn.execute(select(c.c.id).where(mine, c.c.state.in_(OPEN)))).all()]
        await conn.execute(
            update(c).where(mine, c.c.state == "taken").values(state="interrupted", updated_at=self._now)
        )
        await conn.execute(
            update(c).where(mine, c.c.state == "queued").values(state="cancelled", updated_at=self._now)
        )
        for call_id in ids:
            await self._notify(conn, f"c:{call_id}")

    # --- the replica's side -----------------------------------------------------------------------

    async def grant(self, session_id: str, pool: str, template: str, ttl: float) -> Grant | None:
        """The session's live lease, else a new one on the least loaded live worker of `pool`
        that has `template` and room (its epoch one past the last, the last grant's open calls
        ended); None when no worker can take it now."""
        le = worker_leases_table
        async with self._tx() as conn:
            row = (
                await conn.execute(
                    select(le.c.worker, le.c.epoch, le.c.until >= self._now).where(
                        le.c.session_id == session_id
                    )
                )
            ).first()
            if row is not None and row[2]:
                return Grant(row[0], int(row[1]))
            await self._one_grant_at_a_time(conn, pool)
            worker = await self._pick(conn, session_id, pool, template, ttl)
            if worker is None:
                await self._want(conn, session_id, pool, template)
                return None
            await conn.execute(
                delete(worker_wants_table).where(worker_wants_table.c.session_id == session_id)
            )
            epoch = int(row[1]) + 1 if row is not None else 1
            values = {
                "worker": worker,
                "pool": pool,
                "template": template,
                "epoch": epoch,
                "until": self._now + ttl,
            }
            if row is None:
                try:
                    async with conn.begin_nested():
                        await conn.execute(insert(le).values(session_id=session_id, **values))
                except IntegrityError:
                    return None  # another replica granted it just now: asked again
            else:
                done = await conn.execute(
                    update(le).where(le.c.session_id == session_id, le.c.epoch == row[1]).values(**values)
                )
                if not done.rowcount:
                    return None
                await self._end_open(conn, session_id, int(row[1]))
            await self._notify(conn, f"w:{worker}")
        return Grant(worker, epoch)

    async def _one_grant_at_a_time(self, conn: AsyncConnection, pool: str) -> None:
        """PostgreSQL: the pool's grants made one after another, each holding the pool's lock until
        it commits. Two replicas counting a worker's leases at once (READ COMMITTED) would both
        see its last free slot and both take it; the second now counts after the first's commit.
        SQLite: one process, whose one connection makes its transactions one after another."""
        if conn.dialect.name == "postgresql":
            await conn.execute(_GRANTS_LOCK, {"k": _grants_key(pool)})

    async def _pick(
        self, conn: AsyncConnection, session_id: str, pool: str, template: str, ttl: float
    ) -> str | None:
        """The least loaded live worker of the pool with room and the template, a random one of
        those equally loaded (grants made at the same moment spread); a worker started for this
        session (by a dispatcher) first, one started for another session never."""
        w, le = workers_table, worker_leases_table
        load = select(func.count()).where(le.c.worker == w.c.id, le.c.until >= self._now).scalar_subquery()
        rows = (
            await conn.execute(
                select(w.c.id, w.c.templates, w.c.capacity, load, w.c.session_id).where(
                    w.c.pool == pool,
                    w.c.gone == 0,
                    w.c.last_seen >= self._now - ttl,
                    w.c.session_id.in_(("", session_id)),
                )
            )
        ).all()
        free = [
            (not bound, held / max(capacity, 1), held, random.random(), wid)
            for wid, templates, capacity, held, bound in rows
            if held < capacity and (not template or template in json.loads(templates))
        ]
        return min(free)[4] if free else None

    async def _want(self, conn: AsyncConnection, session_id: str, pool: str, template: str) -> None:
        """The session waits for a worker: said (or said again) for a dispatcher to see."""
        wa = worker_wants_table
        values = {"pool": pool, "template": template, "until": self._now + WANT_SECONDS}
        done = await conn.execute(update(wa).where(wa.c.session_id == session_id).values(**values))
        if not done.rowcount:
            await self._sweep_wants(conn)
            try:
                async with conn.begin_nested():
                    await conn.execute(insert(wa).values(session_id=session_id, **values))
            except IntegrityError:
                pass  # another replica said it just now

    async def _sweep_wants(self, conn: AsyncConnection) -> None:
        """The wants that expired WANT_KEPT seconds ago deleted (a dead replica's stay otherwise),
        as a session starts to wait. A want another transaction holds is left (PostgreSQL): it is
        being renewed or deleted, and two sweeps never wait for each other."""
        wa = worker_wants_table
        stale = select(wa.c.session_id).where(wa.c.until < self._now - WANT_KEPT)
        await conn.execute(delete(wa).where(wa.c.session_id.in_(stale.with_for_update(skip_locked=True))))

    async def lease_of(self, session_id: str) -> Grant | None:
        """The session's live lease, without granting one."""
        le = worker_leases_table
        async with self._engine.connect() as conn:
            row = (
                await conn.execute(
                    select(le.c.worker, le.c.epoch).where(
                        le.c.session_id == session_id, le.c.until >= self._now
                    )
                )
            ).first()
        return Grant(row[0], int(row[1])) if row is not None else None

    async def held(self, session_id: str, grant: Grant) -> bool:
        """Whether the grant is still the session's live lease."""
        le = worker_leases_table
        async with self._engine.connect() as conn:
            row = (
                await conn.execute(
                    select(le.c.session_id).where(
                        le.c.session_id == session_id,
                        le.c.worker == grant.worker,
                        le.c.epoch == grant.epoch,
                        le.c.until >= self._now,
                    )
                )
            ).first()
        return row is not None

    async def submit(
        self,
        session_id: str,
        grant: Grant,
        kind: str,
        spec: dict[str, Any],
        data: bytes | None = None,
        watch: float | None = None,
    ) -> int:
        """Queues a call for the grant's worker; its id. `watch`: seconds the caller follows it
        before it must say so again (`watch`), else its worker kills it."""
        c = worker_calls_table
        async with self._tx() as conn:
            done = await conn.execute(
                insert(c).values(
                    session_id=session_id,
                    epoch=grant.epoch,
                    worker=grant.worker,
                    kind=kind,
                    spec=json.dumps(spec),
                    data=data,
                    state="queued",
                    created_at=self._now,
                    updated_at=self._now,
                    watched_until=self._now + watch if watch is not None else None,
                )
            )
            key = done.inserted_primary_key
            assert key is not None
            call_id = int(key[0])
            await self._notify(conn, f"w:{grant.worker}")
        return call_id

    async def watch(self, call_id: int, seconds: float) -> None:
        """The caller still follows the call (its relay runs)."""
        c = worker_calls_table
        async with self._tx() as conn:
            await conn.execute(update(c).where(c.c.id == call_id).values(watched_until=self._now + seconds))

    async def orphans(self, worker: str) -> list[int]:
        """The worker's running commands that no replica follows any more."""
        c = worker_calls_table
        async with self._engine.connect() as conn:
            rows = (
                await conn.execute(
                    select(c.c.id).where(
                        c.c.worker == worker,
                        c.c.state == "taken",
                        c.c.watched_until.is_not(None),
                        c.c.watched_until < self._now,
                    )
                )
            ).all()
        return [int(r[0]) for r in rows]

    async def call(self, call_id: int) -> CallRow | None:
        c = worker_calls_table
        async with self._engine.connect() as conn:
            row = (await conn.execute(select(c).where(c.c.id == call_id))).first()
        return _call(row) if row is not None else None

    async def progress(self, call_id: int, seq: int) -> tuple[CallRow | None, list[tuple[int, bytes]]]:
        """The call and its output after `seq`, through one connection (the output read after
        the call: output stored before its end is in the list when the call is seen ended)."""
        c, o = worker_calls_table, worker_output_table
        async with self._engine.connect() as conn:
            row = (await conn.execute(select(c).where(c.c.id == call_id))).first()
            rows = (
                await conn.execute(
                    select(o.c.seq, o.c.data).where(o.c.call_id == call_id, o.c.seq > seq).order_by(o.c.seq)
                )
            ).all()
        return (_call(row) if row is not None else None), [(int(r[0]), bytes(r[1])) for r in rows]

    async def end_if_lost(self, session_id: str, grant: Grant) -> bool:
        """Where the grant's lease expired (its worker is gone or lost the server): its open calls
        ended (interrupted or cancelled); whether it had expired."""
        if await self.held(session_id, grant):
            return False
        async with self._tx() as conn:
            await self._end_open(conn, session_id, grant.epoch)
        return True

    async def forget(self, session_id: str) -> None:
        """The session is gone for good: its lease, calls, output and snapshot too."""
        c = worker_calls_table
        async with self._tx() as conn:
            ids = select(c.c.id).where(c.c.session_id == session_id)
            await conn.execute(delete(worker_output_table).where(worker_output_table.c.call_id.in_(ids)))
            await conn.execute(delete(c).where(c.c.session_id == session_id))
            await conn.execute(
                delete(worker_snapshots_table).where(worker_snapshots_table.c.session_id == session_id)
            )
            await conn.execute(
                delete(worker_leases_table).where(worker_leases_table.c.session_id == session_id)
            )
            await conn.execute(
                delete(worker_wants_table).where(worker_wants_table.c.session_id == session_id)
            )

    async def prune(self, call_id: int) -> None:
        """A finished call's output rows, read by its relay: no longer needed."""
        async with self._tx() as conn:
            await conn.execute(delete(worker_output_table).where(worker_output_table.c.call_id == call_id))

    async def overview(self, ttl: float) -> list[dict[str, Any]]:
        """Every worker not gone: alive (seen within `ttl`), sessions held, calls running."""
        w, le, c = workers_table, worker_leases_table, worker_calls_table
        sessions = (
            select(func.count()).where(le.c.worker == w.c.id, le.c.until >= self._now).scalar_subquery()
        )
        running = select(func.count()).where(c.c.worker == w.c.id, c.c.state == "taken").scalar_subquery()
        query = (
            select(
                w.c.id,
                w.c.token_name,
                w.c.pool,
                w.c.capacity,
                w.c.backend,
                w.c.templates,
                w.c.last_seen,
                (w.c.last_seen >= self._now - ttl).label("alive"),
                sessions.label("sessions"),
                running.label("running"),
            )
            .where(w.c.gone == 0)
            .order_by(w.c.started_at)
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [{**r._mapping, "alive": bool(r.alive), "templates": json.loads(r.templates)} for r in rows]
