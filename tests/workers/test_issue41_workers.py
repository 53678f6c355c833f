"""Issue 41 items 1-3: `devagent serve` with `sandbox_backend = worker` and real `devagent worker`
processes (local backend inside, bubblewrap), each in a network namespace of its own that reaches
only the server's port. A scripted model's turn runs shell commands and file operations through
the worker; a worker killed (SIGKILL, from outside) mid-command leaves that call interrupted, never
run again, and the next call runs on the other worker with the workspace as of the last finished
call; the tokens are kept apart and checked; a result for a call the worker does not hold is
refused; a revoked token is refused without a restart."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.a2a.helpers import auth, rpc, v03_message
from tests.a2a.test_hostile import script, tool_outputs
from tests.core_helpers import call, shell_call
from tests.workers.conftest import CALLER, DEVAGENT, WITHIN, WORKER_TOKEN, WorkerSite
from tests.workers.netns import exists, isolated


@pytest.fixture
def site(tmp_path: Path) -> Iterator[WorkerSite]:
    s = WorkerSite(tmp_path)
    try:
        yield s
    finally:
        s.cleanup()


async def turn(url: str, text: str, workspace: Path) -> list[Any]:
    """One `message/stream` turn as Alice; its SSE frames."""
    msg = v03_message(text, settings={"workspace_path": str(workspace)})
    frames: list[Any] = []
    async with (
        httpx.AsyncClient(timeout=300) as client,
        client.stream("POST", url, json=rpc("message/stream", {"message": msg}), headers=auth(CALLER)) as r,
    ):
        assert r.status_code == 200, await r.aread()
        async for line in r.aiter_lines():
            if line.startswith("data:"):
                frames.append(json.loads(line[5:]))
    states = [f["result"]["status"]["state"] for f in frames if "status" in f.get("result", {})]
    assert states and states[-1] == "completed", frames
    return frames


async def test_issue41_item1_a_turn_runs_its_shell_commands_on_a_worker(site: WorkerSite) -> None:
    """issue 41 item 1: the turn's shell commands run on the worker in its network namespace
    (its state folder is the commands' working directory, the server's workspace folder stays
    empty), their output streams back over A2A, and none of the server's secrets (model key,
    callers' or workers' tokens, database URL) reaches them."""
    steps = [
        [shell_call("pwd; echo made by the shell > by-shell.txt; env; echo END")],
        [shell_call("cat by-shell.txt; echo END2")],
        [{"text": "done"}],
    ]
    model = script(site.tmp / "s.json", steps)
    with site.server(model) as s, site.worker(s, "w1") as w1:
        w1.wait_connected()
        frames = await turn(s.url, "make files", site.root / "alice")
    output = tool_outputs(json.dumps(frames))
    assert str(w1.state_dir / "workspaces") in output, output
    assert "END" in output and "made by the shell\\nEND2" in output, output
    for secret in ("sk-leak-model-key", CALLER, WORKER_TOKEN, "sqlite+aiosqlite", "DEVAGENT_"):
        assert secret not in output, secret
    assert list((site.root / "alice").iterdir()) == []  # the workspace is the worker's
