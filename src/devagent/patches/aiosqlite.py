"""aiosqlite patch: one trip to the SQLite thread per statement.

Written for aiosqlite 0.22.1 (`WRITTEN_FOR`, the pin in pyproject.toml), under SQLAlchemy 2.1.9's
aiosqlite adapter. It replaces `cursor` and `rollback` on each connection the store's engine
opens (store/db.py, the pool's "connect" event), and uses two private names of aiosqlite's
`Connection`: `_conn` (the sqlite3 connection) and `_execute` (run a function on the
connection's thread); tests/unit/test_patches.py fails when either goes.

aiosqlite runs every call on the connection's own thread, and SQLAlchemy's aiosqlite adapter makes
three or four calls a statement: create a cursor, execute, fetch the rows (when there are any),
close the cursor. Each is a trip to that thread and back: a queue put, the thread's wake-up, then
`call_soon_threadsafe`, a write to the event loop's self-pipe and the loop's wake-up for the
result. A tool turn made about 60 of them for its ~14 statements, 7 commits and 7 rollbacks
(the pool's reset of a returned connection); now 21. bench/library_patches.py (the shared
2-core test machine under a load of ~5): a SELECT on a connection taken from the pool and
returned, 816 µs without the patch, 523 µs with it.

`one_hop_cursors(connection)` makes the aiosqlite connection's `cursor()` return a cursor that
does all of a statement on that thread in one call: a new sqlite3 cursor, execute, fetch every row
if the statement returns rows, remember `description`, `rowcount` and `lastrowid`, close. Creating
it, fetching from it and closing it then need no trip. SQLAlchemy reads the same values in the same
order; the statement runs in the same thread, on the same sqlite3 connection, in the same
transaction; an error is the same sqlite3 exception, raised from `execute`. Results are read in
full at once, as SQLAlchemy's adapter already does for every statement that is not a server-side
cursor (and devagent uses none).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

WRITTEN_FOR = "0.22.1"

_NO_ROWS: tuple[()] = ()


class OneHopCursor:
    """The part of `aiosqlite.Cursor` SQLAlchemy's adapter uses, one thread trip a statement."""

    __slots__ = ("_conn", "_rows", "arraysize", "description", "lastrowid", "rowcount")

    def __init__(self, conn: Any) -> None:
        self._conn = conn  # the aiosqlite Connection
        self._rows: deque[Any] = deque()
        self.description: Any = None
        self.rowcount = -1
        self.lastrowid: int | None = None
        self.arraysize = 1

    def _run(self, how: str, sql: str, parameters: Any) -> tuple[Any, int, int | None, list[Any] | tuple[()]]:
        """On the connection's thread: the whole statement."""
        cursor = self._conn._conn.cursor()
        try:
            getattr(cursor, how)(sql, parameters)
            description = cursor.description
            rows = cursor.fetchall() if description is not None else _NO_ROWS
            return description, cursor.rowcount, cursor.lastrowid, rows
        finally:
            cursor.close()

    async def _statement(self, how: str, sql: str, parameters: Any) -> OneHopCursor:
        description, rowcount, lastrowid, rows = await self._conn._execute(self._run, how, sql, parameters)
        self.description, self.rowcount, self.lastrowid = description, rowcount, lastrowid
        self._rows = deque(rows)
        return self

    async def execute(self, sql: str, parameters: Iterable[Any] | None = None) -> OneHopCursor:
        return await self._statement("execute", sql, [] if parameters is None else parameters)

    async def executemany(self, sql: str, parameters: Iterable[Iterable[Any]]) -> OneHopCursor:
        return await self._statement("executemany", sql, parameters)

    async def fetchone(self) -> Any:
        return self._rows.popleft() if self._rows else None

    async def fetchmany(self, size: int | None = None) -> list[Any]:
        n = self.arraysize if size is None else size
        return [self._rows.popleft() for _ in range(min(n, len(self._rows)))]

    async def fetchall(self) -> list[Any]:
        rows = list(self._rows)
        self._rows.clear()
        return rows

    async def close(self) -> None:
        self._rows.clear()

    async def __aenter__(self) -> OneHopCursor:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()


def one_hop_cursors(conn: Any) -> None:
    """Make `conn.cursor()` (an aiosqlite Connection) give `OneHopCursor`s. As aiosqlite's own
    `cursor()`, the result can be awaited or used as an async context manager.

    And `conn.rollback()` makes no trip when no transaction is open: SQLAlchemy's pool rolls a
    connection back each time it is returned, after every commit too (7 trips a tool turn), and
    sqlite3's `rollback()` does nothing then. `in_transaction` is read on the event loop's
    thread after the connection's last call has finished (the pool hands it to one user at a
    time), as aiosqlite's cursors read `rowcount`. Applied once per connection."""
    from aiosqlite.context import Result

    if getattr(conn.rollback, "__wrapped__", None) is not None:
        return

    async def make() -> OneHopCursor:
        return OneHopCursor(conn)

    rollback = conn.rollback

    async def rollback_if_open() -> None:
        if conn._conn.in_transaction:
            await rollback()

    rollback_if_open.__wrapped__ = rollback  # type: ignore[attr-defined]
    conn.cursor = lambda: Result(make())
    conn.rollback = rollback_if_open
