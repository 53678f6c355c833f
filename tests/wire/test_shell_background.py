"""Issue 30 item 4: a background process never outlives the server that started it. A real
`devagent wire` process with a scripted model starts one (which starts a child of its own), then
is stopped (SIGTERM: its shutdown path closes the core) or killed (SIGKILL: the kernel ends it,
through the supervisor's parent-death signal or bwrap's --die-with-parent); from outside, no
process of either is left. Unsandboxed and, where bubblewrap runs here, sandboxed."""

from __future__ import annotations

import os
import signal
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.core_helpers import call
from tests.process_scan import running
from tests.sandbox_user import for_sandbox_user
from tests.sandboxes import bwrap_or_skip
from tests.wire.conftest import WireProc
from tests.wire.server_stop import finished_turn, stop_leaves_none, until

PY = os.path.realpath(sys.executable)

# A server-like process that starts a child of its own (the marker is an argument of both).
PARENT = """\
import subprocess, sys, time
marker = sys.argv[1]
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)", marker + "-child"])
print("ready", flush=True)
time.sleep(3600)  # runs until something stops it
"""


@pytest.mark.parametrize("sandboxed", [False, True], ids=["unsandboxed", "sandboxed"])
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_issue30_item4_server_stop_leaves_no_background_process(
    start_wire: Callable[..., WireProc], work_dir: Path, sandboxed: bool, stop: signal.Signals
) -> None:
    if sandboxed:
        bwrap_or_skip()
    marker = f"bgproc-{uuid.uuid4().hex[:10]}"
    (work_dir / "server.py").write_text(PARENT)
    for_sandbox_user(work_dir)  # where the tests run as root, sandboxed commands run as nobody
    steps = [
        {
            "items": [
                call("run_shell_command", {"command": f"{PY} -u server.py {marker}", "background": True}, "s")
            ]
        },
        {"items": [call("background_process", {"action": "output", "id": "bg1", "wait_for": "ready"}, "r")]},
        {"items": [{"text": "it runs"}]},
    ]
    w, results = finished_turn(start_wire, steps, sandboxed, "start the server")
    assert not results["r"]["is_error"] and "ready" in results["r"]["output"], results
    # The child is started before "ready" is printed, but its command line shows in /proc only once
    # its exec has gone far enough: wait for it.
    until(
        lambda: running(marker, argument=True) and running(f"{marker}-child", argument=True), "they never ran"
    )
    stop_leaves_none(w, stop, marker, "a process of the background command")
