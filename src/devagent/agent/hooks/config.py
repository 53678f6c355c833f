"""The hooks file: Claude Code's hooks JSON (the `hooks` object of its settings file, or that
object alone), read as data. Which commands run for an event and a name (a tool's, or what the
event is about), with Claude Code's matcher rules, so that users' existing hooks match the same
calls here.

A leaf: the settings loader checks the file with it at start (a name that is neither devagent's nor
Claude Code's stops the start; one devagent skips is said once); the core keeps the parsed set."""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
# Claude Code's events and hook types that devagent does not run: a file written for a newer Claude
# Code loads with a warning. Any other name is a mistake (a misspelling) and stops the start.
CLAUDE_ONLY_EVENTS = (
    "PostToolUseFailure",
    "PostToolBatch",
    "PermissionRequest",
    "PermissionDenied",
    "UserPromptExpansion",
    "StopFailure",
    "SubagentStart",
    "PostCompact",
    "Elicitation",
    "ElicitationResult",
    "TeammateIdle",
    "TaskCreated",
    "TaskCompleted",
    "Setup",
    "InstructionsLoaded",
    "CwdChanged",
    "FileChanged",
    "ConfigChange",
    "WorktreeCreate",
    "WorktreeRemove",
    "PreModelSwitch",
    "PostModelSwitch",
    "MessageDisplay",
    "DirectoryAdded",
)
HOOK_TYPES = ("command",)
CLAUDE_ONLY_TYPES = ("prompt", "agent", "http", "mcp_tool")
# Events where a hook guards: one that cannot run blocks, unless the operator marked it advisory.
GUARD_EVENTS = ("PreToolUse", "UserPromptSubmit")
DEFAULT_TIMEOUT = 60.0  # seconds, as in Claude Code


class HooksFileError(ValueError):
    """The hooks file cannot be used; the message names the file and the place."""


@dataclass(frozen=True, slots=True)
class HookCommand:
    """One hook: its command, its timeout, whether it is `advisory` (where it guards, its failure
    lets the call go on with a warning), and the folders it needs to see in the sandbox (the hooks
    file's and those of the scripts its command names)."""

    command: str
    timeout: float = DEFAULT_TIMEOUT
    advisory: bool = False
    folders: tuple[Path, ...] = ()


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
    # What devagent skips in the file (a Claude Code event or hook type it does not run).
    warnings: tuple[str, ...] = ()

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
    """The hooks file at `path`. HooksFileError for a file that cannot be read, is not the format,
    or names an event or hook type that is neither devagent's nor Claude Code's (with the closest
    name); Claude Code's events and types devagent does not run are skipped, each with one of the
    set's `warnings`, so a file written for a newer Claude Code still works."""
    where = str(path)
    file = Path(path).expanduser()
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except OSError as e:
        raise HooksFileError(f"the hooks file {where} cannot be read: {e.strerror or e}") from None
    except ValueError as e:
        raise HooksFileError(f"the hooks file {where} is not JSON: {e}") from None
    if isinstance(doc, dict) and isinstance(doc.get("hooks"), dict):
        doc = doc["hooks"]  # a whole settings file: only its hooks are read
    if not isinstance(doc, dict):
        raise HooksFileError(f'{where}: expected an object of events ({{"PreToolUse": [...], ...}})')
    reader = _Reader(Path(os.path.realpath(file)).parent)
    groups: dict[str, tuple[MatcherGroup, ...]] = {}
    for event, entries in doc.items():
        if not _known(event, EVENTS, CLAUDE_ONLY_EVENTS, f"{where}: {event!r} is not a hooks event"):
            reader.warnings.append(f"{where}: devagent fires no {event!r} event; its hooks are not run")
            continue
        if not isinstance(entries, list):
            raise HooksFileError(f"{where}: {event} must be a list of matcher groups")
        groups[event] = tuple(reader.group(e, f"{where}: {event}[{i}]") for i, e in enumerate(entries))
    return HookSet(groups, Path(path), tuple(reader.warnings))


def _known(name: str, ours: tuple[str, ...], theirs: tuple[str, ...], what: str) -> bool:
    """True for one of `ours`, False for one of `theirs` (Claude Code's, which devagent skips);
    HooksFileError saying the closest name for anything else."""
    if name in ours:
        return True
    if name in theirs:
        return False
    close = difflib.get_close_matches(name, [*ours, *theirs], n=1, cutoff=0.6)
    hint = f": did you mean {close[0]!r}?" if close else f" (devagent runs {', '.join(ours)})"
    raise HooksFileError(what + hint)


@dataclass
class _Reader:
    """Reads a file's matcher groups: `folder` is the file's own, `warnings` what it skipped."""

    folder: Path
    warnings: list[str] = field(default_factory=list)

    def group(self, entry: Any, where: str) -> MatcherGroup:
        if not isinstance(entry, dict):
            raise HooksFileError(f"{where} must be an object with `hooks` (and a `matcher`)")
        matcher = entry.get("matcher", "")
        if not isinstance(matcher, str):
            raise HooksFileError(f"{where}.matcher must be a string")
        hooks = entry.get("hooks")
        if not isinstance(hooks, list):
            raise HooksFileError(f"{where}.hooks must be a list of hooks")
        commands = [self.command(h, f"{where}.hooks[{i}]") for i, h in enumerate(hooks)]
        kept = tuple(c for c in commands if c is not None)
        return MatcherGroup(matcher, kept, _matcher(matcher, f"{where}.matcher"))

    def command(self, hook: Any, where: str) -> HookCommand | None:
        if not isinstance(hook, dict):
            raise HooksFileError(f'{where} must be an object like {{"type": "command", "command": "..."}}')
        kind = hook.get("type", "command")
        if not isinstance(kind, str):
            raise HooksFileError(f"{where}.type must be a string")
        if not _known(kind, HOOK_TYPES, CLAUDE_ONLY_TYPES, f"{where}: {kind!r} is not a hook type"):
            self.warnings.append(f'{where}: hooks of type {kind!r} are not run by devagent (only "command")')
            return None
        command = hook.get("command")
        if not isinstance(command, str) or not command.strip():
            raise HooksFileError(f"{where}.command must be a non-empty string")
        timeout = hook.get("timeout", DEFAULT_TIMEOUT)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 86400:
            raise HooksFileError(f"{where}.timeout must be a number of seconds, more than 0")
        advisory = hook.get("advisory", False)
        if not isinstance(advisory, bool):
            raise HooksFileError(f"{where}.advisory must be true or false")
        folders = tuple(dict.fromkeys([self.folder, *named_folders(command)]))
        return HookCommand(command, float(timeout), advisory, folders)


def named_folders(command: str) -> list[Path]:
    """The folders of the files a hook command names by absolute path (`~` and `$HOME` expanded):
    the folder of the name as written and, for a link, of the file it leads to. Paths relative
    to the project (`$CLAUDE_PROJECT_DIR/...`) are in the workspace, which the hook sees anyway."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        words = command.split()
    home = os.path.expanduser("~")
    found: list[Path] = []
    for word in words:
        word = word.partition("=")[2] if re.match(r"[A-Za-z_][A-Za-z0-9_]*=", word) else word
        for var in ("${HOME}", "$HOME"):
            if word.startswith(var):
                word = home + word[len(var) :]
        path = os.path.expanduser(word)
        if os.path.isabs(path) and os.path.isfile(path):
            found += [Path(os.path.abspath(path)).parent, Path(os.path.realpath(path)).parent]
    return list(dict.fromkeys(found))
