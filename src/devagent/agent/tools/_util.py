"""Helpers shared by the built-in tools: their parameter schemas, argument checks, text/binary
detection, diffs, globs and a workspace walker that never follows symlinked directories."""

from __future__ import annotations

import asyncio
import difflib
import errno
import os
import re
import stat
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from devagent.agent.events import FileDiff, ToolErrorType
from devagent.agent.sandbox.confine import DIR_READ_FLAGS, TEMP_PREFIX, Located, locate, replace_in
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.workspace import Workspace

T = TypeVar("T")

# Directories no search descends into unless the pattern names them: VCS metadata and the usual
# caches and dependency trees, which are large and never what the model is looking for.
SKIP_DIRS: frozenset[str] = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        ".venv",
        "venv",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
    }
)

# The name prefix of `atomic_write`'s temporary files. Hidden (a dot), recognisable, and skipped
# by the directory walks; a crash before the rename may leave one behind.


BINARY_SNIFF_BYTES = 8192
GLOB_MAGIC = re.compile(r"[*?\[{]")


# --- arguments -----------------------------------------------------------------------------------


def _check_args(args: Any) -> dict[str, Any]:
    if not isinstance(args, dict):
        raise ToolFailure("the arguments must be a JSON object", ToolErrorType.INVALID_ARGUMENTS)
    return args


def parameters_schema(required: list[str], /, **properties: dict[str, Any]) -> dict[str, Any]:
    """A tool's parameters as the model is given them: a JSON Schema object of these properties,
    in this order, and no others; `required` names those a call must give."""
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def parameter(json_type: str, description: str, /, **keywords: Any) -> dict[str, Any]:
    """One parameter's JSON Schema: its type, its other keywords (`minimum`, `enum`, `items`...),
    then its description."""
    return {"type": json_type, **keywords, "description": description}


def str_arg(args: dict[str, Any], key: str, *, allow_empty: bool = False) -> str:
    """A required string argument."""
    value = _check_args(args).get(key)
    if value is None:
        raise ToolFailure(f"the argument {key!r} is required", ToolErrorType.INVALID_ARGUMENTS)
    if not isinstance(value, str):
        raise ToolFailure(
            f"the argument {key!r} must be a string, not {type(value).__name__}",
            ToolErrorType.INVALID_ARGUMENTS,
        )
    if not allow_empty and not value.strip():
        raise ToolFailure(f"the argument {key!r} must not be empty", ToolErrorType.INVALID_ARGUMENTS)
    return value


def opt_str_arg(args: dict[str, Any], key: str, default: str | None = None) -> str | None:
    value = _check_args(args).get(key)
    if value is None or value == "":
        return default
    if not isinstance(value, str):
        raise ToolFailure(
            f"the argument {key!r} must be a string, not {type(value).__name__}",
            ToolErrorType.INVALID_ARGUMENTS,
        )
    return value


def int_arg(args: dict[str, Any], key: str, default: int, *, minimum: int = 0) -> int:
    value = _check_args(args).get(key)
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolFailure(f"the argument {key!r} must be an integer", ToolErrorType.INVALID_ARGUMENTS)
    if value < minimum:
        raise ToolFailure(f"the argument {key!r} must be at least {minimum}", ToolErrorType.INVALID_ARGUMENTS)
    return value


def num_arg(args: dict[str, Any], key: str) -> float | None:
    value = _check_args(args).get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ToolFailure(f"the argument {key!r} must be a positive number", ToolErrorType.INVALID_ARGUMENTS)
    return float(value)


def bool_arg(args: dict[str, Any], key: str, default: bool = False) -> bool:
    value = _check_args(args).get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ToolFailure(f"the argument {key!r} must be true or false", ToolErrorType.INVALID_ARGUMENTS)
    return value


