"""PostgreSQL notifications to this process: one connection LISTENing on the store's channels.

Replicas tell each other "task T has new events" and "stop the turn of session S" through
`NOTIFY` inside the transaction that stores the fact, so a notification never arrives before what
it announces is readable. This module only wakes the interested waiters; they read the facts from
the tables. A notification can be lost (the connection drops and is made again), so every waiter
also looks again after a short time of its own choosing.

Why not Redis pub/sub: the facts are in PostgreSQL already, and a notification sent in the same
transaction needs no second system to deploy, secure and keep consistent with the first.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from devagent.store.tables import CANCEL_CHANNEL, EVENTS_CHANNEL, WORKERS_CHANNEL

log = logging.getLogger(__name__)


class Listener:
    def __init__(self, url: Any) -> None:
        # asyncpg takes the plain URL (SQLAlchemy's names the driver in the scheme)
        self._dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
        self._conn: Any = None
        self._ready: asyncio.Future[None] | None = None
        self._waiters: dict[tuple[str, str], set[asyncio.Event]] = {}
        self._callbacks: dict[str, Callable[[str], None]] = {}
        self._closed = False

    async def start(self) -> None:
        """Connect and listen (once; later calls wait for the first). Failures are logged: the
        waiters then rely on their own polling."""
        if self._ready is None:
            self._ready = asyncio.get_running_loop().create_future()
            try:
                await self._connect()
            finally:
                self._ready.set_result(None)
        else:
            await asyncio.shield(self._ready)

    async def _connect(self) -> None:
        import asyncpg  # type: ignore[import-untyped]

        try:
            conn = await asyncpg.connect(self._dsn)
            for channel in self._channels():
                await conn.add_listener(channel, self._on_notify)
            conn.add_termination_listener(self._on_lost)
            self._conn = conn
        except Exception:
            log.warning("cannot listen for notifications; falling back to polling", exc_info=True)

    def _channels(self) -> list[str]:
        return [EVENTS_CHANNEL, CANCEL_CHANNEL, WORKERS_CHANNEL]

    @property
    def connected(self) -> bool:
        """Whether notifications reach this process now (else its waiters poll)."""
        return self._conn is not None

    def _on_lost(self, _conn: Any) -> None:
        self._conn = None
        if not self._closed:
            log.warning("the notification connection was lost; connecting again")
            asyncio.get_running_loop().call_later(1.0, lambda: asyncio.ensure_future(self._connect()))

    def _on_notify(self, _conn: Any, _pid: int, channel: str, payload: str) -> None:
        for ev in self._waiters.get((channel, payload), ()):
            ev.set()
        callback = self._callbacks.get(channel)
        if callback is not None:
            try:
                callback(payload)
            except Exception:
                log.exception("notification handler for %s failed", channel)

    def on(self, channel: str, callback: Callable[[str], None]) -> None:
        """Call `callback(payload)` on every notification of `channel`."""
        self._callbacks[channel] = callback

    def watch(self, channel: str, payload: str) -> asyncio.Event:
        """An event set whenever `payload` is notified on `channel`; `unwatch` it when done."""
        ev = asyncio.Event()
        self._waiters.setdefault((channel, payload), set()).add(ev)
        return ev

    def unwatch(self, channel: str, payload: str, ev: asyncio.Event) -> None:
        waiters = self._waiters.get((channel, payload))
        if waiters is not None:
            waiters.discard(ev)
            if not waiters:
                del self._waiters[(channel, payload)]

    async def close(self) -> None:
        self._closed = True
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await conn.close()
            except Exception:
                log.debug("closing the notification connection failed", exc_info=True)
