"""Many sessions across workers and replicas (issue 41's speed and scale): S new conversations
sent at once through the round-robin balancer to 2 `devagent serve` replicas on one PostgreSQL
database, each a scripted turn of K shell commands (each writes a file, lists, prints a marker
it computes) and a closing text; first with the replicas on the local backend (bubblewrap on
this host: the baseline), then with 2 fresh replicas on the worker backend and 3 `devagent
worker` processes (on this host, bubblewrap there; worker i connected to replica i mod 2, as a
Service spreads connections; a turn's replica is often not its worker's).

Per backend: sessions complete (final state `completed` and every command's marker in its
output), per-call latency p50/p99 (seen by the client: from the call's EXECUTING event to its
SUCCEEDED one), turn p50/p99, wall time, CPU per session (the replicas and workers with their
children: relays, bubblewrap, commands; and PostgreSQL's); then the ratios worker/local; for the
workers, how the measured sessions and their commands spread over them, their commands' time in
the store (queued to done) and how their calls ended (the store's devagent_worker_calls).

    .venv/bin/python bench/worker_scale.py [--sessions 100] [--calls 3] [--warmup 2]
    .venv/bin/python bench/worker_scale.py --quick        # 10 sessions of 2 commands

Needs PostgreSQL on 127.0.0.1:5432 (user postgres, trust; DEVAGENT_TEST_PG overrides) and
bubblewrap; runs as root, as the test machines do (the workspaces are given to the sandbox
user). The database is created for the run and dropped afterwards. Prints figures and ratios;
asserts nothing. On 2 shared cores the client, the balancer, the replicas, the workers, their
commands' relays and PostgreSQL all compete: compare the ratios within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.replicas import cpu_seconds, postgres_cpu  # noqa: E402
from bench.worker_cluster import CALLER, WorkersTable, balancer, fresh_pg_database, pg_site, worker_id  # noqa: E402
from tests.a2a.helpers import auth, rpc, v03_message  # noqa: E402
from tests.a2a.test_hostile import script  # noqa: E402
from tests.core_helpers import shell_call  # noqa: E402
from tests.sandbox_user import for_sandbox_user  # noqa: E402
from tests.workers.conftest import Worker, WorkerSite  # noqa: E402

REPLICAS, WORKERS = 2, 3
ENDED = ("SUCCEEDED", "FAILED", "CANCELLED", "ERROR")


def steps(calls: int) -> list[list[dict[str, Any]]]:
    """K commands (the marker is computed, so a command's own text never holds it), then text."""
    run = [
        [shell_call(f"echo {i} > f{i}.txt; ls f*.txt | wc -l; echo OK-$(({1000 + i} + 0))")]
        for i in range(calls)
    ]
    return [*run, [{"text": "done"}]]


@dataclass
class Turn:
    seconds: float = 0.0
    final: str | None = None
    calls: list[float] = field(default_factory=list)  # seconds from EXECUTING to its end, per call
    ok: int = 0  # calls that succeeded with their marker
    problem: str = ""


def tool_updates(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool calls' states in a status update (DataParts of its message)."""
    message = (result.get("status") or {}).get("message") or {}
    out = []
    for part in message.get("parts") or []:
        data = part.get("data") if part.get("kind") == "data" else None
        if isinstance(data, dict) and "tool_call_id" in data:
            out.append(data)
    return out


async def one_turn(client: Any, url: str, workspace: Path, tag: str, calls: int) -> Turn:
    import httpx

    msg = v03_message(f"scale {tag}", settings={"workspace_path": str(workspace)})
    turn, started, ended = Turn(), {}, {}
    t0 = time.perf_counter()
    try:
        body = rpc("message/stream", {"message": msg})
        async with client.stream("POST", url, json=body, headers=auth(CALLER)) as r:
            async for line in r.aiter_lines():
                if not line.startswith("data:"):
                    continue
                now = time.perf_counter()
                result = json.loads(line[5:]).get("result") or {}
                for d in tool_updates(result):
                    if d["status"] == "EXECUTING":
                        started.setdefault(d["tool_call_id"], now)
                    elif d["status"] in ENDED:
                        ended[d["tool_call_id"]] = (now, d["status"], json.dumps(d.get("output")))
                if result.get("final"):
                    turn.final = result["status"]["state"]
    except httpx.HTTPError as e:
        turn.problem = repr(e)
    turn.seconds = time.perf_counter() - t0
    turn.calls = [at - started[cid] for cid, (at, _, _) in ended.items() if cid in started]
    succeeded = " ".join(out for _, status, out in ended.values() if status == "SUCCEEDED")
    turn.ok = sum(f"OK-{1000 + k}" in succeeded for k in range(calls))
    return turn


def pct(values: list[float], p: float) -> float:
    if not values:
        return math.nan
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * p))]


