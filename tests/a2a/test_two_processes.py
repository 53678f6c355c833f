"""Two `devagent serve` processes on one database (issue 10 item 2, "one writer per session"):
the same token and workspace roots, a task started through one and answered through the other,
and one answer sent to both at once. On the SQLite file and on a fresh PostgreSQL database."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.a2a.helpers import v03_message
from tests.a2a.procs import Serve, confirmation, get_task, lines, send_stream, serve_args, serving
from tests.conftest import Script
from tests.core_helpers import call_then_text, shell_call

STEPS = [
    *call_then_text(shell_call("echo x >> count.txt", "c1"), "counted"),
    {"items": [{"text": "more: {last_user}"}]},
]


def two_servers(stack: ExitStack, args: list[str], logs: Path) -> tuple[Serve, Serve]:
    a = stack.enter_context(serving(args, logs / "a.log"))
    b = stack.enter_context(serving(args, logs / "b.log"))
    return a, b


def no_integrity_errors(*servers: Serve) -> None:
    for s in servers:
        assert "IntegrityError" not in s.stderr(), s.stderr()


async def pause(c: httpx.AsyncClient, srv: Serve, workspace: Path) -> dict[str, Any]:
    reply = await send_stream(c, srv.url, v03_message("count", settings={"workspace_path": str(workspace)}))
    assert reply.last_state == "input-required", (reply.frames, srv.stderr())
    task: dict[str, Any] = reply.results[0]
    return task


@pytest.fixture
def servers(script: Script, shared_db: str, workspace: Path) -> Iterator[tuple[Serve, Serve]]:
    args = serve_args(shared_db, workspace, script(STEPS), "ask")
    with ExitStack() as stack:
        yield two_servers(stack, args, workspace.parent)


async def test_answer_through_the_other_process(servers: tuple[Serve, Serve], workspace: Path) -> None:
    """Issue 10 item 2, A6 B9 B10: a task paused for permission through process A is confirmed
    through process B, which runs the command; the same confirmation sent late through A (which
    saw the pause itself) is a JSON-RPC error saying it was already answered, and runs nothing."""
    a, b = servers
    counter = workspace / "count.txt"
    async with httpx.AsyncClient(timeout=60) as c:
        task = await pause(c, a, workspace)
        assert (await get_task(c, b.url, task["id"]))["status"]["state"] == "input-required"

        done = await send_stream(c, b.url, confirmation(task, "c1"))
        assert not done.errors and done.cut is None, (done.frames, b.stderr())
        assert done.last_state == "completed", done.results[-1]
        assert lines(counter) == 1

        late = await send_stream(c, a.url, confirmation(task, "c1"))
        assert late.errors and not late.results, late.frames
        assert "already answered" in late.errors[0]["message"], late.errors
        assert lines(counter) == 1
        for srv in (a, b):
            assert (await get_task(c, srv.url, task["id"]))["status"]["state"] == "completed"

        # the conversation goes on through A, which must read B's changes first
        follow = await send_stream(
            c, a.url, v03_message("and?", task_id=task["id"], context_id=task["contextId"])
        )
        assert not follow.errors and follow.last_state == "completed", follow.frames
        assert lines(counter) == 1
    no_integrity_errors(a, b)


async def test_one_answer_raced_through_both_processes(servers: tuple[Serve, Serve], workspace: Path) -> None:
    """Issue 10 item 2, A6 B9 B10: the same confirmation sent to A and B at the same moment runs
    the command once: one request gets the stream that completes the turn, the other a JSON-RPC
    error; neither server hits a duplicate write (IntegrityError), and both read `completed`."""
    a, b = servers
    counter = workspace / "count.txt"
    async with httpx.AsyncClient(timeout=60) as c:
        task = await pause(c, a, workspace)
        # both processes know the task and its session before the race
        for srv in (a, b):
            assert (await get_task(c, srv.url, task["id"]))["status"]["state"] == "input-required"

        ra, rb = await asyncio.gather(
            send_stream(c, a.url, confirmation(task, "c1")), send_stream(c, b.url, confirmation(task, "c1"))
        )
        for r in (ra, rb):
            assert r.cut is None, r.cut
        won = [r for r in (ra, rb) if r.results and not r.errors]
        lost = [r for r in (ra, rb) if r.errors and not r.results]
        assert len(won) == 1 and len(lost) == 1, (ra.frames, rb.frames, a.stderr(), b.stderr())
        assert won[0].last_state == "completed", won[0].results[-1]
        assert "already answered" in lost[0].errors[0]["message"], lost[0].errors
        assert lines(counter) == 1

        for srv in (a, b):
            assert (await get_task(c, srv.url, task["id"]))["status"]["state"] == "completed"
        assert lines(counter) == 1
    no_integrity_errors(a, b)
