"""The built-in tools. `builtin_tools()` returns a fresh instance of each, by name."""

from __future__ import annotations

from devagent.agent.tools.base import Tool


def builtin_tools() -> dict[str, Tool]:
    # late: a door that imports one tool module (the settings import the shell tool's sandbox)
    # does not load every tool before it answers `initialize`
    from devagent.agent.tools.memory import SaveMemory
    from devagent.agent.tools.patch import ApplyPatch
    from devagent.agent.tools.read import ReadFile, ReadManyFiles
    from devagent.agent.tools.search import Glob, Grep, ListDirectory
    from devagent.agent.tools.shell import RunShellCommand
    from devagent.agent.tools.todo import WriteTodos
    from devagent.agent.tools.write import Edit, WriteFile

    tools: list[Tool] = [
        ReadFile(),
        ReadManyFiles(),
        WriteFile(),
        Edit(),
        ApplyPatch(),
        ListDirectory(),
        Glob(),
        Grep(),
        RunShellCommand(),
        SaveMemory(),
        WriteTodos(),
    ]
    return {t.name: t for t in tools}


__all__ = ["builtin_tools"]
