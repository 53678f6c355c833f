"""The built-in tools. `builtin_tools()` returns a fresh instance of each, by name; given the
operator's settings, only those the operator turned on (the web tools can be turned off); given a
session's skills, the `skill` tool when there are any; given its sandbox, the shell tool
describes it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from devagent.agent.tools.base import Tool

if TYPE_CHECKING:
    from devagent.agent.sandbox.base import Sandbox
    from devagent.agent.settings import CoreConfig
    from devagent.agent.tools.skill_catalog import Skills


def builtin_tools(
    config: CoreConfig | None = None, skills: Skills | None = None, sandbox: Sandbox | None = None
) -> dict[str, Tool]:
    # late: a door that imports one tool module does not load every tool before it answers
    # `initialize`
    from devagent.agent.tools.ask import AskUser
    from devagent.agent.tools.background import BackgroundProcessTool
    from devagent.agent.tools.memory import SaveMemory
    from devagent.agent.tools.patch import ApplyPatch
    from devagent.agent.tools.read import ReadFile, ReadManyFiles
    from devagent.agent.tools.search import Glob, Grep, ListDirectory
    from devagent.agent.tools.shell import RunShellCommand
    from devagent.agent.tools.skill import SkillTool
    from devagent.agent.tools.task import Task
    from devagent.agent.tools.todo import WriteTodos
    from devagent.agent.tools.web import WebFetch, WebSearch
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
        RunShellCommand(sandbox),
        BackgroundProcessTool(),
        SaveMemory(),
        WriteTodos(),
        WebFetch(),
        WebSearch(),
        AskUser(),
        Task(),
    ]
    tools = [t for t in tools if config is None or _offered(t.name, config)]
    if skills:
        tools.append(SkillTool(skills))
    return {t.name: t for t in tools}


def _offered(name: str, config: CoreConfig) -> bool:
    if name == "web_fetch":
        return config.web_fetch
    if name == "web_search":  # the operator's search service; "native" is the provider's own
        return "://" in config.web_search
    return True


__all__ = ["builtin_tools"]
