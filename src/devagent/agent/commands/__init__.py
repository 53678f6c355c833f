"""Slash commands: the registry every door lists (A2A `commands/get`, wire `initialize`, ACP's
available commands, the terminal's completion) and runs, through `Session.run_command(path, args)`
or a prompt that starts with `/`. The built-in commands (`registry()`), and for a workspace those
plus the user's and the workspace's custom commands (`with_custom`, custom.py).

Listing commands must be cheap (a stdio door's `initialize`): the command modules load what
they need when they run.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from devagent.agent.commands import builtin, custom, mcp, memory, restore
from devagent.agent.commands.catalog import ArgumentInfo, CommandInfo, Prompt, Registry
from devagent.agent.commands.output import Emit, say
from devagent.agent.events import Notice, RunCommand

if TYPE_CHECKING:
    from devagent.agent.commands.catalog import CommandSession
    from devagent.agent.tools.workspace import Workspace

__all__ = [
    "ArgumentInfo",
    "CommandInfo",
    "Prompt",
    "Registry",
    "parse_command_line",
    "registry",
    "run_command",
    "with_custom",
]


class HelpSession(Protocol):
    """What `/help` needs of a session: its commands (`Session` is the one implementation)."""

    def commands(self) -> Registry:
        """The slash commands of the session: the built-ins and the custom ones, read once."""
        ...


def parse_command_line(text: str, commands: Registry | None = None) -> RunCommand | None:
    """`/memory add fact` -> RunCommand(["memory", "add"], "fact"); None if no command matches.
    The argument text is kept as typed. `commands`: the session's (the built-ins when None)."""
    line = text.strip()
    if not line.startswith("/"):
        return None
    resolved = (commands or registry()).resolve(line[1:].split())
    if resolved is None:
        return None
    path, used = resolved
    pieces = line[1:].split(None, used)
    return RunCommand(path=path, args=pieces[used].strip() if len(pieces) > used else "")


async def run_command(
    session: CommandSession, cmd: RunCommand, emit: Emit, commands: Registry | None = None
) -> str | Prompt | None:
    info = (commands or registry()).find(cmd.path)
    if info is None or info.handler is None:
        emit(Notice(f"Unknown command /{' '.join(cmd.path)}. Try /help.", "error"))
        return None
    return await info.handler(session, cmd.args, emit)


async def _help(session: HelpSession, args: str, emit: Emit) -> str | None:
    lines = ["Commands:"]

    def walk(cmds: Sequence[CommandInfo], prefix: str) -> None:
        for c in cmds:
            if c.handler is not None:
                lines.append(f"  {prefix}{c.name} {c.usage()}".rstrip() + f"  {c.description}")
            walk(c.sub_commands, f"{prefix}{c.name} ")

    walk(session.commands().list(), "/")
    say(emit, "\n".join(lines))
    return None


def with_custom(config_dir: Path, workspace: Workspace | None) -> Registry:
    """The built-in commands, then the custom commands of the user's config folder and of the
    workspace (read now: a session reads them once, so its list stays the same)."""
    builtins = registry().list()
    taken = [n for c in builtins for n in (c.name, *c.aliases)]
    return Registry([*builtins, *(c.info() for c in custom.load(config_dir, workspace, taken))])


@cache
def registry() -> Registry:
    """The built-in commands."""
    return Registry(
        [
            CommandInfo("help", "List the commands", handler=_help, aliases=["?"]),
            CommandInfo(
                "init",
                "Write an AGENTS.md guide for this workspace (asks before writing)",
                [ArgumentInfo("instructions", "What the guide should also cover")],
                handler=builtin.init,
            ),
            CommandInfo(
                "memory",
                "Show, add to or reload the project memory",
                sub_commands=[
                    CommandInfo("show", "Show the project memory", handler=memory.show),
                    CommandInfo(
                        "add",
                        "Add a fact to the project memory",
                        [ArgumentInfo("text", "The fact to remember", required=True)],
                        handler=memory.add,
                    ),
                    CommandInfo(
                        "refresh", "Reload the memory file into the conversation", handler=memory.refresh
                    ),
                ],
            ),
            CommandInfo(
                "compact",
                "Summarise older history through the model to free context",
                [ArgumentInfo("instructions", "What the summary must keep")],
                handler=builtin.compact,
            ),
            CommandInfo("clear", "Start the conversation afresh", handler=builtin.clear, aliases=["reset"]),
            CommandInfo("tools", "List the tools the model can call", handler=builtin.tools),
            CommandInfo(
                "mcp",
                "List the MCP servers, their state and their tools",
                handler=mcp.list_servers,
                sub_commands=[
                    CommandInfo(
                        "restart",
                        "Start MCP servers afresh (by default, those that failed)",
                        [ArgumentInfo("names", "The servers to restart")],
                        handler=mcp.restart,
                    )
                ],
            ),
            CommandInfo(
                "restore",
                "List the checkpoints taken before edits, or restore one (files and conversation)",
                [ArgumentInfo("id", "The checkpoint to restore; without it, the list")],
                handler=restore.restore,
            ),
            CommandInfo(
                "stats",
                "Token usage, cost and tool call statistics",
                handler=builtin.stats,
                aliases=["usage"],
            ),
        ]
    )
