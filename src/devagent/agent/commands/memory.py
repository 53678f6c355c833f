"""`/memory show`, `/memory add` and `/memory refresh`: the project memory file the system prompt
quotes (AGENTS.md by default)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from devagent.agent.commands.output import Emit, say
from devagent.agent.events import Notice
from devagent.agent.tools._util import read_text, write_text
from devagent.agent.tools.memory import add_memory, memory_path

if TYPE_CHECKING:
    from devagent.agent.settings import CoreConfig
    from devagent.agent.tools.workspace import Workspace


class MemorySession(Protocol):
    """What the `/memory` commands need of a session (`Session` is the one implementation)."""

    workspace: Workspace

    @property
    def config(self) -> CoreConfig: ...

    def read_memory(self) -> str: ...

    def refresh_memory(self) -> str: ...


async def show(session: MemorySession, args: str, emit: Emit) -> str | None:
    text = session.read_memory()
    name = session.config.memory_file
    say(emit, f"{name}:\n{text}" if text.strip() else f"The memory file {name} is empty or missing.")
    return None


async def add(session: MemorySession, args: str, emit: Emit) -> str | None:
    if not args.strip():
        emit(Notice("Usage: /memory add <text to remember>", "error"))
        return None
    # The user typed this command: it is their own edit, so it needs no permission request.
    path = memory_path(session.workspace, session.config.memory_file)
    old = read_text(path) if path.is_file() else None
    write_text(path, add_memory(old, args.strip()))  # atomic, like the save_memory tool
    session.refresh_memory()
    say(emit, f"Remembered in {path}: {args.strip()}")
    return None


async def refresh(session: MemorySession, args: str, emit: Emit) -> str | None:
    text = session.refresh_memory()
    n = len(text.splitlines())
    say(emit, f"Memory reloaded ({n} line{'' if n == 1 else 's'} from {session.config.memory_file}).")
    return None
