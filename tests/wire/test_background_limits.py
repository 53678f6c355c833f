"""Issue 37 item 3 through a real `devagent wire` process: twenty `background: true` starts in one
step of the scripted model give eight running processes with distinct ids and twelve refusals; a
`cancel` of the turn then ends every one of them while the server goes on running, seen from
outside in /proc. Unsandboxed and, where bubblewrap runs here, sandboxed."""

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
from tests.wire.conftest import WireProc, events, is_response

PY = os.path.realpath(sys.executable)
WITHIN = 60.0  # seconds a condition may take on a loaded machine (a failure guard, never a pace)
STARTS = 20
LINGER = "import time; print('ready', flush=True); time.sleep(3600)  # until something stops it\n"


def count_within(script: str, count: int) -> None:
    """Waits until exactly `count` processes run `script` (one whole argument), seen in /proc."""
    deadline = time.monotonic() + WITHIN
    while len(running(script, argument=True)) != count:
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(running(script, argument=True))} processes run {script}, not {count}")
        time.sleep(0.05)  # polling /proc; the deadline only guards failure


@pytest.mark.parametrize("sandboxed", [False, True], ids=["unsandboxed", "sandboxed"])
def test_issue37_item3_wire_twenty_starts_then_cancel_leaves_none(
    start_wire: Callable[..., WireProc], work_dir: Path, tmp_path: Path, sandboxed: bool
) -> None:
    if sandboxed and isinstance(probe_bwrap(), str):
        pytest.skip("bubblewrap cannot run here")
    script = f"bgwire-{uuid.uuid4().hex[:10]}.py"
    (work_dir / script).write_text(LINGER)
    for_sandbox_user(work_dir)  # where the tests run as root, sandboxed commands run as nobody
    starts = [
        call("run_shell_command", {"command": f"exec {PY} -u {script}", "background": True}, f"s{i}")
        for i in range(STARTS)
    ]
    reads = [
        call("background_process", {"action": "output", "id": f"bg{n}", "wait_for": "ready"}, f"r{n}")
        for n in range(1, 9)
    ]
    steps = [
        {"items": starts},
        {"items": reads},
        {"items": [{"wait_for": str(tmp_path / "never")}, {"text": "never said"}]},
    ]
    w = start_wire(steps, "--yolo", "--sandbox" if sandboxed else "--no-sandbox")
    try:
        w.initialize()
        w.prompt("start twenty")
        msgs, _ = w.until(
            lambda m: (
                m.get("method") == "event"
                and m["params"]["type"] == "ToolResult"
                and m["params"]["payload"]["tool_call_id"] == "r8"
            ),
            timeout=WITHIN,
        )
        results = {r["tool_call_id"]: r["return_value"] for r in events(msgs, "ToolResult")}
        started = [cid for cid in results if cid.startswith("s") and not results[cid]["is_error"]]
        refused = [cid for cid in results if cid.startswith("s") and results[cid]["is_error"]]
        assert len(started) == 8 and len(refused) == 12, results
        ids = sorted(str(results[cid]["output"]).split(" as ")[1].split(".")[0] for cid in started)
        assert ids == sorted(f"bg{n}" for n in range(1, 9)), ids
        assert all(
            "8 background processes of this session are running" in results[c]["message"] for c in refused
        )
        count_within(script, 8)
        w.call("c1", "cancel")
        _, resp = w.until(lambda m: is_response(m, "p1"), timeout=WITHIN)
        assert resp["result"] == {"status": "cancelled"}, resp
        count_within(script, 0)
        assert w.proc.poll() is None  # the server still runs: the cancel, not its exit, ended them
        assert w.close() == 0
    finally:
        for pid in running(script, argument=True):  # what a failure left behind
            os.kill(pid, signal.SIGKILL)
