"""Stopping a command's process group: SIGTERM to the whole group, SIGKILL after a grace for
whatever is left, so nothing a command started outlives its stop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time

KILL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - a pid reused by another user
        return False
    return True


def signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def wait_exit(proc: asyncio.subprocess.Process, seconds: float) -> None:
    """Waits until the process has exited (not for its pipes, which others may hold open)."""
    deadline = time.monotonic() + seconds
    while proc.returncode is None and time.monotonic() < deadline:  # noqa: ASYNC110 - no exit event
        await asyncio.sleep(0.02)


async def kill_group(proc: asyncio.subprocess.Process, grace: float | None = None) -> None:
    """SIGTERM to the whole process group, SIGKILL after `grace` for whatever is left."""
    grace = KILL_GRACE if grace is None else grace
    pgid = proc.pid  # start_new_session: the command leads its own group
    signal_group(pgid, signal.SIGTERM)
    try:
        deadline = time.monotonic() + grace
        await wait_exit(proc, grace)
        while _group_alive(pgid) and time.monotonic() < deadline:  # noqa: ASYNC110 - polling a pgid
            await asyncio.sleep(0.02)
    finally:
        # Reaped zombies of other parents may still answer signal 0 for a moment; SIGKILL is
        # harmless to them and final for anything that ignored SIGTERM.
        signal_group(pgid, signal.SIGKILL)
        await wait_exit(proc, 1.0)
