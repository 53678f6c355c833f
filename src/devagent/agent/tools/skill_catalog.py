"""Agent Skills: folders with a `SKILL.md` that teach the model one kind of task. The user keeps
them in the `skills/` folder of devagent's config folder, a project in its workspace's
`.agents/skills/`:

    release-notes/
        SKILL.md            ---
                            name: release-notes
                            description: Turn merged changes into release notes. Use when ...
                            ---
                            (the instructions, in Markdown)
        scripts/collect.sh  (any files beside it)

Each skill's name and description go into the system prompt; the `skill` tool gives the model
the instructions and the list of files when a task calls for them. Read once per loaded
session, so the prompt stays the same for its requests.

A skill is text. Only `name` and `description` are read from its front matter: other keys
(`allowed-tools`, `model`, ...) are ignored, so a skill grants, configures or widens nothing, and
its scripts run only as the model's ordinary commands under the approval policy. As in Claude
Code, a skill is named after its folder: a `name` that is missing, not a valid name or not the
folder's gives way to the folder's, with one warning. Front matter that is not strict YAML (an
unquoted `: ` in a description) is read leniently (`front_matter.py`). A skill that cannot be
read, has no description or whose folder's name is not a name is left out with a warning; on a
name both folders hold, the user's wins.
"""

from __future__ import annotations

import logging
import os
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from devagent.agent.events import ToolErrorType
from devagent.agent.sandbox.shown import SKILL_FILE, USER_SKILLS
from devagent.agent.tools import front_matter
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.workspace import Workspace

log = logging.getLogger(__name__)

USER_FOLDER = USER_SKILLS  # in the user's config folder
WORKSPACE_FOLDER = ".agents/skills"  # in each workspace root
MAX_FILE_BYTES = 128 * 1024
MAX_SKILLS = 100  # in all: each adds a line to every request
MAX_NAME = 64
MAX_DESCRIPTION = 1024
_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_FOLDER_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")  # a skill's folder: lowercase
# The keys of Agent Skills and Claude Code's skills, for reading front matter that is not YAML.
KEYS = (
    "name",
    "description",
    "license",
    "compatibility",
    "metadata",
    "allowed-tools",
    "model",
    "version",
    "author",
    "tags",
    "when_to_use",
    "argument-hint",
    "disable-model-invocation",
    "user-invocable",
    "context",
    "agent",
    "hooks",
)

USER = "user"
WORKSPACE = "workspace"


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str  # one line, at most MAX_DESCRIPTION characters
    body: str  # the instructions: SKILL.md without its front matter
    folder: Path  # its real path
    origin: str  # USER or WORKSPACE


@dataclass(frozen=True, slots=True)
class Skills:
    """The skills of a loaded session, by name."""

    items: tuple[Skill, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.items)

    def get(self, name: str) -> Skill | None:
        return next((s for s in self.items if s.name == name), None)

    def names(self) -> list[str]:
        return [s.name for s in self.items]

    def user_folders(self) -> tuple[Path, ...]:
        return tuple(s.folder for s in self.items if s.origin == USER)

    def listing(self) -> str:
        """One line a skill, as the system prompt lists them."""
        return "\n".join(f"- {s.name} ({s.origin}): {s.description}" for s in self.items)


def check_name(name: object, folder_name: str, warnings: list[str] | None = None) -> str:
    """The skill's name: its folder's (ValueError when that is not 1 to 64 lowercase letters,
    digits, `.`, `_` and `-`). A `name` that is missing, not 1 to 64 lowercase letters, digits and single
    hyphens, or not the folder's, gives way to it with a warning."""
    if not _FOLDER_NAME.match(folder_name):
        raise ValueError(f"the folder's name {folder_name[:80]!r} is not lowercase letters, digits, `._-`")
    if isinstance(name, str) and name == folder_name and _NAME.match(name):
        return name
    if not isinstance(name, str) or not name:
        why = "the front matter has no `name`"
    elif len(name) > MAX_NAME or not _NAME.match(name):
        why = (
            f"the name {name[:80]!r} is not 1 to {MAX_NAME} lowercase letters, digits and single "
            "hyphens (not first or last)"
        )
    else:
        why = f"the name {name!r} is not the name of its folder"
    if warnings is not None:
        warnings.append(f"{why}: the skill is named {folder_name!r} after its folder")
    return folder_name


