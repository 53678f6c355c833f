"""What the A2A benches share (bench/provider_path.py, bench/a2a_overhead.py): devagent's real
provider path against a bare a2a-sdk agent with no model (the floor), each server its own process.

- the fake OpenAI-compatible model (tests/fakes/openai_server.py) as a process: a prompt starting
  with "chat" gets text; any other a `write_file` call, then text after the tool result;
- the floor: a bare a2a-sdk agent (in-memory task store) that emits as many events per turn as
  devagent did, chat or tool by the prompt's first word;
- server processes (`Server`: spawn, ready, stop), their CPU time and peak RSS from /proc;
- the client: one A2A 1.0 `SendStreamingMessage` turn, sequential and concurrent turns with the
  server's CPU per turn;
- `bench_run`: a temporary folder, the fake model running, a fresh SQLite file or PostgreSQL
  database; `serve_args`: `devagent serve` on the fake model, approval yolo.

Run as a script, it is one of those servers (`--serve-openai`, `--serve-bare PORT CHAT TOOL`), or
`devagent serve` under a CPU profile (`--serve-profiled FILE ARGS...`, yappi: `pip install yappi`
in the venv, a tool and not a dependency): SIGUSR1 starts the profile, the next SIGUSR1 writes it
to FILE (pstats) and stops it, so a bench profiles just the turns it chooses.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable
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
    from tests.fakes.openai_server import FakeToolCall, Reply

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

    serve_fake_openai(script)


def serve_fake_openai(script: Any) -> None:
    """The fake OpenAI-compatible server answering by `script`, until this process is stopped;
    its URL announced on stdout ("fake openai on URL")."""
    sys.path.insert(0, str(ROOT))
    from tests.fakes.openai_server import FakeOpenAI

    async def run() -> None:
        fake = FakeOpenAI(script)
        async with fake as base_url:
            print(f"fake openai on {base_url}", flush=True)
            await asyncio.Event().wait()

    asyncio.run(run())


# --- the floor: a bare a2a-sdk agent ----------------------------------------------------------------


def bare_app(url: str, store: Any, events: Callable[[Any], int]) -> Any:
    """The floor's ASGI app at `url`: a bare a2a-sdk agent on the task store `store` whose turn is
    Task, working, `events(context)` working updates with a TextPart, completed."""
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import TaskUpdater
    from a2a.types import Part, TaskState
    from starlette.applications import Starlette

    from a2a.helpers import new_task_from_user_message

    class Bare(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            n = events(context)
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

    sys.path.insert(0, str(ROOT))
    from tests.fakes.bare_a2a_agent import plain_card

    card = plain_card(url)
    handler = DefaultRequestHandler(agent_executor=Bare(), task_store=store, agent_card=card)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> Any:
        if hasattr(store, "initialize"):  # a database store makes its table first
            await store.initialize()
        yield
        await handler.aclose()

    return Starlette(
        routes=[
            *create_agent_card_routes(card),
            *create_jsonrpc_routes(handler, "/", enable_v0_3_compat=True),
        ],
        lifespan=lifespan,
    )


def serve_bare(port: int, chat_events: int, tool_events: int) -> None:
    """The floor with as many events per turn as devagent's (chat or tool, by the prompt's first
    word), from an in-memory task store."""
    import uvicorn
    from a2a.server.tasks import InMemoryTaskStore

    def events(context: Any) -> int:
        text = context.get_user_input()
        return (chat_events if text.startswith("chat") else tool_events) - 3  # Task, working, completed

    url = f"http://127.0.0.1:{port}/"
    app = bare_app(url, InMemoryTaskStore(), events)
    print(f"listening on {url}", file=sys.stderr, flush=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


# --- processes -----------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """The process's CPU time, its exited threads' included, in clock ticks (10 ms)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


@dataclass
class CpuMark:
    """A process's CPU time at one moment: in ticks, and per live thread in nanoseconds."""

    ticks_s: float
    threads_ns: dict[str, int]


def cpu_mark(pid: int) -> CpuMark:
    threads: dict[str, int] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):
            threads[task.name] = int((task / "schedstat").read_text().split()[0])
    return CpuMark(cpu_seconds(pid), threads)


def cpu_since(pid: int, mark: CpuMark) -> float:
    """Seconds of CPU the process used since `mark`: to the nanosecond from its threads' run
    times (a clock tick is a third of the floor's CPU for a turn) when every thread of the mark
    is still there, otherwise (a thread exited, its time gone from the sum) from the ticks."""
    now = cpu_mark(pid)
    if mark.threads_ns and mark.threads_ns.keys() <= now.threads_ns.keys():
        return sum(now.threads_ns.values()) / 1e9 - sum(mark.threads_ns.values()) / 1e9
    return now.ticks_s - mark.ticks_s


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


def body(text: str, context_id: str | None) -> dict[str, Any]:
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
            async with client.stream("POST", url, json=body(text, context_id), headers=HEADERS) as r:
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


