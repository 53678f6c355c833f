"""Slash commands (G5): a registry with names, descriptions, arguments and sub-commands.

Adapters expose the registry (A2A `commands/get`, wire `initialize.slash_commands`) and run a
command through `Session.run_command(path, args)` or a prompt that starts with `/`. A command either
does its work directly and reports it as text, or returns a prompt that the session then runs as an
ordinary model turn (`/init`), so the normal tools and the normal approval policy apply.

This module imports nothing heavy: listing commands must be cheap (wire `initialize`).
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING

from devagent.agent.events import Event, Notice, RunCommand, TextDelta

if TYPE_CHECKING:
    from devagent.agent.session import Session

# A handler gets the session, the argument text and the event sink; it returns a prompt to run
# through the model, or None when it is done.
Handler = Callable[["Session", str, Callable[[Event], None]], Awaitable[str | None]]


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


def parse_command_line(text: str) -> RunCommand | None:
    """`/memory add fact` -> RunCommand(["memory", "add"], "fact"); None if no command matches.
    The argument text is kept as typed."""
    line = text.strip()
    if not line.startswith("/"):
        return None
    resolved = registry().resolve(line[1:].split())
    if resolved is None:
        return None
    path, used = resolved
    pieces = line[1:].split(None, used)
    return RunCommand(path=path, args=pieces[used].strip() if len(pieces) > used else "")


async def run_command(session: Session, cmd: RunCommand, emit: Callable[[Event], None]) -> str | None:
    info = registry().find(cmd.path)
    if info is None or info.handler is None:
        emit(Notice(f"Unknown command /{' '.join(cmd.path)}. Try /help.", "error"))
        return None
    return await info.handler(session, cmd.args, emit)


# --- the commands ----------------------------------------------------------------------------


def _say(emit: Callable[[Event], None], text: str) -> None:
    emit(TextDelta(text if text.endswith("\n") else text + "\n"))


async def _help(session: Session, args: str, emit: Callable[[Event], None]) -> str | None:
    lines = ["Commands:"]

    def walk(cmds: list[CommandInfo], prefix: str) -> None:
        for c in cmds:
            if c.handler is not None:
                argtext = " ".join(f"<{a.name}>" if a.required else f"[{a.name}]" for a in c.arguments)
                lines.append(f"  {prefix}{c.name} {argtext}".rstrip() + f"  {c.description}")
            walk(c.sub_commands, f"{prefix}{c.name} ")

    walk(registry().list(), "/")
    _say(emit, "\n".join(lines))
    return None


INIT_PROMPT = """Create or update the file AGENTS.md at the root of this workspace: a concise guide for
coding agents working on this project. First look around (list the directory, read the build files,
README and main sources; grep where useful). Then write AGENTS.md with write_file: what the project
is, how it is laid out, how to build, run and test it, the coding conventions you observed, and
anything a newcomer would trip over. Keep it factual and short (under 80 lines). If AGENTS.md
already exists, read it first and improve it rather than starting over."""


async def _init(session: Session, args: str, emit: Callable[[Event], None]) -> str | None:
    return INIT_PROMPT + (f"\n\nThe user adds: {args}" if args.strip() else "")


async def _memory_show(session: Session, args: str, emit: Callable[[Event], None]) -> str | None:
    text = session.read_memory()
    name = session.core.config.memory_file
    _say(emit, f"{name}:\n{text}" if text.strip() else f"The memory file {name} is empty or missing.")
    return None


async def _memory_add(session: Session, args: str, emit: Callable[[Event], None]) -> str | None:
    from devagent.agent.tools._util import read_text, write_text
    from devagent.agent.tools.memory import add_memory, memory_path

    if not args.strip():
        emit(Notice("Usage: /memory add <text to remember>", "error"))
        return None
    # The user typed this command: it is their own edit, so it needs no permission request.
    path = memory_path(session.workspace, session.core.config.memory_file)
    old = read_text(path) if path.is_file() else None
    write_text(path, add_memory(old, args.strip()))  # atomic, like the save_memory tool
    session.refresh_memory()
    _say(emit, f"Remembered in {path}: {args.strip()}")
    return None


async def _memory_refresh(session: Session, args: str, emit: Callable[[Event], None]) -> str | None:
    text = session.refresh_memory()
    n = len(text.splitlines())
    _say(emit, f"Memory reloaded ({n} line{'' if n == 1 else 's'} from {session.core.config.memory_file}).")
    return None


async def _compact(session: Session, args: str, emit: Callable[[Event], None]) -> str | None:
    from devagent.agent.compact import compact

    await compact(session, emit, keep_instructions=args)
    return None


async def _clear(session: Session, args: str, emit: Callable[[Event], None]) -> str | None:
    session.state.pending = []
    session.state.todos = []
    await session.replace_messages([])
    _say(emit, "Conversation cleared.")
    return None


async def _tools(session: Session, args: str, emit: Callable[[Event], None]) -> str | None:
    lines = ["Tools:"]
    for d in session.tool_definitions():
        first = (d["description"] or "").strip().splitlines()[0] if d["description"] else ""
        lines.append(f"  {d['name']} ({d['kind']}): {first}")
    _say(emit, "\n".join(lines))
    return None


async def _stats(session: Session, args: str, emit: Callable[[Event], None]) -> str | None:
    u = session.state.usage
    lines = [
        f"Session {session.id}",
        f"Model: {session.state.model or session.core.default_model}",
        f"Approval mode: {session.state.approval_mode}",
        f"Tokens: {u.input_tokens} in ({u.cache_read_tokens} read from the cache, "
        f"{u.cache_write_tokens} written to it), {u.output_tokens} out ({u.reasoning_tokens} reasoning); "
        f"{u.requests} model requests",
    ]
    if session.state.tool_stats:
        lines.append("Tool calls:")
        for name, s in sorted(session.state.tool_stats.items()):
            lines.append(f"  {name}: {s['calls']} calls, {s['failures']} failed")
    _say(emit, "\n".join(lines))
    return None


async def _mcp(session: Session, args: str, emit: Callable[[Event], None]) -> str | None:
    from devagent.agent.mcp import mcp_command

    return await mcp_command(session, args, emit)


async def _mcp_restart(session: Session, args: str, emit: Callable[[Event], None]) -> str | None:
    from devagent.agent.mcp import mcp_restart_command

    return await mcp_restart_command(session, args, emit)


async def _restore(session: Session, args: str, emit: Callable[[Event], None]) -> str | None:
    from devagent.agent.checkpoints import restore_command

    return await restore_command(session, args, emit)


@cache
def registry() -> Registry:
    return Registry(
        [
            CommandInfo("help", "List the commands", handler=_help, aliases=["?"]),
            CommandInfo(
                "init",
                "Write an AGENTS.md guide for this workspace (asks before writing)",
                [ArgumentInfo("instructions", "What the guide should also cover")],
                handler=_init,
            ),
            CommandInfo(
                "memory",
                "Show, add to or reload the project memory",
                sub_commands=[
                    CommandInfo("show", "Show the project memory", handler=_memory_show),
                    CommandInfo(
                        "add",
                        "Add a fact to the project memory",
                        [ArgumentInfo("text", "The fact to remember", required=True)],
                        handler=_memory_add,
                    ),
                    CommandInfo(
                        "refresh", "Reload the memory file into the conversation", handler=_memory_refresh
                    ),
                ],
            ),
            CommandInfo(
                "compact",
                "Summarise older history through the model to free context",
                [ArgumentInfo("instructions", "What the summary must keep")],
                handler=_compact,
            ),
            CommandInfo("clear", "Start the conversation afresh", handler=_clear, aliases=["reset"]),
            CommandInfo("tools", "List the tools the model can call", handler=_tools),
            CommandInfo(
                "mcp",
                "List the MCP servers, their state and their tools",
                handler=_mcp,
                sub_commands=[
                    CommandInfo(
                        "restart",
                        "Start MCP servers afresh (by default, those that failed)",
                        [ArgumentInfo("names", "The servers to restart")],
                        handler=_mcp_restart,
                    )
                ],
            ),
            CommandInfo(
                "restore",
                "List the checkpoints taken before edits, or restore one (files and conversation)",
                [ArgumentInfo("id", "The checkpoint to restore; without it, the list")],
                handler=_restore,
            ),
            CommandInfo("stats", "Token usage and tool call statistics", handler=_stats, aliases=["usage"]),
        ]
    )
