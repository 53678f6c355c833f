"""Subagent types: what the `task` tool may start. Two are built in (`general-purpose`, which has
its parent's tools, and `explorer`, which only reads); more are Markdown files with YAML front
matter in the user's config folder (`agents/`) and in a workspace (`.devagent/agents/`):

    ---
    name: reviewer
    description: Reviews a change and reports problems; never edits.
    tools: Read, Grep, Glob           # or read_file, ...; a YAML list; left out: the parent's tools
    model: sonnet                     # or inherit, or a devagent spec; honoured from the user's
    ---                               # folder, a workspace's only if the operator allows
    You review code. Read the files named in the task ...

Claude Code's agent files work as they are: tools by Claude Code's names (`claude_names.py`,
`mcp__SERVER__TOOL` too) or devagent's, `disallowedTools` taken away, `model: inherit` the
parent's model and `sonnet|opus|haiku` that family on the parent's provider (`model_aliases.py`),
`color` ignored, other keys of Claude Code's ignored with a warning. Front matter that is not
strict YAML is read leniently (`front_matter.py`); a tool list that cannot be read gives no tools.

A type only narrows: its tools are cut to its parent's (`narrow`), it never gets a wider approval
mode or workspace, and a workspace's type is text and a subset, nothing more (it cannot take the
name of a built-in or of a type of the user's own).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from devagent.agent.events import ToolKind
from devagent.agent.naming.claude import rules_of, split_list
from devagent.agent.tools import front_matter
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.workspace import Workspace

log = logging.getLogger(__name__)

GENERAL = "general-purpose"
EXPLORER = "explorer"
TYPES_FOLDER = "agents"  # in the user's config folder
WORKSPACE_FOLDER = ".devagent/agents"
MAX_FILE_BYTES = 64 * 1024
MAX_FILES = 100  # per folder
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
KEYS = ("name", "description", "tools", "disallowedTools", "model")
DISPLAY_KEYS = ("color",)  # how Claude Code shows the agent: ignored without a word
# Claude Code's other keys: devagent does not use them, and says so once per file.
CLAUDE_KEYS = (
    "permissionMode",
    "maxTurns",
    "skills",
    "mcpServers",
    "hooks",
    "memory",
    "background",
    "isolation",
    "effort",
    "initialPrompt",
)

_SUBAGENT_ROLE = (
    "You are a subagent: another agent gave you the task in the user's message and reads only your "
    "final message, not your tool calls. Do the task with the tools you have, then end with a "
    "complete, self-contained report of what you found or changed (files as `path:line`), and "
    "anything left undone. Do not ask the other agent questions; if something blocks you, say so "
    "in your report."
)


@dataclass(frozen=True, slots=True)
class AgentType:
    name: str
    description: str
    tools: tuple[str, ...] | None  # the tools it asks for (as written); None: its parent's
    model: str  # as written ("", `inherit`: its parent's)
    prompt: str  # its instructions (the file's body)
    source: str  # "built-in", or the file it came from
    read_only: bool = False  # the parent's read tools only (the explorer)
    remote: bool = False  # a remote A2A agent the operator configured (named after its settings key)
    denied: tuple[str, ...] = ()  # its disallowedTools, as written

    def instructions(self) -> str:
        """What the subagent's system prompt says of its role."""
        return f"{_SUBAGENT_ROLE}\n\n{self.prompt.strip()}".strip()


BUILT_IN = (
    AgentType(
        GENERAL,
        "your tools, for a change, a fix or an investigation done in a context of its own.",
        None,
        "",
        "",
        "built-in",
    ),
    AgentType(
        EXPLORER,
        "read-only: searches and reads the code to answer a question about it.",
        None,
        "",
        "Explore the workspace to answer the question: search broadly, read what matters, and "
        "report the answer with the files and lines it rests on. You cannot change files or run "
        "commands.",
        "built-in",
        read_only=True,
    ),
)


@dataclass(frozen=True, slots=True)
class Catalog:
    """The types a session may start, by name, and the warnings of reading them (bad files)."""

    types: Mapping[str, AgentType]
    warnings: tuple[str, ...] = ()

    def listing(self) -> str:
        """The types and their descriptions, sorted by name: the same text for the whole session
        (it is part of every request's tool definitions)."""
        ordered = sorted(self.types.items())
        return "\n".join(f"- {name}: {' '.join(t.description.split())}" for name, t in ordered)


