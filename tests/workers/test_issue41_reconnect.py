"""Issue 41 item 2: a worker that loses the server reconnects, and finishes or gives back what it
held. The server is SIGKILLed while a session's command blocks on the worker; the command is let
go while the server is down (its result cannot be sent); the server is started again on the same
port and database. Within the lease, the worker's retried result is accepted: the command's
relay (in the test's process, as a replica's would be) ends with its real exit code and output.
After the lease expired (the call reported interrupted meanwhile), the worker's result is refused
and it drops the session. Either way the command ran once."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.a2a.test_hostile import script
from tests.workers.conftest import WITHIN, Worker, WorkerSite
from tests.workers.fifos import FifoCounter, release_blocked
from tests.workers.test_issue41_workers import read_to_end


async def logged(worker: Worker, text: str) -> None:
    for _ in range(int(WITHIN / 0.1)):  # a hang guard: the line comes when it comes
        if text in worker.log_text():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{text!r} not in the worker's log:\n{worker.log_text()}")


@pytest.mark.parametrize("lease", ["kept", "expired"])
async def test_issue41_item2_a_worker_that_lost_the_server_reconnects_and_finishes_or_gives_back(
    tmp_path: Path, lease: str
) -> None:
    from devagent.agent.sandbox.base import Limits
    from devagent.agent.sandbox.worker import WorkerProvider

    site = WorkerSite(tmp_path)
    ttl = 120 if lease == "kept" else 3
    site.env["DEVAGENT_WORKER_LEASE_SECONDS"] = str(ttl)
    started, go = FifoCounter(site.shared / "started"), site.shared / "go"
    os.mkfifo(go, 0o666)
    os.chmod(go, 0o666)
    model, ws = script(tmp_path / "s.json", [[{"text": "done"}]]), site.root / "alice"
    config = SimpleNamespace(db_url=site.db_url, worker_lease_seconds=ttl, worker_wait_seconds=WITHIN)
    provider = WorkerProvider(config)
    try:
        # the first server picks a free port itself; the second comes back on it, as the worker's URL says
        with site.server(model) as s, site.worker(s, "w1", netns=False) as w1:
            port = int(s.url.rstrip("/").rsplit(":", 1)[1])
            w1.wait_connected()
            sandbox = provider.for_session("reconnecting", [ws])
            command = f"pwd > {started.path}; cat {go}; echo FINISHED"
            run = await sandbox.start(command, cwd=str(ws), env={}, limits=Limits())
            output = asyncio.ensure_future(asyncio.to_thread(read_to_end, run.output_fd))
            await started.first_line()
            os.kill(s.proc.pid, signal.SIGKILL)
            s.proc.wait(30)
            await logged(w1, "cannot be reached")
            if lease == "expired":  # the relay reports the call interrupted once the lease expired
                assert await asyncio.wait_for(run.proc.wait(), WITHIN) == 254
            release_blocked(go)  # the command ends on the worker while the server is down
            await asyncio.sleep(0)
            with site.server(model, port):
                if lease == "kept":
                    assert await asyncio.wait_for(run.proc.wait(), WITHIN) == 0
                else:
                    await logged(w1, "is no longer this worker's")
                text = (await output).decode()
        assert ("FINISHED" in text) == (lease == "kept"), text
        assert ("interrupted and is not run again" in text) == (lease == "expired"), text
        assert len(started.lines) == 1  # it ran once
        assert w1.proc.returncode == 0  # the worker stayed up through it all
    finally:
        await provider.close()
        release_blocked(go)
        started.close()
        site.cleanup()


def test_issue41_item2_a_stopping_server_answers_the_workers_held_poll_at_once(tmp_path: Path) -> None:
    """SIGTERM to a server a worker holds a long poll on: the poll is answered as the server
    stops, so the graceful shutdown does not wait it out (uvicorn says when it had to cancel
    requests that outlived it); the worker, cut off, stays up to come back."""
    site = WorkerSite(tmp_path)
    site.env["DEVAGENT_WORKER_LEASE_SECONDS"] = "120"  # polls held up to 25 s, the default
    model = script(tmp_path / "s.json", [[{"text": "done"}]])
    try:
        with site.server(model) as s, site.worker(s, "w1", netns=False) as w1:
            w1.wait_connected()  # said after its hello: its first poll follows at once
            s.proc.send_signal(signal.SIGTERM)
            s.proc.wait(WITHIN)  # uvicorn ends by raising the signal it caught again: -15
            log = s.log.read_text(errors="replace")
            assert "graceful shutdown exceeded" not in log, log
            assert w1.proc.poll() is None  # the worker waits for a server to answer again
    finally:
        site.cleanup()
