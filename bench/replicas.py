"""Scale-out: concurrent tool turns through the round-robin balancer with 1, 2 and 3 `devagent serve`
replicas on one fresh PostgreSQL database, against a baseline of one replica without the balancer
(same database, same run).

Each turn: `message/stream` (v0.3) of a new conversation; the model (`openai-compatible` against
the fake OpenAI server of tests/fakes/openai_server.py, in its own process) asks to write a file,
the server's approval mode is `yolo` so nothing stops for permission, then the model answers with
a short text. A turn counts as completed when its stream carried every event up to the final
`completed` one.

A row "1 replica, no fan-out" runs one more replica with DEVAGENT_REPLICA_EVENTS=off (its live
events not logged for other replicas): against "1 replica, direct" it shows what the cross-replica
machinery costs one process on the same database.

Prints, per setup: completed turns, p50/p99 time to the final event, wall time, turns per second,
CPU seconds per turn of the replicas, of the balancer and of PostgreSQL (from /proc), and ratios
against the baseline (measured first, after a warm-up burst on every replica, and again last: the
difference between the two is the run's noise).

    .venv/bin/python bench/replicas.py [--concurrent 200] [--replicas 1,2,3] [--warmup 4]

Needs PostgreSQL on 127.0.0.1:5432 (user postgres; DEVAGENT_TEST_PG overrides). The database is
created for the run and dropped afterwards. 2 shared cores: the client, the fake model, the
balancer, the replicas and PostgreSQL all compete for them, so absolute figures are modest; compare
the ratios within one run.
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
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import provider_floor as pf

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "bench-token"
PG_URL = os.environ.get("DEVAGENT_TEST_PG", "postgresql+asyncpg://postgres@127.0.0.1:5432/test")
CLK_TCK = os.sysconf("SC_CLK_TCK")


# --- the fake model, as its own process ------------------------------------------------------------


def serve_openai() -> None:
    sys.path.insert(0, str(ROOT))
    from tests.fakes.openai_server import FakeToolCall, Reply

    def script(body: dict[str, Any]) -> Reply:
        messages = body.get("messages") or []
        if messages and messages[-1].get("role") == "tool":
            return Reply(
                text=["The file ", "is written."], usage={"prompt_tokens": 50, "completion_tokens": 5}
            )
        prompt = next((m.get("content") for m in reversed(messages) if m.get("role") == "user"), "") or ""
        name = re.sub(r"[^A-Za-z0-9_-]", "_", str(prompt))[-40:] or "x"
        call = FakeToolCall(
            id=f"call_{uuid.uuid4().hex[:8]}",
            name="write_file",
            args={"path": f"out/{name}.txt", "content": f"{prompt}\n"},
        )
        return Reply(
            text=["Writing it."], tool_calls=[call], usage={"prompt_tokens": 40, "completion_tokens": 9}
        )

    pf.serve_fake_openai(script)


# --- processes -----------------------------------------------------------------------------------


def cpu_seconds(pid: int, *, reaped: bool = False) -> float:
    """User + system CPU of a process (and, with `reaped`, of its children that exited)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    if reaped:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime
    return ticks / CLK_TCK


def postgres_cpu() -> float:
    """Every PostgreSQL process, the backends that exited included (in the postmaster's reaped
    children's time)."""
    total = 0.0
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if stat.split(" (", 1)[1].startswith("postgres"):
                total += cpu_seconds(int(d.name), reaped=True)
    return total


def spawn(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)


async def wait_line(proc: subprocess.Popen[bytes], log: Path, pattern: str, within: float = 120) -> str:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        m = re.search(pattern, log.read_text(errors="replace"))
        if m:
            return m.group(1)
        if proc.poll() is not None:
            break
        await asyncio.sleep(0.05)
    raise RuntimeError(f"{log.name}: no {pattern!r}:\n{log.read_text(errors='replace')[-3000:]}")


async def wait_healthy(url: str, within: float = 120) -> None:
    import httpx

    deadline = time.monotonic() + within
    async with httpx.AsyncClient(timeout=5) as c:
        while time.monotonic() < deadline:
            try:
                r = await c.get(url + "healthz", headers={"Authorization": f"Bearer {TOKEN}"})
                if r.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} not healthy")


