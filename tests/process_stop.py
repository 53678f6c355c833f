"""Stopping a process a test started: asked first (SIGTERM), then made to (SIGKILL), reaped."""

from __future__ import annotations

import subprocess
from typing import Any


def stop_process(proc: subprocess.Popen[Any], grace: float) -> None:
    """Ends `proc` if it still runs: SIGTERM and up to `grace` seconds to exit (its own clean-up,
    its log flushed), then SIGKILL. Reaped either way: no zombie is left for the next test."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