def str_list_arg(args: dict[str, Any], key: str, *, required: bool) -> list[str]:
    value = _check_args(args).get(key)
    if value is None:
        if required:
            raise ToolFailure(f"the argument {key!r} is required", ToolErrorType.INVALID_ARGUMENTS)
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ToolFailure(f"the argument {key!r} must be a list of strings", ToolErrorType.INVALID_ARGUMENTS)
    if required and not value:
        raise ToolFailure(f"the argument {key!r} must not be empty", ToolErrorType.INVALID_ARGUMENTS)
    return list(value)


# --- files ---------------------------------------------------------------------------------------


def _locate(
    path: Path, workspace: Workspace | None, *, create_dirs: bool = False, readable: bool = False
) -> Located:
    """`path` located through the workspace (`readable`: its read-only roots too). Without a
    workspace the path must be a real path already (what `Workspace.resolve` gives) and is
    walked from "/" following no symlink at all: one that appeared since the path was resolved
    is refused (ELOOP)."""
    if workspace is not None:
        return workspace.locate(path, create_dirs=create_dirs, readable=readable)
    return locate([Path("/")], path, follow=False, create_dirs=create_dirs)


def _locate_for_change(path: Path, workspace: Workspace | None, *, create_dirs: bool = False) -> Located:
    """`_locate` for a write or a removal: the located real path is checked against what no tool
    may change (`Workspace.check_writable`) before anything is done there."""
    if workspace is not None:  # the check first: a refused write creates no directory either
        workspace.check_writable(Path(os.path.realpath(path)), path)
    loc = _locate(path, workspace, create_dirs=create_dirs)
    if workspace is not None:
        try:
            workspace.check_writable(loc.path, path)
        except BaseException:
            loc.close()
            raise
    return loc


def fs_failure(e: OSError, path: str | Path) -> ToolFailure:
    """An OSError of a file operation as the model should read it."""
    shown = str(path)
    if isinstance(e, FileNotFoundError):
        return ToolFailure(f"{shown!r} does not exist", ToolErrorType.NOT_FOUND)
    if isinstance(e, IsADirectoryError):
        return ToolFailure(
            f"{shown!r} is a directory; use list_directory or glob to see its files",
            ToolErrorType.IS_DIRECTORY,
        )
    if e.errno == errno.ELOOP:
        return ToolFailure(
            f"{shown!r} could not be opened: a symlink appeared on its path while it was opened, or "
            "there are too many symlinks",
            ToolErrorType.OS_ERROR,
        )
    if e.errno == errno.EINVAL and e.strerror == "not a regular file":
        return ToolFailure(f"{shown!r} is not a regular file", ToolErrorType.NOT_A_FILE)
    return ToolFailure(f"{shown!r}: {e.strerror or e}", ToolErrorType.OS_ERROR)


async def in_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Runs file IO off the event loop; an OSError that escapes it (a directory
    swapped for a symlink under the walk, a file removed meanwhile) becomes a ToolFailure."""
    try:
        return await asyncio.to_thread(fn, *args, **kwargs)
    except OSError as e:
        raise _escaped(e) from e


def _escaped(e: OSError) -> ToolFailure:
    return fs_failure(e, e.filename if isinstance(e.filename, str) else "the path")


# Reading a small file of this host (from the page cache: microseconds; else one read of the
# disk) costs less than a trip to a worker thread and back, which on two loaded cores cost a tool
# turn about 0.5 ms of CPU each (the executor's queue, two thread wake-ups, the event loop's
# self-pipe, the GIL handed over twice: bench/ab_turns.py). Work that only stats and reads such
# files runs on the event loop's thread; what may wait longer (an fsync, a walk of a tree, a larger
# file, a FIFO or device, a command) still goes to a worker thread.
LOOP_READ_MAX = 64 * 1024


def small_on_disk(paths: Iterable[str | Path], workspace: Workspace) -> bool:
    """Whether each path is missing or a regular file of at most `LOOP_READ_MAX` bytes, as the
    confined walk finds it (`file_status`: through no link out of the workspace, a final symlink
    not followed). Anything else (a link, a folder, a FIFO or device, a path the walk refuses)
    is not: its work goes to a worker thread, as all of it did before."""
    for path in paths:
        try:
            status = file_status(Path(path), workspace)
        except (OSError, ToolFailure, ValueError):
            return False
        if status is not None and (not stat.S_ISREG(status.st_mode) or status.st_size > LOOP_READ_MAX):
            return False
    return True


async def off_loop_unless_small(
    reads: Iterable[str | Path], workspace: Workspace, fn: Callable[..., T], *args: Any
) -> T:
    """`fn(*args)`, whose only file IO is stats and reads of `reads` (in `workspace`): on the event
    loop's thread when those are small (`small_on_disk`), else in a worker thread."""
    if small_on_disk(reads, workspace):
        return fn(*args)
    return await asyncio.to_thread(fn, *args)


