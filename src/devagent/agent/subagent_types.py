"""Subagent types: what the `task` tool may start. Two are built in (`general-purpose`, which has
its parent's tools, and `explorer`, which only reads); more are Markdown files with YAML front
matter in the user's config folder (`agents/`) and in a workspace (`.devagent/agents/`):

    ---
    name: reviewer
    description: Reviews a change and reports problems; never edits.
    tools: read_file, grep, glob      # or a YAML list; left out: the parent's tools
    model: anthropic:claude-sonnet-4-5  # honoured from the user's folder; a workspace's only if
    ---                                 # the operator allows (subagent_workspace_models)
    You review code. Read the files named in the task ...

A type only narrows: its tools are cut to its parent's (`narrow`), it never gets a wider approval
mode or workspace, and a workspace's type is text and a subset, nothing more (it cannot take the
name of a built-in or of a type of the user's own).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from devagent.agent import front_matter
from devagent.agent.events import ToolKind
from devagent.agent.tools.base import ToolFailure, Workspace

log = logging.getLogger(__name__)

GENERAL = "general-purpose"
EXPLORER = "explorer"
TYPES_FOLDER = "agents"  # in the user's config folder
WORKSPACE_FOLDER = ".devagent/agents"
MAX_FILE_BYTES = 64 * 1024
MAX_FILES = 100  # per folder
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")

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
    tools: tuple[str, ...] | None  # the tools it asks for; None: its parent's
    model: str  # "" : its parent's
    prompt: str  # its instructions (the file's body)
    source: str  # "built-in", or the file it came from
    read_only: bool = False  # the parent's read tools only (the explorer)
    remote: bool = False  # a remote A2A agent the operator configured (named after its settings key)

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
            yield parse_type(text, str(path))
        except (OSError, ToolFailure, ValueError) as e:
            warnings.append(f"{path}: {getattr(e, 'message', None) or e}")


def parse_type(text: str, source: str) -> AgentType:
    """A type file: `---`, YAML front matter (`name`, `description`, `tools`, `model`), `---`,
    then the prompt. ValueError says what is wrong."""
    meta, body = front_matter.split(text, required=True)
    unknown = sorted(set(map(str, meta)) - {"name", "description", "tools", "model"})
    if unknown:
        raise ValueError(f"unknown keys in the front matter: {', '.join(unknown)}")
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError("`name` must be lower-case letters, digits, `-` or `_` (at most 64)")
    if not isinstance(description, str) or not description.strip():
        raise ValueError("`description` must be a non-empty string")
    model = meta.get("model") or ""
    if not isinstance(model, str):
        raise ValueError("`model` must be a string")
    return AgentType(name, description.strip(), _tools(meta.get("tools")), model.strip(), body, source)


def _tools(value: object) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        items = list(value)
    else:
        raise ValueError("`tools` must be a list of tool names or a comma-separated string")
    return tuple(dict.fromkeys(i.strip() for i in items if i.strip()))


def narrow(
    agent: AgentType, parent_tools: Mapping[str, ToolKind], *, keep_task: bool
) -> tuple[list[str], list[str]]:
    """The tools a subagent of this type gets from a parent that has `parent_tools` (name: kind),
    in the parent's order: those it asks for that the parent has (`task` only when `keep_task`),
    and the names it asked for that it does not get."""
    offered = {n: k for n, k in parent_tools.items() if keep_task or n != "task"}
    if agent.read_only:
        offered = {n: k for n, k in offered.items() if k == ToolKind.READ}
    if agent.tools is None:
        return list(offered), []
    wanted: Collection[str] = agent.tools
    return [n for n in offered if n in wanted], [n for n in agent.tools if n not in offered]
