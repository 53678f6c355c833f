"""The host-side process that stands for one command running in a session's container.

Run as `python -I -S relay.py SPEC_JSON` by the container backend: it starts the engine's `exec`
client in a process group of its own (with the relay's standard input, output and error) and
leads its own group, so that whoever holds the command (the shell tool, the background-process
table) signals it as it signals a local command: a signal to the relay's group is forwarded to the
command's process group inside the container (the engine's client would not forward it, and
killing the client alone leaves the command running). SIGUSR1 means "kill it all" (SIGKILL inside).
When the server that started it dies, the command is killed too. When the engine's client ends
because the container itself stopped (killed, out of memory, stopped by an operator), the relay says
so in the command's output and exits with INTERRUPTED: the command was interrupted, and nothing
runs it again.

SPEC_JSON: {"server": pid, "exec": argv, "kill": argv (the signal name is appended),
"state": argv (prints "true" while the container runs), "tty": bool}. Only the standard library:
it runs isolated (-I -S), outside the virtual environment's packages."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

INTERRUPTED = 254  # the exit code when the container stopped under the command
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR2)
KILL_AFTER = 1.5  # seconds after a forwarded SIGTERM before SIGKILL follows inside
NOTE = (
    "\n[devagent] the sandbox container stopped while this command ran: the command was "
    "interrupted and is not run again\n"
)


def main(spec: dict[str, object]) -> int:
    pending: list[int] = []
    for forwarded in (*FORWARDED, signal.SIGUSR1):
        signal.signal(forwarded, lambda signum, _frame: pending.append(signum))
    child = subprocess.Popen(
        list(spec["exec"]),  # type: ignore[call-overload]
        start_new_session=True,
        preexec_fn=_take_terminal if spec.get("tty") else None,
    )
    server = int(spec["server"])  # type: ignore[call-overload]
    kill_at: float | None = None
    while True:
        try:
            code = child.wait(timeout=0.1)
            break
        except subprocess.TimeoutExpired:
            pass
        while pending:
            sig = pending.pop(0)
            name = "KILL" if sig == signal.SIGUSR1 else signal.Signals(sig).name[3:]
            _forward(spec, name)
            if sig == signal.SIGTERM and kill_at is None:
                kill_at = time.monotonic() + KILL_AFTER
        if kill_at is not None and time.monotonic() >= kill_at:
            _forward(spec, "KILL")
            kill_at = float("inf")
        if os.getppid() != server:  # the server died: nothing may outlive it here
            _forward(spec, "KILL")
            server = os.getppid()
    if code != 0 and not _running(spec):
        os.write(2, NOTE.encode())
        return INTERRUPTED
    return 128 - code if code < 0 else code


def _take_terminal() -> None:
    """In the engine's client, before its exec: its own session (start_new_session) whose
    controlling terminal is the pty the relay was given, so that resizes reach it."""
    import fcntl
    import termios

    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _forward(spec: dict[str, object], name: str) -> None:
    try:
        subprocess.run(
            [*spec["kill"], name],  # type: ignore[misc]
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        pass


def _running(spec: dict[str, object]) -> bool:
    try:
        done = subprocess.run(
            list(spec["state"]),  # type: ignore[call-overload]
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.stdout.strip() == b"true"


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
