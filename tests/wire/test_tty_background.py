"""Issue 43 item 2: a background process in a pseudo-terminal through a real `devagent wire`
process with a scripted model: Python's REPL typed into (its screen over the wire), then the server
stopped (SIGTERM) or killed (SIGKILL); from outside, no process of it is left. The REPL leads a
session of its own (its terminal's), out of the command's process group: the supervisor or the
sandbox still ends it. Unsandboxed and, where bubblewrap runs here, sandboxed (as root: as the
sandbox user)."""

from __future__ import annotations

import os
import signal
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from devagent.agent.sandbox.probe import probe_bwrap
from tests.core_helpers import call
from tests.process_scan import running
from tests.sandbox_user import for_sandbox_user
from tests.wire.conftest import WireProc, events

PY = os.path.realpath(sys.executable)
WITHIN = 30.0  # seconds a condition may take on a loaded machine (a failure guard, never a pace)


def until(condition: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + WITHIN
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {WITHIN:g} s")
        time.sleep(0.05)  # polling the condition; the deadline only guards failure


@pytest.mark.parametrize("sandboxed", [False, True], ids=["unsandboxed", "sandboxed"])
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_issue43_item2_repl_over_wire_and_server_stop_leaves_none(
    start_wire: Callable[..., WireProc], work_dir: Path, sandboxed: bool, stop: signal.Signals
) -> None:
    if sandboxed:
        probed = probe_bwrap()
        if isinstance(probed, str):
            pytest.skip(f"bubblewrap cannot run here: {probed}")
    marker = f"ttyproc-{uuid.uuid4().hex[:10]}"
    for_sandbox_user(work_dir)  # where the tests run as root, sandboxed commands run as nobody
    repl = f"{PY} -q -i -c pass {marker}"
    steps = [
        {"items": [call("run_shell_command", {"command": repl, "tty": True, "cols": 60}, "s")]},
        {"items": [call("background_process", {"action": "output", "id": "bg1", "wait_for": ">>>"}, "p")]},
        {
            "items": [
                call(
                    "background_process",
                    {"action": "input", "id": "bg1", "input": "6*7<Enter>", "wait_for": "\n>>>"},
                    "i",
                )
            ]
        },
        {"items": [{"text": "it runs"}]},
    ]
    w = start_wire(steps, "--yolo", "--sandbox" if sandboxed else "--no-sandbox")
    w.initialize()
    w.prompt("use the REPL")
    msgs, response = w.until(lambda m: m.get("id") == "p1" and "method" not in m, timeout=60)
    assert response.get("result") == {"status": "finished"}, response
    results = {r["tool_call_id"]: r["return_value"] for r in events(msgs, "ToolResult")}
    assert not results["i"]["is_error"], results
    assert results["i"]["output"] == (
        "--- the screen (24x60), cursor at line 3, column 5 ---\n>>> 6*7\n42\n>>>\n[bg1: running]"
    )
    assert running(marker, argument=True)
    try:
        w.proc.send_signal(stop)
        w.proc.wait(WITHIN)
        until(lambda: not running(marker), f"the REPL outlived {stop.name}")
    finally:
        for pid in running(marker):  # what a failure left behind, for the tests after this one
            os.kill(pid, signal.SIGKILL)
