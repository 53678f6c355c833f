"""Custom slash commands: Markdown prompt files the user keeps in the `commands/` folder of
devagent's config folder, and a project keeps in its workspace's `.devagent/commands/`, in Claude
Code's format:

    ---
    description: Review a file for one concern
    argument-hint: <file> [focus]
    allowed-tools: Read, Grep, Bash(git diff:*)
    model: sonnet
    ---
    Review the file $1. Look above all for: $2 (see docs/commands.md)

`/NAME ARGS` runs the body as the user's message to the model, with `$ARGUMENTS` replaced by the
argument text as typed and `$1`, `$2`, ... by its words (split like a shell: quotes group words);
a missing one is empty. A body with no placeholder gets the arguments appended. A file in a
subfolder is named with its folder: `frontend/component.md` is `/frontend:component`. A folder's
README.md (and other all-capitals documents such as CHANGELOG.md) is not a command.

Running a command is sending its prompt under the session's approval mode. `allowed-tools` narrows
the tools of that turn to those it names (Claude Code's names or devagent's, `claude_names.py`):
it never adds one, and the approval policy still asks where it would. `model` is the turn's model
where the caller may choose models (`model_aliases.py` turns Claude's names into one); else it is
left out with a log line. Claude Code's display keys (`disable-model-invocation`,
`hide-from-slash-command-tool`, ...) are ignored. Built-in commands keep their names; a
workspace's command cannot take the name of a user's.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from devagent.agent.commands.catalog import ArgumentInfo, CommandInfo, Prompt
from devagent.agent.commands.output import Emit
from devagent.agent.naming.claude import split_list
from devagent.agent.tools import front_matter
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.workspace import Workspace

log = logging.getLogger(__name__)

USER_FOLDER = "commands"  # in the user's config folder
WORKSPACE_FOLDER = ".devagent/commands"
MAX_FILE_BYTES = 64 * 1024
MAX_FILES = 200  # per folder, subfolders included
MAX_DEPTH = 3  # folder levels below the commands folder
_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# `$1`..`$99`, but not an amount such as `$5M`, `$2.0M` or `$5,000` in a prompt about money
_PLACEHOLDER = re.compile(r"\$(ARGUMENTS\b|[1-9][0-9]?(?![0-9A-Za-z_]|[.,][0-9]))")
# A folder's documents, not commands: README.md in any case, these in capitals.
_DOCUMENTS = {
    "README",
    "CHANGELOG",
    "LICENSE",
    "CONTRIBUTING",
    "CODE_OF_CONDUCT",
    "SECURITY",
    "CLAUDE",
    "AGENTS",
}
KEYS = ("description", "argument-hint", "allowed-tools", "model")
# Claude Code's keys that only change how it shows or offers a command: ignored without a word.
DISPLAY_KEYS = (
    "disable-model-invocation",
    "hide-from-slash-command-tool",
    "name",
    "title",
    "version",
    "author",
)


@dataclass(frozen=True, slots=True)
class CustomCommand:
    name: str  # `frontend:component` for commands/frontend/component.md
    description: str
    argument_hint: str
    body: str
    source: str  # the file it came from
    tools: tuple[str, ...] | None = None  # its allowed-tools, as written; None: the session's
    model: str = ""  # the model it asks for, as written

    def expand(self, args: str) -> str:
        return expand(self.body, args)

    def info(self) -> CommandInfo:
        async def handler(session: object, args: str, emit: Emit) -> Prompt:
            return Prompt(self.expand(args), self.tools, self.model)

        argument = ArgumentInfo(self.argument_hint or "arguments", "The command's arguments")
        return CommandInfo(self.name, self.description, [argument], handler=handler, hint=self.argument_hint)


def expand(body: str, args: str) -> str:
    """The body with `$ARGUMENTS` and `$1`..`$99` replaced; with no placeholder, the arguments
    (if any) follow the body."""
    text = args.strip()
    try:
        words = shlex.split(text)
    except ValueError:  # an unbalanced quote: plain words rather than a refusal
        words = text.split()

    def value(m: re.Match[str]) -> str:
        key = m.group(1)
        if key.startswith("ARGUMENTS"):
            return text
        i = int(key)
        return words[i - 1] if i <= len(words) else ""

    if _PLACEHOLDER.search(body) is None:
        return body.rstrip() + (f"\n\nArguments: {text}" if text else "")
    return _PLACEHOLDER.sub(value, body).rstrip()


def load(config_dir: Path, workspace: Workspace | None, taken: Iterable[str]) -> list[CustomCommand]:
    """The user's commands, then the workspace's (through its confined walk), by name; a name
    already taken (a built-in's, or the user's for a workspace command) is left out with a warning,
    as is a file that cannot be read or parsed."""
    names = set(taken)
    found: list[CustomCommand] = []
    warnings: list[str] = []
    folders: list[tuple[Path, Workspace | None]] = [(config_dir / USER_FOLDER, None)]
    if workspace is not None:
        folders += [(root / WORKSPACE_FOLDER, workspace) for root in workspace.roots]
    for folder, ws in folders:
        for cmd in _read_folder(folder, ws, warnings):
            if cmd.name in names:
                warnings.append(f"{cmd.source}: the command /{cmd.name} exists already; this one is ignored")
                continue
            names.add(cmd.name)
            found.append(cmd)
    for w in warnings:
        log.warning("custom commands: %s", w)
    return sorted(found, key=lambda c: c.name)


def _read_folder(folder: Path, workspace: Workspace | None, warnings: list[str]) -> Iterator[CustomCommand]:
    files = list(_markdown_files(folder, workspace, (), warnings))
    if len(files) > MAX_FILES:
        warnings.append(f"{folder}: only the first {MAX_FILES} command files are read")
    for path, parts in files[:MAX_FILES]:
        try:
            text = front_matter.read_small(path, workspace, MAX_FILE_BYTES)
            yield parse(text, ":".join(parts), str(path), warnings)
        except (OSError, ToolFailure, ValueError, UnicodeDecodeError) as e:
            warnings.append(f"{path}: {getattr(e, 'message', None) or e}")


def _markdown_files(
    folder: Path, workspace: Workspace | None, prefix: tuple[str, ...], warnings: list[str]
) -> Iterator[tuple[Path, tuple[str, ...]]]:
    """`(file, name parts)` of the `*.md` files under `folder`, sorted; a workspace's folders
    resolved through its confined walk (a link out of the roots is not followed)."""
    try:
        real = workspace.resolve(folder) if workspace is not None else folder
        entries = sorted(os.scandir(real), key=lambda e: e.name)
    except (OSError, ToolFailure):
        return
    for e in entries:
        stem = e.name[:-3] if e.name.endswith(".md") else e.name
        if not _PART.match(stem) or stem.upper() == "README" or stem in _DOCUMENTS:
            continue
        if e.name.endswith(".md") and e.is_file():
            yield real / e.name, (*prefix, stem)
        elif e.is_dir() and len(prefix) < MAX_DEPTH:
            yield from _markdown_files(real / e.name, workspace, (*prefix, e.name), warnings)


def parse(text: str, name: str, source: str, warnings: list[str] | None = None) -> CustomCommand:
    """A command file: optional front matter (`description`, `argument-hint`, `allowed-tools`,
    `model`; display keys ignored, other keys ignored with a warning), then the prompt."""
    meta, body = front_matter.split(text, required=False, keys=(*KEYS, *DISPLAY_KEYS))
    # a key the lenient reading could not read is left out, but allowed-tools (then: no tool)
    meta = {k: v for k, v in meta.items() if v is not front_matter.UNREADABLE or k == "allowed-tools"}
    unknown = sorted(set(map(str, meta)) - {*KEYS, *DISPLAY_KEYS})
    if unknown and warnings is not None:
        warnings.append(f"{source}: keys devagent does not use, ignored: {', '.join(unknown)}")
    description = meta.get("description") or ""
    if not isinstance(description, str):
        raise ValueError("`description` must be a string")
    model = meta.get("model") or ""
    if not isinstance(model, str):
        raise ValueError("`model` must be a model name (a string)")
    if not body.strip():
        raise ValueError("the command has no prompt")
    first = body.strip().splitlines()[0].strip().lstrip("#").strip()  # a title line without its `#`
    description = " ".join(description.split()) or (first[:80] + ("…" if len(first) > 80 else ""))
    hint = " ".join(_hint(meta.get("argument-hint")).split())
    return CustomCommand(
        name, description, hint, body, source, allowed_tools(meta.get("allowed-tools")), model.strip()
    )


def _hint(value: object) -> str:
    """`argument-hint` in any YAML form: a string as it is, a list as its flow form (`[file]`,
    which YAML reads as a list of one)."""
    if value is None:
        return ""
    if isinstance(value, list):
        return "[" + ", ".join(_hint(v) for v in value) + "]"
    if isinstance(value, dict):
        return " ".join(f"{k}: {_hint(v)}" for k, v in value.items())
    return str(value)


def allowed_tools(value: object) -> tuple[str, ...] | None:
    """An `allowed-tools` list as written (a string of names or a YAML list; None: not given).
    One that cannot be read allows no tool: it never widens."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("[") and text.endswith("]"):  # a flow list the lenient reading kept whole
            text = text[1:-1]
        return tuple(i.strip("\"'") for i in split_list(text))
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(i for v in value for i in split_list(v))
    return ()