async def file_io(reads: Iterable[str | Path], workspace: Workspace, fn: Callable[..., T], *args: Any) -> T:
    """`in_thread` for work that only stats and reads the files `reads`: on the event loop's
    thread when they are small (`off_loop_unless_small`), its OSError a ToolFailure either way."""
    try:
        return await off_loop_unless_small(reads, workspace, fn, *args)
    except OSError as e:
        raise _escaped(e) from e


def open_file(path: Path, workspace: Workspace | None = None, *, readable: bool = False) -> BinaryIO:
    """The regular file `path`, open for reading through the confined walk (`readable`: the
    workspace's read-only roots too): the final open is O_NOFOLLOW relative to the parent's
    descriptor. A hard link to a file outside the workspace is read like any file (the two names
    are one file; nothing can tell them apart)."""
    with _locate(path, workspace, readable=readable) as loc:
        fd = loc.open_file()
    return os.fdopen(fd, "rb")


def file_status(path: Path, workspace: Workspace | None = None) -> os.stat_result | None:
    """The status of what `path` names (not following a final symlink), None when it is missing."""
    try:
        with _locate(path, workspace) as loc:
            return loc.lstat()
    except FileNotFoundError:
        return None


def read_bytes(path: Path, workspace: Workspace | None = None) -> bytes:
    with open_file(path, workspace) as f:
        return f.read()


def sniff_binary(f: BinaryIO) -> bool:
    """Whether an open file's first bytes hold a NUL byte (what git and ripgrep assume); the file
    is left at its start."""
    binary = b"\x00" in f.read(BINARY_SNIFF_BYTES)
    f.seek(0)
    return binary


def read_text(path: Path, workspace: Workspace | None = None) -> str:
    """The whole file as text, newlines untouched; invalid UTF-8 is replaced, not fatal."""
    with open_file(path, workspace) as f:
        return f.read().decode("utf-8", errors="replace")


def write_text(path: Path, content: str, workspace: Workspace | None = None) -> None:
    """Writes text as UTF-8, newlines untouched, atomically (see `atomic_write`)."""
    atomic_write(path, content, workspace)


def remove_file(path: Path, workspace: Workspace | None = None) -> None:
    """Removes the file `path` (relative to its confined parent directory); a missing one is fine."""
    try:
        with _locate_for_change(path, workspace) as loc:
            os.unlink(loc.name, dir_fd=loc.dir_fd)
    except FileNotFoundError:
        return


def is_temp_name(name: str) -> bool:
    """Whether a file name is one of `atomic_write`'s temporary files (left behind by a crash)."""
    return name.startswith(TEMP_PREFIX)


