"""Without a sandbox: commands run directly on the host, as the server's user (`sandbox =
off`), or not at all (`Unavailable`: the sandbox is on but cannot run here, so every command
fails closed with why, never runs unsandboxed)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from devagent.agent.sandbox.base import Limits, SandboxError, Started, Stdin, Streams, Winsize
from devagent.agent.sandbox.files import HostFiles
from devagent.agent.sandbox.spawn import command_line, spawn, started, supervised


def root_note() -> str:
    """What the start-up line says where the server runs as root and commands run unsandboxed."""
    if os.geteuid() != 0:
        return ""
    return ". The server runs as root: so do its commands, with root's access to every file"


class Unsandboxed(HostFiles):
    """A session's commands as plain processes of this server."""

    kind = "none"
    network = True

    def describe(self) -> str:
        return "not sandboxed" + root_note()

    def unavailable(self) -> str | None:
        return None

    def refuses(self, cwd: str) -> str | None:
        return None

    def owner(self) -> tuple[int, int] | None:
        return None

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
        argv = command_line(command, limits, tty)
        if lasting:  # it never outlives the server (the supervisor ends it)
            argv = supervised(argv)
        spawned = await spawn(argv, cwd=cwd, env=env, stdin=stdin, tty=tty, streams=streams)
        return started(spawned, sandboxed=False, supervised=lasting, tty=tty)

    async def release(self, keep: bool) -> None:
        return None


@dataclass(frozen=True, slots=True)
class SandboxMissing:
    """The sandbox is on but cannot run here: shell commands fail closed with
    `why`, never run unsandboxed."""

    why: str

    def message(self) -> str:
        return (
            f"shell commands cannot run on this server: its sandbox is on but {self.why}. "
            "The operator must install bubblewrap, or turn the sandbox off explicitly (--no-sandbox)"
        )


class Unavailable(Unsandboxed):
    """A session's sandbox that is on but cannot run here: no command starts."""

    kind = "local"
    network = False

    def __init__(self, missing: SandboxMissing, roots: Sequence[Path]) -> None:
        super().__init__(roots)
        self.missing = missing

    def describe(self) -> str:
        return f"unavailable ({self.missing.why})"

    def unavailable(self) -> str | None:
        return self.missing.message()

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
        raise SandboxError(self.missing.message())


class DirectProvider:
    """The core's sessions without a sandbox (`missing`: on, but it cannot run here)."""

    def __init__(self, missing: SandboxMissing | None = None) -> None:
        self.missing = missing

    @property
    def kind(self) -> str:
        return "none" if self.missing is None else "local"

    @property
    def network(self) -> bool:
        return self.missing is None

    def describe(self) -> str:
        return "not sandboxed" if self.missing is None else f"unavailable ({self.missing.why})"

    def unavailable(self) -> str | None:
        return None if self.missing is None else self.missing.message()

    def refuses(self, root: Path) -> str | None:
        return None

    def give(self, folder: Path) -> None:
        return None

    def for_session(self, session_id: str, roots: Sequence[Path]) -> Unsandboxed:
        return Unsandboxed(roots) if self.missing is None else Unavailable(self.missing, roots)

    async def close(self) -> None:
        return None
