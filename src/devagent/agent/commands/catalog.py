"""What a slash command is: a name, a description, its arguments and sub-commands, and a handler
that gets the session (as the narrow protocol the handler names), the argument text and the
event sink. A handler either
does its work and reports it as text, or returns a prompt the session then runs as an ordinary
model turn (so the normal tools and approval policy apply)."""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from devagent.agent.commands.output import Emit

if TYPE_CHECKING:
    from devagent.agent.commands import HelpSession
    from devagent.agent.commands.builtin import ClearingSession, StatsSession, ToolListing
    from devagent.agent.commands.mcp import McpCommandSession
    from devagent.agent.commands.memory import MemorySession
    from devagent.agent.commands.restore import RestoringSession
    from devagent.agent.loop.compact import CompactingSession

    class CommandSession(
        HelpSession,
        CompactingSession,
        ClearingSession,
        ToolListing,
        StatsSession,
        MemorySession,
        McpCommandSession,
        RestoringSession,
        Protocol,
    ):
        """A session as `run_command` hands it to whichever handler a command names: what
        every built-in handler asks (each handler's parameter names its own, narrower protocol).
        Only the type checker sees it: it checks `Session` against it where a command runs."""


@dataclass(frozen=True, slots=True)
class Prompt:
    """A prompt a command runs through the model, with what it narrows for that turn: the tools
    (a custom command's `allowed-tools`, as written; None: the session's) and the model it asks
    for (a custom command's `model`, as written; "": the session's)."""

    text: str
    tools: tuple[str, ...] | None = None
    model: str = ""


# A handler returns a prompt to run through the model, or None when it is done.
Handler = Callable[["CommandSession", str, Emit], Awaitable[str | Prompt | None]]


@dataclass(slots=True)
class ArgumentInfo:
    name: str
    description: str
    required: bool = False


@dataclass(slots=True)
class CommandInfo:
    name: str
    description: str
    arguments: list[ArgumentInfo] = field(default_factory=list)
    sub_commands: list[CommandInfo] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    handler: Handler | None = None
    hint: str = ""  # how to call it, when its author wrote that (a custom command's argument-hint)

    def usage(self) -> str:
        """The arguments as a list shows them: `<required> [optional]`, or the author's hint."""
        if self.hint:
            return self.hint
        return " ".join(f"<{a.name}>" if a.required else f"[{a.name}]" for a in self.arguments)


class Registry:
    def __init__(self, commands: builtins.list[CommandInfo]) -> None:
        self._commands = commands

    def list(self) -> builtins.list[CommandInfo]:
        return list(self._commands)

    def find(self, path: builtins.list[str]) -> CommandInfo | None:
        """The command at `path`, or None. A parent without a handler needs a sub-command."""
        found = self._walk(path)
        if found is None:
            return None
        cmd, rest = found
        if rest or cmd.handler is None:
            return None
        return cmd

    def _walk(self, path: builtins.list[str]) -> tuple[CommandInfo, builtins.list[str]] | None:
        if not path:
            return None
        cmd = _match(self._commands, path[0])
        if cmd is None:
            return None
        i = 1
        while i < len(path):
            sub = _match(cmd.sub_commands, path[i])
            if sub is None:
                break
            cmd = sub
            i += 1
        return cmd, path[i:]

    def resolve(self, words: builtins.list[str]) -> tuple[builtins.list[str], int] | None:
        """The canonical command path for a command line's leading words (aliases resolved)
        and how many words it used; None when the first word names no command."""
        found = self._walk(words)
        if found is None:
            return None
        _cmd, rest = found
        used = len(words) - len(rest)
        names: builtins.list[str] = []
        cmds = self._commands
        for w in words[:used]:
            c = _match(cmds, w)
            assert c is not None
            names.append(c.name)
            cmds = c.sub_commands
        return names, used


def _match(commands: list[CommandInfo], name: str) -> CommandInfo | None:
    for c in commands:
        if c.name == name or name in c.aliases:
            return c
    return None
