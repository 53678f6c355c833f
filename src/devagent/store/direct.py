"""A turn's SQLite writes, run on the pooled connection without SQLAlchemy's execution layer.

A statement of a turn costs SQLite about 10 µs; through SQLAlchemy's async engine it cost
300-600 µs of CPU: the connection checked out and returned, the greenlet switches of the async
adaptation around each driver call, the execution context, the result object, and a trip to
aiosqlite's thread and back (a queue put, the thread's wake-up, `call_soon_threadsafe`, the event
loop's wake-up) for each statement and for the commit. A tool turn commits seven transactions of
about sixteen statements: most of the store's share of a turn's CPU was that machinery.

`DirectSQLite.begin()` takes the same pooled connection SQLAlchemy uses (one per process for a
SQLite file, so the writes of this process stay in one order and never wait for each other's
locks), and runs SQLAlchemy statements on its sqlite3 connection on the event loop's thread: each
statement compiled once for the dialect (its SQL, the order of its parameters, the types'
processors for parameters and result columns), then executed with the same values SQLAlchemy
would send, in the same transaction (sqlite3's implicit BEGIN before the first write, one COMMIT
at the end), failing with the same SQLAlchemy exception classes. Only what the hot path uses is
supported (a statement with positional parameters and no expanding ones, scalar column defaults);
anything else raises `NotImplementedError` at once, not quietly.

What must not run on the event loop's thread is kept off it:
- Waiting for another process's lock: the connection's busy timeout is 0 while a direct
  transaction runs; a statement refused with SQLITE_BUSY is run again on aiosqlite's thread with
  the usual timeout (`BUSY_TIMEOUT_MS`), as it would have been.
- The WAL checkpoint (its fsyncs): SQLite's automatic checkpoint is off on these connections
  (`prepare_connection`); every `CHECKPOINT_EVERY` direct commits a passive checkpoint runs on
  aiosqlite's thread, before the connection goes back to the pool.

Durability is SQLite's own and unchanged: the same commits in WAL mode with `synchronous=NORMAL`.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from sqlalchemy import exc
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util import greenlet_spawn

T = TypeVar("T")

BUSY_TIMEOUT_MS = 30_000  # the `timeout` the store opens SQLite connections with
CHECKPOINT_EVERY = 200  # direct commits between two checkpoints (~2.6 MB of WAL at a tool turn's ~13 KB)

_SQLITE_BUSY = 5  # sqlite_errorcode & 0xff of "database is locked" (SQLITE_BUSY_SNAPSHOT is 517)


class WriteConnection(Protocol):
    """What a write in a store transaction is given: SQLAlchemy's `AsyncConnection`, or a
    `DirectConnection` on SQLite."""

    async def execute(self, statement: Any, parameters: Any = None, /) -> Any: ...


def prepare_connection(raw: sqlite3.Connection) -> None:
    """On a new connection of a store that writes directly: no automatic WAL checkpoint inside
    a commit (`DirectSQLite` runs them off the event loop's thread)."""
    raw.execute("PRAGMA wal_autocheckpoint=0").close()


def _checkpoint(raw: sqlite3.Connection) -> None:
    """A passive checkpoint (it waits for no reader or writer); a failure leaves the WAL to the
    next one."""
    with contextlib.suppress(sqlite3.Error):
        raw.execute("PRAGMA wal_checkpoint(PASSIVE)").close()


class _Compiled:
    """One statement compiled for one set of parameter names: what running it needs."""

    __slots__ = ("compiled", "defaults", "positions", "processors", "result_processors", "sql")

    def __init__(self, stmt: Any, dialect: Any, keys: Sequence[str], many: bool) -> None:
        compiled = stmt.compile(dialect=dialect, column_keys=list(keys), for_executemany=many)
        if not compiled.positional or compiled.literal_execute_params or compiled.post_compile_params:
            raise NotImplementedError("a statement direct execution does not support")
        if compiled.schema_translate_map:
            raise NotImplementedError("a schema translate map")
        self.compiled = compiled
        self.sql: str = compiled.string
        self.positions: list[str] = list(compiled.positiontup or ())
        self.processors: Mapping[str, Any] = compiled._bind_processors
        defaults: list[tuple[str, Any]] = []
        for col in [*compiled.insert_prefetch, *compiled.update_prefetch]:
            default = col.default if compiled.isinsert else col.onupdate
            if default is None or not default.is_scalar:
                raise NotImplementedError(f"a non-scalar default of column {col.key}")
            defaults.append((col.key, default.arg))
        self.defaults = defaults
        procs = []
        for entry in compiled._result_columns:
            type_ = entry[3]
            procs.append(type_._cached_result_processor(dialect, None))
        self.result_processors: list[Any] = procs

    def values(self, params: Mapping[str, Any] | None) -> list[Any]:
        """The positional values SQLAlchemy would send for `params`."""
        bound = self.compiled.construct_params(params, escape_names=False)
        for key, value in self.defaults:
            if bound.get(key) is None:
                bound[key] = value
        procs = self.processors
        return [procs[k](bound[k]) if k in procs else bound[k] for k in self.positions]

    def rows(self, raw: list[Any]) -> list[tuple[Any, ...]]:
        procs = self.result_processors
        if not any(procs):
            return [tuple(r) for r in raw]
        return [tuple(p(v) if p else v for p, v in zip(procs, r, strict=False)) for r in raw]


class DirectResult:
    """The part of SQLAlchemy's `Result` the store's writes use."""

    __slots__ = ("_rows", "rowcount")

    def __init__(self, rows: list[tuple[Any, ...]], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    def first(self) -> tuple[Any, ...] | None:
        return self._rows[0] if self._rows else None

    def scalar(self) -> Any:
        return self._rows[0][0] if self._rows else None

    def scalar_one(self) -> Any:
        if len(self._rows) != 1:
            raise exc.NoResultFound("no row") if not self._rows else exc.MultipleResultsFound("rows")
        return self._rows[0][0]

    def all(self) -> list[tuple[Any, ...]]:
        return list(self._rows)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self._rows)


class DirectConnection:
    """A transaction on the pooled sqlite3 connection: `execute` as `AsyncConnection.execute`."""

    __slots__ = ("_aio", "_direct", "_raw")

    def __init__(self, direct: DirectSQLite, aio: Any, raw: sqlite3.Connection) -> None:
        self._direct = direct
        self._aio = aio  # the aiosqlite Connection: its thread, for what must wait
        self._raw = raw

    async def execute(self, stmt: Any, params: Any = None, /) -> DirectResult:
        """`params`: a mapping, or a list of them (executemany), as for SQLAlchemy."""
        many = isinstance(params, list | tuple)
        rows: Sequence[Mapping[str, Any] | None] = params if many else [params]
        compiled = self._direct.compiled(stmt, rows[0] if rows else None, many)
        values: Any = [compiled.values(p) for p in rows] if many else compiled.values(params)
        try:
            rowcount, raw_rows = self._run(compiled.sql, values, many)
        except sqlite3.OperationalError as e:
            if (getattr(e, "sqlite_errorcode", 0) & 0xFF) != _SQLITE_BUSY:
                raise _wrapped(e, compiled.sql, values) from e
            rowcount, raw_rows = await self._run_waiting(compiled.sql, values, many)
        except sqlite3.Error as e:
            raise _wrapped(e, compiled.sql, values) from e
        return DirectResult(compiled.rows(raw_rows) if raw_rows else [], rowcount)

    def _run(self, sql: str, values: Any, many: bool) -> tuple[int, list[Any]]:
        cursor = self._raw.cursor()
        try:
            if many:
                cursor.executemany(sql, values)
            else:
                cursor.execute(sql, values)
            rows = cursor.fetchall() if cursor.description is not None else []
            return cursor.rowcount, rows
        finally:
            cursor.close()

    async def _run_waiting(self, sql: str, values: Any, many: bool) -> tuple[int, list[Any]]:
        """The statement again on aiosqlite's thread, waiting for the lock as long as SQLite's
        usual busy timeout allows."""

        def run() -> tuple[int, list[Any]]:
            _busy_timeout(self._raw, BUSY_TIMEOUT_MS)
            try:
                return self._run(sql, values, many)
            finally:
                _busy_timeout(self._raw, 0)

        try:
            result: tuple[int, list[Any]] = await _on_thread(self._aio, run)
        except sqlite3.Error as e:
            raise _wrapped(e, sql, values) from e
        return result

    async def _commit(self) -> None:
        try:
            self._raw.commit()
        except sqlite3.OperationalError as e:
            if (getattr(e, "sqlite_errorcode", 0) & 0xFF) != _SQLITE_BUSY:
                raise _wrapped(e, "COMMIT", ()) from e
            await _on_thread(self._aio, self._commit_waiting)

    def _commit_waiting(self) -> None:
        _busy_timeout(self._raw, BUSY_TIMEOUT_MS)
        try:
            self._raw.commit()
        finally:
            _busy_timeout(self._raw, 0)


async def _on_thread(aio: Any, fn: Callable[[], T]) -> T:
    """`fn` on aiosqlite's thread. A cancelled caller still waits for it to finish: the
    transaction is then rolled back on the loop's thread, and the sqlite3 connection must not be
    used from two threads at once."""
    call = asyncio.ensure_future(aio._execute(fn))
    try:
        return await asyncio.shield(call)
    except asyncio.CancelledError:
        with contextlib.suppress(BaseException):
            await call
        raise


def _busy_timeout(raw: sqlite3.Connection, ms: int) -> None:
    # the pragma answers with a row: its cursor closed, or the commit finds a statement running
    raw.execute(f"PRAGMA busy_timeout={ms}").close()


def _wrapped(e: sqlite3.Error, sql: str, values: Any) -> exc.DBAPIError:
    """The SQLAlchemy exception its engine would raise for this driver error."""
    wrapped = exc.DBAPIError.instance(sql, values, e, sqlite3.Error)
    return wrapped if isinstance(wrapped, exc.DBAPIError) else exc.DBAPIError(sql, values, e)


class DirectSQLite:
    """Direct transactions on a SQLite store's engine (see the module's docstring)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._dialect = engine.dialect
        self._cache: dict[tuple[int, tuple[str, ...], bool], tuple[Any, _Compiled]] = {}
        self._commits = 0

    def compiled(self, stmt: Any, params: Mapping[str, Any] | None, many: bool) -> _Compiled:
        keys = tuple(sorted(params)) if params else ()
        key = (id(stmt), keys, many)
        hit = self._cache.get(key)
        if hit is not None and hit[0] is stmt:
            return hit[1]
        compiled = _Compiled(stmt, self._dialect, keys, many)
        if len(self._cache) > 256:  # statements built per call (not the turn's) do not pile up
            self._cache.clear()
        self._cache[key] = (stmt, compiled)  # the statement kept: its id stays its own
        return compiled

    @contextlib.asynccontextmanager
    async def begin(self) -> AsyncIterator[DirectConnection]:
        """A transaction on the pooled connection: committed when the block ends, rolled back
        when it raises; the connection back to the pool either way."""
        fairy = await greenlet_spawn(self._engine.sync_engine.pool.connect)
        try:
            aio: Any = fairy.driver_connection
            raw: sqlite3.Connection = aio._conn
            _busy_timeout(raw, 0)
            try:
                conn = DirectConnection(self, aio, raw)
                try:
                    yield conn
                except BaseException:
                    if raw.in_transaction:
                        raw.rollback()
                    raise
                await conn._commit()
                self._commits += 1
                if self._commits % CHECKPOINT_EVERY == 0:
                    await _on_thread(aio, lambda: _checkpoint(raw))
            finally:
                _busy_timeout(raw, BUSY_TIMEOUT_MS)
        finally:
            await greenlet_spawn(fairy.close)
