"""Set-up shared by the workers' benches on PostgreSQL (worker_scale.py, worker_reconnect.py):
the tests' `WorkerSite` (tests/workers/conftest.py: real `devagent serve` and `devagent worker`
processes, logs in files) pointed at a fresh PostgreSQL database of the bench's own, the
round-robin balancer (tests/fakes/balancer.py) as a process, and the store's workers' tables
read from outside.

    async with fresh_pg_database("devagent_bench_x") as db:       # dropped afterwards
        site = pg_site(tmp, db)
        with site.server(model, log="r0") as s, site.worker(s, "w0", netns=False) as w:
            worker_id(w)                                            # its name in the store
            async with WorkersTable(db) as table:
                await table.calls_per_worker()

Not a bench itself: nothing to run here.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import fresh_pg_database  # noqa: E402
from tests.workers.conftest import CALLER, Worker, WorkerSite  # noqa: E402

__all__ = ["CALLER", "WorkersTable", "balancer", "fresh_pg_database", "pg_site", "until", "worker_id"]


def pg_site(
    tmp: Path, db_url: str, *, lease_seconds: float = 15.0, wait_seconds: float = 300.0
) -> WorkerSite:
    """A WorkerSite whose servers use `db_url` (PostgreSQL), with the default lease (the tests'
    is short, for kill tests), a long wait for a worker with room, and no per-token limit on
    streams (every session of a bench comes with the same caller's token)."""
    site = WorkerSite(tmp)
    site.env.update(
        {
            "DEVAGENT_DB": db_url,
            "DEVAGENT_WORKER_LEASE_SECONDS": str(lease_seconds),
            "DEVAGENT_WORKER_WAIT_SECONDS": str(wait_seconds),
            "DEVAGENT_MAX_STREAMS_PER_TOKEN": "0",
        }
    )
    return site


@contextmanager
def balancer(urls: list[str], log: Path, within: float = 60.0) -> Iterator[str]:
    """tests/fakes/balancer.py in a process of its own in front of `urls`; its URL."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fakes.balancer", *urls],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
    try:
        deadline = time.monotonic() + within
        while True:
            m = re.search(r"balancer listening on (\S+)", log.read_text(errors="replace"))
            if m:
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the balancer did not start:\n{log.read_text(errors='replace')}")
            time.sleep(0.05)
        yield m.group(1)
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(20)


def worker_id(worker: Worker, within: float = 90.0) -> str:
    """The worker's name in the store (random per process; its first line says it)."""
    deadline = time.monotonic() + within
    while True:
        m = re.search(r"devagent worker (\S+): connecting", worker.log_text())
        if m:
            return m.group(1)
        if worker.proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"worker {worker.name} did not start:\n{worker.log_text()}")
        time.sleep(0.05)


class WorkersTable:
    """The store's workers' tables, read from outside (the bench's own connection)."""

    def __init__(self, db_url: str) -> None:
        from sqlalchemy.ext.asyncio import create_async_engine

        self._engine = create_async_engine(db_url, pool_size=2)

    async def __aenter__(self) -> WorkersTable:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._engine.dispose()

    async def _rows(self, sql: str, **params: Any) -> list[Any]:
        from sqlalchemy import text

        async with self._engine.connect() as conn:
            return list((await conn.execute(text(sql), params)).all())

    async def last_seen(self, worker: str) -> float | None:
        """When the worker's last poll (or hello) reached a server: the database's clock, in
        seconds since the epoch (the same host's clock as time.time() here)."""
        rows = await self._rows("SELECT last_seen FROM devagent_workers WHERE id = :w", w=worker)
        return float(rows[0][0]) if rows else None

    async def calls_per_worker(self) -> dict[str, tuple[int, int]]:
        """worker -> (sessions it ran commands for, commands it was given)."""
        rows = await self._rows(
            "SELECT worker, count(DISTINCT session_id), count(*) FROM devagent_worker_calls"
            " WHERE kind = 'exec' GROUP BY worker"
        )
        return {str(r[0]): (int(r[1]), int(r[2])) for r in rows}

    async def call_states(self) -> dict[str, int]:
        """How many of the workers' calls are in each state, by kind ("exec done": 300)."""
        rows = await self._rows(
            "SELECT kind, state, count(*) FROM devagent_worker_calls GROUP BY kind, state"
        )
        return {f"{r[0]} {r[1]}": int(r[2]) for r in rows}

    async def command_seconds(self) -> list[float]:
        """Each finished command's time in the store, from queued to done (the database's clock)."""
        rows = await self._rows(
            "SELECT updated_at - created_at FROM devagent_worker_calls WHERE kind = 'exec' AND state = 'done'"
        )
        return [float(r[0]) for r in rows]


async def until(what: str, check: Any, within: float, every: float = 0.01) -> Any:
    """`await check()` until it returns something other than None (a hang guard, not a pace)."""
    deadline = time.monotonic() + within
    while True:
        got = await check()
        if got is not None:
            return got
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {within} s")
        await asyncio.sleep(every)