# --- the client ----------------------------------------------------------------------------------


@dataclass
class Turn:
    seconds: float
    events: int
    final: str | None


async def one_turn(client: Any, url: str, tag: str) -> Turn:
    msg = {
        "kind": "message",
        "messageId": str(uuid.uuid4()),
        "role": "user",
        "parts": [{"kind": "text", "text": f"bench {tag}"}],
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": {"message": msg}}
    t0 = time.perf_counter()
    events = 0
    final: str | None = None
    try:
        async with client.stream("POST", url, json=body, headers={"Authorization": f"Bearer {TOKEN}"}) as r:
            async for line in r.aiter_lines():
                if line.startswith("data:"):
                    events += 1
                    data = json.loads(line[5:])
                    res = data.get("result") or {}
                    if res.get("final"):
                        final = res["status"]["state"]
    except Exception as e:  # counted as not completed
        print(f"turn {tag}: {e!r}", file=sys.stderr)
    return Turn(time.perf_counter() - t0, events, final)


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * p))]


async def measure(
    url: str, label: str, concurrent: int, warmup: int, replica_pids: list[int], balancer_pid: int | None
) -> dict[str, Any]:
    import httpx

    limits = httpx.Limits(max_connections=concurrent + 10, max_keepalive_connections=concurrent + 10)
    async with httpx.AsyncClient(timeout=600, limits=limits) as c:
        for i in range(warmup):
            await one_turn(c, url, f"{label}-warm{i}")
        cpu0 = sum(cpu_seconds(p) for p in replica_pids)
        bal0 = cpu_seconds(balancer_pid) if balancer_pid else 0.0
        pg0 = postgres_cpu()
        t0 = time.perf_counter()
        turns = await asyncio.gather(*(one_turn(c, url, f"{label}-{i}") for i in range(concurrent)))
        wall = time.perf_counter() - t0
        cpu = sum(cpu_seconds(p) for p in replica_pids) - cpu0
        bal = (cpu_seconds(balancer_pid) - bal0) if balancer_pid else 0.0
        pg = postgres_cpu() - pg0
    ok = [t.events for t in turns if t.final == "completed"]
    events = statistics.mode(ok) if ok else 0
    done = [t for t in turns if t.final == "completed" and t.events == events]
    others = Counter((t.final, t.events) for t in turns if t not in done)
    if others:
        print(f"{label}: not completed (final state, events): {dict(others)}", file=sys.stderr, flush=True)
    lat = [t.seconds for t in done] or [float("nan")]
    n = max(1, len(done))
    return {
        "label": label,
        "completed": len(done),
        "events": events,
        "p50": pct(lat, 0.5),
        "p99": pct(lat, 0.99),
        "wall": wall,
        "tps": len(done) / wall,
        "cpu_replicas": cpu / n * 1000,
        "cpu_balancer": bal / n * 1000,
        "cpu_pg": pg / n * 1000,
    }


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


