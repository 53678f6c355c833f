"""Crash soak: permission-stopping turns of real `devagent serve` processes SIGKILLed at random crash
points (DEVAGENT_CRASH_AT), restarted on the same database, and checked from outside.

Each round is one conversation: the model asks to run `echo x >> count.txt` (approval `ask`, so it
stops for permission); the client confirms; the model answers. The server of the round is started
with one crash point of `POINTS`, chosen at random with the time it is reached (1st or 2nd), and
dies there if the round gets that far. Then a server without crash points is started on the same
database and the client goes on the way a client that only reads `tasks/get` would:

- `input-required`: the status message must show the waiting call (a PENDING ToolCall with its
  `confirmation_request`), and confirming it must be accepted;
- `failed`: the message must say the turn was interrupted, and a new message on the same task
  must be taken;
- `working`: only while a live process runs the turn (never after the restart: a violation);
- until the conversation completes (a bounded number of steps, else it counts as stuck).

Counted: rounds, kills, the states read after the restart, and violations: a call run twice (the
counter file with more than one line), a state that disagrees with what the server then accepts
(input-required whose confirmation is refused, or a refused answer to a call it showed), a stuck
conversation, an answer accepted twice.

    .venv/bin/python bench/crash_soak.py [--rounds 40] [--db sqlite|postgres] [--seed 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.a2a.helpers import v03_message  # noqa: E402
from tests.a2a.procs import (  # noqa: E402
    Serve,
    confirmation,
    get_task,
    lines,
    send_stream,
    serve_args,
    start_serve,
    status_text,
    status_tool_calls,
)
from tests.conftest import fresh_pg_database  # noqa: E402

POINTS = [
    "session.calls_stored",
    "session.answers_stored",
    "session.tool_running",
    "session.tool_ran",
    "a2a.working_sent",
    "a2a.turn_stored",
]
STEPS = [
    {
        "items": [
            {
                "tool_call": {
                    "name": "run_shell_command",
                    "args": {"command": "echo x >> count.txt"},
                    "id": "c1",
                }
            }
        ]
    },
    *({"items": [{"text": "done"}]} for _ in range(12)),
]


async def one_round(
    c: httpx.AsyncClient, db: str, tmp: Path, n: int, rng: random.Random, tally: Counter[str]
) -> None:
    ws = tmp / f"ws{n}"
    ws.mkdir()
    script = tmp / f"script{n}.json"
    script.write_text(json.dumps({"steps": STEPS}))
    args = serve_args(db, ws, f"scripted:{script}", "ask")
    point = f"{rng.choice(POINTS)}@{rng.choice((1, 1, 2))}"
    counter = ws / "count.txt"
    servers: list[Serve] = []

    def violation(what: str) -> None:
        tally["violations"] += 1
        tally[f"violation: {what}"] += 1
        print(f"round {n} ({point}): {what}", file=sys.stderr, flush=True)

    try:
        first = start_serve(args, tmp / f"r{n}a.log", crash_at=point)
        servers.append(first)
        reply = await send_stream(c, first.url, v03_message("count", settings={"workspace_path": str(ws)}))
        task = reply.results[0] if reply.results else None
        if task is not None and first.proc.poll() is None and reply.last_state == "input-required":
            reply = await send_stream(c, first.url, confirmation(task, "c1"))
        await asyncio.sleep(0.05)
        died = first.proc.poll() is not None
        tally["killed" if died else "not killed"] += 1
        if task is None:  # killed before the task existed: nothing to check
            tally["killed before the task"] += 1
            return
        if died:
            first.wait_killed()
        second = start_serve(args, tmp / f"r{n}b.log")
        servers.append(second)
        confirmed = counter.exists()  # (the command ran already)
        for _ in range(6):
            got = await get_task(c, second.url, task["id"])
            state = got["status"]["state"]
            tally[f"read {state}"] += 1
            if state == "completed":
                break
            if state == "input-required":
                calls = [t for t in status_tool_calls(got) if t.get("tool_call_id") == "c1"]
                if (
                    not calls
                    or calls[0].get("status") != "PENDING"
                    or not calls[0].get("confirmation_request")
                ):
                    violation("input-required without the waiting call in its status message")
                r = await send_stream(c, second.url, confirmation(got, "c1"))
                if r.errors:
                    violation(f"input-required but its confirmation was refused: {r.errors[0]}")
                    break
                confirmed = True
            elif state == "failed":
                if "interrupted" not in status_text(got):
                    violation(f"failed without saying it was interrupted: {status_text(got)!r}")
                r = await send_stream(
                    c, second.url, v03_message("go on", task_id=got["id"], context_id=got["contextId"])
                )
                if r.errors:
                    violation(f"a failed task could not be continued: {r.errors[0]}")
                    break
            else:
                violation(f"task reads {state} after the restart with no turn running")
                break
        else:
            violation("stuck: not completed after six steps")
        if lines(counter) > 1:
            violation(f"the command ran {lines(counter)} times")
        if confirmed:
            late = await send_stream(c, second.url, confirmation(task, "c1"))
            if not late.errors:
                violation("a confirmation of a call answered already was accepted again")
        tally["rounds"] += 1
    finally:
        for s in servers:
            s.stop()


async def main(args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    tally: Counter[str] = Counter()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        async with httpx.AsyncClient(timeout=60) as c:
            if args.db == "postgres":
                async with fresh_pg_database("devagent_soak") as url:
                    for n in range(args.rounds):
                        await one_round(c, url, tmp, n, rng, tally)
            else:
                url = f"sqlite+aiosqlite:///{tmp / 'soak.db'}"
                for n in range(args.rounds):
                    await one_round(c, url, tmp, n, rng, tally)
    print(f"crash soak on {args.db}, seed {args.seed}:")
    for k in sorted(tally):
        print(f"  {k:60} {tally[k]}")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    p.add_argument("--seed", type=int, default=1)
    asyncio.run(main(p.parse_args()))
