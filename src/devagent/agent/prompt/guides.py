"""The project's agent guides: the AGENTS.md files (the operator may name another file) of a
workspace. The one at the primary root is the project memory and goes into the prompt whole; the
ones in folders below it apply to the files under their folder, the nearer one taking precedence,
and go into the prompt after it, each with its scope, up to a size cap (the rest are named, to be
read when the model works there).

A guide is text from the repository: the prompt says it is the project's guidance and that it can
neither grant permissions nor change what the tools allow.

Every new conversation looks for the nested guides, and in a large tree that walk is the most of
its set-up (a tree of 50,000 files: the walk stops at `WALK_MAX_FILES`, ~30 ms of CPU). So the
process remembers, per root, where the last walk found guides and the folders it listed (device,
inode, modification and change times). A folder's times change whenever a name in it is added,
removed or renamed, and its change time when its mode changes: all a walk depends on (a guide's
text is read afresh each time). So while every remembered folder still has its identity and times
(one `lstat` each), the walk's result stands. A folder changed within `RACY_SECONDS` before a walk
may change again within its timestamps' grain unseen (git's "racily clean" problem): such a walk
is not remembered. Nor is a root's first walk: a server whose every conversation gets a new clone
never walks a root twice, and would only fill its memory with folders no walk looks at again."""

from __future__ import annotations

import os
import stat
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from devagent.agent.tools._util import SKIP_DIRS, open_walk, read_text, walk_files
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.workspace import Workspace

NESTED_MAX_CHARS = 32 * 1024  # all nested guides together
NESTED_MAX_FILES = 20
WALK_MAX_FILES = 20_000  # a walk of a huge tree stops here (the guides found so far are used)
RACY_SECONDS = 2.0  # a folder changed more recently than this before a walk: the walk not kept
WALKS_REMEMBERED = 32  # roots whose last walk is kept (each: its folders' identities)
ROOTS_SEEN = 1024  # roots walked once (their walk kept from the second on)


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


Identity = tuple[int, int, int, int]  # a folder's device, inode, modification and change times (ns)
_now_ns = time.time_ns  # the clock a walk is dated by (tests move it)


@dataclass(frozen=True, slots=True)
class _Walk:
    """A walk's result and what it depends on: each folder it listed, with its identity then."""

    folders: tuple[tuple[str, Identity], ...]
    found: tuple[Path, ...]
    whole: bool


_walks: OrderedDict[tuple[str, str, int], _Walk] = OrderedDict()
_seen: OrderedDict[tuple[str, str, int], None] = OrderedDict()  # walked before: worth keeping
_walks_lock = threading.Lock()  # walks run on the event loop's thread and on worker threads


def _identity(st: os.stat_result) -> Identity:
    return st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns


def _still(walk: _Walk) -> bool:
    """Whether every folder the walk listed is the same folder with the same names in it (a folder
    swapped for a link, or a link in a folder's place, changes its parent's time too)."""
    for path, identity in walk.folders:
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:
            return False
        if not stat.S_ISDIR(st.st_mode) or _identity(st) != identity:
            return False
    return True


def _remembered(key: tuple[str, str, int]) -> _Walk | None:
    with _walks_lock:
        walk = _walks.get(key)
    if walk is None or not _still(walk):
        return None
    with _walks_lock:
        if key in _walks:
            _walks.move_to_end(key)
    return walk


def _remember(key: tuple[str, str, int], walk: _Walk, started_ns: int) -> None:
    racy = started_ns - int(RACY_SECONDS * 1e9)
    with _walks_lock:
        first = key not in _seen
        _seen[key] = None
        _seen.move_to_end(key)
        if len(_seen) > ROOTS_SEEN:
            _seen.popitem(last=False)
        if first or any(max(identity[2:]) >= racy for _, identity in walk.folders):
            _walks.pop(key, None)
            return
        _walks[key] = walk
        _walks.move_to_end(key)
        while len(_walks) > WALKS_REMEMBERED:
            _walks.popitem(last=False)


def _walk(workspace: Workspace, name: str, max_files: int) -> tuple[list[Path], bool]:
    """The paths of the files named `name` below the primary root, from a walk of at most
    `max_files` files, and whether the walk ended within them (the last walk's, while no folder
    it listed has changed: see the module's docstring)."""
    root = workspace.primary
    key = (str(root), name, max_files)
    kept = _remembered(key)
    if kept is not None:
        return list(kept.found), kept.whole
    started_ns = _now_ns()
    try:
        fd = open_walk(workspace, root)
    except (OSError, ToolFailure):
        return [], True
    if fd is None:
        return [], True
    folders: list[tuple[str, Identity]] = []

    def entered(dir_fd: int, path: Path) -> None:
        try:
            folders.append((str(path), _identity(os.fstat(dir_fd))))
        except OSError:  # an identity no folder has: the walk is never taken as still standing
            folders.append((str(path), (-1, -1, 1 << 62, 1 << 62)))

    found: list[Path] = []
    whole = True
    try:
        for seen, entry in enumerate(walk_files(fd, root, skip_dirs=SKIP_DIRS, on_folder=entered)):
            if seen >= max_files:
                whole = False
                break
            if entry.name == name and entry.folder != root:
                found.append(entry.path)
    finally:
        os.close(fd)
    _remember(key, _Walk(tuple(folders), tuple(found), whole), started_ns)
    return found, whole


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
