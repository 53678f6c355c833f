"""The project's agent guides: the AGENTS.md files (the operator may name another file) of a
workspace. The one at the primary root is the project memory and goes into the prompt whole; the
ones in folders below it apply to the files under their folder, the nearer one taking precedence,
and go into the prompt after it, each with its scope, up to a size cap (the rest are named, to be
read when the model works there).

A guide is text from the repository: the prompt says it is the project's guidance and that it can
neither grant permissions nor change what the tools allow."""

from __future__ import annotations

import operator
import os
from dataclasses import dataclass
from pathlib import Path

from devagent.agent.sandbox.confine import DIR_READ_FLAGS
from devagent.agent.tools._util import SKIP_DIRS, is_temp_name, open_walk, read_text
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
    confined walk; never following symlinked folders); a walk of at most `WALK_MAX_FILES` files."""
    found = nested_guides_within(workspace, name, WALK_MAX_FILES, whole=False)
    assert found is not None  # a walk cut short keeps what it found
    return found


def nested_guides_within(
    workspace: Workspace, name: str, max_files: int, *, whole: bool = True
) -> list[Guide] | None:
    """`nested_guides` from a walk of at most `max_files` files: with `whole`, None when the
    tree holds more (the caller walks it elsewhere); else the guides found so far."""
    root = workspace.primary
    try:
        fd = open_walk(workspace, root)
    except (OSError, ToolFailure):
        return []
    if fd is None:
        return []
    found: list[Path] = []
    try:
        ended = _find(fd, root, name, found, [max_files], top=True)
    finally:
        os.close(fd)
    if not ended and whole:
        return None
    guides = []
    for path in found:
        try:
            text = read_text(path, workspace)
        except (OSError, ToolFailure):
            continue
        rel = path.relative_to(root).as_posix()
        guides.append(Guide(folder=path.parent.relative_to(root).as_posix(), path=rel, text=text.strip()))
    return [g for g in guides if g.text]


_BY_NAME = operator.attrgetter("name")


def _find(dir_fd: int, folder: Path, name: str, found: list[Path], left: list[int], *, top: bool) -> bool:
    """Adds to `found`, in path order, the regular files named `name` in the folders below the
    open directory `dir_fd` (whose path is `folder`; not in it when `top`): the files
    `tools._util.walk_files` would yield, counted the same way (`left[0]`: how many more the walk
    may pass; False when it ran out first). A walk of its own because it matches one name: no
    object per file, no generator per folder level (a tree of 400 files: 0.34 ms that way)."""
    try:
        with os.scandir(dir_fd) as listing:
            entries = sorted(listing, key=_BY_NAME)
    except OSError:
        return True
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):  # never a symlinked folder
                if entry.name in SKIP_DIRS:
                    continue
                sub = os.open(entry.name, DIR_READ_FLAGS, dir_fd=dir_fd)
                try:
                    if not _find(sub, folder / entry.name, name, found, left, top=False):
                        return False
                finally:
                    os.close(sub)
            elif entry.is_file(follow_symlinks=False) and not is_temp_name(entry.name):
                if left[0] <= 0:
                    return False
                left[0] -= 1
                if not top and entry.name == name:
                    found.append(folder / name)
        except OSError:
            continue
    return True


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