@dataclass
class Run:
    backend: str
    turns: list[Turn]
    wall: float
    calls: int
    cpu: dict[str, float] = field(default_factory=dict)  # seconds, by group: replicas, workers (with
    # their children: relays, bubblewrap, commands), PostgreSQL

    def complete(self) -> list[Turn]:
        return [t for t in self.turns if t.final == "completed" and t.ok == self.calls]

    def row(self) -> dict[str, float]:
        done = self.complete()
        lat = [c for t in self.turns for c in t.calls]
        turns = [t.seconds for t in done]
        n = max(1, len(self.turns))
        return {
            "complete": len(done),
            "calls_ok": sum(t.ok for t in self.turns),
            "call_p50": pct(lat, 0.5),
            "call_p99": pct(lat, 0.99),
            "turn_p50": pct(turns, 0.5),
            "turn_p99": pct(turns, 0.99),
            "wall": self.wall,
            "cpu": sum(v for k, v in self.cpu.items() if k != "pg") / n * 1000,
            "pg": self.cpu.get("pg", 0.0) / n * 1000,
        }


class Sessions:
    """Turns through `url`, each in a workspace folder of its own, its CPU counted over `pids`."""

    def __init__(
        self, url: str, site: WorkerSite, backend: str, calls: int, pids: dict[str, list[int]]
    ) -> None:
        self.url, self.site, self.backend, self.calls, self.pids = url, site, backend, calls, pids

    def cpu(self) -> dict[str, float]:
        out = {k: sum(cpu_seconds(p, reaped=True) for p in pids) for k, pids in self.pids.items()}
        return {**out, "pg": postgres_cpu()}

    def folder(self, tag: str) -> Path:
        ws = self.site.root / "alice" / f"{self.backend}-{tag}"
        ws.mkdir()
        return for_sandbox_user(ws)

    async def warm(self, turns: int) -> None:
        """Turns one after another, not counted (first relays, imports, connection pools)."""
        import httpx

        async with httpx.AsyncClient(timeout=900) as c:
            for i in range(turns):
                await one_turn(c, self.url, self.folder(f"warm{i}"), f"{self.backend} warm {i}", self.calls)

    async def at_once(self, n: int) -> Run:
        import httpx

        folders = [self.folder(str(i)) for i in range(n)]
        limits = httpx.Limits(max_connections=n + 10, max_keepalive_connections=n + 10)
        async with httpx.AsyncClient(timeout=900, limits=limits) as c:
            cpu0 = self.cpu()
            t0 = time.perf_counter()
            turns = await asyncio.gather(
                *(one_turn(c, self.url, folders[i], f"{self.backend} {i}", self.calls) for i in range(n))
            )
            wall = time.perf_counter() - t0
            cpu = {k: v - cpu0[k] for k, v in self.cpu().items()}
        run = Run(self.backend, list(turns), wall, self.calls, cpu)
        problems = Counter((t.final, t.ok, t.problem[:80]) for t in run.turns if t not in run.complete())
        if problems:
            print(f"{self.backend}: not complete (final, calls ok, error): {dict(problems)}", file=sys.stderr)
        return run


def replicas(site: WorkerSite, stack: ExitStack, model: str, backend: str) -> list[Any]:
    """2 replicas on `backend`, the first alone (it creates the schema of an empty database)."""
    site.env["DEVAGENT_SANDBOX_BACKEND"] = backend
    return [stack.enter_context(site.server(model, log=f"{backend}-r{i}")) for i in range(REPLICAS)]


async def local_phase(site: WorkerSite, model: str, args: argparse.Namespace) -> Run:
    with ExitStack() as stack:
        servers = replicas(site, stack, model, "local")
        url = stack.enter_context(balancer([s.url for s in servers], site.tmp / "balancer-local.log"))
        run = Sessions(url, site, "local", args.calls, {"replicas": [s.proc.pid for s in servers]})
        await run.warm(args.warmup)
        return await run.at_once(args.sessions)


@dataclass
class WorkerFigures:
    spread: list[tuple[str, int, int]]  # per worker: its label, sessions, commands
    states: dict[str, int]  # the workers' calls by kind and state
    in_store: list[float]  # each command's seconds from queued to done


