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

from devagent.agent.hooks.rules import check_rule
from devagent.common.errors import DevagentError

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
    "PostToolUseFailure",
)
# Claude Code's events and hook types that devagent does not run: a file written for a newer Claude
# Code loads with a warning. Any other name is a mistake (a misspelling) and stops the start.
CLAUDE_ONLY_EVENTS = (
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
HOOK_TYPES = ("command", "http")
CLAUDE_ONLY_TYPES = ("prompt", "agent", "mcp_tool")
# The keys of a hook devagent reads (`statusMessage` is Claude Code's text shown while it runs:
# nothing to show here, so it is accepted and not used); any other key is said once.
HOOK_KEYS = (
    "type", "command", "timeout", "advisory", "if", "async", "url", "headers", "allowedEnvVars",
    "statusMessage",
)  # fmt: skip
GROUP_KEYS = ("matcher", "hooks")
# Events about a tool call: the ones a hook's `if` (a permission rule) is tested on.
TOOL_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure")
# Events where a hook guards: one that cannot run blocks, unless the operator marked it advisory.
GUARD_EVENTS = ("PreToolUse", "UserPromptSubmit")
DEFAULT_TIMEOUT = 60.0  # seconds, as in Claude Code


class HooksFileError(DevagentError, ValueError):
    """The hooks file cannot be used; the message names the file and the place."""


@dataclass(frozen=True, slots=True)
class HookCommand:
    """One hook: its command (for an http hook, the URL it posts to), its timeout, whether it is
    `advisory` (where it guards, its failure lets the call go on with a warning), and the folders
    it needs to see in the sandbox (the hooks file's, its plugin's, those of the scripts its command
    names). `condition` is its `if` (a permission rule the call must match), `background` its
    `async`; `headers` and `env_vars` an http hook's; `plugin_root` the plugin folder its file is in."""

    command: str
    timeout: float = DEFAULT_TIMEOUT
    advisory: bool = False
    folders: tuple[Path, ...] = ()
    kind: str = "command"
    condition: str = ""
    background: bool = False
    headers: tuple[tuple[str, str], ...] = ()
    env_vars: tuple[str, ...] = ()
    plugin_root: Path | None = None


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
        command listed twice with the same `if` once). Events without a subject match every group."""
        names = list(names)
        out: dict[str, HookCommand] = {}
        for group in self.groups.get(event, ()):
            if not names or group.matches(names):
                for hook in group.hooks:
                    out.setdefault(f"{hook.condition}\0{hook.command}", hook)
        return list(out.values())


NO_HOOKS = HookSet({})


def load_hooks(path: str | Path) -> HookSet:
    """The hooks file at `path`. HooksFileError for a file that cannot be read, is not the format,
    or names an event or hook type that is neither devagent's nor Claude Code's (with the closest
    name); Claude Code's events and types devagent does not run, and keys it does not know, are
    skipped, each with one of the set's `warnings`, so a file written for a newer Claude Code
    still works."""
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
    real = Path(os.path.realpath(file))
    reader = _Reader(real.parent, plugin_root(real))
    groups: dict[str, tuple[MatcherGroup, ...]] = {}
    for event, entries in doc.items():
        if not _known(event, EVENTS, CLAUDE_ONLY_EVENTS, f"{where}: {event!r} is not a hooks event"):
            reader.warnings.append(f"{where}: devagent fires no {event!r} event; its hooks are not run")
            continue
        if not isinstance(entries, list):
            raise HooksFileError(f"{where}: {event} must be a list of matcher groups")
        groups[event] = tuple(reader.group(e, event, f"{where}: {event}[{i}]") for i, e in enumerate(entries))
    return HookSet(groups, Path(path), tuple(reader.warnings))


def plugin_root(file: Path) -> Path | None:
    """The plugin folder a hooks file belongs to, as Claude Code has it for `${CLAUDE_PLUGIN_ROOT}`:
    the folder holding `.claude-plugin/plugin.json` next to or above the file's folder, or, for a
    plugin's usual `hooks/hooks.json`, the folder above `hooks/`. None for any other file."""
    folder = file.parent
    for candidate in (folder, folder.parent):
        if (candidate / ".claude-plugin" / "plugin.json").is_file():
            return candidate
    if folder.name == "hooks" and file.name == "hooks.json":
        return folder.parent
    return None


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
    """Reads a file's matcher groups: `folder` is the file's own, `plugin` the plugin folder it is
    in (or None), `warnings` what it skipped (a key it does not know: once per key)."""

    folder: Path
    plugin: Path | None = None
    warnings: list[str] = field(default_factory=list)
    _unknown: set[str] = field(default_factory=set)

    def _keys(self, entry: dict[str, Any], known: tuple[str, ...], where: str) -> None:
        for key in entry:
            if key not in known and key not in self._unknown:
                self._unknown.add(key)
                self.warnings.append(f"{where}: devagent does not know the key {key!r}; it is ignored")

    def group(self, entry: Any, event: str, where: str) -> MatcherGroup:
        if not isinstance(entry, dict):
            raise HooksFileError(f"{where} must be an object with `hooks` (and a `matcher`)")
        self._keys(entry, GROUP_KEYS, where)
        matcher = entry.get("matcher", "")
        if not isinstance(matcher, str):
            raise HooksFileError(f"{where}.matcher must be a string")
        hooks = entry.get("hooks")
        if not isinstance(hooks, list):
            raise HooksFileError(f"{where}.hooks must be a list of hooks")
        commands = [self.command(h, event, f"{where}.hooks[{i}]") for i, h in enumerate(hooks)]
        kept = tuple(c for c in commands if c is not None)
        return MatcherGroup(matcher, kept, _matcher(matcher, f"{where}.matcher"))

    def command(self, hook: Any, event: str, where: str) -> HookCommand | None:
        if not isinstance(hook, dict):
            raise HooksFileError(f'{where} must be an object like {{"type": "command", "command": "..."}}')
        kind = hook.get("type", "command")
        if not isinstance(kind, str):
            raise HooksFileError(f"{where}.type must be a string")
        if not _known(kind, HOOK_TYPES, CLAUDE_ONLY_TYPES, f"{where}: {kind!r} is not a hook type"):
            self.warnings.append(f"{where}: hooks of type {kind!r} are not run by devagent")
            return None
        self._keys(hook, HOOK_KEYS, where)
        common = self._common(hook, event, where)
        if kind == "http":
            return self._http(hook, where, common)
        command = hook.get("command")
        if not isinstance(command, str) or not command.strip():
            raise HooksFileError(f"{where}.command must be a non-empty string")
        # A plugin's folder is shown whole only where its manifest says it is one: a hooks file
        # at ~/.claude/hooks/hooks.json must not show all of ~/.claude (the scripts it names are).
        named = named_folders(command, self.plugin)
        whole = self.plugin is not None and (self.plugin / ".claude-plugin" / "plugin.json").is_file()
        extra = [self.plugin] if whole and self.plugin is not None else []
        folders = tuple(dict.fromkeys([self.folder, *extra, *named]))
        return HookCommand(command, folders=folders, plugin_root=self.plugin, **common)

    def _common(self, hook: dict[str, Any], event: str, where: str) -> dict[str, Any]:
        """What every hook may say: timeout, advisory, if, async."""
        timeout = hook.get("timeout", DEFAULT_TIMEOUT)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 86400:
            raise HooksFileError(f"{where}.timeout must be a number of seconds, more than 0")
        flags = {}
        for key in ("advisory", "async"):
            flags[key] = hook.get(key, False)
            if not isinstance(flags[key], bool):
                raise HooksFileError(f"{where}.{key} must be true or false")
        condition = hook.get("if", "")
        if not isinstance(condition, str):
            raise HooksFileError(f'{where}.if must be a permission rule like "Bash(git *)"')
        if condition:
            try:
                check_rule(condition)
            except ValueError as e:
                raise HooksFileError(f"{where}.if: {e}") from None
            if event not in TOOL_EVENTS:
                self.warnings.append(f"{where}: `if` is tested on tool events only; this hook is never run")
        return {
            "timeout": float(timeout),
            "advisory": flags["advisory"],
            "background": flags["async"],
            "condition": condition,
        }

    def _http(self, hook: dict[str, Any], where: str, common: dict[str, Any]) -> HookCommand:
        url = hook.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise HooksFileError(f"{where}.url must be an http:// or https:// URL")
        headers = hook.get("headers", {})
        if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
            raise HooksFileError(f"{where}.headers must be an object of strings")
        names = hook.get("allowedEnvVars", [])
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise HooksFileError(f"{where}.allowedEnvVars must be a list of variable names")
        return HookCommand(url, kind="http", headers=tuple(headers.items()), env_vars=tuple(names), **common)


def named_folders(command: str, plugin: Path | None = None) -> list[Path]:
    """The folders of the files a hook command names by absolute path (`~`, `$HOME` and, in a
    plugin's file, `$CLAUDE_PLUGIN_ROOT` expanded): the folder of the name as written and, for a
    link, of the file it leads to. Paths relative to the project (`$CLAUDE_PROJECT_DIR/...`) are
    in the workspace, which the hook sees anyway."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        words = command.split()
    starts = {"${HOME}": os.path.expanduser("~"), "$HOME": os.path.expanduser("~")}
    if plugin is not None:
        starts |= {"${CLAUDE_PLUGIN_ROOT}": str(plugin), "$CLAUDE_PLUGIN_ROOT": str(plugin)}
    found: list[Path] = []
    for word in words:
        word = word.partition("=")[2] if re.match(r"[A-Za-z_][A-Za-z0-9_]*=", word) else word
        for var, value in starts.items():
            if word.startswith(var):
                word = value + word[len(var) :]
        path = os.path.expanduser(word)
        if os.path.isabs(path) and os.path.isfile(path):
            found += [Path(os.path.abspath(path)).parent, Path(os.path.realpath(path)).parent]
    return list(dict.fromkeys(found))
