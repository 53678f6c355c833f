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
import contextlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "bench-token"
CLK_TCK = os.sysconf("SC_CLK_TCK")
HEADERS = {"Authorization": f"Bearer {TOKEN}", "A2A-Version": "1.0"}


# --- the fake model, as its own process ------------------------------------------------------------


def serve_openai() -> None:
    sys.path.insert(0, str(ROOT))
    from tests.fakes.openai_server import FakeOpenAI, FakeToolCall, Reply

    def script(body: dict[str, Any]) -> Reply:
        messages = body.get("messages") or []
        usage = {"prompt_tokens": 40, "completion_tokens": 9}
        if messages and messages[-1].get("role") == "tool":
            return Reply(text=["The file ", "is written."], usage=usage)
        prompt = str(messages[-1].get("content") or "") if messages else ""
        if prompt.startswith("chat"):
            return Reply(text=["Hello, ", "here is ", "the answer."], usage=usage)
        name = re.sub(r"[^A-Za-z0-9_-]", "_", prompt)[-40:] or "x"
        call = FakeToolCall(
            id=f"call_{uuid.uuid4().hex[:8]}",
            name="write_file",
            args={"path": f"out/{name}.txt", "content": f"{prompt}\n"},
        )
        return Reply(text=["Writing it."], tool_calls=[call], usage=usage)

    async def run() -> None:
        fake = FakeOpenAI(script)
        async with fake as base_url:
            print(f"fake openai on {base_url}", flush=True)
            await asyncio.Event().wait()

    asyncio.run(run())


# --- the floor: a bare a2a-sdk agent ----------------------------------------------------------------


