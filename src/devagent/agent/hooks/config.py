"""The hooks file: Claude Code's hooks JSON (the `hooks` object of its settings file, or that
object alone), read as data. Which commands run for an event and a name (a tool's, or what the
event is about), with Claude Code's matcher rules, so that users' existing hooks match the same
calls here.

A leaf: the settings loader checks the file with it at start; the core keeps the parsed set."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("devagent.hooks")

EVENTS = (
    "PreToolUse",
    "PostToolUse",
    "UserPromptSubmit",
    "Stop",
    "SubagentStop",
    "SessionStart",
    "SessionEnd",
    "PreCompact",
    "Notification",
)
DEFAULT_TIMEOUT = 60.0  # seconds, as in Claude Code

# Claude Code's names for devagent's tools: a matcher may name either, and a hook reads Claude
# Code's name as `tool_name` where there is one (its scripts compare against those). apply_patch
# has no counterpart; it answers to the names of the edits it makes, so a guard on Edit|Write holds.
CLAUDE_NAMES: dict[str, tuple[str, ...]] = {
    "run_shell_command": ("Bash",),
    "read_file": ("Read",),
    "read_many_files": ("Read",),
    "write_file": ("Write",),
    "edit": ("Edit", "MultiEdit"),
    "apply_patch": ("apply_patch", "Edit", "MultiEdit", "Write"),
    "list_directory": ("LS",),
    "glob": ("Glob",),
    "grep": ("Grep",),
    "web_fetch": ("WebFetch",),
    "web_search": ("WebSearch",),
    "task": ("Task", "Agent"),
    "write_todos": ("TodoWrite",),
    "background_process": ("BashOutput", "KillShell"),
    "ask_user": ("AskUserQuestion",),
    "skill": ("Skill",),
}


def claude_names(tool: str, mcp_server: str | None = None) -> tuple[str, ...]:
    """The names Claude Code gives the tool `tool` (an MCP tool: `mcp__SERVER__TOOL`)."""
    if mcp_server is not None:
        return (f"mcp__{mcp_server}__{tool[len(mcp_server) + 2 :]}",)
    return CLAUDE_NAMES.get(tool, ())


class HooksFileError(ValueError):
    """The hooks file cannot be used; the message names the file and the place."""


@dataclass(frozen=True, slots=True)
class HookCommand:
    command: str
    timeout: float = DEFAULT_TIMEOUT


_LITERAL = re.compile(r"[A-Za-z0-9_|]+")


def _matcher(pattern: str, where: str) -> Callable[[Iterable[str]], bool]:
    """Claude Code's rule: empty or `*` matches everything; letters, digits, `_` and `|` name
    exact names; anything else is a regular expression searched in the name."""
    if pattern in ("", "*"):
        return lambda names: True
    if _LITERAL.fullmatch(pattern):
        wanted = set(pattern.split("|"))
        return lambda names: any(n in wanted for n in names)
    try:
        compiled = re.compile(pattern)
    except re.error as e:
        raise HooksFileError(f"{where}: the matcher {pattern!r} is not a regular expression: {e}") from None
    return lambda names: any(compiled.search(n) for n in names)


@dataclass(frozen=True)
class MatcherGroup:
    matcher: str
    hooks: tuple[HookCommand, ...]
    _matches: Callable[[Iterable[str]], bool] = field(repr=False, compare=False)

    def matches(self, names: Iterable[str]) -> bool:
        return self._matches(names)


@dataclass(frozen=True)
class HookSet:
    """The parsed hooks file: the matcher groups of each event devagent fires."""

    groups: Mapping[str, tuple[MatcherGroup, ...]]
    source: Path | None = None

    def has(self, event: str) -> bool:
        return bool(self.groups.get(event))

    def commands(self, event: str, names: Iterable[str] = ()) -> list[HookCommand]:
        """The commands to run for `event` about `names` (each once, as Claude Code runs a
        command listed twice once). Events without a subject match every group."""
        names = list(names)
        out: dict[str, HookCommand] = {}
        for group in self.groups.get(event, ()):
            if not names or group.matches(names):
                for hook in group.hooks:
                    out.setdefault(hook.command, hook)
        return list(out.values())


NO_HOOKS = HookSet({})


def load_hooks(path: str | Path) -> HookSet:
    """The hooks file at `path`. HooksFileError for a file that cannot be read or is not the
    format; events and hook types devagent does not fire are skipped with a warning, so a file
    written for a newer Claude Code still works."""
    where = str(path)
    try:
        doc = json.loads(Path(path).expanduser().read_text(encoding="utf-8"))
    except OSError as e:
        raise HooksFileError(f"the hooks file {where} cannot be read: {e.strerror or e}") from None
    except ValueError as e:
        raise HooksFileError(f"the hooks file {where} is not JSON: {e}") from None
    if isinstance(doc, dict) and isinstance(doc.get("hooks"), dict):
        doc = doc["hooks"]  # a whole settings file: only its hooks are read
    if not isinstance(doc, dict):
        raise HooksFileError(f'{where}: expected an object of events ({{"PreToolUse": [...], ...}})')
    groups: dict[str, tuple[MatcherGroup, ...]] = {}
    for event, entries in doc.items():
        if event not in EVENTS:
            log.warning("%s: devagent fires no %r event; its hooks are not run", where, event)
            continue
        if not isinstance(entries, list):
            raise HooksFileError(f"{where}: {event} must be a list of matcher groups")
        groups[event] = tuple(_group(entry, f"{where}: {event}[{i}]") for i, entry in enumerate(entries))
    return HookSet(groups, Path(path))


def _group(entry: Any, where: str) -> MatcherGroup:
    if not isinstance(entry, dict):
        raise HooksFileError(f"{where} must be an object with `hooks` (and a `matcher`)")
    matcher = entry.get("matcher", "")
    if not isinstance(matcher, str):
        raise HooksFileError(f"{where}.matcher must be a string")
    hooks = entry.get("hooks")
    if not isinstance(hooks, list):
        raise HooksFileError(f"{where}.hooks must be a list of hooks")
    commands = [c for i, h in enumerate(hooks) if (c := _command(h, f"{where}.hooks[{i}]")) is not None]
    return MatcherGroup(matcher, tuple(commands), _matcher(matcher, f"{where}.matcher"))


def _command(hook: Any, where: str) -> HookCommand | None:
    if not isinstance(hook, dict):
        raise HooksFileError(f'{where} must be an object like {{"type": "command", "command": "..."}}')
    kind = hook.get("type", "command")
    if kind != "command":
        log.warning('%s: hooks of type %r are not run by devagent (only "command")', where, kind)
        return None
    command = hook.get("command")
    if not isinstance(command, str) or not command.strip():
        raise HooksFileError(f"{where}.command must be a non-empty string")
    timeout = hook.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 86400:
        raise HooksFileError(f"{where}.timeout must be a number of seconds, more than 0")
    return HookCommand(command, float(timeout))
