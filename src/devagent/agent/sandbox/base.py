"""The sandbox interface: what the core, the tools, the hooks and the prompt ask of the place a
session's commands run. Its unit is the session: a `SandboxProvider` (one per core, chosen by the
operator's settings, never by a caller) gives each session its `Sandbox` (`for_session`), which
starts the session's commands, says how it runs them, and reads and writes the session's files
within its workspace roots; `release` lets it go when the session is done with it."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from devagent.common.errors import DevagentError

# The backends an operator may name (`sandbox_backend`); "none" is the kind of a sandbox that
# runs commands directly (`sandbox = off`).
BACKENDS = ("local", "container", "worker")

# What a pseudo-terminal's process is told its terminal is (the tty tool's screen, pyte, follows
# xterm's sequences).
PTY_TERM = "xterm-256color"


class SandboxError(DevagentError):
    """The sandbox was asked for but cannot run here (or cannot start this command); the message
    names the fix."""


@dataclass(frozen=True, slots=True)
class Limits:
    """A command's limits: its data memory in MiB and its processes (0: none), and the seconds
    it may run (None: the caller stops it when it must)."""

    memory_mb: int = 0
    processes: int = 0
    timeout: float | None = None


class Winsize(Protocol):
    """A pseudo-terminal's size (`tools.tty_screen.TtySize`)."""

    @property
    def rows(self) -> int: ...

    @property
    def cols(self) -> int: ...

    def winsize(self) -> bytes: ...


@dataclass(frozen=True, slots=True)
class Streams:
    """Standard streams as asyncio streams (`proc.stdin`, `proc.stdout`, `proc.stderr`) rather
    than raw descriptors: `errors`, its standard error a stream of its own (else dropped);
    `limit`, the reader's line limit in bytes."""

    errors: bool = False
    limit: int = 2**16


@dataclass(slots=True)
class Started:
    """A command started in its own process group: the read end of its output (-1 with
    `Streams`), the write end of its input where it has one (else -1), whether it runs sandboxed,
    whether a supervisor leads it (an unsandboxed lasting command), for a pty process its
    terminal's size (both ends are then the pty's master), and whether its process here is a relay
    that forwards the signals its group gets to the command elsewhere (a container's, a worker's):
    a stop then signals that group alone, never the terminal's foreground group, which is the
    engine's client, not the command."""

    proc: asyncio.subprocess.Process
    output_fd: int = -1
    input_fd: int = -1
    sandboxed: bool = False
    supervised: bool = False
    tty: Winsize | None = None
    relayed: bool = False


Stdin = Literal["closed", "pipe"]


class Sandbox(Protocol):
    """One session's sandbox."""

    @property
    def kind(self) -> str:
        """ "local" (bubblewrap here), "none" (directly), "container" (a container per session),
        "worker" (on a `devagent worker` elsewhere)."""
        ...

    @property
    def network(self) -> bool:
        """Whether its commands reach the network."""
        ...

    def describe(self) -> str:
        """One line on how commands run, for the prompt and `devagent info`."""
        ...

    def show_path(self, host_path: str | Path) -> str:
        """How a workspace path reads to a command inside."""
        ...

    @property
    def files_here(self) -> bool:
        """Whether the session's workspace is a folder of this server's host (the local and
        unsandboxed backends, a container bound to a host folder); when it is not (a container's
        own volume, a worker on another machine) its files are reached only through the
        sandbox's file operations and commands."""
        ...

    def unavailable(self) -> str | None:
        """Why no command can run in it (it is on but cannot start here: fail closed), or None."""
        ...

    def refuses(self, cwd: str) -> str | None:
        """Why a command cannot run in `cwd` (its user cannot write the workspace), or None."""
        ...

    def owner(self) -> tuple[int, int] | None:
        """The uid and gid its commands run as where that is not the server's user, else None:
        what the server writes for them to read or change is theirs."""
        ...

    async def start(
        self,
        command: str,
        *,
        cwd: str,
        env: Mapping[str, str],
        limits: Limits,
        stdin: Stdin = "closed",
        tty: Winsize | None = None,
        streams: Streams | None = None,
        lasting: bool = False,
        shown: Sequence[Path] = (),
    ) -> Started:
        """Starts `bash -c command` in `cwd` with `env` (the caller's clean environment) under
        `limits`, in a process group of its own, its error merged into its output unless
        `streams`. `stdin`: closed, or a pipe for the caller to write; `tty`: a pseudo-terminal
        of that size, its controlling terminal; `lasting`: it may outlive the call that started
        it, never the server; `shown`: folders outside the workspace it may read.
        SandboxError when it cannot start here."""
        ...

    def read_bytes(self, path: str | Path) -> bytes:
        """The bytes of a file inside the workspace roots (OSError, or SandboxError outside)."""
        ...

    def write_atomic(self, path: str | Path, data: bytes) -> None:
        """Replaces or creates a file inside the roots so a crash leaves the old or the new."""
        ...

    def list_dir(self, path: str | Path) -> list[str]:
        """The names in a folder inside the roots, sorted."""
        ...

    def stat(self, path: str | Path) -> os.stat_result | None:
        """A path's lstat inside the roots, None when there is nothing there."""
        ...

    def delete(self, path: str | Path) -> None:
        """Removes a file (or an empty folder) inside the roots."""
        ...

    async def read_bytes_async(self, path: str | Path) -> bytes:
        """`read_bytes` without holding up the event loop (the form tools use)."""
        ...

    async def write_atomic_async(self, path: str | Path, data: bytes) -> None: ...

    async def list_dir_async(self, path: str | Path) -> list[str]: ...

    async def stat_async(self, path: str | Path) -> os.stat_result | None: ...

    async def delete_async(self, path: str | Path) -> None: ...

    async def release(self, keep: bool) -> None:
        """The session is done with it for now (`keep`: its workspace stays for a later turn)
        or for good."""
        ...


@runtime_checkable
class KeptWorkspace(Protocol):
    """A sandbox whose workspace the server keeps as snapshots (a worker's): the session starts
    from the first (`seed`), and `last_snapshot` is the workspace as of its last finished call."""

    async def seed(self, folder: Path) -> None:
        """`folder`'s contents become the workspace the session starts from."""
        ...

    async def last_snapshot(self) -> bytes | None:
        """The last snapshot kept (a gzipped tar of the workspace), or None."""
        ...


class SandboxProvider(Protocol):
    """The core's sandboxes: one backend, chosen by the operator."""

    @property
    def kind(self) -> str: ...

    @property
    def network(self) -> bool: ...

    def describe(self) -> str:
        """One line on how this server runs commands."""
        ...

    def unavailable(self) -> str | None:
        """Why commands cannot run on this server at all, or None."""
        ...

    def refuses(self, root: Path) -> str | None:
        """Why commands in the workspace root `root` would be refused, or None."""
        ...

    def give(self, folder: Path) -> None:
        """A folder the server made for a caller's workspace becomes its commands' user's."""
        ...

    def for_session(self, session_id: str, roots: Sequence[Path]) -> Sandbox:
        """The session's sandbox over its workspace roots."""
        ...

    async def close(self) -> None:
        """The core closes: what the provider holds is let go."""
        ...


def runs_sandboxed(sandbox: Sandbox | SandboxProvider) -> bool:
    """Whether commands run sandboxed: the sandbox is on and can run here."""
    return sandbox.kind != "none" and sandbox.unavailable() is None