def atomic_write(path: Path, content: str | bytes, workspace: Workspace | None = None) -> None:
    """Replaces (or creates) the file `path` so that a crash at any moment leaves either the old
    content or the new one, never a truncated file.

    The parent directory is reached through the confined walk (`Workspace.locate`,
    missing directories created relative to their open parent; without a workspace, `path` must
    be a real path and no symlink is followed) and everything after happens relative to its open
    descriptor, so a directory swapped for a symlink meanwhile cannot redirect the write. The
    content goes to a new temporary file in that directory (`.devagent-tmp-<random>`, O_EXCL, given
    the permissions of the file it replaces, or the default ones for a new file), is flushed and
    fsynced, and is renamed over the name (`os.replace` with `src_dir_fd`/`dst_dir_fd`); then the
    directory is fsynced so the rename itself is durable. The rename replaces the directory entry:
    another hard link to the old file (possibly outside the workspace) keeps the old content, and
    a symlink put there since is replaced, not followed. On any failure the temporary file is
    removed and `path` is untouched. A crash (SIGKILL, power cut) between creating the temporary
    file and the rename can leave the temporary file behind: the walks of list_directory, glob,
    grep and read_many_files skip such names (`is_temp_name`).
    """
    data = content.encode("utf-8") if isinstance(content, str) else content
    with _locate_for_change(path, workspace, create_dirs=True) as loc:
        replace_in(loc, data, path)


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover


