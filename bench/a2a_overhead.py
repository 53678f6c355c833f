"""A2A overhead: the same scripted turn through devagent and through a bare a2a-sdk agent that
emits the same number of events, both on SQLite task stores (or the bare one in memory:
--bare-store memory), each server in its own process.

Prints, for each: mean time per streamed turn (turns back to back), time to first event (back
to back, and on an idle server), events per second, and the overhead ratio (devagent / bare);
then 200 concurrent streaming tasks against each: p50/p99 latency per task and the server's peak
memory (VmHWM).

Then the server CPU of a chat turn and of a tool turn: `devagent serve` on its real provider path
(the fake OpenAI-compatible model of bench/provider_floor.py, a tool turn two model requests with a
`write_file` between them, approval yolo, SQLite) against the floor, a bare a2a-sdk agent with no
model emitting as many events. Both servers run side by side; `--rounds` rounds each measure
`--seq` sequential chat turns then tool turns on devagent, then on the floor (server CPU per turn
from /proc, p50 time to the final event): the ratios are per round, given as the median and the
range. Then `--tool-concurrent` tool turns at once on each (p50, p99, completed). `--profile FILE`
writes a CPU profile (pstats, yappi) of `--seq` more sequential tool turns on devagent,
after the rounds.

    .venv/bin/python bench/a2a_overhead.py [--turns 30] [--concurrent 200] [--chunks 40]
        [--part stream,provider] [--seq 30] [--rounds 3] [--tool-concurrent 100] [--profile FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import provider_floor as pf

TOKEN = "bench-token"


# --- servers (run as subprocesses) ---------------------------------------------------------------


def _script(path: Path, chunks: int) -> None:
    items = [{"text": f"chunk {i} of the answer. "} for i in range(chunks)]
    path.write_text(json.dumps({"steps": [{"items": items}]}))  # every turn opens a new context


def serve_devagent(port: int, tmp: Path, chunks: int) -> None:
    from devagent.a2a import A2ASettings, run_server
    from devagent.agent.settings import CoreConfig

    script = tmp / "script.json"
    _script(script, chunks)
    ws = tmp / "ws"
    ws.mkdir(exist_ok=True)
    cfg = CoreConfig(db_url=f"sqlite+aiosqlite:///{tmp / 'devagent.db'}", default_model=f"scripted:{script}")
    # many clients behind one token: the per-token stream limit does not apply
    settings = A2ASettings(
        host="127.0.0.1", port=port, workspace_roots=[ws], tokens={TOKEN: "bench"}, max_streams_per_token=0
    )
    run_server(cfg, settings)


def serve_bare(port: int, tmp: Path, events: int) -> None:
    """provider_floor's bare a2a-sdk agent: Task, `events` working updates with a TextPart,
    completed; on SQLite, or in memory with BENCH_BARE_STORE=memory."""
    import uvicorn

    store: Any
    if os.environ.get("BENCH_BARE_STORE") == "memory":
        from a2a.server.tasks import InMemoryTaskStore

        store = InMemoryTaskStore()
    else:
        from a2a.server.tasks import DatabaseTaskStore
        from sqlalchemy.ext.asyncio import create_async_engine

        store = DatabaseTaskStore(create_async_engine(f"sqlite+aiosqlite:///{tmp / 'bare.db'}"))
    app = pf.bare_app(f"http://127.0.0.1:{port}/", store, lambda _context: events)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


# --- client --------------------------------------------------------------------------------------


def _body(text: str) -> dict[str, Any]:
    msg = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    return {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": msg}}


HEADERS = {"Authorization": f"Bearer {TOKEN}", "A2A-Version": "1.0"}


async def one_turn(client: Any, url: str) -> tuple[float, float, int]:
    """(total seconds, seconds to first event, events)"""
    t0 = time.perf_counter()
    first = 0.0
    n = 0
    async with client.stream("POST", url, json=_body("bench"), headers=HEADERS) as r:
        async for line in r.aiter_lines():
            if line.startswith("data:"):
                if n == 0:
                    first = time.perf_counter() - t0
                n += 1
                if '"error"' in line[:40]:
                    raise RuntimeError(line)
    return time.perf_counter() - t0, first, n


def start(role: str, port: int, tmp: Path, n: int, bare_store: str = "sqlite") -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).resolve().parent.parent / "src"),
        "BENCH_BARE_STORE": bare_store,
    }
    return subprocess.Popen(
        [sys.executable, __file__, "--serve", role, "--port", str(port), "--tmp", str(tmp), "--n", str(n)],
        env=env,
    )


async def wait_ready(url: str) -> None:
    import httpx

    async with httpx.AsyncClient() as c:
        for _ in range(600):
            try:
                r = await c.get(url + ".well-known/agent-card.json")
                if r.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.05)
    raise RuntimeError(f"{url} did not start")


def peak_rss_mb(pid: int) -> float:
    text = Path(f"/proc/{pid}/status").read_text()
    m = re.search(r"VmHWM:\s+(\d+) kB", text)
    return int(m.group(1)) / 1024 if m else float("nan")


async def measure(url: str, turns: int, concurrent: int) -> dict[str, Any]:
    import httpx

    limits = httpx.Limits(max_connections=concurrent + 10, max_keepalive_connections=concurrent + 10)
    async with httpx.AsyncClient(timeout=120, limits=limits) as c:
        for _ in range(3):  # warm up (imports, model creation, first session)
            await one_turn(c, url)
        seq = [await one_turn(c, url) for _ in range(turns)]
        idle_first = []
        for _ in range(10):  # a server with nothing else to do: pause between turns
            await asyncio.sleep(0.3)
            idle_first.append((await one_turn(c, url))[1])
        t0 = time.perf_counter()
        conc = await asyncio.gather(*(one_turn(c, url) for _ in range(concurrent)))
        wall = time.perf_counter() - t0
    totals = [s[0] for s in seq]
    events = seq[0][2]
    lat = sorted(x[0] for x in conc)
    return {
        "turn_mean_ms": statistics.mean(totals) * 1000,
        "first_event_ms": statistics.mean(s[1] for s in seq) * 1000,
        "idle_first_event_ms": statistics.median(idle_first) * 1000,
        "events": events,
        "events_per_s": events / statistics.mean(totals),
        "conc_p50_ms": lat[len(lat) // 2] * 1000,
        "conc_p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000,
        "conc_wall_s": wall,
        "conc_events_per_s": sum(x[2] for x in conc) / wall,
        # a turn completed when its stream carried every event of the turn (the final one included)
        "conc_completed": sum(1 for x in conc if x[2] == events),
    }


async def measured(role: str, port: int, tmp: Path, n: int, args: argparse.Namespace) -> dict[str, Any]:
    """`measure` of the server `start(role, port, tmp, n)` starts, with its peak RSS; stopped after."""
    p = start(role, port, tmp, n, args.bare_store)
    try:
        url = f"http://127.0.0.1:{port}/"
        await wait_ready(url)
        res = await measure(url, args.turns, args.concurrent)
        res["peak_rss_mb"] = peak_rss_mb(p.pid)
    finally:
        p.terminate()
        p.wait()
    return res


async def stream_turns(args: argparse.Namespace) -> None:
    """The scripted turn of `--chunks` text chunks, devagent and the bare agent (the first part)."""
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        # devagent first, to learn how many events its turn emits
        dev = await measured("devagent", args.port, tmp, args.chunks, args)
        # Task + working + n updates + completed: the bare agent emits the same count
        bare = await measured("bare", args.port + 1, tmp, dev["events"] - 3, args)
    store = args.bare_store
    print(f"events per turn: devagent {dev['events']}, bare a2a-sdk {bare['events']} ({store} task store)")
    print(f"{'':24}{'devagent':>12}{'bare sdk':>12}")
    rows = [
        ("turn mean (ms)", "turn_mean_ms"),
        ("first event (ms)", "first_event_ms"),
        ("first event, idle (ms)", "idle_first_event_ms"),
        ("events/s (one stream)", "events_per_s"),
        (f"{args.concurrent} conc p50 (ms)", "conc_p50_ms"),
        (f"{args.concurrent} conc p99 (ms)", "conc_p99_ms"),
        (f"{args.concurrent} conc wall (s)", "conc_wall_s"),
        (f"{args.concurrent} conc events/s", "conc_events_per_s"),
        (f"{args.concurrent} conc completed", "conc_completed"),
        ("peak RSS (MB)", "peak_rss_mb"),
    ]
    for label, key in rows:
        print(f"{label:24}{dev[key]:12.1f}{bare[key]:12.1f}")
    print(f"overhead ratio (turn time devagent / bare): {dev['turn_mean_ms'] / bare['turn_mean_ms']:.2f}x")
    print(
        f"overhead ratio ({args.concurrent} concurrent, p50): {dev['conc_p50_ms'] / bare['conc_p50_ms']:.2f}x"
    )


# --- server CPU of chat and tool turns on the provider path ----------------------------------------


async def rounds_of_turns(
    pair: dict[str, pf.Server], args: argparse.Namespace, prof: Path | None
) -> dict[str, list[dict[str, Any]]]:
    """`args.rounds` rounds: chat then tool turns on devagent, then on the floor; then, with
    `prof`, more tool turns on devagent under the profiler."""
    import httpx

    out: dict[str, list[dict[str, Any]]] = {"dev": [], "floor": []}
    async with httpx.AsyncClient(timeout=600) as c:
        for _ in range(args.rounds):
            for name, srv in pair.items():
                chat = await pf.sequential(c, srv, "chat", args.seq)
                tool = await pf.sequential(c, srv, "tool", args.seq)
                out[name].append({"chat": chat, "tool": tool})
        if prof is not None:  # after the rounds: the profiler's own cost is in no figure
            await pf.sequential(c, pair["dev"], "tool", args.seq, prof)
    return out


async def at_once(srv: pf.Server, n: int) -> dict[str, float]:
    import httpx

    limits = httpx.Limits(max_connections=n + 10, max_keepalive_connections=n + 10)
    async with httpx.AsyncClient(timeout=600, limits=limits) as c:
        await asyncio.gather(*(pf.one_turn(c, srv.url, f"tool warm {i}") for i in range(20)))
        return await pf.concurrent(c, srv, n)


async def provider_turns(args: argparse.Namespace) -> None:
    """Server CPU and time to the final event of chat and tool turns, devagent against the floor."""
    load = os.getloadavg()
    prof = Path(args.profile).resolve() if args.profile else None
    async with pf.bench_run("") as run:
        dev = pf.Server(pf.devagent_command(run, prof), run.env, run.tmp / "devagent.log")
        run.procs.append(dev)
        await dev.ready()
        first = await pf.measure_turns(dev, 2, [])  # the events of each kind, for the floor
        floor = pf.bare_server(run.tmp, first["chat"]["events"], first["tool"]["events"])
        run.procs.append(floor)
        await floor.ready()
        res = await rounds_of_turns({"dev": dev, "floor": floor}, args, prof)
        conc: dict[str, dict[str, float]] = {}
        if args.tool_concurrent:
            conc = {
                name: await at_once(srv, args.tool_concurrent)
                for name, srv in (("dev", dev), ("floor", floor))
            }
    report_provider(first, res, conc, args, load[0])


def report_provider(
    first: dict[str, Any],
    res: dict[str, list[dict[str, Any]]],
    conc: dict[str, dict[str, float]],
    args: argparse.Namespace,
    load: float,
) -> None:
    print(
        f"provider path: events per turn chat {first['chat']['events']}, tool {first['tool']['events']}; "
        f"{args.rounds} rounds of {args.seq} sequential turns each; load {load:.1f} on {os.cpu_count()} cores"
    )
    print(f"{'figure (median of rounds)':44}{'floor':>10}{'devagent':>10}{'ratio':>8}  ratio range")
    for kind, key, label in (
        ("chat", "cpu", "server CPU per chat turn (ms)"),
        ("tool", "cpu", "server CPU per tool turn (ms)"),
        ("chat", "p50", "chat turn, time to final event p50 (ms)"),
        ("tool", "p50", "tool turn, time to final event p50 (ms)"),
    ):
        d = [r[kind][key] for r in res["dev"]]
        f = [r[kind][key] for r in res["floor"]]
        ratios = [a / b for a, b in zip(d, f, strict=True) if b]
        spread = f"  {min(ratios):.2f}-{max(ratios):.2f}" if ratios else ""
        line = pf.floor_row(label, statistics.median(f), statistics.median(d))
        print(f"{line[:64]}{statistics.median(ratios) if ratios else float('nan'):8.2f}{spread}")
    if conc:
        n = args.tool_concurrent
        print(
            pf.floor_row(f"{n} tool turns at once p50 (s)", conc["floor"]["p50"], conc["dev"]["p50"], "10.2f")
        )
        print(
            pf.floor_row(f"{n} tool turns at once p99 (s)", conc["floor"]["p99"], conc["dev"]["p99"], "10.2f")
        )
        done = f"{conc['floor']['completed']:10d}{conc['dev']['completed']:10d}"
        print(f"{f'{n} tool turns at once completed':44}{done}")
    if args.profile:
        print(f"profile of devagent's sequential tool turns (after the rounds): {args.profile}")


async def main(args: argparse.Namespace) -> None:
    parts = set(args.part.split(","))
    if "stream" in parts:
        await stream_turns(args)
    if "provider" in parts:
        await provider_turns(args)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", choices=["devagent", "bare"])
    ap.add_argument("--port", type=int, default=42310)
    ap.add_argument("--tmp", type=Path)
    ap.add_argument("--n", type=int, default=0)
    ap.add_argument("--turns", type=int, default=30)
    ap.add_argument("--concurrent", type=int, default=200)
    ap.add_argument("--chunks", type=int, default=40)
    ap.add_argument(
        "--bare-store",
        choices=["sqlite", "memory"],
        default="sqlite",
        help="the bare agent's task store: SQLite like devagent's (default) or in memory",
    )
    ap.add_argument("--part", default="stream,provider", help="stream (scripted turns), provider (CPU)")
    ap.add_argument(
        "--seq", type=int, default=30, help="provider part: sequential turns of each kind a round"
    )
    ap.add_argument("--rounds", type=int, default=3, help="provider part: rounds, devagent then floor")
    ap.add_argument("--tool-concurrent", type=int, default=100, help="provider part: tool turns at once")
    ap.add_argument("--profile", default="", help="provider part: FILE for devagent's CPU profile")
    a = ap.parse_args()
    if a.serve == "devagent":
        serve_devagent(a.port, a.tmp, a.n)
    elif a.serve == "bare":
        serve_bare(a.port, a.tmp, a.n)
    else:
        asyncio.run(main(a))
