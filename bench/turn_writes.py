"""How many transactions a turn commits, and which statements it runs (issue 14).

Runs `devagent serve` (the real provider path, the fake OpenAI-compatible server of
bench/provider_path.py, approval yolo) with SQLAlchemy event listeners installed on every engine
of the server process: they count commits, rollbacks and statements (by verb and table). The
client sends sequential turns and reads the counts between them (SIGUSR1 makes the server write
them to a file). Printed per turn: a tool turn and a chat turn of a new conversation, and a tool
turn continuing one. No timing: bench/provider_path.py measures time.

    .venv/bin/python bench/turn_writes.py [--turns 20] [--db postgresql://postgres@127.0.0.1:5432/postgres]

With `TURN_WRITES_PROFILE=FILE` in the environment the server runs under yappi (CPU clock;
`pip install yappi` in the venv: a tool, not a dependency) and writes the profile of each span
between counts to FILE.1, FILE.2, ... (FILE.2: the tool turns of new conversations).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import provider_floor as pp


def serve_counted(counts_file: str, argv: list[str]) -> None:
    """`devagent serve` with listeners counting what every engine of the process does."""
    import runpy

    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    counts: Counter[str] = Counter()

    @event.listens_for(Engine, "commit")
    def _commit(conn: Any) -> None:
        counts["commit"] += 1

    @event.listens_for(Engine, "rollback")
    def _rollback(conn: Any) -> None:
        counts["rollback"] += 1

    @event.listens_for(Engine, "before_cursor_execute")
    def _stmt(conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool) -> None:
        words = statement.split()
        verb = words[0].upper() if words else "?"
        m = re.search(r"\b(?:FROM|INTO|UPDATE)\s+\"?(\w+)", statement, re.I)
        counts[f"{verb} {m.group(1) if m else ''}".strip()] += 1

    # TURN_WRITES_PROFILE=FILE: the server's CPU profile (yappi, CPU clock: it follows coroutines
    # and SQLAlchemy's greenlets) between each count and the one before, as FILE.1, FILE.2, ...
    prof_file = os.environ.get("TURN_WRITES_PROFILE", "")
    dumps = [0]
    if prof_file:
        import yappi  # type: ignore[import-not-found]  # a tool: `pip install yappi` in the venv

        yappi.set_clock_type("cpu")
        yappi.start(builtins=False, profile_threads=True)

    def dump(*_: Any) -> None:
        if prof_file:
            dumps[0] += 1
            yappi.get_func_stats().save(f"{prof_file}.{dumps[0]}", type="pstat")
            yappi.clear_stats()
        tmp = counts_file + ".tmp"
        Path(tmp).write_text(json.dumps(counts))
        os.replace(tmp, counts_file)

    signal.signal(signal.SIGUSR1, dump)
    sys.argv = ["devagent", *argv]
    runpy.run_module("devagent", run_name="__main__")


async def read_counts(srv: pp.Server, path: Path) -> Counter[str]:
    path.unlink(missing_ok=True)
    os.kill(srv.proc.pid, signal.SIGUSR1)
    for _ in range(500):
        if path.exists():
            return Counter(json.loads(path.read_text()))
        await asyncio.sleep(0.01)
    raise RuntimeError("the server wrote no counts")


async def per_turn(
    c: Any, srv: pp.Server, path: Path, texts: list[str], context_id: str | None = None
) -> Counter[str]:
    # Writes behind (a `working` task flushed after 5 s) and lease renewals are not part of a
    # short turn: wait for nothing, but let the last turn's final writes land.
    before = await read_counts(srv, path)
    for text in texts:
        _, _, done = await pp.one_turn(c, srv.url, text, context_id)
        if not done:
            raise RuntimeError(f"turn {text!r} did not complete")
    await asyncio.sleep(0.2)
    after = await read_counts(srv, path)
    after.subtract(before)
    return after


def fresh(kind: str, n: int) -> list[str]:
    return [f"{kind} {i} {uuid.uuid4().hex[:6]}" for i in range(n)]


def show(label: str, diff: Counter[str], turns: int) -> None:
    print(f"{label}: {diff['commit'] / turns:.2f} commits, {diff['rollback'] / turns:.2f} rollbacks per turn")
    for key in sorted(k for k in diff if k not in ("commit", "rollback") and diff[k]):
        print(f"    {key:40}{diff[key] / turns:6.2f}")


async def main(args: argparse.Namespace) -> None:
    import httpx

    async with pp.bench_run(args.db) as run:
        counts_file = run.tmp / "counts.json"
        cmd = [sys.executable, __file__, "--serve-counted", str(counts_file), *run.serve_args()]
        dev = pp.Server(cmd, run.env, run.tmp / "devagent.log")
        run.procs.append(dev)
        await dev.ready()
        n = args.turns
        async with httpx.AsyncClient(timeout=600) as c:
            for i in range(3):  # warm-up (the checkpoints table is created on first use)
                await pp.one_turn(c, dev.url, f"tool warm {i}")
                await pp.one_turn(c, dev.url, f"chat warm {i}")
            tool = await per_turn(c, dev, counts_file, [f"tool {i} {uuid.uuid4().hex[:6]}" for i in range(n)])
            chat = await per_turn(c, dev, counts_file, [f"chat {i} {uuid.uuid4().hex[:6]}" for i in range(n)])
            ctx = str(uuid.uuid4())
            await pp.one_turn(c, dev.url, "tool first", ctx)
            cont = await per_turn(c, dev, counts_file, [f"tool more {i}" for i in range(n)], ctx)
    print(
        f"store: {'PostgreSQL' if args.db else 'SQLite'}; {n} sequential turns each; {time.strftime('%F %T')}"
    )
    show("tool turn, new conversation", tool, n)
    show("chat turn, new conversation", chat, n)
    show("tool turn, continued conversation", cont, n)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--serve-counted":
        serve_counted(sys.argv[2], sys.argv[3:])
        sys.exit(0)
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--db", default="", help="postgresql://... (a fresh database on it); default SQLite")
    asyncio.run(main(ap.parse_args()))