async def worker_phase(
    site: WorkerSite, model: str, db: str, args: argparse.Namespace
) -> tuple[Run, WorkerFigures]:
    # room for every session on any worker: the spread is the server's choice alone
    more = ("--capacity", str(args.sessions + args.warmup))
    with ExitStack() as stack:
        servers = replicas(site, stack, model, "worker")
        workers: list[Worker] = [
            stack.enter_context(site.worker(servers[i % REPLICAS], f"w{i}", netns=False, more=more))
            for i in range(WORKERS)
        ]
        for w in workers:
            w.wait_connected()
        names = {worker_id(w): w.name for w in workers}
        url = stack.enter_context(balancer([s.url for s in servers], site.tmp / "balancer-worker.log"))
        pids = {"replicas": [s.proc.pid for s in servers], "workers": [w.proc.pid for w in workers]}
        sessions = Sessions(url, site, "worker", args.calls, pids)
        async with WorkersTable(db) as table:
            await sessions.warm(args.warmup)
            before = await table.calls_per_worker()
            run = await sessions.at_once(args.sessions)
            after = await table.calls_per_worker()
            states, in_store = await table.call_states(), await table.command_seconds()
    spread = []
    for wid, name in sorted(names.items(), key=lambda x: x[1]):
        s0, k0 = before.get(wid, (0, 0))
        s1, k1 = after.get(wid, (0, 0))
        spread.append((name, s1 - s0, k1 - k0))
    return run, WorkerFigures(spread, states, in_store)


async def main(args: argparse.Namespace) -> None:
    import shutil

    tmp = Path(tempfile.mkdtemp(prefix="devagent-bench-scale-"))
    try:
        async with fresh_pg_database("devagent_bench_scale") as db:
            site = pg_site(tmp, db, lease_seconds=args.lease_seconds)
            try:
                model = script(tmp / "s.json", steps(args.calls))
                local = await local_phase(site, model, args)
                worker, figures = await worker_phase(site, model, db, args)
            finally:
                site.cleanup()
    finally:
        if args.keep:
            print(f"the processes' logs: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    report(args, local, worker, figures)


def report(args: argparse.Namespace, local: Run, worker: Run, figures: WorkerFigures) -> None:
    a, b = local.row(), worker.row()
    n, k = args.sessions, args.calls
    print(
        f"{n} sessions at once, {k} shell commands each, "
        f"{REPLICAS} replicas on PostgreSQL behind the balancer"
    )
    print(
        f"{'backend':9}{'complete':>10}{'calls ok':>10}{'call p50 ms':>13}{'call p99 ms':>13}"
        f"{'turn p50 s':>12}{'turn p99 s':>12}{'wall s':>9}{'cpu ms/s.':>11}{'pg ms/s.':>10}"
    )
    for name, r in (("local", a), ("worker", b)):
        print(
            f"{name:9}{int(r['complete']):>6}/{n:<3}{int(r['calls_ok']):>6}/{n * k:<4}"
            f"{r['call_p50'] * 1000:13.0f}{r['call_p99'] * 1000:13.0f}"
            f"{r['turn_p50']:12.2f}{r['turn_p99']:12.2f}{r['wall']:9.2f}{r['cpu']:11.0f}{r['pg']:10.0f}"
        )
    ratios = ", ".join(
        f"{what} {b[key] / a[key]:.2f}x"
        for what, key in (
            ("call p50", "call_p50"),
            ("call p99", "call_p99"),
            ("turn p50", "turn_p50"),
            ("wall", "wall"),
            ("cpu", "cpu"),
        )
    )
    print(f"worker / local: {ratios}")
    in_store = figures.in_store
    print(
        f"the workers' commands in the store, queued to done: p50 {pct(in_store, 0.5) * 1000:.0f} ms, "
        f"p99 {pct(in_store, 0.99) * 1000:.0f} ms"
    )
    n = max(1, len(worker.turns))
    split = ", ".join(f"{k} {v / n * 1000:.0f}" for k, v in worker.cpu.items())
    print(f"the worker run's CPU per session, ms: {split}")
    spread = ", ".join(f"{name} {s}/{c}" for name, s, c in figures.spread)
    print(f"spread over the {WORKERS} workers (sessions/commands): {spread}")
    print(f"the workers' calls (warm-up included) by kind and state: {dict(sorted(figures.states.items()))}")
    print("cpu ms/s.: the replicas' (and workers') CPU, their children's included, per session;")
    print("pg ms/s.: PostgreSQL's; call: from its EXECUTING event to its end, seen by the client")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--calls", type=int, default=3, help="shell commands per session's turn")
    parser.add_argument("--warmup", type=int, default=2, help="turns before the measured ones, per backend")
    parser.add_argument(
        "--lease-seconds", type=float, default=15.0, help="worker_lease_seconds (15: the default)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the processes' logs (the path is printed)")
    parser.add_argument("--quick", action="store_true", help="10 sessions of 2 commands, 1 warm-up turn")
    parsed = parser.parse_args()
    if parsed.quick:
        parsed.sessions, parsed.calls, parsed.warmup = 10, 2, 1
    asyncio.run(main(parsed))
