"""A worker's reconnect time after its server restarts (issue 41): one `devagent serve` on a fresh
PostgreSQL database and one `devagent worker` connected to it (on this host). Each repetition
waits a random moment of the worker's long poll, stops the server (SIGKILL; SIGTERM with
`--signal term`), starts it again on the same port and database (after `--down` seconds), and
measures from the moment the new server answers /healthz until the worker's next poll reached
it: the worker's `last_seen` in the store's devagent_workers table, which each poll sets as it
arrives, on the database's clock (this host's, as the bench's). Also shown: how long the server
was away (stop to /healthz answered), which is what the worker's backoff runs through.

    .venv/bin/python bench/worker_reconnect.py [--repeats 10] [--signal kill|term] [--down 0]

"Answers /healthz" is when the bench's probe, asking every 10 ms from the old server's end, got
its first 200: a worker whose retry reached the new server first shows a time at or just under 0.
Needs PostgreSQL on 127.0.0.1:5432 (user postgres, trust; DEVAGENT_TEST_PG overrides); the
database is created for the run and dropped afterwards. Prints min, median and max; asserts
nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import socket
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.worker_cluster import WorkersTable, fresh_pg_database, pg_site, until, worker_id  # noqa: E402
from tests.a2a.procs import TOKEN as OPS  # noqa: E402
from tests.a2a.procs import Serve  # noqa: E402
from tests.a2a.test_hostile import script  # noqa: E402
from tests.workers.conftest import WorkerSite  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Restarts:
    """The server on one port, stopped and started again; the worker's polls read from the store."""

    def __init__(self, site: WorkerSite, model: str, table: WorkersTable, sig: signal.Signals) -> None:
        self.site, self.model, self.table, self.sig = site, model, table, sig
        self.port = free_port()
        self.count = 0
        self.stack = ExitStack()
        self.server = self.start()

    def start(self) -> Serve:
        """A new server on the port, returned once it answers /healthz (tests/a2a/procs.py)."""
        self.count += 1
        return self.stack.enter_context(self.site.server(self.model, self.port, log=f"serve{self.count}"))

    async def healthy(self) -> float:
        """When /healthz on the port first answered 200 (asked every 10 ms from now on)."""
        import httpx

        url = f"http://127.0.0.1:{self.port}/healthz"
        async with httpx.AsyncClient(timeout=30, headers={"Authorization": f"Bearer {OPS}"}) as c:
            while True:
                try:
                    if (await c.get(url)).status_code == 200:
                        return time.time()
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.01)

    async def once(self, worker: str, down: float) -> tuple[float, float]:
        """(seconds from /healthz answered to the worker's next poll, seconds the server was away)."""
        proc = self.server.proc
        stopped = time.time()
        os.kill(proc.pid, self.sig)
        await asyncio.to_thread(proc.wait, 60)
        gone = time.time()  # no poll of the old server's is counted after this
        self.stack.close()
        await asyncio.sleep(down)
        probe = asyncio.ensure_future(self.healthy())
        self.server = await asyncio.to_thread(self.start)
        ready = await probe

        async def polled() -> float | None:
            seen = await self.table.last_seen(worker)
            return seen if seen is not None and seen > gone else None

        seen = await until("the worker's next poll", polled, within=120.0)
        return seen - ready, ready - stopped

    def close(self) -> None:
        self.stack.close()


async def main(args: argparse.Namespace) -> None:
    import shutil

    rng = random.Random(args.seed)
    sig = signal.SIGKILL if args.signal == "kill" else signal.SIGTERM
    tmp = Path(tempfile.mkdtemp(prefix="devagent-bench-reconnect-"))
    times: list[float] = []
    away: list[float] = []
    try:
        async with fresh_pg_database("devagent_bench_reconnect") as db, WorkersTable(db) as table:
            site = pg_site(tmp, db)
            restarts = Restarts(site, script(tmp / "s.json", [[{"text": "ok"}]]), table, sig)
            try:
                with site.worker(restarts.server, "w", netns=False) as w:
                    w.wait_connected()
                    name = worker_id(w)
                    for r in range(args.repeats):
                        await asyncio.sleep(rng.uniform(0.5, 3.0))  # a random moment of its long poll
                        reconnect, down = await restarts.once(name, args.down)
                        times.append(reconnect)
                        away.append(down)
                        print(
                            f"restart {r + 1}: server away {down:.2f} s, worker back after {reconnect:.3f} s"
                        )
                    if w.proc.poll() is not None:
                        print(f"the worker exited ({w.proc.returncode}):\n{w.log_text()}", file=sys.stderr)
            finally:
                restarts.close()
                site.cleanup()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report(args, times, away)


def report(args: argparse.Namespace, times: list[float], away: list[float]) -> None:
    def three(values: list[float]) -> str:
        return f"min {min(values):.3f}, median {statistics.median(values):.3f}, max {max(values):.3f}"

    print(f"{len(times)} restarts (SIG{args.signal.upper()}, down {args.down} s more):")
    print(f"  the worker's next poll after /healthz answered, s: {three(times)}")
    print(f"  the server away (stopped to /healthz answered), s: {three(away)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--signal", choices=("kill", "term"), default="kill")
    parser.add_argument("--down", type=float, default=0.0, help="seconds the server stays stopped")
    parser.add_argument("--seed", type=int, default=1)
    asyncio.run(main(parser.parse_args()))