def count_lines(text: str) -> int:
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def _diff_lines(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines


def unified_diff(display: str, old: str | None, new: str) -> str:
    return "".join(
        difflib.unified_diff(
            _diff_lines(old or ""),
            _diff_lines(new),
            fromfile=f"a/{display}",
            tofile=f"b/{display}",
        )
    )


def file_diff(workspace: Workspace, path: Path, old: str | None, new: str) -> FileDiff:
    return FileDiff(
        file_name=path.name,
        file_path=str(path),
        old_content=old,
        new_content=new,
        formatted_diff=unified_diff(workspace.display(path), old, new),
    )


# --- globs and walking ---------------------------------------------------------------------------


def _translate(pat: str) -> str:
    out: list[str] = []
    i, n = 0, len(pat)
    while i < n:
        c = pat[i]
        if pat.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pat.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pat.find("]", i + 2 if pat[i + 1 : i + 2] in ("!", "^", "]") else i + 1)
            if j < 0:
                out.append(re.escape(c))
            else:
                body = pat[i + 1 : j]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = j
        elif c == "{":
            j = pat.find("}", i)
            if j < 0:
                out.append(re.escape(c))
            else:
                alternatives = pat[i + 1 : j].split(",")
                out.append("(?:" + "|".join(_translate(a) for a in alternatives) + ")")
                i = j
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


@lru_cache(maxsize=256)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob as a regex over '/'-separated relative paths: `*`, `?`, `[...]`, `{a,b}` and `**`
    (any number of directories). `*` also matches names starting with a dot."""
    try:
        return re.compile(r"(?s:" + _translate(pattern) + r")\Z")
    except re.error as e:
        raise ToolFailure(f"invalid glob pattern {pattern!r}: {e}", ToolErrorType.INVALID_ARGUMENTS) from e


def glob_match(pattern: str, rel: str, *, basename: bool = False) -> bool:
    """Whether the '/'-separated relative path matches. With `basename`, patterns without '/'
    match the base name at any depth (like .gitignore and ripgrep's --glob)."""
    if basename and "/" not in pattern:
        return glob_regex(pattern).match(rel.rsplit("/", 1)[-1]) is not None
    return glob_regex(pattern).match(rel) is not None


def split_glob(
    workspace: Workspace, pattern: str, base: str = ".", resolve: Callable[[str], Path] | None = None
) -> tuple[Path, str]:
    """Splits a pattern into the directory it starts from (resolved through the workspace, or by
    `resolve`, so a leading `..` or an outside absolute path is refused) and the magic remainder."""
    parts = pattern.replace("\\", "/").split("/")
    static: list[str] = []
    for part in parts[:-1]:
        if GLOB_MAGIC.search(part):
            break
        static.append(part)
    rest = parts[len(static) :]
    if any(p == ".." for p in rest):
        raise ToolFailure(
            f"the pattern {pattern!r} uses '..' after a wildcard; patterns cannot leave the directory "
            "they start from",
            ToolErrorType.PATH_OUTSIDE_WORKSPACE,
        )
    prefix = "/".join(static) if static else ""
    if pattern.startswith("/") and not prefix:
        prefix = "/"
    start = os.path.join(base, prefix) if prefix else base
    root = resolve(start) if resolve is not None else workspace.resolve(start, must_exist=True)
    return root, "/".join(rest)


def explicit_skip_dirs(pattern: str) -> frozenset[str]:
    """SKIP_DIRS minus the directories a pattern names literally (so `node_modules/**` works)."""
    named = set(pattern.replace("\\", "/").split("/"))
    return frozenset(d for d in SKIP_DIRS if d not in named)


@dataclass(slots=True)
class WalkEntry:
    """A file `walk_files` found: its name in the open directory `dir_fd` (valid only until the
    walk goes on) and its path (for matching and display)."""

    dir_fd: int
    name: str
    folder: Path  # the path of the directory it is in
    is_link: bool  # a symlink (only with follow_file_links): locate it through the workspace

    @property
    def path(self) -> Path:
        """Made when asked for: a walk that matches names only builds no path per file."""
        return self.folder / self.name

    def open(self) -> BinaryIO:
        """The file open for reading: O_NOFOLLOW relative to its directory, a regular file only."""
        return os.fdopen(Located(self.dir_fd, self.name, self.path).open_file(), "rb")

    def lstat(self) -> os.stat_result:
        return os.stat(self.name, dir_fd=self.dir_fd, follow_symlinks=False)


def open_walk(workspace: Workspace, base: Path) -> int | None:
    """The directory `base` open for `walk_files` (through the confined walk), or None when it is
    not a directory. The caller closes it."""
    with workspace.locate(base) as loc:
        status = loc.lstat()
        if status is None or not stat.S_ISDIR(status.st_mode):
            return None
        return loc.open_dir()


def walk_files(
    dir_fd: int,
    base: Path,
    *,
    skip_dirs: frozenset[str] = SKIP_DIRS,
    follow_file_links: bool = False,
    on_folder: Callable[[int, Path], None] | None = None,
) -> Generator[WalkEntry, None, None]:
    """Files under the open directory `dir_fd` (whose path is `base`) in path order (entries of a
    directory sorted by name, directories visited where they sort). Each subdirectory is opened
    O_NOFOLLOW relative to its parent's descriptor, so no swap can lead the walk out;
    symlinked directories are never entered; symlinks are yielded (as `is_link`) only with
    `follow_file_links`, for the caller to locate through the workspace. Temporary files a crashed
    `atomic_write` left behind are not workspace files: skipped. `on_folder(fd, path)` is told of
    each directory as the walk enters it, before it is listed."""
    if on_folder is not None:
        on_folder(dir_fd, base)
    try:
        entries = sorted(os.scandir(dir_fd), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_symlink():
                if follow_file_links:
                    yield WalkEntry(dir_fd, entry.name, base, True)
                continue
            if entry.is_dir(follow_symlinks=False):
                if entry.name in skip_dirs:
                    continue
                sub = os.open(entry.name, DIR_READ_FLAGS, dir_fd=dir_fd)
                try:
                    yield from walk_files(
                        sub,
                        base / entry.name,
                        skip_dirs=skip_dirs,
                        follow_file_links=follow_file_links,
                        on_folder=on_folder,
                    )
                finally:
                    os.close(sub)
            elif entry.is_file(follow_symlinks=False) and not is_temp_name(entry.name):
                yield WalkEntry(dir_fd, entry.name, base, False)
        except OSError:
            continue


def rel_posix(path: Path, base: Path) -> str:
    return path.relative_to(base).as_posix()