async def sequential(
    c: Any, srv: Server, kind: str, turns: int, prof_file: Path | None = None
) -> dict[str, float]:
    """Three turns to warm up, then `turns` back to back (profiled into `prof_file` if given)."""
    for i in range(3):
        await one_turn(c, srv.url, f"{kind} warm {i}")
    await toggle_profile(srv, prof_file, saved=False)
    cpu0 = cpu_mark(srv.proc.pid)
    res = [await one_turn(c, srv.url, f"{kind} {i} {uuid.uuid4().hex[:6]}") for i in range(turns)]
    cpu = cpu_since(srv.proc.pid, cpu0)
    await toggle_profile(srv, prof_file, saved=True)
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


async def _pg_connect(u: Any) -> Any:
    """A connection to the server of `u`, to its maintenance database: the one that is there
    whatever the user is called, and not the database being created or dropped."""
    import asyncpg  # type: ignore[import-untyped]

    return await asyncpg.connect(
        host=u.host or "127.0.0.1", port=u.port or 5432, user=u.username or "postgres", database="postgres"
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


def windows(turns: int) -> list[tuple[int, int]]:
    """1-based inclusive windows of turns, scaled from the 200-turn ones."""
    out = [(1, min(10, turns))]
    for mid in (50, 100):
        m = mid * turns // 200
        if m > 10:
            out.append((max(1, m - 5), min(turns, m + 5)))
    out.append((max(1, turns - 10), turns))
    return out


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


def bare_server(tmp: Path, chat_events: int, tool_events: int) -> Server:
    """The floor, emitting `chat_events` / `tool_events` events per turn (not yet ready)."""
    cmd = [sys.executable, __file__, "--serve-bare", str(free_port()), str(chat_events), str(tool_events)]
    return Server(cmd, {**os.environ, "PYTHONPATH": str(ROOT / "src")}, tmp / "bare.log")


async def measure_turns(srv: Server, seq: int, at_once: list[int]) -> dict[str, Any]:
    """`seq` sequential chat turns, `seq` tool turns (each: p50 to the final event, server CPU per
    turn), then for each n of `at_once` n tool turns at once, and the peak RSS after them."""
    import httpx

    most = max(at_once, default=0)
    limits = httpx.Limits(max_connections=most + 10, max_keepalive_connections=most + 10)
    out: dict[str, Any] = {"spawn": srv.spawn_s * 1000}
    async with httpx.AsyncClient(timeout=600, limits=limits) as c:
        out["chat"] = await sequential(c, srv, "chat", seq)
        out["tool"] = await sequential(c, srv, "tool", seq)
        if at_once:
            await asyncio.gather(*(one_turn(c, srv.url, f"tool warm {i}") for i in range(20)))
        for n in at_once:
            out[f"conc{n}"] = await concurrent(c, srv, n)
        out["rss"] = peak_rss_mib(srv.proc.pid)
    return out


def floor_row(label: str, floor: float, dev: float, fmt: str = "10.1f") -> str:
    """A report line: the figure for the floor, for devagent, and their ratio."""
    return f"{label:44}{floor:{fmt}}{dev:{fmt}}{dev / floor if floor else float('nan'):8.2f}"


# --- a CPU profile of the server -------------------------------------------------------------------


def serve_profiled(prof_file: str, argv: list[str]) -> None:
    """`devagent serve ARGV` under yappi, started and saved by SIGUSR1 (see `toggle_profile`).
    CPU clock: it follows coroutines; its own cost per call (several times the call's) weighs
    call-heavy Python code more than C work, so read its shares as an order, not as times."""
    import runpy

    import yappi  # type: ignore[import-not-found]  # a tool: `pip install yappi` in the venv

    yappi.set_clock_type("cpu")
    running = [False]

    def toggle(*_: Any) -> None:
        if running[0]:
            yappi.stop()
            yappi.get_func_stats().save(prof_file + ".tmp", type="pstat")
            os.replace(prof_file + ".tmp", prof_file)
            yappi.clear_stats()
        else:
            yappi.clear_stats()
            yappi.start(builtins=False, profile_threads=True)
        running[0] = not running[0]

    signal.signal(signal.SIGUSR1, toggle)
    sys.argv = ["devagent", *argv]
    runpy.run_module("devagent", run_name="__main__")


async def toggle_profile(srv: Server, prof_file: Path | None, saved: bool) -> None:
    """Starts (saved False) or saves (saved True) the profile of a `--serve-profiled` server."""
    if prof_file is None:
        return
    if saved:
        prof_file.unlink(missing_ok=True)
    os.kill(srv.proc.pid, signal.SIGUSR1)
    for _ in range(600 if saved else 0):
        if prof_file.exists():
            return
        await asyncio.sleep(0.05)


def devagent_command(run: Run, prof_file: Path | None = None) -> list[str]:
    """The command of `devagent serve` for this run, under the profiler when `prof_file` is given."""
    if prof_file is None:
        return [sys.executable, "-m", "devagent", *run.serve_args()]
    return [sys.executable, __file__, "--serve-profiled", str(prof_file), *run.serve_args()]


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve-openai"]:
        serve_openai()
    elif sys.argv[1:2] == ["--serve-bare"]:
        serve_bare(*(int(x) for x in sys.argv[2:5]))
    elif sys.argv[1:2] == ["--serve-profiled"]:
        serve_profiled(sys.argv[2], sys.argv[3:])
