"""Issue 37 item 3 on the A2A server: background processes are limited per session and per caller
(the token's identity), and one caller at its cap leaves the others free. The scripted model
starts twenty background processes in one step of each task; the answer quotes each start's
result. Counted from outside in /proc as well."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.a2a.helpers import auth, call, rpc, running_server, v03_message
from tests.conftest import Script
from tests.process_scan import running

PY = os.path.realpath(sys.executable)
TOKENS = {"tok-alice": "alice", "tok-bob": "bob"}
STARTS = 20
WITHIN = 60.0  # seconds a condition may take on a loaded machine (a failure guard, never a pace)
STARTED = "Started in the background as bg"
SESSION_FULL = "background processes of this session are running or starting, the most there may be"
CALLER_FULL = "caller 'alice' has 16 background processes running or starting across its sessions"
LINGER = "import time; time.sleep(3600)  # until something stops it"


@pytest.fixture
def marker(workspace: Path) -> Iterator[str]:
    name = f"bga2a-{uuid.uuid4().hex[:10]}"
    (workspace / f"{name}.py").write_text(LINGER)
    yield name
    for pid in running(name):
        os.kill(pid, signal.SIGKILL)


def answer(task: dict[str, Any]) -> str:
    assert task["status"]["state"] == "completed", task["status"]
    return "".join(p.get("text", "") for a in task.get("artifacts") or [] for p in a["parts"])


async def until_count(script: Path, count: int) -> None:
    """Waits until exactly `count` processes running `script` show in /proc."""
    deadline = time.monotonic() + WITHIN
    while len(running(str(script), argument=True)) != count:
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(running(str(script), argument=True))} running, not {count}")
        await asyncio.sleep(0.05)  # polling /proc; the deadline only guards failure


async def test_issue37_item3_a2a_caller_cap_leaves_other_callers_free(
    script: Script, sqlite_url: str, workspace: Path, marker: str
) -> None:
    """With the default caller cap (16) and session cap (8): alice's first two tasks each get 8
    of their 20 parallel starts (ids bg1..bg8, the rest refused by the session's cap); her third
    gets none (refused by her cap, which it names); bob's task still gets 8. 24 run, seen from
    outside; the server's stop ends them all."""
    starts = [
        {
            "tool_call": {
                "name": "run_shell_command",
                "args": {"command": f"exec {PY} {workspace / marker}.py", "background": True},
            }
        }
        for _ in range(STARTS)
    ]
    steps = [{"items": starts}, {"items": [{"text": "{last_tool_results}"}]}]
    core_kw = {"approval_mode": "yolo"}
    a2a_kw = {"plain_approval": "server"}
    async with running_server(
        script(steps), sqlite_url, workspace, tokens=TOKENS, core_kw=core_kw, a2a_kw=a2a_kw
    ) as srv:
        async with httpx.AsyncClient(timeout=120) as c:

            async def task(token: str) -> str:
                body = rpc("message/send", {"message": v03_message("start twenty")})
                got = await call(c, srv.url, body, auth(token, ext=False))
                assert "result" in got, got
                return answer(got["result"])

            for _ in range(2):
                text = await task("tok-alice")
                assert text.count(STARTED) == 8 and text.count(SESSION_FULL) == 12, text
                assert sorted(text.count(f"{STARTED}{n}.") for n in range(1, 9)) == [1] * 8, text
            third = await task("tok-alice")
            assert third.count(STARTED) == 0 and third.count(CALLER_FULL) == STARTS, third
            bob = await task("tok-bob")
            assert bob.count(STARTED) == 8 and bob.count(SESSION_FULL) == 12, bob
            await until_count(workspace / f"{marker}.py", 24)
    await until_count(workspace / f"{marker}.py", 0)
