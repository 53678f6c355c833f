"""Issue 41 items 1 and 2 across replicas: two `devagent serve` replicas on PostgreSQL behind the
round-robin balancer, one `devagent worker` connected through the same balancer (so its polls
and results land on either replica). The replica running a turn is SIGKILLed while the session's
command blocks on the worker; the session goes on through the other replica, on the same worker,
in the same workspace; the blocked command ran once and, followed by no replica any more, is
killed by its worker."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.a2a.helpers import auth, rpc, v03_message
from tests.a2a.test_hostile import tool_outputs
from tests.conftest import Script
from tests.core_helpers import shell_call
from tests.process_scan import running
from tests.replicas.conftest import StartCluster
from tests.replicas.helpers import SSE, WITHIN, final_state
from tests.workers.fifos import FifoCounter, release_blocked

pytestmark = pytest.mark.postgres
WORKER_TOKEN = "replica-worker-token"


@pytest.fixture
def shared() -> Iterator[Path]:
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="devagent-workers-", dir="/var/tmp"))
    os.chmod(folder, 0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def spawn_worker(url: str, tmp_path: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVAGENT_")}
    env.update({"DEVAGENT_WORKER_TOKEN": WORKER_TOKEN, "HOME": str(tmp_path), "PYTHONUNBUFFERED": "1"})
    argv = [sys.executable, "-m", "devagent", "worker", "--server", url, "--state-dir", str(tmp_path / "w")]
    with (tmp_path / "worker.log").open("wb") as log:
        return subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)


async def test_issue41_item2_replica_killed_mid_command_the_other_replica_goes_on_with_the_same_worker(
    script: Script, start_cluster: StartCluster, workspace: Path, tmp_path: Path, shared: Path
) -> None:
    started = FifoCounter(shared / "started")
    go = shared / "go"
    os.mkfifo(go, 0o666)
    os.chmod(go, 0o666)
    after = shell_call("pwd; cat a.txt; echo AFTER")
    steps = [
        {"items": [shell_call("echo first > a.txt; echo ONE")]},
        {"items": [shell_call(f"pwd > {started.path}; cat {go}; echo NEVER")]},
        # the next prompt plays step 2, or step 3 if the interrupted turn was closed with a
        # response of its own: both go on the same way
        {"items": [after]},
        {"items": [after]},
        {"items": [{"text": "continued"}]},
        {"items": [{"text": "continued"}]},
    ]
    env = {
        "DEVAGENT_SANDBOX_BACKEND": "worker",
        "DEVAGENT_WORKER_TOKENS": f"w={WORKER_TOKEN}",
        "DEVAGENT_WORKER_LEASE_SECONDS": "3",
        "DEVAGENT_WORKER_POLL_SECONDS": "1",  # the balancer does not close a poll its client left
    }
    cl = await start_cluster(script(steps), n=2, approval="yolo", env=env, sandbox=True)
    worker = spawn_worker(cl.url, tmp_path)
    try:
        async with httpx.AsyncClient(timeout=WITHIN) as c:
            m = v03_message("write, then wait", settings={"workspace_path": str(workspace)})
            sx = SSE(c, cl.url, rpc("message/stream", {"message": m}), auth())
            folder = await started.first_line()  # the command blocks on the worker now
            assert sx.backend is not None and folder.startswith(str(tmp_path / "w"))
            context = sx.frames[0]["result"]["contextId"]
            cl.kill(sx.backend)
            await sx.finish()
            assert "ONE" in tool_outputs(json.dumps(sx.frames))
            s2 = await go_on(c, cl.url, context)
        output = tool_outputs(json.dumps(s2.frames))
        assert s2.backend != sx.backend and final_state(s2.results()) == "completed", s2.frames[-1]
        assert f"{folder}\\nfirst\\nAFTER" in output, output  # the same worker, the same workspace
        await gone(str(go))  # followed by no replica: its worker killed it
        assert started.lines == [folder]  # and it never ran again
        assert worker.poll() is None
    finally:
        release_blocked(go)
        started.close()
        worker.terminate()
        worker.wait(30)


async def go_on(c: httpx.AsyncClient, url: str, context: str) -> SSE:
    """A new message in the conversation, sent until a replica takes it (the killed replica's
    session lease expires first)."""
    deadline = time.monotonic() + WITHIN
    while True:
        s2 = SSE(c, url, rpc("message/stream", {"message": v03_message("go on", context_id=context)}), auth())
        await s2.finish()
        results = s2.results()
        if (results and final_state(results) == "completed") or time.monotonic() > deadline:
            return s2
        await asyncio.sleep(0.5)


async def gone(marker: str) -> None:
    for _ in range(int(WITHIN / 0.1)):  # a hang guard: the worker kills it once its watch expires
        if not running(marker, argument=True):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{marker}: still blocked on the worker")
