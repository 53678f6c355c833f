"""Where the built-in tools read and write files and run commands: the tool-backend seam.

By default a session's file tools use the workspace on disk (confined, `_confine`) and shell
commands run as local processes (`shell.py`). A front door whose client can do these things
itself supplies backends for the session (`Session.use_backends`): an editor that reads and
writes files through its buffers (so unsaved changes are seen and edits land in the editor), or
runs commands in its own terminal. The core knows no protocol: a backend is these few coroutines.

Backends are process resources, like MCP connections: they are never stored. Paths given to a
backend are already resolved inside the workspace roots (`Workspace.resolve`), so a backend
never widens what a tool may touch, and approval is decided before any backend is called.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


class CallContext(Protocol):
    """What a backend may use of the call it runs a command for (a tool's `ToolContext`)."""

    @property
    def call_id(self) -> str: ...

    @property
    def live(self) -> Callable[[str], Awaitable[None]]:
        """Shows live output: the text passed replaces what was shown before."""
        ...


class FileBackend(Protocol):
    async def read_text(self, path: Path) -> str | None:
        """The text of the file (as the editor has it), or None when there is no such file.
        A failure raises `ToolFailure`."""
        ...

    async def write_text(self, path: Path, content: str) -> None:
        """Replace (or create) the file's text. A failure raises `ToolFailure`."""
        ...


@dataclass(slots=True)
class CommandResult:
    output: str  # combined stdout and stderr (its tail when it was long)
    exit_code: int | None  # None when killed by a signal
    signal: str | None = None
    truncated: bool = False


class CommandBackend(Protocol):
    async def run(
        self, command: str, cwd: str, time_limit: float, ctx: CallContext, env: Mapping[str, str]
    ) -> CommandResult:
        """Run `bash -c command` in `cwd` with `env` added to its environment, reporting output
        through `ctx.live`; kill it after `time_limit` seconds. Cancelling the awaiting task must
        kill the command."""
        ...


@dataclass(slots=True)
class ToolBackends:
    files: FileBackend | None = None  # None: the workspace on disk
    commands: CommandBackend | None = None  # None: local processes
