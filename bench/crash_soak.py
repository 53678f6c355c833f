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
        [--scenario permission|conversation] [--focus continued] [--pace 1] [--show]

`--scenario conversation` (issue 28 item 8, the red team's conversations): the model runs a
command needing permission, the client confirms, the model writes some text and asks for a second
command, the client confirms, the model answers. A round's servers are killed from outside
(SIGKILL after a random delay from a request's start) or at a named crash point, once, and often a
second time while the task the restart continued runs. The client goes on as one that reads
`tasks/get` would (confirm what input-required shows, "go on" after failed), and the round is
checked against the invariants of `conversation_round`. `--focus continued`: every round is
killed twice, the second time as the continued task's turn begins (the red team's "continued task
killed twice"); `--pace` stretches the script's pauses and the kill times (with 8 the task store's
write-behind snapshots land mid-turn).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import sys
import tempfile
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.a2a.helpers import auth, call, rpc, v03_message  # noqa: E402
from tests.a2a.procs import (  # noqa: E402
    TOKEN,
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
                if "interrupted" not in status_text(got) and "send it again" not in status_text(got):
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


# --- the red team's conversations (issue 28 item 8) -------------------------------------------

MARKS = ("S0", "S1", "S2", *(f"F{i}" for i in range(3, 16)))  # one word opening each text of the script


def conversation_script(pace: float) -> list[dict[str, Any]]:
    """The red team's script; `pace` stretches its pauses (seconds of model time and command time)."""

    def shell(n: int) -> dict[str, Any]:
        command = f"sleep {0.3 * pace:.2f}; echo {n} >> {('one', 'two')[n - 1]}.txt"
        return {"tool_call": {"name": "run_shell_command", "args": {"command": command}, "id": f"c{n}"}}

    return [
        {"items": [{"text": "S0 Let me run the first command."}, {"sleep": 0.2 * pace}, shell(1)]},
        {
            "items": [
                {"text": "S1 The first command ran; now the second one."},
                {"sleep": 0.3 * pace},
                shell(2),
            ]
        },
        {
            "items": [
                {"text": "S2 Both commands ran,"},
                {"sleep": 0.3 * pace},
                {"text": " and the answer is 42."},
            ]
        },
        *({"items": [{"text": f"F{i} follow-up {i}: {{last_user}}"}]} for i in range(3, 16)),
    ]


INTERRUPTED = "The turn was interrupted"
CONVERSATION_POINTS = [*POINTS, "a2a.task_created"]
MAX_ACTIONS = 10  # client requests per conversation before it counts as stalled
KILL_WITHIN = 1.5  # seconds after a request's start a timed kill fires at most (times `pace`)


def _plan(rng: random.Random, first: bool, pace: float) -> tuple[str, str | int, float]:
    """A kill: ("point", "name@N", 0) at a named crash point, or ("time", action, delay): SIGKILL
    from outside `delay` seconds after the start of the round's `action`-th request (the second
    kill: of the first request after the restart, a continuation)."""
    if rng.random() < 0.4:
        name = rng.choice(CONVERSATION_POINTS if first else POINTS)
        return ("point", f"{name}@{rng.choice((1, 1, 2)) if first else 1}", 0.0)
    return ("time", rng.randrange(3) if first else 0, rng.uniform(0, KILL_WITHIN * pace))


def _twice(rng: random.Random) -> list[tuple[str, str | int, float]]:
    """`--focus continued`: two kills, the second while the restarted task is continued and before
    (or just as) its turn begins: the red team's "continued task killed twice"."""
    first = rng.choice(
        [
            ("point", "a2a.task_created@1", 0.0),
            ("point", "session.answers_stored@1", 0.0),
            ("point", "session.tool_running@1", 0.0),
            ("point", "session.tool_running@2", 0.0),
            ("time", rng.randrange(3), rng.uniform(0, KILL_WITHIN)),
        ]
    )
    second = rng.choice([("point", "a2a.working_sent@1", 0.0), ("time", 0, rng.uniform(0, 0.3))])
    return [first, second]


def agent_marks(task: dict[str, object]) -> Counter[str]:
    """How many agent messages of a task's history hold each text of the script."""
    seen: Counter[str] = Counter()
    for m in task.get("history") or []:  # type: ignore[union-attr]
        if m.get("role") != "agent":
            continue
        text = " ".join(p.get("text", "") for p in m.get("parts") or [] if p.get("kind") == "text")
        for word in set(text.split()):
            if word in MARKS:
                seen[word] += text.split().count(word)
    return seen


def asked_calls(task: dict[str, object]) -> set[str]:
    """The ids of the calls a task's history or status message shows (ToolCall updates)."""
    msgs = [*(task.get("history") or []), task["status"].get("message") or {}]  # type: ignore[union-attr,index]
    return {
        p["data"]["tool_call_id"]
        for m in msgs
        for p in m.get("parts") or []
        if p.get("kind") == "data"
        and isinstance(p.get("data"), dict)
        and "tool_call_id" in p["data"]
        and "status" in p["data"]
    }


FOLLOW_ON = 2  # messages continuing a conversation once it completed


def duplicates(task: dict[str, Any], violation: Callable[[str], None]) -> None:
    """Issue 37 item 6: a messageId twice in the task's history, or a text of the model's twice
    (two of the server's notes with the same words, for two messages no process took up, are two
    messages)."""
    ids = Counter(m.get("messageId") for m in task.get("history") or [])
    if any(k > 1 for k in ids.values()):
        violation("(a) a messageId twice in the task's history")
    if any(k > 1 for k in agent_marks(task).values()):
        violation("(a) agent text twice in the task's history")


def summary(task: dict[str, Any]) -> str:
    """A task in short: each history message (role, messageId's head, its texts and ToolCall
    updates), the status and the artifacts."""

    def parts(m: dict[str, Any]) -> str:
        out = []
        for p in m.get("parts") or []:
            d = p.get("data")
            if p.get("kind") == "text":
                out.append(repr(p["text"]))
            elif isinstance(d, dict) and "tool_call_id" in d:
                out.append(f"<{d['tool_call_id']} {d.get('status') or d.get('selected_option_id')}>")
            else:
                out.append("<data>")
        return " ".join(out)

    rows = [f"  {m['role']:5} {m['messageId'][:8]} {parts(m)}" for m in task.get("history") or []]
    status = task["status"]
    rows.append(f"  status {status['state']}: {parts(status.get('message') or {})}")
    for a in task.get("artifacts") or []:
        rows.append(f"  artifact {a.get('name')}: {parts(a)}")
    return "\n".join(rows)


async def conversation_round(
    c: httpx.AsyncClient,
    db: str,
    tmp: Path,
    n: int,
    rng: random.Random,
    tally: Counter[str],
    show: bool,
    pace: float,
    focus: str = "",
) -> None:
    """One conversation, killed once or twice. Invariants (each violation counted by kind):
    (a) every text of the script appears at most once in the agent messages of the task's history,
    those the conversation holds for certain exactly once (and the final answer once in its
    `reply` artifacts); (b) a task reads input-required only
    with the waiting calls in its status message, and confirming them is accepted; (c) the
    conversation reaches its second command and completes within MAX_ACTIONS requests; no command
    runs twice; an answer is never accepted twice; a task never reads working or submitted for
    long after a restart."""
    ws = tmp / f"ws{n}"
    ws.mkdir()
    script = tmp / f"script{n}.json"
    script.write_text(json.dumps({"steps": conversation_script(pace)}))
    args = serve_args(db, ws, f"scripted:{script}", "ask")
    if focus == "continued":
        plans = _twice(rng)
    else:
        plans = [_plan(rng, True, pace)]
        if rng.random() < 0.6:
            plans.append(_plan(rng, False, pace))
    label = " then ".join(
        f"{kind} {what}" + (f" +{delay:.2f}s" if kind == "time" else "") for kind, what, delay in plans
    )
    servers: list[Serve] = []
    found: set[str] = set()

    def violation(what: str) -> None:
        if what in found:
            return
        found.add(what)
        tally["violations"] += 1
        tally[f"violation: {what}"] += 1
        print(f"round {n} ({label}): {what}", file=sys.stderr, flush=True)

    def start() -> Serve:
        point = plans[0][1] if plans and plans[0][0] == "point" else None
        s = start_serve(args, tmp / f"r{n}-{len(servers)}.log", crash_at=str(point) if point else None)
        servers.append(s)
        return s

    kills = turnless = 0
    unread = False  # a restart since the last read of the task (nothing was sent to the new server)

    def restart(dead: Serve) -> Serve:
        nonlocal kills, turnless, unread
        dead.proc.wait(30)
        kills += 1
        unread = True
        tally["kills"] += 1
        if plans[0][0] == "point" and str(plans[0][1]).startswith("a2a.working_sent"):
            turnless += 1  # it died before the turn of its execution began: nothing was interrupted
        plans.pop(0)
        return start()

    async def read(task_id: str) -> dict[str, Any]:
        """tasks/get on the current server, restarting it if it died at a crash point meanwhile."""
        return await on_live(lambda url: get_task(c, url, task_id))

    async def list_tasks(url: str) -> dict[str, Any]:
        body = rpc("ListTasks", {"contextId": context})
        got: dict[str, Any] = await call(c, url, body, auth(TOKEN, v1=True))
        return got

    async def on_live(request: Callable[[str], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        nonlocal server
        while True:
            try:
                return await request(server.url)
            except httpx.TransportError:
                await asyncio.sleep(0.1)
                if server.proc.poll() is None:
                    raise
                server = restart(server)

    context = f"soak-{n}-{uuid.uuid4().hex[:8]}"
    try:
        server = start()
        task: dict[str, object] | None = None
        message = v03_message("two commands", context_id=context, settings={"workspace_path": str(ws)})
        on_server = 0  # requests sent to the current server
        sent = "prompt"  # what `message` is
        confirmed: set[str] = set()
        for _ in range(MAX_ACTIONS):
            killer = None
            if plans and plans[0][0] == "time" and plans[0][1] == on_server:
                delay = plans[0][2]

                async def kill(s: Serve = server, delay: float = delay) -> None:
                    await asyncio.sleep(delay)
                    if s.proc.poll() is None:
                        os.kill(s.proc.pid, signal.SIGKILL)

                killer = asyncio.create_task(kill())
            reply = await send_stream(c, server.url, message)
            on_server += 1
            if killer is not None:
                await killer
            if task is None and reply.results and reply.results[0].get("kind") == "task":
                task = reply.results[0]
            for err in reply.errors:
                if sent == "confirm":
                    violation(f"(b) input-required but its confirmation was refused: {err.get('message')}")
                else:
                    violation(f"a message was refused: {err.get('message')}")
            if server.proc.poll() is None and plans and plans[0][0] == "point" and reply.cut is not None:
                await asyncio.sleep(0.05)
            if server.proc.poll() is not None:
                server = restart(server)
                on_server = 0
            if task is None:  # killed before the client had its task: found by its contextId
                listed = await on_live(list_tasks)
                tasks = listed.get("result", {}).get("tasks") or []
                if not tasks:
                    tally["killed before the task"] += 1
                    return
                task = {"id": tasks[0]["id"], "contextId": context}
            got = await read(str(task["id"]))
            state = got["status"]["state"]
            if unread:
                unread = False
                tally[f"first read after kill {kills}: {state}"] += 1
                if kills > 1 and state in ("submitted", "working"):
                    # the continued task's second kill: no process runs or starts its turn now
                    violation(f"(c) a continued task killed twice reads {state}, not its true state")
            for _ in range(200):  # a turn no process took up reads failed once the lease expired
                if state not in ("submitted", "working"):
                    break
                await asyncio.sleep(0.1)
                got = await read(str(task["id"]))
                state = got["status"]["state"]
            tally[f"read {state}"] += 1
            if state == "completed":
                break
            if state == "input-required":
                calls = [t for t in status_tool_calls(got) if t.get("status") == "PENDING"]
                if not calls or not all(t.get("confirmation_request") for t in calls):
                    violation("(b) input-required without a waiting call in its status message")
                    break
                ids = [str(t["tool_call_id"]) for t in calls]
                data = [{"tool_call_id": i, "selected_option_id": "proceed_once"} for i in ids]
                message = v03_message(data=data, task_id=got["id"], context_id=got["contextId"])
                confirmed |= set(ids)
                sent = "confirm"
            elif state == "failed":
                if "interrupted" not in status_text(got) and "send it again" not in status_text(got):
                    violation(f"failed without saying it was interrupted: {status_text(got)[:80]!r}")
                message = v03_message("go on", task_id=got["id"], context_id=got["contextId"])
                sent = "prompt"
            else:
                violation(f"(c) the task reads {state} with no turn running")
                break
        else:
            violation("(c) stalled: not completed within the requests allowed")
        tally[f"killed {kills} times"] += 1
        final = await read(str(task["id"]))
        duplicates(final, violation)
        for i in range(FOLLOW_ON):  # a completed task continued: each message still once
            if final["status"]["state"] != "completed":
                break
            more = v03_message(f"more {i}", task_id=final["id"], context_id=final["contextId"])
            on = await send_stream(c, server.url, more)
            if on.errors or on.last_state != "completed":
                violation(f"a completed task continued did not complete: {on.errors or on.last_state}")
            final = await read(str(task["id"]))
            duplicates(final, violation)
        if show:
            print(f"round {n} ({label}):\n{summary(final)}", file=sys.stderr)
        marks = agent_marks(final)
        twice = sorted(m for m, k in marks.items() if k > 1)
        if twice:
            violation("(a) agent text twice in the task's history")
            print(f"  round {n}: twice: {twice}", file=sys.stderr)
        notes = sum(
            p.get("text", "").count(INTERRUPTED)
            for m in final.get("history") or []
            if m.get("role") == "agent"
            for p in m.get("parts") or []
        )
        if notes > kills - turnless:
            violation("(a) the interruption note more often in the history than the turn was interrupted")
        # Texts the conversation holds for certain (the model's answer is stored before its calls
        # wait), missing from the history: not once either.
        for call_id, mark in (("c1", "S0"), ("c2", "S1")):
            if call_id in confirmed and not marks[mark]:
                violation(f"(a) {mark} missing from the history")
        answer = status_text(final).split()[:1]
        if final["status"]["state"] == "completed" and answer and answer[0] in MARKS and not marks[answer[0]]:
            violation("(a) the final answer missing from the history")
        replies = [
            p.get("text", "")
            for a in final.get("artifacts") or []
            if a.get("name") == "reply"
            for p in a.get("parts") or []
        ]
        if sum(r.count("S2") for r in replies) > 1:
            violation("(a) the final answer twice in the reply artifacts")
        if final["status"]["state"] == "completed" and not replies:
            violation("(a) completed without a reply artifact")
        if final["status"]["state"] == "completed" and "c2" not in asked_calls(final):
            violation("(c) completed without reaching the second command")
        for name in ("one.txt", "two.txt"):
            if lines(ws / name) > 1:
                violation(f"a command ran {lines(ws / name)} times ({name})")
        for call_id in confirmed:
            late = await send_stream(c, server.url, confirmation(final, call_id))
            if not late.errors:
                violation("a confirmation of a call answered already was accepted again")
        tally["rounds"] += 1
    finally:
        for s in servers:
            s.stop()


async def main(args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    tally: Counter[str] = Counter()

    async def play(
        c: httpx.AsyncClient, db: str, tmp: Path, n: int, rng: random.Random, tally: Counter[str]
    ) -> None:
        if args.scenario == "conversation":
            await conversation_round(c, db, tmp, n, rng, tally, args.show, args.pace, args.focus)
        else:
            await one_round(c, db, tmp, n, rng, tally)

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(args.keep or d)
        tmp.mkdir(parents=True, exist_ok=True)
        async with httpx.AsyncClient(timeout=60) as c:
            if args.db == "postgres":
                async with fresh_pg_database("devagent_soak") as url:
                    for n in range(args.rounds):
                        await play(c, url, tmp, n, rng, tally)
            else:
                url = f"sqlite+aiosqlite:///{tmp / 'soak.db'}"
                for n in range(args.rounds):
                    await play(c, url, tmp, n, rng, tally)
    print(f"crash soak ({args.scenario}) on {args.db}, seed {args.seed}:")
    for k in sorted(tally):
        print(f"  {k:60} {tally[k]}")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--scenario", choices=("permission", "conversation"), default="permission")
    p.add_argument(
        "--focus",
        choices=("", "continued"),
        default="",
        help="continued: kill twice, the second time as the continuation begins",
    )
    p.add_argument("--pace", type=float, default=1.0, help="stretch the script's pauses and kill times")
    p.add_argument("--keep", help="a directory for the rounds' workspaces and server logs, kept")
    p.add_argument("--show", action="store_true", help="print each conversation's final task")
    asyncio.run(main(p.parse_args()))
