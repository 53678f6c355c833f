"""Shared by the wire tests that start background processes, then stop the server: one finished
turn of a `devagent wire` (sandboxed or not), then the server stopped or killed, and a wait until
no process of the background command is left, seen from outside in /proc."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any

from tests.process_scan import running
from tests.wire.conftest import WireProc, events

WITHIN = 30.0  # seconds a condition may take on a loaded machine (a failure guard, never a pace)


def until(condition: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + WITHIN
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {WITHIN:g} s")
        time.sleep(0.05)  # polling the condition; the deadline only guards failure


def finished_turn(
    start_wire: Callable[..., WireProc], steps: list[Any], sandboxed: bool, prompt: str
) -> tuple[WireProc, dict[str, Any]]:
    """A `--yolo` server with the scripted `steps`, one turn (`prompt`) run to its end; the server
    and its tool results by call id."""
    w = start_wire(steps, "--yolo", "--sandbox" if sandboxed else "--no-sandbox")
    w.initialize()
    w.prompt(prompt)
    msgs, response = w.until(lambda m: m.get("id") == "p1" and "method" not in m, timeout=60)
    assert response.get("result") == {"status": "finished"}, response
    return w, {r["tool_call_id"]: r["return_value"] for r in events(msgs, "ToolResult")}


def stop_leaves_none(w: WireProc, stop: signal.Signals, marker: str, what: str) -> None:
    """Sends `stop` to the server; no process with `marker` on its command line is left (else
    "`what` outlived" it). What a failure left is killed, for the tests after this one."""
    try:
        w.proc.send_signal(stop)
        w.proc.wait(WITHIN)
        until(lambda: not running(marker), f"{what} outlived {stop.name}")
    finally:
        for pid in running(marker):
            os.kill(pid, signal.SIGKILL)
