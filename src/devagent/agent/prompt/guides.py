"""The project's agent guides: the AGENTS.md files (the operator may name another file) of a
workspace. The one at the primary root is the project memory and goes into the prompt whole; the
ones in folders below it apply to the files under their folder, the nearer one taking precedence,
and go into the prompt after it, each with its scope, up to a size cap (the rest are named, to be
read when the model works there).

A guide is text from the repository: the prompt says it is the project's guidance and that it can
neither grant permissions nor change what the tools allow."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from devagent.agent.tools._util import SKIP_DIRS, open_walk, read_text, walk_files
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.workspace import Workspace

NESTED_MAX_CHARS = 32 * 1024  # all nested guides together
NESTED_MAX_FILES = 20
WALK_MAX_FILES = 20_000  # a walk of a huge tree stops here (the guides found so far are used)


@dataclass(frozen=True, slots=True)
class Guide:
    folder: str  # relative to the primary root, posix, "" for the root
    path: str
    text: str


def nested_guides(workspace: Workspace, name: str) -> list[Guide]:
    """The guides named `name` in folders below the primary root, in path order (through the
    confined walk; never following symlinked folders); a walk of at most `WALK_MAX_FILES` files,
    whose guides found so far are used when the tree holds more."""
    found, _ = _walk(workspace, name, WALK_MAX_FILES)
    return _read(workspace, found)


def nested_guides_within(workspace: Workspace, name: str, max_files: int) -> list[Guide] | None:
    """`nested_guides` from a walk of at most `max_files` files; None when the tree holds more
    (the caller walks it elsewhere)."""
    found, whole = _walk(workspace, name, max_files)
    return _read(workspace, found) if whole else None


def _walk(workspace: Workspace, name: str, max_files: int) -> tuple[list[Path], bool]:
    """The paths of the files named `name` below the primary root, from a walk of at most
    `max_files` files, and whether the walk ended within them."""
    root = workspace.primary
    try:
        fd = open_walk(workspace, root)
    except (OSError, ToolFailure):
        return [], True
    if fd is None:
        return [], True
    found: list[Path] = []
    try:
        for seen, entry in enumerate(walk_files(fd, root, skip_dirs=SKIP_DIRS)):
            if seen >= max_files:
                return found, False
            if entry.name == name and entry.folder != root:
                found.append(entry.path)
    finally:
        os.close(fd)
    return found, True


def _read(workspace: Workspace, found: list[Path]) -> list[Guide]:
    root = workspace.primary
    guides = []
    for path in found:
        try:
            text = read_text(path, workspace)
        except (OSError, ToolFailure):
            continue
        rel = path.relative_to(root).as_posix()
        guides.append(Guide(folder=path.parent.relative_to(root).as_posix(), path=rel, text=text.strip()))
    return [g for g in guides if g.text]


def render_nested(guides: list[Guide]) -> str:
    """The nested guides as a prompt section: whole while they fit the cap, then named only."""
    if not guides:
        return ""
    parts = [
        "Guides in folders of the workspace. Each applies to the files under its folder and takes "
        "precedence over the guides above it for those files."
    ]
    used = 0
    named: list[str] = []
    for i, guide in enumerate(guides):
        if i >= NESTED_MAX_FILES or used + len(guide.text) > NESTED_MAX_CHARS:
            named.append(guide.path)
            continue
        used += len(guide.text)
        parts.append(f"<guide path={guide.path!r} applies_to={guide.folder + '/'!r}>\n{guide.text}\n</guide>")
    if named:
        parts.append(
            "More guides, not shown here (read each with read_file before working under its folder): "
            + ", ".join(named)
        )
    return "\n\n".join(parts)
