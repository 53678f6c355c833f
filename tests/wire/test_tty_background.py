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
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.core_helpers import call
from tests.process_scan import running
from tests.sandbox_user import for_sandbox_user
from tests.sandboxes import bwrap_or_skip
from tests.wire.conftest import WireProc
from tests.wire.server_stop import finished_turn, stop_leaves_none

PY = os.path.realpath(sys.executable)


@pytest.mark.parametrize("sandboxed", [False, True], ids=["unsandboxed", "sandboxed"])
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_issue43_item2_repl_over_wire_and_server_stop_leaves_none(
    start_wire: Callable[..., WireProc], work_dir: Path, sandboxed: bool, stop: signal.Signals
) -> None:
    if sandboxed:
        bwrap_or_skip()
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
    w, results = finished_turn(start_wire, steps, sandboxed, "use the REPL")
    assert not results["i"]["is_error"], results
    assert results["i"]["output"] == (
        "--- the screen (24x60), cursor at line 3, column 5 ---\n>>> 6*7\n42\n>>>\n[bg1: running]"
    )
    assert running(marker, argument=True)
    stop_leaves_none(w, stop, marker, "the REPL")