def serve_bare(port: int, chat_events: int, tool_events: int) -> None:
    """Task, working, n-3 working updates with a TextPart, completed: as many events per turn as
    devagent's (chat or tool, by the prompt's first word), from an in-memory task store."""
    import contextlib

    import uvicorn
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
    from a2a.types import Part, TaskState
    from starlette.applications import Starlette

    from a2a.helpers import new_task_from_user_message

    class Bare(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            text = context.get_user_input()
            n = (chat_events if text.startswith("chat") else tool_events) - 3
            if context.current_task is None:
                await event_queue.enqueue_event(new_task_from_user_message(context.message))
            up = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
            await up.start_work()
            for i in range(n):
                await up.update_status(
                    TaskState.TASK_STATE_WORKING,
                    up.new_agent_message([Part(text=f"chunk {i} of the answer. ")]),
                    metadata={"ext": {"kind": "TEXT_CONTENT", "model": "bare"}},
                )
            await up.complete()

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            pass

    url = f"http://127.0.0.1:{port}/"
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.fakes.bare_a2a_agent import plain_card

    card = plain_card(url)
    handler = DefaultRequestHandler(agent_executor=Bare(), task_store=InMemoryTaskStore(), agent_card=card)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> Any:
        yield
        await handler.aclose()

    app = Starlette(
        routes=[
            *create_agent_card_routes(card),
            *create_jsonrpc_routes(handler, "/", enable_v0_3_compat=True),
        ],
        lifespan=lifespan,
    )
    print(f"listening on {url}", file=sys.stderr, flush=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


# --- processes -----------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def peak_rss_mib(pid: int) -> float:
    m = re.search(r"VmHWM:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    return int(m.group(1)) / 1024 if m else float("nan")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """A server process and its URL; `spawn_s`: spawn -> first JSON-RPC request answered."""

    def __init__(self, cmd: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        self.t0 = time.perf_counter()
        with log.open("wb") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        self.url = ""
        self.spawn_s = float("nan")

    async def ready(self) -> Server:
        import httpx

        deadline = time.monotonic() + 120
        while not self.url:
            m = re.search(r"listening on (http://\S+)", self.log.read_text(errors="replace"))
            if m:
                self.url = m.group(1).rstrip("/") + "/"
            elif self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(self.log.read_text(errors="replace")[-3000:])
            else:
                await asyncio.sleep(0.005)
        body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "none"}}
        async with httpx.AsyncClient(timeout=5) as c:
            while True:
                try:
                    r = await c.post(self.url, json=body, headers=HEADERS)
                    if (
                        r.headers.get("content-type", "").startswith("application/json")
                        and "jsonrpc" in r.text
                    ):
                        self.spawn_s = time.perf_counter() - self.t0
                        return self
                except httpx.HTTPError:
                    pass
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(self.log.read_text(errors="replace")[-3000:])
                await asyncio.sleep(0.005)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# --- the client ----------------------------------------------------------------------------------


def _body(text: str, context_id: str | None) -> dict[str, Any]:
    msg: dict[str, Any] = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    if context_id:
        msg["contextId"] = context_id
    return {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": msg}}


async def one_turn(
    client: Any, url: str, text: str, context_id: str | None = None
) -> tuple[float, int, bool]:
    """(seconds to the final event, events, completed)"""
    t0 = time.perf_counter()
    n = 0
    done = False
    for attempt in range(2):
        try:
            async with client.stream("POST", url, json=_body(text, context_id), headers=HEADERS) as r:
                async for line in r.aiter_lines():
                    if line.startswith("data:"):
                        n += 1
                        if '"TASK_STATE_COMPLETED"' in line:
                            done = True
                        elif '"error"' in line[:40]:
                            print(line[:300], file=sys.stderr)
            break
        except Exception as e:
            # A kept-alive connection the server closed (uvicorn: after 5 s idle) just as the
            # client reused it fails before anything was sent: sent again once, timed from the
            # first attempt.
            if attempt == 0 and n == 0 and type(e).__name__ in ("ReadError", "RemoteProtocolError"):
                continue
            print(f"turn failed: {e!r}", file=sys.stderr)
            break
    return time.perf_counter() - t0, n, done


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * p))] if s else float("nan")


async def sequential(c: Any, srv: Server, kind: str, turns: int) -> dict[str, float]:
    for i in range(3):
        await one_turn(c, srv.url, f"{kind} warm {i}")
    cpu0 = cpu_seconds(srv.proc.pid)
    res = [await one_turn(c, srv.url, f"{kind} {i} {uuid.uuid4().hex[:6]}") for i in range(turns)]
    cpu = cpu_seconds(srv.proc.pid) - cpu0
    return {
        "p50": pct([r[0] for r in res], 0.5) * 1000,
        "cpu": cpu / turns * 1000,
        "events": statistics.mode(r[1] for r in res),
        "completed": sum(r[2] for r in res),
    }


async def concurrent(c: Any, srv: Server, n: int) -> dict[str, float]:
    res = await asyncio.gather(
        *(one_turn(c, srv.url, f"tool conc {i} {uuid.uuid4().hex[:6]}") for i in range(n))
    )
    ok = [r[0] for r in res if r[2]]
    return {"p50": pct(ok, 0.5), "p99": pct(ok, 0.99), "completed": len(ok)}


def windows(turns: int) -> list[tuple[int, int]]:
    out = [(1, min(10, turns))]
    for mid in (50, 100):
        m = mid * turns // 200
        if m > 10:
            out.append((max(1, m - 5), min(turns, m + 5)))
    out.append((max(1, turns - 10), turns))
    return out


async def grow(c: Any, srv: Server, turns: int) -> tuple[list[float], list[float]]:
    """One conversation: `turns` tool turns in one contextId. (ms per turn, CPU ms per turn)"""
    context_id = str(uuid.uuid4())
    times: list[float] = []
    cpus: list[float] = []
    for i in range(turns):
        cpu0 = cpu_seconds(srv.proc.pid)
        t, _, done = await one_turn(c, srv.url, f"tool grow {i}", context_id)
        cpus.append((cpu_seconds(srv.proc.pid) - cpu0) * 1000)
        if not done:
            raise RuntimeError(f"turn {i} of the long conversation did not complete")
        times.append(t * 1000)
    return times, cpus


async def measure(srv: Server, args: argparse.Namespace) -> dict[str, Any]:
    import httpx

    most = max(args.concurrent)
    limits = httpx.Limits(max_connections=most + 10, max_keepalive_connections=most + 10)
    out: dict[str, Any] = {"spawn": srv.spawn_s * 1000}
    async with httpx.AsyncClient(timeout=600, limits=limits) as c:
        out["chat"] = await sequential(c, srv, "chat", args.seq)
        out["tool"] = await sequential(c, srv, "tool", args.seq)
        await asyncio.gather(*(one_turn(c, srv.url, f"tool warm {i}") for i in range(20)))
        for n in args.concurrent:
            out[f"conc{n}"] = await concurrent(c, srv, n)
        out["rss"] = peak_rss_mib(srv.proc.pid)
        if args.grow:
            out["grow"] = await grow(c, srv, args.grow)
    return out


async def _pg_connect(u: Any) -> Any:
    import asyncpg  # type: ignore[import-untyped]

    return await asyncpg.connect(
        host=u.host or "127.0.0.1", port=u.port or 5432, user=u.username or "postgres"
    )


async def create_pg(url: str) -> tuple[str, str]:
    from sqlalchemy.engine import make_url

    u = make_url(url)
    name = f"devagent_bench_{uuid.uuid4().hex[:10]}"
    conn = await _pg_connect(u)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return name, u.set(drivername="postgresql+asyncpg", database=name).render_as_string(hide_password=False)


async def drop_pg(url: str, name: str) -> None:
    from sqlalchemy.engine import make_url

    u = make_url(url)
    conn = await _pg_connect(u)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


async def pg_size(url: str) -> int:
    from sqlalchemy.engine import make_url

    u = make_url(url)
    conn = await _pg_connect(u)
    try:
        return int(await conn.fetchval("SELECT pg_database_size($1)", u.database))
    finally:
        await conn.close()


async def spawn_median(make: Any, runs: int) -> float:
    times = []
    for _ in range(runs):
        srv = make()
        try:
            times.append((await srv.ready()).spawn_s * 1000)
        finally:
            srv.stop()
    return statistics.median(times)


async def fake_model_env(fake: Server, tmp: Path) -> dict[str, str]:
    """Waits for the fake OpenAI server to announce its URL; the environment of a devagent
    server that uses it (and nothing of this shell's DEVAGENT_* settings)."""
    m = None
    while m is None:
        await asyncio.sleep(0.05)
        m = re.search(r"fake openai on (\S+)", fake.log.read_text(errors="replace"))
        if fake.proc.poll() is not None:
            raise RuntimeError(fake.log.read_text())
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVAGENT_")}
    env.update(
        {
            "PYTHONUNBUFFERED": "1",
            "OPENAI_BASE_URL": m.group(1),
            "OPENAI_API_KEY": "fake",
            "DEVAGENT_PLAIN_APPROVAL": "server",
            "DEVAGENT_DATA_DIR": str(tmp / "data"),
            # many clients behind one token: the per-token stream limit does not apply
            "DEVAGENT_MAX_STREAMS_PER_TOKEN": "0",
        }
    )
    return env


@dataclass
class Run:
    """What a bench run works in: a temporary folder, a workspace, the database URL devagent
    stores on, the fake model's environment, and the processes to stop at the end."""

    tmp: Path
    ws: Path
    db_url: str
    env: dict[str, str]
    procs: list[Server]

    def serve_args(self) -> list[str]:
        """`devagent serve`'s arguments: the real provider path, approval yolo."""
        where = ["--port", "0", "--db", self.db_url, "--workspace-root", str(self.ws)]
        return ["serve", *where, "--token", TOKEN, "--approval", "yolo", "--model", "openai:fake"]


@contextlib.asynccontextmanager
async def bench_run(db: str) -> AsyncIterator[Run]:
    """A fresh SQLite file, or with `db` a fresh database on that PostgreSQL server (dropped at
    the end), and the fake OpenAI server running; every process in `procs` stopped at the end."""
    pg_name = ""
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        ws = tmp / "ws"
        (ws / "out").mkdir(parents=True)
        db_url = f"sqlite:///{tmp / 'devagent.db'}"
        if db:
            pg_name, db_url = await create_pg(db)
        fake = Server([sys.executable, __file__, "--serve-openai"], dict(os.environ), tmp / "openai.log")
        run = Run(tmp, ws, db_url, {}, [fake])
        try:
            run.env = await fake_model_env(fake, tmp)
            yield run
        finally:
            for p in reversed(run.procs):
                p.stop()
            if pg_name:
                await drop_pg(db, pg_name)


async def main(args: argparse.Namespace) -> None:
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} (1 and 5 min), {os.cpu_count()} cores")
    async with bench_run(args.db) as run:
        tmp, db_url, env = run.tmp, run.db_url, run.env
        serve = [sys.executable, "-m", "devagent", *run.serve_args()]
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

        def bare_server() -> Server:
            port = free_port()
            cmd = [
                sys.executable,
                __file__,
                "--serve-bare",
                str(port),
                str(chat_events),
                str(tool_events),
            ]
            return Server(cmd, {**os.environ, "PYTHONPATH": str(ROOT / "src")}, tmp / "bare.log")

        bare = bare_server()
        run.procs.append(bare)
        await bare.ready()
        bare_res = await measure(bare, args)
        bare.stop()
        bare_spawn = [bare_res["spawn"]]
        for _ in range(args.spawns - 1):
            bare_spawn.append(await spawn_median(bare_server, 1))
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
        print(f"{label:44}{b:{fmt}}{d:{fmt}}{d / b if b else float('nan'):8.2f}")

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
    ap.add_argument("--serve-openai", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--serve-bare", nargs=3, type=int, help=argparse.SUPPRESS)
    ap.add_argument("--seq", type=int, default=30, help="sequential turns of each kind")
    ap.add_argument("--concurrent", default="100,200", help="tool turns at once, e.g. 100,200")
    ap.add_argument("--grow", type=int, default=200, help="turns of the long conversation (0: skip)")
    ap.add_argument("--spawns", type=int, default=3, help="fresh processes for spawn -> first answer")
    ap.add_argument("--db", default="", help="postgresql://... (a fresh database on it); default SQLite")
    a = ap.parse_args()
    if a.serve_openai:
        serve_openai()
    elif a.serve_bare:
        serve_bare(*a.serve_bare)
    else:
        a.concurrent = [int(x) for x in str(a.concurrent).split(",") if x]
        asyncio.run(main(a))
