"""Issue 40 item 2 (a debt of issue 39's review): stopping a pty background process that a relay
stands for (a container's, a worker's) signals the relay's group alone, which forwards the stop
to the command; never the terminal's foreground group, which is the engine's client there.
Signalled itself, Podman's exec client left its exec session behind and the next command of that
container could wait on the engine. A local pty command's foreground group is still signalled
(it may have left the command's group to own the terminal).

The relay and the client here are stand-ins shaped like relay.py and an engine's `exec -t`: the
relay leads its own group on the pty, the client takes the pty in a session of its own and
writes down each signal it gets; the relay forwards a TERM to the client as SIGUSR2."""

from __future__ import annotations

import asyncio
import os
import select
import sys
from pathlib import Path

import pytest

from devagent.agent.sandbox.base import Started
from devagent.agent.tools.processes import BackgroundProcess
from devagent.agent.tools.tty_screen import TtySize

GUARD = 60.0  # seconds a step may take on a loaded machine (a failure guard, never a pace)

# writes down every signal (two that come at once are handled in signal-number order, so it
# never ends on the first), and ends once the relay's forwarded stop has come
CLIENT = """
import signal, sys, time
got = []
def note(signum, frame):
    got.append(signum)
    with open(sys.argv[1], "a") as f:
        f.write("client " + signal.Signals(signum).name + "\\n")
signal.signal(signal.SIGTERM, note)
signal.signal(signal.SIGUSR2, note)
print("ready", flush=True)
while signal.SIGUSR2 not in got:
    time.sleep(0.05)
"""

RELAY = """
import contextlib, fcntl, os, signal, subprocess, sys, termios
def take_terminal():
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
client = subprocess.Popen([sys.executable, "-c", sys.argv[2], sys.argv[1]], start_new_session=True,
                          preexec_fn=take_terminal)
def forward(signum, frame):
    with open(sys.argv[1], "a") as f:
        f.write("relay " + signal.Signals(signum).name + "\\n")
    with contextlib.suppress(ProcessLookupError):
        os.killpg(client.pid, signal.SIGUSR2)
signal.signal(signal.SIGTERM, forward)
client.wait()
"""


def _read_until(fd: int, marker: bytes) -> bytes:
    seen = b""
    while marker not in seen:
        ready, _, _ = select.select([fd], [], [], GUARD)
        assert ready, f"{marker!r} did not come: {seen!r}"
        seen += os.read(fd, 4096)
    return seen


async def _stopped(tmp_path: Path, relayed: bool) -> list[str]:
    """What each stand-in was signalled with when the process table stopped the relay."""
    log = tmp_path / "signals"
    log.touch()
    master, slave = os.openpty()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        RELAY,
        str(log),
        CLIENT,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    try:
        _read_until(master, b"ready")
        # as with a real relay: the terminal's foreground is the client, not the relay's group
        assert os.tcgetpgrp(master) not in (proc.pid, os.getpgrp())
        started = Started(
            proc, master, os.dup(master), sandboxed=True, tty=TtySize(rows=24, cols=80), relayed=relayed
        )
        process = BackgroundProcess("bg1", "sleep", str(tmp_path), started)
        await asyncio.wait_for(process.stop("stopped by the test"), GUARD)
        await asyncio.wait_for(proc.wait(), GUARD)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        os.close(master)
    return log.read_text().splitlines()


@pytest.mark.skipif(not hasattr(os, "tcgetpgrp"), reason="needs POSIX terminals")
async def test_issue40_item2_a_relayed_pty_command_is_stopped_through_its_relay_alone(tmp_path: Path) -> None:
    assert await _stopped(tmp_path, relayed=True) == ["relay SIGTERM", "client SIGUSR2"]


@pytest.mark.skipif(not hasattr(os, "tcgetpgrp"), reason="needs POSIX terminals")
async def test_issue43_item2_a_local_pty_commands_terminal_group_is_still_signalled(tmp_path: Path) -> None:
    assert "client SIGTERM" in await _stopped(tmp_path, relayed=False)