def load_catalog(
    config_dir: Path, workspace: Workspace, *, workspace_models: bool, remote: Mapping[str, str] | None = None
) -> Catalog:
    """The built-in types, then the user's (which may replace a built-in), then the operator's
    remote agents (`remote`: name to description), then the workspace's (which may add names,
    never replace one). A file that cannot be read or parsed is left out with a warning."""
    types = {t.name: t for t in BUILT_IN}
    warnings: list[str] = []
    for t in _read_folder(config_dir / TYPES_FOLDER, None, warnings):
        types[t.name] = t
    for name, description in (remote or {}).items():
        types[name] = AgentType(name, description, (), "", "", "settings file", remote=True)
    for root in workspace.roots:
        for t in _read_folder(root / WORKSPACE_FOLDER, workspace, warnings):
            if t.name in types:
                warnings.append(f"{t.source}: the type {t.name!r} is defined already; this one is ignored")
                continue
            if t.model and not workspace_models:
                t = replace(t, model="")  # the operator has not let a repository choose models
            types[t.name] = t
    for w in warnings:
        log.warning("subagent types: %s", w)
    return Catalog(types, tuple(warnings))


def _read_folder(folder: Path, workspace: Workspace | None, warnings: list[str]) -> Iterable[AgentType]:
    """The types of the `*.md` files of a folder, by file name; a workspace's read through its
    confined walk (never outside its roots)."""
    try:
        real = workspace.resolve(folder) if workspace is not None else folder
        names = sorted(n for n in os.listdir(real) if n.endswith(".md"))
    except (OSError, ToolFailure):
        return
    if len(names) > MAX_FILES:
        warnings.append(f"{folder}: only the first {MAX_FILES} type files are read")
    for name in names[:MAX_FILES]:
        path = real / name
        try:
            text = front_matter.read_small(path, workspace, MAX_FILE_BYTES)
            yield parse_type(text, str(path), warnings)
        except (OSError, ToolFailure, ValueError) as e:
            warnings.append(f"{path}: {getattr(e, 'message', None) or e}")


def parse_type(text: str, source: str, warnings: list[str] | None = None) -> AgentType:
    """A type file: `---`, front matter (`name`, `description`, `tools`, `disallowedTools`,
    `model`; `color` ignored, Claude Code's other keys ignored with a warning), `---`, then the
    prompt. ValueError says what is wrong."""
    meta, body = front_matter.split(text, required=True, keys=(*KEYS, *DISPLAY_KEYS, *CLAUDE_KEYS))
    unknown = sorted(set(map(str, meta)) - {*KEYS, *DISPLAY_KEYS})
    if unknown and warnings is not None:
        warnings.append(f"{source}: keys devagent does not use, ignored: {', '.join(unknown)}")
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError("`name` must be lower-case letters, digits, `-` or `_` (at most 64)")
    if not isinstance(description, str) or not description.strip():
        raise ValueError("`description` must be a non-empty string")
    model = meta.get("model") or ""
    if model is front_matter.UNREADABLE:
        model = ""
    if not isinstance(model, str):
        raise ValueError("`model` must be a string")
    denied = _tools(meta.get("disallowedTools"), unreadable=("*",))
    return AgentType(
        name, description.strip(), _tools(meta.get("tools")), model.strip(), body, source, denied=denied or ()
    )


def _tools(value: object, unreadable: tuple[str, ...] = ()) -> tuple[str, ...] | None:
    """A tool list as written (None: not given); one the lenient reading could not read is
    `unreadable`: no tools asked for, every tool denied."""
    if value is None:
        return None
    if value is front_matter.UNREADABLE:
        return unreadable
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("[") and text.endswith("]"):  # a flow list kept whole
            text = text[1:-1]
        items = [i.strip("\"'") for i in split_list(text)]
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        items = [i for v in value for i in split_list(v)]
    else:
        raise ValueError("`tools` must be a list of tool names or a comma-separated string")
    return tuple(dict.fromkeys(i for i in items if i))


def narrow(
    agent: AgentType, parent_tools: Mapping[str, ToolKind], *, keep_task: bool
) -> tuple[list[str], list[str]]:
    """The tools a subagent of this type gets from a parent that has `parent_tools` (name: kind),
    in the parent's order: those it asks for that the parent has (`task` only when `keep_task`),
    and the names it asked for that it does not get."""
    offered = {n: k for n, k in parent_tools.items() if keep_task or n != "task"}
    if agent.read_only:
        offered = {n: k for n, k in offered.items() if k == ToolKind.READ}
    denied = rules_of(agent.denied)
    if "*" in agent.denied:  # a deny list that could not be read
        return [], []
    offered = {n: k for n, k in offered.items() if not denied.allows(n)}
    if agent.tools is None or "*" in agent.tools:  # `tools: "*"`: all of the parent's, as left out
        return list(offered), []
    wanted = rules_of(agent.tools)
    return [n for n in offered if wanted.allows(n)], wanted.missing(offered)
