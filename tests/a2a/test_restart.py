"""`devagent serve` as a real process: a confirmation answered after a server restart."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.a2a.helpers import auth, call, results, rpc, stream, v03_message
from tests.process_stop import stop_process

DEVAGENT = [sys.executable, "-m", "devagent"]


PROCS: dict[str, subprocess.Popen[str]] = {}


@contextmanager
def serve_process(args: list[str]) -> Iterator[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    p = subprocess.Popen(
        [*DEVAGENT, "serve", "--port", "0", *args], stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        assert p.stderr is not None
        deadline = time.monotonic() + 20
        url = None
        while time.monotonic() < deadline:
            line = p.stderr.readline()
            if not line:
                break
            m = re.search(r"listening on (http://\S+)", line)
            if m:
                url = m.group(1)
                break
        assert url, f"server did not start (exit {p.poll()})"
        PROCS[url] = p
        yield url
    finally:
        stop_process(p, 10)


WRITE = [
    {
        "items": [
            {"tool_call": {"name": "write_file", "args": {"path": "r.txt", "content": "R\n"}, "id": "r1"}}
        ]
    },
    {"items": [{"text": "written after restart"}]},
]


async def test_confirmation_after_restart(
    script: Callable[[list[Any]], str], sqlite_url: str, workspace: Path
) -> None:
    """A6 G6 B10: tasks and pending confirmations survive a restart of `devagent serve`."""
    model = script(WRITE)
    args = ["--db", sqlite_url, "--workspace-root", str(workspace.parent), "--token", "tok", "--model", model]
    async with httpx.AsyncClient(timeout=30) as c:
        with serve_process(args) as url:
            card = (await c.get(url + ".well-known/agent-card.json")).json()
            assert card["url"] == url
            m = v03_message("write r", settings={"workspace_path": str(workspace)})
            evs = results(await stream(c, url, rpc("message/stream", {"message": m}), auth("tok")))
            assert evs[-1]["status"]["state"] == "input-required"
            task = evs[0]
        with serve_process(args) as url:
            got = await call(c, url, rpc("tasks/get", {"id": task["id"]}), auth("tok"))
            assert got["result"]["status"]["state"] == "input-required"
            conf = {"tool_call_id": "r1", "selected_option_id": "proceed_once"}
            m = v03_message(data=[conf], task_id=task["id"], context_id=task["contextId"])
            evs = results(await stream(c, url, rpc("message/stream", {"message": m}), auth("tok")))
            assert evs[-1]["status"]["state"] == "completed", evs[-1]
            assert (workspace / "r.txt").read_text() == "R\n"


def test_serve_refuses_public_bind_without_token(tmp_path: Path) -> None:
    """A5: `devagent serve --host 0.0.0.0` without a token does not start."""
    env = {k: v for k, v in os.environ.items() if k != "DEVAGENT_TOKEN"}
    r = subprocess.run(
        [
            *DEVAGENT,
            "serve",
            "--host",
            "0.0.0.0",
            "--port",
            "0",
            "--db",
            f"sqlite+aiosqlite:///{tmp_path}/x.db",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )
    assert r.returncode == 2 and "token" in r.stderr


async def test_push_registered_before_restart_keeps_its_version(
    script: Callable[[list[Any]], str], sqlite_url: str, workspace: Path
) -> None:
    """A4 A6: a webhook registered over v0.3 before a restart still gets v0.3 Task payloads."""
    from tests.a2a.test_push import webhook

    model = script(WRITE)
    args = [
        "--db",
        sqlite_url,
        "--workspace-root",
        str(workspace.parent),
        "--token",
        "tok",
        "--model",
        model,
        "--allow-private-webhooks",
    ]
    async with webhook() as hook, httpx.AsyncClient(timeout=30) as c:
        with serve_process(args) as url:
            m = v03_message("write r", settings={"workspace_path": str(workspace)})
            params = {
                "message": m,
                "configuration": {"pushNotificationConfig": {"url": hook.url, "token": "pt"}},
            }
            evs = results(await stream(c, url, rpc("message/stream", params), auth("tok")))
            task = evs[0]
        with serve_process(args) as url:
            conf = {"tool_call_id": "r1", "selected_option_id": "proceed_once"}
            m = v03_message(data=[conf], task_id=task["id"], context_id=task["contextId"])
            evs = results(await stream(c, url, rpc("message/stream", {"message": m}), auth("tok")))
            assert evs[-1]["status"]["state"] == "completed"

            def done(bodies: list[Any]) -> bool:
                return any(b.get("kind") == "task" and b["status"]["state"] == "completed" for b in bodies)

            await hook.wait_for(done, within=20)
            assert all(b.get("kind") == "task" for _, b in hook.received)


async def test_turn_cut_off_by_a_crash_is_reported(
    script: Callable[[list[Any]], str], sqlite_url: str, workspace: Path
) -> None:
    """A6 A3: a task whose turn was running when the server died reads back `failed` with the
    reason (not `working` forever); the conversation continues in its context."""
    import json as _json
    import signal

    steps = [
        {"items": [{"text": "starting "}, {"sleep": 30}, {"text": "never"}]},
        {"items": [{"text": "back again"}]},
    ]
    model = script(steps)
    args = ["--db", sqlite_url, "--workspace-root", str(workspace.parent), "--token", "tok", "--model", model]
    async with httpx.AsyncClient(timeout=30) as c:
        with serve_process(args) as url:
            m = v03_message("go", settings={"workspace_path": str(workspace)})
            seen: list[dict[str, Any]] = []
            async with c.stream(
                "POST", url, json=rpc("message/stream", {"message": m}), headers=auth("tok")
            ) as r:
                async for line in r.aiter_lines():
                    if line.startswith("data:"):
                        seen.append(_json.loads(line[5:])["result"])
                        if any(e.get("kind") == "status-update" and e["status"].get("message") for e in seen):
                            break
            task = seen[0]
            # die without a clean shutdown
            pid = PROCS[url].pid
            os.kill(pid, signal.SIGKILL)
        with serve_process(args) as url:
            got = (await call(c, url, rpc("tasks/get", {"id": task["id"]}), auth("tok")))["result"]
            assert got["status"]["state"] == "failed", got["status"]
            assert "interrupted" in got["status"]["message"]["parts"][0]["text"]
            m = v03_message("/help", context_id=task["contextId"])
            res = (await call(c, url, rpc("message/send", {"message": m}), auth("tok")))["result"]
            assert res["status"]["state"] == "completed"