def one_line(text: str, limit: int = MAX_DESCRIPTION) -> str:
    """`text` on one line: control characters dropped, whitespace runs made one space, cut at
    `limit` characters."""
    kept = "".join(" " if unicodedata.category(c) == "Cc" else c for c in text)
    line = " ".join(kept.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def parse(
    text: str, folder: Path, origin: str, folder_name: str | None = None, warnings: list[str] | None = None
) -> Skill:
    """A SKILL.md: front matter with `name` and `description` (other keys ignored), then the
    instructions. ValueError says what is wrong; `warnings` gets what was taken otherwise."""
    meta, body = front_matter.split(text, required=True, keys=KEYS)
    where = f"{folder / SKILL_FILE}"
    notes: list[str] = []
    name = check_name(meta.get("name"), folder_name or folder.name, notes)
    if warnings is not None:
        warnings += [f"{where}: {n}" for n in notes]
    description = meta.get("description")
    if isinstance(description, list) and all(isinstance(d, str) for d in description):
        description = " ".join(description)  # `- ...` lines the lenient reading took as a list
    if not isinstance(description, str) or not one_line(description):
        raise ValueError("the front matter has no `description` (a string)")
    return Skill(name, one_line(description), body.strip("\n"), folder, origin)


def read_user(config_dir: Path) -> list[Skill]:
    """The skills in the user's config folder, by folder name. A skill folder may be a symlink
    (the user's own choice): the skill is its real folder."""
    warnings: list[str] = []
    found = list(_read_user(config_dir / USER_FOLDER, warnings))
    _warn(warnings)
    return found


def _read_user(folder: Path, warnings: list[str]) -> Iterator[Skill]:
    for entry in _entries(folder):
        real = Path(os.path.realpath(folder / entry))
        if not real.is_dir():
            continue
        try:
            # read with no workspace: walked from "/" following no symlink, so a SKILL.md that
            # is a link is refused
            text = front_matter.read_small(real / SKILL_FILE, None, MAX_FILE_BYTES)
            yield parse(text, real, USER, entry, warnings)
        except FileNotFoundError:
            continue  # a folder without a SKILL.md is not a skill
        except (OSError, ToolFailure, ValueError, UnicodeDecodeError) as e:
            warnings.append(f"{folder / entry / SKILL_FILE}: {getattr(e, 'message', None) or e}")


def read_workspace(workspace: Workspace) -> list[Skill]:
    """The skills of each workspace root's `.agents/skills/`, through the confined walk (a link
    that leads out of the workspace is not followed)."""
    warnings: list[str] = []
    found: list[Skill] = []
    for root in workspace.roots:
        found += _read_workspace(workspace, root / WORKSPACE_FOLDER, warnings)
    _warn(warnings)
    return found


def _read_workspace(workspace: Workspace, folder: Path, warnings: list[str]) -> Iterator[Skill]:
    try:
        real_folder = workspace.resolve(folder, must_exist=True)
    except ToolFailure:
        return
    for entry in _entries(real_folder):
        path = folder / entry / SKILL_FILE
        try:
            real = workspace.resolve(real_folder / entry, must_exist=True)
            if not real.is_dir():
                continue
            text = front_matter.read_small(real / SKILL_FILE, workspace, MAX_FILE_BYTES)
            yield parse(text, real, WORKSPACE, entry, warnings)
        except FileNotFoundError:
            continue
        except ToolFailure as e:
            if e.type != ToolErrorType.NOT_FOUND:
                warnings.append(f"{path}: {e.message}")
        except (OSError, ValueError, UnicodeDecodeError) as e:
            warnings.append(f"{path}: {e}")


def _entries(folder: Path) -> list[str]:
    """The names in `folder` that may be skills, sorted (none when it cannot be listed)."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    return [n for n in names if not n.startswith(".")]


def catalog(user: list[Skill], workspace: list[Skill]) -> Skills:
    """The session's skills, sorted by name: the user's first, then the workspace's; a name
    taken already is left out with a warning, as is anything past MAX_SKILLS."""
    chosen: dict[str, Skill] = {}
    warnings: list[str] = []
    for skill in [*user, *workspace]:
        first = chosen.get(skill.name)
        if first is not None:
            warnings.append(
                f"{skill.folder}: the skill {skill.name!r} is in {first.folder} already; this one is ignored"
            )
        elif len(chosen) >= MAX_SKILLS:
            warnings.append(f"{skill.folder}: only {MAX_SKILLS} skills are read; this one is ignored")
        else:
            chosen[skill.name] = skill
    _warn(warnings)
    return Skills(tuple(sorted(chosen.values(), key=lambda s: s.name)))


def _warn(warnings: list[str]) -> None:
    for w in warnings:
        log.warning("skills: %s", w)


def session_skills(config_dir: Path, roots: list[str]) -> Skills:
    """A session's skills: the user's, then those of its workspace roots (read through a
    workspace of those roots, without the read-only roots the user's skills become)."""
    return catalog(read_user(config_dir), read_workspace(Workspace([Path(r) for r in roots])))
