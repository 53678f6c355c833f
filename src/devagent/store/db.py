"""Durable storage of sessions through SQLAlchemy async: a SQLite file by default, PostgreSQL by URL.

Two tables:
- `devagent_sessions`: one row per session; `state` is the JSON of `SessionState` (settings,
  grants, pending calls, usage…); `revision` counts saves; `lease_owner`/`lease_until` say which
  process may change the session now, and until when; `cancel_requested` asks that process to stop
  the running turn.
- `devagent_messages`: the transcript, one row per model message (pydantic-ai's JSON form), in
  `seq` order. A step appends rows; `/clear` and `/compact` replace them.

A step's state and its new messages are written in one transaction, so a crash leaves either the
step before or the step after, never half of one.

One writer per session, across processes: a process changes a session only while it holds the
session's lease (`claim`), and every write is a compare-and-set on the revision it read
(`save(..., expected=...)`): a process whose view is stale, or that lost its lease, gets
`StaleSession` and writes nothing. A lease expires `ttl` seconds after its last renewal (by the
database's clock, so replicas' clocks need not agree); the lease of a process found dead on this
host is free at once, so a restarted single server does not wait for it.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from sqlalchemy import (
    and_,
    bindparam,
    delete,
    insert,
    literal_column,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from devagent.patches.aiosqlite import one_hop_cursors
from devagent.store.direct import DirectSQLite, WriteConnection, prepare_connection
from devagent.store.leases import (
    Holder,
    Lease,
    SessionExists,
    SessionRow,
    StaleSession,
    new_owner,
    owner_is_dead,
    retire,
)
from devagent.store.notify import Listener
from devagent.store.slots import TurnSlots
from devagent.store.tables import (
    ADDED_COLUMNS,
    CANCEL_CHANNEL,
    EVENTS_CHANNEL,
    USAGE_KINDS,
    messages_table,
    metadata,
    sessions_table,
    task_events_table,
    usage_table,
)
from devagent.store.worker_dispatch import DispatchQueue
from devagent.store.workers import WorkerQueue

__all__ = ["Holder", "Lease", "SessionRow", "StaleSession", "Store"]

_SCHEMA_LOCK = 7361024  # the advisory lock taken while tables are created


def normalise_url(url: str) -> str:
    """Accept plain `sqlite:///` and `postgresql://` URLs and pick the async drivers."""
    if url.startswith("sqlite:"):
        return "sqlite+aiosqlite:" + url[len("sqlite:") :]
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url[len(prefix) :]
    return url


def _private_files(database: str) -> None:
    """Private state: a SQLite database file and its -wal/-shm files are 0600
    (SQLite gives the latter the database's mode). An existing database is only chmodded."""
    if database == ":memory:" or database.startswith("file:"):
        return
    with contextlib.suppress(OSError):  # exists already; or SQLite says what is wrong
        os.close(os.open(database, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    for path in (database, f"{database}-wal", f"{database}-shm"):
        with contextlib.suppress(OSError):
            if stat.S_IMODE(os.stat(path).st_mode) != 0o600:
                os.chmod(path, 0o600)


class Store:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.is_sqlite = engine.dialect.name == "sqlite"
        self._listener: Listener | None = None
        # This store's name as a lease owner: a session changed through it is leased to it.
        self.owner = new_owner()
        # The database's clock in seconds since the epoch: leases are compared with one clock.
        self._now: Any = literal_column(
            "((julianday('now') - 2440587.5) * 86400.0)"
            if self.is_sqlite
            else "extract(epoch from clock_timestamp())"
        )
        self._stmts = _Statements(self._now)
        # SQLite: the writes of a turn skip SQLAlchemy's execution layer (store/direct.py)
        self._direct = DirectSQLite(engine) if self.is_sqlite else None
        self._usage_upsert: Any = None
        self._slots: TurnSlots | None = None
        self._workers: WorkerQueue | None = None

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
                _private_files(database)  # before SQLite creates it with 0644
        engine = create_async_engine(url, **kwargs)
        if url.startswith("sqlite"):
            from sqlalchemy import event

            @event.listens_for(engine.sync_engine, "connect")
            def _pragmas(dbapi_conn: Any, _record: Any) -> None:
                # a statement is one trip to aiosqlite's thread, not three or four
                one_hop_cursors(dbapi_conn._connection)
                cur = dbapi_conn.cursor()
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA synchronous=NORMAL")
                cur.close()
                prepare_connection(dbapi_conn._connection._conn)

        async with engine.begin() as conn:
            if engine.dialect.name == "postgresql":
                # Replicas starting together: one creates the schema, the others wait for it.
                await conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _SCHEMA_LOCK})
            await conn.run_sync(metadata.create_all)
            await conn.run_sync(_add_missing_columns)
        if url.startswith("sqlite") and engine.url.database:
            _private_files(engine.url.database)  # the -wal and -shm files now exist
        return cls(engine)

    @contextlib.asynccontextmanager
    async def schema_lock(self) -> AsyncIterator[None]:
        """Held while tables are created: on PostgreSQL an advisory lock, so replicas starting
        together on an empty database do not race in CREATE TABLE (SQLite: one process)."""
        if self.is_sqlite:
            yield
            return
        async with self.engine.connect() as conn:
            await conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _SCHEMA_LOCK})
            await conn.commit()
            try:
                yield
            finally:
                await conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _SCHEMA_LOCK})
                await conn.commit()

    def begin(self) -> contextlib.AbstractAsyncContextManager[WriteConnection]:
        """A write transaction of this store's tables: committed when the block ends, rolled back
        when it raises. On SQLite it runs directly on the pooled connection (store/direct.py)."""
        if self._direct is not None:
            return self._direct.begin()
        return self.engine.begin()

    async def close(self) -> None:
        retire(self.owner)
        if self._listener is not None:
            await self._listener.close()
        if self._workers is not None:
            await self._workers.close()
        await self.engine.dispose()

    async def create_session(
        self, session_id: str, state: dict[str, Any], *, lease_ttl: float | None = None
    ) -> None:
        """Insert a new session; `SessionExists` if one with this id is stored already. With
        `lease_ttl` the row is inserted holding this store's lease for that long, as `claim`
        would leave it: a turn about to start on a new session needs no second write for it."""
        params: dict[str, Any] = {
            "b_id": session_id,
            "b_state": json.dumps(state),
            "b_now": time.time(),
            "b_identity": state.get("identity") or "",
        }
        stmt = self._stmts.create
        if lease_ttl is not None:
            stmt = self._stmts.create_leased
            params.update(b_owner=self.owner, b_ttl=lease_ttl)
        try:
            async with self.begin() as conn:
                await conn.execute(stmt, params)
        except IntegrityError:
            raise SessionExists(session_id) from None

    async def load_session(
        self, session_id: str, known_revision: int | None = None
    ) -> tuple[int, dict[str, Any] | None] | None:
        """The stored (revision, state) of a session; the state is None when the stored revision
        is `known_revision` (the caller has it already: no JSON to parse)."""
        t = sessions_table
        async with self.engine.connect() as conn:
            row = (await conn.execute(select(t.c.revision, t.c.state).where(t.c.id == session_id))).first()
        if row is None:
            return None
        revision = int(row[0])
        if revision == known_revision:
            return revision, None
        return revision, dict(json.loads(row[1]))

    async def read_session(self, session_id: str) -> SessionRow | None:
        """The stored session with who holds its lease: what a reader (tasks/get) derives from."""
        t = sessions_table
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    select(
                        t.c.revision, t.c.state, t.c.lease_owner, t.c.lease_until >= self._now, t.c.updated_at
                    ).where(t.c.id == session_id)
                )
            ).first()
        if row is None:
            return None
        owner = row[2]
        live = bool(owner) and bool(row[3]) and not owner_is_dead(owner)
        return SessionRow(int(row[0]), dict(json.loads(row[1])), owner, live, float(row[4]))

    async def load_messages(self, session_id: str) -> list[str]:
        async with self.engine.connect() as conn:
            rows = await conn.execute(
                select(messages_table.c.data)
                .where(messages_table.c.session_id == session_id)
                .order_by(messages_table.c.seq)
            )
            return [r[0] for r in rows]

    async def claim(self, session_id: str, owner: str, ttl: float, known_revision: int) -> Lease | Holder:
        """Take (or renew) the session's lease for `owner` unless another live process holds it.
        Returns the `Lease` (with the stored state when `known_revision` is not the stored one), or
        the `Holder` that has it. A lease whose owner died on this host is taken at once."""
        stmts, sid = self._stmts, {"b_id": session_id}
        for _ in range(2):
            async with self.begin() as conn:
                res = await conn.execute(stmts.claim, {"b_id": session_id, "b_owner": owner, "b_ttl": ttl})
                got = res.first()
                if got is not None:
                    revision = int(got[0])
                    state = None
                    if revision != known_revision:
                        raw = (await conn.execute(stmts.state, sid)).scalar_one()
                        state = dict(json.loads(raw))
                    return Lease(revision, state)
                held = (await conn.execute(stmts.holder, sid)).first()
                if held is None:
                    raise KeyError(session_id)
                holder = Holder(str(held[0]), float(held[1] or 0.0))
                if not owner_is_dead(holder.owner):
                    return holder
                # Its process is gone: free the lease (only if it is still that one's) and retry.
                await conn.execute(stmts.free_dead, {"b_id": session_id, "b_owner": holder.owner})
        return holder

    async def renew(self, session_id: str, owner: str, ttl: float) -> bool | None:
        """Extend `owner`'s lease. None: the lease is not `owner`'s any more; else whether a
        cancel was requested for the running turn."""
        async with self.begin() as conn:
            res = await conn.execute(self._stmts.renew, {"b_id": session_id, "b_owner": owner, "b_ttl": ttl})
            row = res.first()
        return None if row is None else bool(row[0])

    async def release(self, session_id: str, owner: str) -> None:
        async with self.begin() as conn:
            await conn.execute(self._stmts.release, {"b_id": session_id, "b_owner": owner})

    async def request_cancel(self, session_id: str) -> str | None:
        """Ask the process running the session's turn to stop it. Returns the lease holder, or
        None when no process holds the lease (no turn runs)."""
        t = sessions_table
        async with self.engine.begin() as conn:
            res = await conn.execute(
                update(t)
                .where(and_(t.c.id == session_id, t.c.lease_owner.is_not(None)))
                .values(cancel_requested=1)
                .returning(t.c.lease_owner)
            )
            row = res.first()
            if row is not None and not self.is_sqlite:
                await self._notify(conn, CANCEL_CHANNEL, session_id)
        return None if row is None else str(row[0])

    @staticmethod
    async def _notify(conn: Any, channel: str, payload: str) -> None:
        await conn.execute(_NOTIFY, {"c": channel, "p": payload})

    # --- the live events of A2A tasks (fan-out between replicas) ---------------------------------

    async def append_task_events(self, rows: list[tuple[str, int, bytes]]) -> None:
        """Append `(task_id, kind, data)` rows in order, in one transaction; a snapshot row (kind
        1) first removes the task's older rows. Listeners are notified once per task.

        On PostgreSQL the transaction commits without waiting for its WAL fsync
        (`synchronous_commit` off for it alone): the log is a live feed for the replicas that
        follow a turn, written behind the stream (a write per event when the stream is idle,
        most of a turn's commits), not a record anything is recovered from; a crash of the
        database loses at most its last fraction of a second, never its consistency, and the
        turns it fed fail anyway (their session saves do wait for the fsync)."""
        t = task_events_table
        now = time.time()
        async with self.engine.begin() as conn:
            for task_id in {r[0] for r in rows if r[1] == 1}:
                await conn.execute(delete(t).where(t.c.task_id == task_id))
            await conn.execute(
                insert(t), [{"task_id": r[0], "kind": r[1], "data": r[2], "created_at": now} for r in rows]
            )
            if not self.is_sqlite:
                for i, task_id in enumerate(dict.fromkeys(r[0] for r in rows)):
                    stmt = _NOTIFY_NO_FSYNC if i == 0 else _NOTIFY
                    await conn.execute(stmt, {"c": EVENTS_CHANNEL, "p": task_id})

    async def read_task_events(self, task_id: str, after: int = 0) -> list[tuple[int, int, bytes]]:
        """The task's rows `(id, kind, data)` after `after`, in order."""
        t = task_events_table
        async with self.engine.connect() as conn:
            rows = await conn.execute(
                select(t.c.id, t.c.kind, t.c.data)
                .where(and_(t.c.task_id == task_id, t.c.id > after))
                .order_by(t.c.id)
            )
            return [(int(r[0]), int(r[1]), bytes(r[2])) for r in rows]

    async def prune_task_events(self, older_than: float) -> None:
        t = task_events_table
        async with self.engine.begin() as conn:
            await conn.execute(delete(t).where(t.c.created_at < time.time() - older_than))

    def listener(self) -> Listener:
        """This process's connection listening for notifications (PostgreSQL only)."""
        if self._listener is None:
            self._listener = Listener(self.engine.url)
        return self._listener

    async def save(
        self,
        session_id: str,
        state: dict[str, Any],
        *,
        expected: int,
        owner: str | None = None,
        release: bool = False,
        append: list[tuple[int, str]] | None = None,
        replace: list[str] | None = None,
        also: Sequence[Callable[[WriteConnection], Awaitable[object]]] = (),
    ) -> int:
        """Write the state and, in the same transaction, append messages `(seq, json)` or replace
        the whole transcript; returns the new revision. A compare-and-set: the stored revision
        must be `expected` and, when `owner` is given, the lease must be `owner`'s (or free), or
        nothing is written and `StaleSession` is raised. `release` gives up the lease. `also`:
        more writes of this store's tables (checkpoints), run in the same transaction after the
        state's: one commit for the step rather than one each."""
        params = {
            "b_id": session_id,
            "b_expected": expected,
            "b_revision": expected + 1,
            "b_state": json.dumps(state),
            "b_now": time.time(),
            "b_owner": owner,
        }
        async with self.begin() as conn:
            res = await conn.execute(self._stmts.save[owner is not None, release], params)
            if res.rowcount != 1:
                raise StaleSession(session_id)
            if replace is not None:
                await conn.execute(self._stmts.delete_messages, {"b_id": session_id})
                append = list(enumerate(replace))
            if append:
                await conn.execute(
                    _INSERT_MESSAGE,
                    [{"session_id": session_id, "seq": seq, "data": data} for seq, data in append],
                )
            for write in also:
                await write(conn)
        return expected + 1

    def message_write(
        self, session_id: str, seq: int, data: str
    ) -> Callable[[WriteConnection], Awaitable[object]]:
        """A write (for `save(also=...)`) replacing the stored message `seq` of a session (one the
        session changed after it was stored)."""
        stmt, params = self._stmts.rewrite_message, {"b_id": session_id, "b_seq": seq, "b_data": data}

        async def write(conn: WriteConnection) -> object:
            return await conn.execute(stmt, params)

        return write

    def usage_write(
        self, identity: str, day: str, amounts: dict[str, int]
    ) -> Callable[[WriteConnection], Awaitable[object]]:
        """A write (for `save(also=...)`) adding `amounts` (USAGE_KINDS) to a caller's day."""
        if self._usage_upsert is None:
            ins: Any
            if self.engine.dialect.name == "postgresql":  # each dialect's module only when used
                from sqlalchemy.dialects.postgresql import insert as pg_insert

                ins = pg_insert(usage_table)
            else:
                from sqlalchemy.dialects.sqlite import insert as sqlite_insert

                ins = sqlite_insert(usage_table)
            self._usage_upsert = ins.on_conflict_do_update(
                index_elements=["identity", "day"],
                set_={k: usage_table.c[k] + ins.excluded[k] for k in USAGE_KINDS},
            )
        stmt = self._usage_upsert
        row = {"identity": identity, "day": day, **{k: int(amounts.get(k, 0)) for k in USAGE_KINDS}}

        async def write(conn: WriteConnection) -> None:
            await conn.execute(stmt, row)

        return write

    async def usage(self, day: str | None = None, identity: str | None = None) -> list[dict[str, Any]]:
        """The usage rows (identity, day and USAGE_KINDS), of one day and/or one caller."""
        q = select(usage_table)
        if day is not None:
            q = q.where(usage_table.c.day == day)
        if identity is not None:
            q = q.where(usage_table.c.identity == identity)
        async with self.engine.connect() as conn:
            rows = await conn.execute(q.order_by(usage_table.c.day.desc(), usage_table.c.identity))
            return [dict(r._mapping) for r in rows]

    @property
    def workers(self) -> WorkerQueue:
        """The workers' leases, calls and snapshots (`devagent worker`), shared by every replica."""
        if self._workers is None:
            self._workers = WorkerQueue(self.engine, self._now, None if self.is_sqlite else self.listener())
        return self._workers

    @property
    def dispatch(self) -> DispatchQueue:
        """What a dispatcher asks of the workers' tables (`devagent dispatcher`)."""
        return DispatchQueue(self.engine, self._now)

    @property
    def slots(self) -> TurnSlots:
        """The callers' turn slots (concurrent-turn budgets), shared by every replica."""
        if self._slots is None:
            self._slots = TurnSlots(self.engine, self._now, self.owner)
        return self._slots

    async def list_sessions(self, limit: int | None = 50) -> list[tuple[str, dict[str, Any], float]]:
        """(id, state, last activity) of the sessions, the most recently active first."""
        async with self.engine.connect() as conn:
            rows = await conn.execute(
                select(sessions_table.c.id, sessions_table.c.state, sessions_table.c.updated_at)
                .order_by(sessions_table.c.updated_at.desc())
                .limit(limit)
            )
            return [(r[0], json.loads(r[1]), r[2]) for r in rows]


