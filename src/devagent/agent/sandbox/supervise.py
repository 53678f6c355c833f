"""The supervisor of an unsandboxed background process, run as a program by the server (never
imported): `python -I -S supervise.py SERVER_PID COMMAND...`.

It leads the command's process group and is a child subreaper, so whatever the command starts
stays below it, even a process that leaves the group (`setsid`, a daemon's double fork). It ends
everything below it:

- when the server dies, SIGKILL included: the kernel sends it SIGUSR1 then (its parent-death
  signal, PR_SET_PDEATHSIG; strictly, when the thread that started it ends: every door runs its
  event loop, which starts commands, on the main thread);
- when the command ends: what the command left running ends with it, as in a sandbox;
- on SIGUSR1 from the server, which stops a command that outlived SIGTERM.

SIGTERM (the group's stop) it outlives until the command ends, so it is there to clean up. A
sandboxed command needs none of this: bwrap's `--die-with-parent` and its PID namespace do it.
Standard library only, and nothing of devagent: it starts with `-I -S`.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from typing import Any

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
ROUNDS = 100  # rounds of killing what is below, at most (each round's kills may orphan more)


def _below() -> list[int]:
    """The live processes below this one (every descendant, zombies left out)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    todo = [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def end_all() -> None:
    """SIGKILL to everything below, until nothing is (what a killed process leaves comes here)."""
    for _ in range(ROUNDS):
        pids = _below()
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        _reap()


def _on_signal(_signum: int, _frame: Any) -> None:
    end_all()
    os._exit(128 + signal.SIGKILL)


def main(argv: list[str]) -> None:
    server, command = int(argv[1]), argv[2:]
    signal.signal(signal.SIGUSR1, _on_signal)
    signal.signal(signal.SIGTERM, lambda *_: None)  # a handler, not SIG_IGN: exec resets it
    libc = ctypes.CDLL(None, use_errno=True)
    prctl = getattr(libc, "prctl", None)
    if prctl is not None:
        prctl(PR_SET_CHILD_SUBREAPER, 1)
        prctl(PR_SET_PDEATHSIG, signal.SIGUSR1)
    if os.getppid() != server:  # the server died before the death signal was asked for
        _on_signal(signal.SIGUSR1, None)
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(command[0], command)
        finally:
            os._exit(127)
    _, status = os.waitpid(pid, 0)
    end_all()
    code = os.waitstatus_to_exitcode(status)
    os._exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main(sys.argv)
