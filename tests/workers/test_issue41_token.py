"""Issue 41 item 3 (trust): the worker's token stays in the worker. Checked from outside, on a real
worker in its network namespace running as an ordinary user (nobody), while a session's command it
runs is blocked on a FIFO:

- the command's environment (printed by the command) has neither the token nor its variable, and
  from its sandbox the worker's /proc entry cannot be read;
- no process on the machine but the server (whose settings list the workers' tokens) has the token
  in its /proc/PID/environ, read as root: the worker's own initial environment block no longer
  holds the value;
- another process of the worker's user cannot open the worker's /proc/PID/environ (the worker is
  non-dumpable), while it can open that of a plain process of the same user (`sleep`): the check
  tells the two apart."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.a2a.helpers import turn
from tests.a2a.test_hostile import script, tool_outputs
from tests.core_helpers import shell_call
from tests.workers.conftest import CALLER, WorkerSite
from tests.workers.fifos import FifoCounter, release_blocked

TOKEN_VAR = "DEVAGENT_WORKER_TOKEN"
NOBODY = 65534
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


def environ_of(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""  # gone, or a kernel thread


def holding(secret: bytes) -> set[int]:
    """Every process whose environment (as /proc shows it to root) holds `secret`."""
    return {int(p) for p in os.listdir("/proc") if p.isdigit() and secret in environ_of(int(p))}


def readable_by_nobody(pid: int) -> bool:
    """Whether another process of the user nobody can read `pid`'s environment."""
    done = subprocess.run([*AS_NOBODY, "cat", f"/proc/{pid}/environ"], capture_output=True, timeout=30)
    return done.returncode == 0


async def test_issue41_item3_the_worker_token_is_in_no_command_environ_and_the_worker_is_undumpable(
    tmp_path: Path,
) -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv (the worker and the reader run as nobody)")
    site = WorkerSite(tmp_path)
    token = f"worker-token-{uuid.uuid4().hex}"
    site.env["DEVAGENT_WORKER_TOKENS"] = f"w1={token}"
    started, go, pid_file = FifoCounter(site.shared / "started"), site.shared / "go", site.shared / "pid"
    os.mkfifo(go, 0o666)
    os.chmod(go, 0o666)
    probe = (
        f"env; echo ---; p=$(cat {pid_file}); "
        "cat /proc/$p/environ >/dev/null 2>&1 && echo WORKER-ENVIRON-READ || echo WORKER-ENVIRON-UNREAD; "
        f"echo up > {started.path}; cat {go}; echo END"
    )
    model = script(tmp_path / "s.json", [[shell_call(probe)], [{"text": "done"}]])
    plain = await asyncio.create_subprocess_exec(*AS_NOBODY, "sleep", "600")
    try:
        with site.server(model) as s, site.worker(s, "w1", token=token, user=NOBODY) as w1:
            w1.wait_connected()
            cmdline = Path(f"/proc/{w1.proc.pid}/cmdline").read_bytes()
            assert b"devagent\0worker" in cmdline, cmdline  # `ip netns exec` became the worker
            pid_file.write_text(str(w1.proc.pid))
            pid_file.chmod(0o644)
            running = asyncio.ensure_future(turn(s.url, CALLER, "look around", site.root / "alice"))
            await started.first_line()  # the command runs (its processes live) on the worker
            holders = holding(token.encode())
            worker_environ = environ_of(w1.proc.pid)
            worker_readable = readable_by_nobody(w1.proc.pid)
            plain_readable = readable_by_nobody(plain.pid)
            release_blocked(go)
            frames = await running
    finally:
        plain.kill()
        await plain.wait()
        release_blocked(go)
        started.close()
        site.cleanup()
    output = tool_outputs(json.dumps(frames))
    assert "END" in output and "WORKER-ENVIRON-UNREAD" in output, output
    assert token not in output and TOKEN_VAR not in output, output
    assert holders == {s.proc.pid}, holders  # the server's settings; no worker's process
    assert worker_environ and token.encode() not in worker_environ  # read as root: overwritten
    assert not worker_readable and plain_readable
    assert w1.proc.returncode == 0