_INSERT_MESSAGE = insert(messages_table)
_NOTIFY = text("SELECT pg_notify(:c, :p)")
# The same, and this transaction's commit does not wait for the WAL to reach the disk (one
# statement: no round trip of its own).
_NOTIFY_NO_FSYNC = text("SELECT set_config('synchronous_commit', 'off', true), pg_notify(:c, :p)")


class _Statements:
    """The statements of every turn, built once per store with bound parameters (`b_*`): building
    a statement (its clauses, then its cache key) cost SQLAlchemy more CPU per save than running
    it (measured with py-spy); a statement object built once keeps its memoized cache key."""

    def __init__(self, now: Any) -> None:
        t = sessions_table
        sid: Any = bindparam("b_id")
        owner: Any = bindparam("b_owner")
        self.create = insert(t).values(
            id=sid,
            revision=0,
            state=bindparam("b_state"),
            created_at=bindparam("b_now"),
            updated_at=bindparam("b_now"),
            cancel_requested=0,
            identity=bindparam("b_identity"),
        )
        # the same row, born holding the caller's lease (values() adds to the statement's values)
        self.create_leased = self.create.values(lease_owner=owner, lease_until=now + bindparam("b_ttl"))
        free = or_(t.c.lease_owner.is_(None), t.c.lease_owner == owner, t.c.lease_until < now)
        self.claim = (
            update(t)
            .where(and_(t.c.id == sid, free))
            .values(lease_owner=owner, lease_until=now + bindparam("b_ttl"), cancel_requested=0)
            .returning(t.c.revision)
        )
        mine = and_(t.c.id == sid, t.c.lease_owner == owner)
        self.renew = (
            update(t).where(mine).values(lease_until=now + bindparam("b_ttl")).returning(t.c.cancel_requested)
        )
        self.release = update(t).where(mine).values(lease_owner=None, lease_until=None, cancel_requested=0)
        # a claim's reads, and the freeing of a dead process's lease
        self.state = select(t.c.state).where(t.c.id == sid)
        self.holder = select(t.c.lease_owner, t.c.lease_until).where(t.c.id == sid)
        self.free_dead = (
            update(t)
            .where(and_(t.c.id == sid, t.c.lease_owner == owner))
            .values(lease_owner=None, lease_until=None)
        )
        m = messages_table
        self.delete_messages = delete(m).where(m.c.session_id == sid)
        self.rewrite_message = (
            update(m)
            .where(m.c.session_id == sid, m.c.seq == bindparam("b_seq"))
            .values(data=bindparam("b_data"))
        )
        # save: [checks the lease's owner, releases the lease]
        self.save: dict[tuple[bool, bool], Any] = {}
        for checked in (False, True):
            cond = and_(t.c.id == sid, t.c.revision == bindparam("b_expected"))
            if checked:
                cond = and_(cond, or_(t.c.lease_owner == owner, t.c.lease_owner.is_(None)))
            for release in (False, True):
                values: dict[str, Any] = {
                    "state": bindparam("b_state"),
                    "revision": bindparam("b_revision"),
                    "updated_at": bindparam("b_now"),
                }
                if release:
                    values.update(lease_owner=None, lease_until=None, cancel_requested=0)
                self.save[checked, release] = update(t).where(cond).values(**values)


def _add_missing_columns(conn: Any) -> None:
    """A database made by an earlier version lacks the columns added since: add them."""
    from sqlalchemy import inspect, text

    insp = inspect(conn)
    for table, columns in ADDED_COLUMNS.items():
        have = {c["name"] for c in insp.get_columns(table)}
        for name, ddl in columns:
            if name not in have:
                conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {name} {ddl}"))
