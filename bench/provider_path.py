"""devagent's real provider path side by side with a bare a2a-sdk agent, in one run (issue 14).

devagent: `devagent serve --model openai:fake --approval yolo` against the fake OpenAI-compatible
server of tests/fakes/openai_server.py, run as its own process: a chat turn is one model call
(text); a tool turn two (the first asks for `write_file`, the second answers with text after the
tool result). The floor: a bare a2a-sdk agent (in-memory task store, no model) that emits the same
number of events per turn as devagent did. Both are spoken to by the same client, with A2A 1.0
`SendStreamingMessage`, each turn a new conversation unless said otherwise.

Prints, floor / devagent / ratio:
- sequential chat and tool turns: p50 time to the final event, server CPU per turn (/proc);
- 100 and 200 tool turns at once: p50 / p99, how many completed (every event up to the final one);
- peak RSS of the server process (VmHWM) after the 200 concurrent turns;
- spawn -> first JSON-RPC request answered (median of `--spawns` fresh processes);
- one conversation grown to `--grow` tool turns (one contextId): mean time per turn over turns
  1-10, 45-55, 95-105, 190-200, server CPU per turn in the same windows, and the database size.

    .venv/bin/python bench/provider_path.py [--seq 30] [--concurrent 100,200] [--grow 200]
        [--db postgresql://postgres@127.0.0.1:5432/postgres]

`--db postgresql://...`: devagent stores on a fresh database created on that server for the run
(dropped afterwards); default a fresh SQLite file. The machine is shared: compare the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from provider_floor import (
    Server,
    bare_server,
    bench_run,
    cpu_mark,
    cpu_since,
    devagent_command,
    floor_row,
    measure_turns,
    one_turn,
    pg_size,
    spawn_median,
    windows,
)


async def grow(c: Any, srv: Server, turns: int) -> tuple[list[float], list[float]]:
    """One conversation: `turns` tool turns in one contextId. (ms per turn, CPU ms per turn)"""
    context_id = str(uuid.uuid4())
    times: list[float] = []
    cpus: list[float] = []
    for i in range(turns):
        cpu0 = cpu_mark(srv.proc.pid)
        t, _, done = await one_turn(c, srv.url, f"tool grow {i}", context_id)
        cpus.append(cpu_since(srv.proc.pid, cpu0) * 1000)
        if not done:
            raise RuntimeError(f"turn {i} of the long conversation did not complete")
        times.append(t * 1000)
    return times, cpus


async def measure(srv: Server, args: argparse.Namespace) -> dict[str, Any]:
    import httpx

    out = await measure_turns(srv, args.seq, args.concurrent)
    if args.grow:
        async with httpx.AsyncClient(timeout=600) as c:
            out["grow"] = await grow(c, srv, args.grow)
    return out


async def main(args: argparse.Namespace) -> None:
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} (1 and 5 min), {os.cpu_count()} cores")
    async with bench_run(args.db) as run:
        tmp, db_url, env = run.tmp, run.db_url, run.env
        serve = devagent_command(run)
        dev = Server(serve, env, tmp / "devagent.log")
        run.procs.append(dev)
        await dev.ready()
        dev_res = await measure(dev, args)
        if args.db:
            dev_res["db_bytes"] = await pg_size(db_url)
        else:
            dev_res["db_bytes"] = sum(p.stat().st_size for p in tmp.glob("devagent.db*"))
        dev.stop()
        # spawn -> first answer on fresh processes (the first one above included)
        dev_spawn = [dev_res["spawn"]]
        for i in range(args.spawns - 1):
            cmd = [*serve]
            cmd[cmd.index("--db") + 1] = f"sqlite:///{tmp / f'spawn{i}.db'}" if not args.db else db_url
            dev_spawn.append(await spawn_median(lambda cmd=cmd: Server(cmd, env, tmp / "spawn.log"), 1))
        dev_res["spawn"] = statistics.median(dev_spawn)

        chat_events, tool_events = dev_res["chat"]["events"], dev_res["tool"]["events"]

        def floor() -> Server:
            return bare_server(tmp, chat_events, tool_events)

        bare = floor()
        run.procs.append(bare)
        await bare.ready()
        bare_res = await measure(bare, args)
        bare.stop()
        bare_spawn = [bare_res["spawn"]]
        for _ in range(args.spawns - 1):
            bare_spawn.append(await spawn_median(floor, 1))
        bare_res["spawn"] = statistics.median(bare_spawn)
    report(bare_res, dev_res, args)


def report(bare: dict[str, Any], dev: dict[str, Any], args: argparse.Namespace) -> None:
    store = "PostgreSQL" if args.db else "SQLite"
    print(f"events per turn: chat {dev['chat']['events']}, tool {dev['tool']['events']} (both servers)")
    print(
        f"devagent: openai:fake over HTTP, approval yolo, {store}; floor: bare a2a-sdk, in-memory task store"
    )
    print(f"{'figure':44}{'floor':>10}{'devagent':>10}{'ratio':>8}")

    def row(label: str, b: float, d: float, fmt: str = "10.1f") -> None:
        print(floor_row(label, b, d, fmt))

    row("sequential chat turn p50 (ms)", bare["chat"]["p50"], dev["chat"]["p50"])
    row("sequential tool turn p50 (ms)", bare["tool"]["p50"], dev["tool"]["p50"])
    row("server CPU per chat turn (ms)", bare["chat"]["cpu"], dev["chat"]["cpu"])
    row("server CPU per tool turn (ms)", bare["tool"]["cpu"], dev["tool"]["cpu"])
    for n in args.concurrent:
        b, d = bare[f"conc{n}"], dev[f"conc{n}"]
        row(f"{n} tool turns at once p50 (s)", b["p50"], d["p50"], "10.2f")
        row(f"{n} tool turns at once p99 (s)", b["p99"], d["p99"], "10.2f")
        print(f"{f'{n} tool turns at once completed':44}{b['completed']:10d}{d['completed']:10d}")
    row(f"peak RSS after {max(args.concurrent)} at once (MiB)", bare["rss"], dev["rss"])
    row(f"spawn -> first JSON-RPC answer (ms, median of {args.spawns})", bare["spawn"], dev["spawn"])
    if args.grow:
        wins = windows(args.grow)
        print(f"one conversation, {args.grow} tool turns: mean ms per turn (server CPU ms per turn)")
        for name, res in (("floor", bare), ("devagent", dev)):
            times, cpus = res["grow"]
            cells = "  ".join(
                f"{a}-{b}: {statistics.mean(times[a - 1 : b]):6.1f} ({statistics.mean(cpus[a - 1 : b]):5.1f})"
                for a, b in wins
            )
            first, last = statistics.mean(times[: wins[0][1]]), statistics.mean(times[wins[-1][0] - 1 :])
            print(f"  {name:9} {cells}  last/first {last / first:.2f}")
        print(f"  devagent database at the end: {dev['db_bytes'] / 1e6:.2f} MB ({store})")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=30, help="sequential turns of each kind")
    ap.add_argument("--concurrent", default="100,200", help="tool turns at once, e.g. 100,200")
    ap.add_argument("--grow", type=int, default=200, help="turns of the long conversation (0: skip)")
    ap.add_argument("--spawns", type=int, default=3, help="fresh processes for spawn -> first answer")
    ap.add_argument("--db", default="", help="postgresql://... (a fresh database on it); default SQLite")
    a = ap.parse_args()
    a.concurrent = [int(x) for x in str(a.concurrent).split(",") if x]
    asyncio.run(main(a))
