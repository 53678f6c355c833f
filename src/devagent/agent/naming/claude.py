"""Claude Code's names for devagent's tools, both ways: what a hook's matcher and `tool_name` use
(`claude_names`), and what the tool lists of Claude Code's files mean here (`ToolRules`): a
subagent type's `tools` and `disallowedTools`, a custom command's `allowed-tools`.

A list names tools devagent's way (`read_file`), Claude Code's way (`Read`, `Bash(git status:*)`,
whose part in brackets is a permission rule: the tool is named, nothing is granted), or an MCP
server's (`mcp__github__create_issue`; `mcp__github` or `mcp__github__*` for all of its tools).
A name devagent has no tool for is kept apart, so the caller can say it was left out: a list only
ever narrows."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from devagent.agent.naming.mcp import SEPARATOR

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

# Claude Code's name -> devagent's tools that answer to it (`Edit`: edit and apply_patch, of which
# a model is given the one its family uses).
DEVAGENT_NAMES: dict[str, tuple[str, ...]] = {}
for _tool, _names in CLAUDE_NAMES.items():
    for _name in _names:
        DEVAGENT_NAMES[_name] = (*DEVAGENT_NAMES.get(_name, ()), _tool)

_MCP = "mcp__"
_RULE = re.compile(r"^([A-Za-z0-9_*.-]+)\s*(\(.*\))?$", re.S)


def claude_names(tool: str, mcp_server: str | None = None) -> tuple[str, ...]:
    """The names Claude Code gives the tool `tool` (an MCP tool: `mcp__SERVER__TOOL`)."""
    if mcp_server is not None:
        return (f"mcp__{mcp_server}__{tool[len(mcp_server) + 2 :]}",)
    return CLAUDE_NAMES.get(tool, ())


@dataclass(frozen=True, slots=True)
class Rule:
    """One entry of a tool list: as written, the devagent names it stands for, or the MCP server
    all of whose tools it allows."""

    written: str
    names: frozenset[str] = frozenset()
    server: str = ""

    def allows(self, tool: str) -> bool:
        """Whether it names the tool `tool` (devagent's name; an MCP tool's `SERVER__TOOL`)."""
        return tool in self.names or (bool(self.server) and tool.startswith(self.server + SEPARATOR))


@dataclass(frozen=True, slots=True)
class ToolRules:
    """A tool list read."""

    rules: tuple[Rule, ...] = ()

    def allows(self, tool: str) -> bool:
        return any(r.allows(tool) for r in self.rules)

    def missing(self, offered: Iterable[str]) -> list[str]:
        """The entries (as written) that name none of the tools `offered`."""
        tools = list(offered)
        return [r.written for r in self.rules if not any(r.allows(t) for t in tools)]


def split_list(value: str) -> list[str]:
    """A comma- (or space-) separated tool list as Claude Code writes it, where a rule's brackets
    may hold commas and spaces: `Bash(git add:*), Read Grep`."""
    items: list[str] = []
    depth, current = 0, ""
    for c in value:
        if c == "(":
            depth += 1
        elif c == ")":
            depth = max(0, depth - 1)
        if depth == 0 and (c == "," or c.isspace()):
            items.append(current)
            current = ""
        else:
            current += c
    items.append(current)
    return [i.strip() for i in items if i.strip()]


def read_rules(entries: Iterable[str]) -> ToolRules:
    """What a list of tool names (any of the spellings above) allows here."""
    return ToolRules(tuple(dict.fromkeys(_rule(e.strip()) for e in entries if e.strip())))


@lru_cache(maxsize=256)
def rules_of(entries: tuple[str, ...]) -> ToolRules:
    """`read_rules`, kept for lists read again and again (a turn's, at each step)."""
    return read_rules(entries)


def _rule(entry: str) -> Rule:
    m = _RULE.match(entry)
    name = m.group(1) if m else entry
    if name.startswith(_MCP):
        server, _, tool = name[len(_MCP) :].partition(SEPARATOR)
        if tool in ("", "*"):
            return Rule(entry, server=server)
        return Rule(entry, frozenset({f"{server}{SEPARATOR}{tool}"}))
    return Rule(entry, frozenset(DEVAGENT_NAMES.get(name, (name,))))
