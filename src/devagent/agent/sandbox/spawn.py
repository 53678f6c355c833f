"""Starting a command's process: `bash -c` under the per-command limits (`limited`), in a
process group of its own, its standard streams wired as the caller asked (closed input, a pipe,
a pseudo-terminal, or asyncio streams). A backend gives the final command line (bwrap's, or
the supervisor's for an unsandboxed lasting command)."""

from __future__ import annotations

import asyncio
import fcntl
import os
import shutil
import subprocess
import sys
import termios
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devagent.agent.sandbox.base import Limits, Started, Stdin, Streams, Winsize

# The program that leads an unsandboxed lasting command's process group and ends everything
# the command started when the server dies or the command ends (see its docstring). A sandboxed
# command needs none: bwrap's --die-with-parent and its PID namespace do the same.
SUPERVISOR = str(Path(__file__).with_name("supervise.py"))

# Run first in a pty process's terminal: a session of its own (unless it leads one already)
# whose controlling terminal is its input, the pty, so that the keys typed there signal it (Ctrl-C)
# and what it starts; then the command argv[1:]. Inside a sandbox too: bwrap passes the pty on.
_TAKE_TERMINAL = (
    "import os, sys, fcntl, termios; os.getsid(0) == os.getpid() or os.setsid(); "
    "fcntl.ioctl(0, termios.TIOCSCTTY, 0); os.execvp(sys.argv[1], sys.argv[1:])"
)


def limited(command: str, memory_mb: int, processes: int) -> list[str]:
    """`bash -c command` under the per-command limits: data memory in MiB and
    processes, each capped at what this process may give (a hard limit cannot be raised), 0 for
    none. `ulimit` sets soft and hard limits, so the command cannot raise them again."""
    import resource

    steps: list[str] = []
    for flag, rlimit, value, unit in (
        ("-d", resource.RLIMIT_DATA, memory_mb * 1024, 1024),
        ("-u", resource.RLIMIT_NPROC, processes, 1),
    ):
        if value <= 0:
            continue
        hard = resource.getrlimit(rlimit)[1]
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard // unit)
        steps.append(f"ulimit {flag} {value}")
    if not steps:
        return ["bash", "-c", command]
    return ["bash", "-c", " && ".join([*steps, 'exec bash -c "$1"']), "bash", command]


def command_line(command: str, limits: Limits, tty: Winsize | None) -> list[str]:
    """The limited `bash -c command`, first taking its terminal where it runs in one."""
    argv = limited(command, limits.memory_mb, limits.processes)
    if tty is not None:
        bash = shutil.which("bash") or "bash"
        argv = [os.path.realpath(sys.executable), "-I", "-S", "-c", _TAKE_TERMINAL, bash, *argv[1:]]
    return argv


def supervised(argv: Sequence[str]) -> list[str]:
    """`argv` led by the supervisor, which ends it and all it started when this server dies."""
    return [os.path.realpath(sys.executable), "-I", "-S", SUPERVISOR, str(os.getpid()), *argv]


@dataclass(slots=True)
class _Stdio:
    """The command's standard input and output (its error goes with its output), our ends of
    them, and the descriptors only the command keeps (closed here once it has started)."""

    stdin: int
    stdout: int
    ours: tuple[int, int]  # (read its output, write its input: -1 for none)
    theirs: tuple[int, ...]

    @classmethod
    def make(cls, stdin: Stdin, tty: Winsize | None) -> _Stdio:
        if tty is not None:
            master, slave = os.openpty()
            fcntl.ioctl(slave, termios.TIOCSWINSZ, tty.winsize())
            return cls(slave, slave, (master, os.dup(master)), (slave,))
        read_fd, write_fd = os.pipe()
        if stdin == "closed":
            return cls(subprocess.DEVNULL, write_fd, (read_fd, -1), (write_fd,))
        stdin_r, stdin_w = os.pipe()
        return cls(stdin_r, write_fd, (read_fd, stdin_w), (write_fd, stdin_r))


async def spawn(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    stdin: Stdin,
    tty: Winsize | None,
    streams: Streams | None,
    **popen: Any,
) -> tuple[asyncio.subprocess.Process, int, int]:
    """Starts `argv` in a new session (its own process group); returns it with the read end of
    its output and the write end of its input (-1 where it has none, or with `streams`)."""
    if streams is not None:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=dict(env),
            stdin=asyncio.subprocess.PIPE if stdin == "pipe" else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE if streams.errors else asyncio.subprocess.DEVNULL,
            start_new_session=True,
            limit=streams.limit,
            **popen,
        )
        return proc, -1, -1
    # Our own pipes rather than asyncio's: we can close our end when background jobs keep the
    # write end open after the shell exited, and the process transport holds no pipes (so its
    # wait() ends when the process does).
    stdio = _Stdio.make(stdin, tty)
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=dict(env),
            stdin=stdio.stdin,
            stdout=stdio.stdout,
            stderr=stdio.stdout,
            start_new_session=True,
            **popen,
        )
    except BaseException:
        for fd in stdio.ours:
            if fd >= 0:
                os.close(fd)
        raise
    finally:
        for fd in stdio.theirs:
            os.close(fd)
    return proc, *stdio.ours


def started(
    spawned: tuple[asyncio.subprocess.Process, int, int],
    *,
    sandboxed: bool,
    supervised: bool,
    tty: Winsize | None,
) -> Started:
    proc, output_fd, input_fd = spawned
    return Started(proc, output_fd, input_fd, sandboxed, supervised, tty)
