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

SPEC_JSON: {"server": pid, "exec": argv, "pidfile": the command's file inside (its wrapper's
argument), "kill": argv (the signal name is appended),
"state": argv (prints "true" while the container runs), "tty": bool, "timeout": seconds (optional:
then SIGTERM, and SIGKILL after KILL_AFTER)}. Only the standard library:
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
    timeout = spec.get("timeout")
    ends_at = time.monotonic() + float(timeout) if isinstance(timeout, int | float) else None
    while True:
        try:
            code = child.wait(timeout=0.1)
            break
        except subprocess.TimeoutExpired:
            pass
        if ends_at is not None and time.monotonic() >= ends_at:  # the command's own time limit
            pending.append(signal.SIGTERM)
            ends_at = None
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
    # Signals that came as the client ended still reach the command (a pty's foreground group is
    # the client's: a stop signals both); a client killed from outside takes the command with it.
    for sig in pending:
        _forward(spec, "KILL" if sig == signal.SIGUSR1 else signal.Signals(sig).name[3:])
    if code < 0:
        _forward(spec, "KILL")
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
    """The signal `name` to the command's group: from here when its processes are this machine's
    and ours to signal (found by the wrapper's argument, the command's own random file name), else
    by an `exec` of `kill` inside. Here first: a container whose pids limit is exhausted (a fork
    bomb) cannot start the `kill`."""
    group = _host_group(str(spec.get("pidfile", "")))
    if group is not None:
        try:
            os.killpg(group, getattr(signal, f"SIG{name}"))
            return
        except OSError:
            pass
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


def _host_group(pidfile: str) -> int | None:
    """The process group, as this machine numbers it, of the command's wrapper (`/bin/sh -c
    WRAPPER PIDFILE ...`, the leader of the command's group), when it is visible here."""
    if not pidfile:
        return None
    wanted = pidfile.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if len(argv) > 3 and argv[0] == b"/bin/sh" and argv[3] == wanted:
                return os.getpgid(int(entry))
        except OSError:
            continue
    return None


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