async def main(args: argparse.Namespace) -> None:
    counts = sorted({int(x) for x in args.replicas.split(",")})
    most = max(counts)
    db_name, db_url = await pf.create_pg(PG_URL)
    procs: list[subprocess.Popen[bytes]] = []
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        ws = tmp / "ws"
        (ws / "out").mkdir(parents=True)
        try:
            fake = spawn([sys.executable, __file__, "--serve-openai"], tmp / "openai.log")
            procs.append(fake)
            base_url = await wait_line(fake, tmp / "openai.log", r"fake openai on (\S+)")
            env = {k: v for k, v in os.environ.items() if not k.startswith("DEVAGENT_")}
            # (the client is a plain A2A one: the replicas apply their own yolo mode to it)
            env.update(
                {
                    "PYTHONUNBUFFERED": "1",
                    "DEVAGENT_BASE_URL": base_url,
                    "DEVAGENT_PLAIN_APPROVAL": "server",
                    # many clients behind one token: the per-token stream limit does not apply
                    "DEVAGENT_MAX_STREAMS_PER_TOKEN": "0",
                }
            )
            serve = [sys.executable, "-m", "devagent", "serve", "--port", "0", "--db", db_url]
            serve += ["--workspace-root", str(ws), "--token", TOKEN, "--approval", "yolo"]
            serve += ["--model", "openai-compatible:fake-model"]
            replicas: list[tuple[subprocess.Popen[bytes], str]] = []
            for i in range(most):  # the first alone: it creates the schema
                log = tmp / f"replica{i}.log"
                p = spawn(serve, log, env)
                procs.append(p)
                url = (await wait_line(p, log, r"listening on (http://\S+)")).rstrip("/") + "/"
                await wait_healthy(url)
                replicas.append((p, url))

            # unmeasured: a burst on every replica first, so no row pays for growing connection pools
            warm = max(1, args.concurrent // 4)
            await asyncio.gather(
                *(measure(u, f"warm{i}", warm, 1, [], None) for i, (_, u) in enumerate(replicas))
            )
            direct_url, direct_pids = replicas[0][1], [replicas[0][0].pid]
            label = "1 replica, direct"
            rows.append(await measure(direct_url, label, args.concurrent, args.warmup, direct_pids, None))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
            # the same, with the live events not logged for other replicas: what the fan-out costs
            log = tmp / "replica-single.log"
            single = spawn(serve, log, {**env, "DEVAGENT_REPLICA_EVENTS": "off"})
            procs.append(single)
            single_url = (await wait_line(single, log, r"listening on (http://\S+)")).rstrip("/") + "/"
            await wait_healthy(single_url)
            await measure(single_url, "warm-single", warm, 1, [], None)
            label = "1 replica, no fan-out"
            rows.append(await measure(single_url, label, args.concurrent, args.warmup, [single.pid], None))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
            stop([single])
            for k in counts:
                log = tmp / f"balancer{k}.log"
                bal = spawn(
                    [sys.executable, "-m", "tests.fakes.balancer", *[u for _, u in replicas[:k]]], log, env
                )
                procs.append(bal)
                try:
                    url = await wait_line(bal, log, r"balancer listening on (\S+)")
                    pids = [p.pid for p, _ in replicas[:k]]
                    label = f"{k} replica{'s' if k > 1 else ''}, balancer"
                    rows.append(await measure(url, label, args.concurrent, args.warmup * k, pids, bal.pid))
                    print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
                finally:
                    stop([bal])
            # the baseline again, last: how much the machine drifted during the run
            label = "1 direct, again"
            rows.append(await measure(direct_url, label, args.concurrent, args.warmup, direct_pids, None))
        finally:
            stop(list(reversed(procs)))
            await pf.drop_pg(PG_URL, db_name)
    report(rows, args.concurrent)


def report(rows: list[dict[str, Any]], concurrent: int) -> None:
    base = rows[0]
    print(
        f"{concurrent} concurrent tool turns (write_file in yolo mode, then text), "
        f"events per turn: {base['events']}"
    )
    head = f"{'setup':22}{'done':>6}{'p50 s':>8}{'p99 s':>8}{'wall s':>8}{'turns/s':>9}"
    head += f"{'cpu ms/turn':>12}{'bal ms':>8}{'pg ms':>8}{'p50 x':>7}{'p99 x':>7}{'tput x':>8}"
    print(head)
    for r in rows:
        print(
            f"{r['label']:22}{r['completed']:>6}{r['p50']:8.2f}{r['p99']:8.2f}{r['wall']:8.2f}{r['tps']:9.1f}"
            f"{r['cpu_replicas']:12.1f}{r['cpu_balancer']:8.1f}{r['cpu_pg']:8.1f}"
            f"{r['p50'] / base['p50']:7.2f}{r['p99'] / base['p99']:7.2f}{r['tps'] / base['tps']:8.2f}"
        )
    print("cpu ms/turn: the replicas' user+system CPU over the concurrent run / completed turns;")
    print("bal ms, pg ms: the balancer's and PostgreSQL's; x: ratio to the first row (same run)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve-openai", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--concurrent", type=int, default=200)
    ap.add_argument("--replicas", default="1,2,3", help="replica counts behind the balancer, e.g. 1,2,3")
    ap.add_argument("--warmup", type=int, default=4, help="turns per replica before measuring")
    a = ap.parse_args()
    if a.serve_openai:
        serve_openai()
    else:
        asyncio.run(main(a))
