"""Helpers shared by the built-in tools: argument checks, text/binary detection, diffs, globs and a
workspace walker that never follows symlinked directories (G4)."""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import secrets
import stat
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from devagent.agent.events import FileDiff
from devagent.agent.tools.base import ToolFailure, Workspace
from devagent.faults import crash_point

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
TEMP_PREFIX = ".devagent-tmp-"

BINARY_SNIFF_BYTES = 8192
GLOB_MAGIC = re.compile(r"[*?\[{]")


# --- arguments -----------------------------------------------------------------------------------


def _check_args(args: Any) -> dict[str, Any]:
    if not isinstance(args, dict):
        raise ToolFailure("the arguments must be a JSON object", "invalid_arguments")
    return args


def str_arg(args: dict[str, Any], key: str, *, allow_empty: bool = False) -> str:
    """A required string argument."""
    value = _check_args(args).get(key)
    if value is None:
        raise ToolFailure(f"the argument {key!r} is required", "invalid_arguments")
    if not isinstance(value, str):
        raise ToolFailure(
            f"the argument {key!r} must be a string, not {type(value).__name__}", "invalid_arguments"
        )
    if not allow_empty and not value.strip():
        raise ToolFailure(f"the argument {key!r} must not be empty", "invalid_arguments")
    return value


def opt_str_arg(args: dict[str, Any], key: str, default: str | None = None) -> str | None:
    value = _check_args(args).get(key)
    if value is None or value == "":
        return default
    if not isinstance(value, str):
        raise ToolFailure(
            f"the argument {key!r} must be a string, not {type(value).__name__}", "invalid_arguments"
        )
    return value


def int_arg(args: dict[str, Any], key: str, default: int, *, minimum: int = 0) -> int:
    value = _check_args(args).get(key)
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolFailure(f"the argument {key!r} must be an integer", "invalid_arguments")
    if value < minimum:
        raise ToolFailure(f"the argument {key!r} must be at least {minimum}", "invalid_arguments")
    return value


def num_arg(args: dict[str, Any], key: str) -> float | None:
    value = _check_args(args).get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ToolFailure(f"the argument {key!r} must be a positive number", "invalid_arguments")
    return float(value)


def bool_arg(args: dict[str, Any], key: str, default: bool = False) -> bool:
    value = _check_args(args).get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ToolFailure(f"the argument {key!r} must be true or false", "invalid_arguments")
    return value


def str_list_arg(args: dict[str, Any], key: str, *, required: bool) -> list[str]:
    value = _check_args(args).get(key)
    if value is None:
        if required:
            raise ToolFailure(f"the argument {key!r} is required", "invalid_arguments")
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ToolFailure(f"the argument {key!r} must be a list of strings", "invalid_arguments")
    if required and not value:
        raise ToolFailure(f"the argument {key!r} must not be empty", "invalid_arguments")
    return list(value)


# --- files ---------------------------------------------------------------------------------------


def is_binary(path: Path) -> bool:
    """A file is binary when its first bytes hold a NUL byte (what git and ripgrep assume)."""
    try:
        with open(path, "rb") as f:
            return b"\x00" in f.read(BINARY_SNIFF_BYTES)
    except OSError:
        return False


def read_text(path: Path) -> str:
    """The whole file as text, newlines untouched; invalid UTF-8 is replaced, not fatal."""
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        return f.read()


def write_text(path: Path, content: str) -> None:
    """Writes text as UTF-8, newlines untouched, atomically (see `atomic_write`)."""
    atomic_write(path, content)


def is_temp_name(name: str) -> bool:
    """Whether a file name is one of `atomic_write`'s temporary files (left behind by a crash)."""
    return name.startswith(TEMP_PREFIX)


def atomic_write(path: Path, content: str | bytes) -> None:
    """Replaces (or creates) the file `path` so that a crash at any moment leaves either the old
    content or the new one, never a truncated file (G4, issue 10 item 1 (atomic writes)).

    `path` must be the resolved real path (`Workspace.resolve`). The content goes to a new
    temporary file in the same directory (`.devagent-tmp-<random>`, created with O_EXCL, given the
    permissions of the file it replaces, or the default ones for a new file), is flushed and
    fsynced, and is renamed over `path`; then the directory is fsynced so the rename itself is
    durable. The rename replaces the directory entry: another hard link to the old file (possibly
    outside the workspace) keeps the old content, and a symlink put there since `resolve` is
    replaced, not followed. On any failure the temporary file is removed and `path` is untouched.
    A crash (SIGKILL, power cut) between creating the temporary file and the rename can leave the
    temporary file behind: the walks of list_directory, glob, grep and read_many_files skip such
    names (`is_temp_name`).
    """
    data = content.encode("utf-8") if isinstance(content, str) else content
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    try:
        old: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        old = None
    tmp, fd = _create_temp(directory)
    try:
        with os.fdopen(fd, "wb") as f:
            if old is not None:
                _copy_permissions(f.fileno(), old)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        crash_point("atomic_write.before_rename")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_directory(directory)


def _create_temp(directory: Path) -> tuple[Path, int]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    for _ in range(100):
        tmp = directory / f"{TEMP_PREFIX}{secrets.token_hex(8)}"
        try:
            # 0o666 minus the umask: the default permissions of a new file
            return tmp, os.open(tmp, flags, 0o666)
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a temporary file in {directory}")  # pragma: no cover


def _copy_permissions(fd: int, old: os.stat_result) -> None:
    """The replaced file's mode, and its owner and group where this process may set them."""
    mode = stat.S_IMODE(old.st_mode)
    os.fchmod(fd, mode)
    new = os.fstat(fd)
    if (new.st_uid, new.st_gid) != (old.st_uid, old.st_gid):
        with contextlib.suppress(OSError):  # only root may give a file away; a group may be kept
            os.fchown(fd, old.st_uid, old.st_gid)
        if stat.S_IMODE(os.fstat(fd).st_mode) != mode:  # chown clears setuid/setgid bits
            os.fchmod(fd, mode)


def _fsync_directory(directory: Path) -> None:
    """Makes a rename in `directory` durable. The file is already in place when this runs, so a
    file system that cannot fsync a directory (some network ones) is not an error."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


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
        raise ToolFailure(f"invalid glob pattern {pattern!r}: {e}", "invalid_arguments") from e


def glob_match(pattern: str, rel: str, *, basename: bool = False) -> bool:
    """Whether the '/'-separated relative path matches. With `basename`, patterns without '/'
    match the base name at any depth (like .gitignore and ripgrep's --glob)."""
    if basename and "/" not in pattern:
        return glob_regex(pattern).match(rel.rsplit("/", 1)[-1]) is not None
    return glob_regex(pattern).match(rel) is not None


def split_glob(workspace: Workspace, pattern: str, base: str = ".") -> tuple[Path, str]:
    """Splits a pattern into the directory it starts from (resolved through the workspace, so a
    leading `..` or an outside absolute path is refused) and the magic remainder."""
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
            "path_outside_workspace",
        )
    prefix = "/".join(static) if static else ""
    if pattern.startswith("/") and not prefix:
        prefix = "/"
    start = os.path.join(base, prefix) if prefix else base
    root = workspace.resolve(start, must_exist=True)
    return root, "/".join(rest)


def explicit_skip_dirs(pattern: str) -> frozenset[str]:
    """SKIP_DIRS minus the directories a pattern names literally (so `node_modules/**` works)."""
    named = set(pattern.replace("\\", "/").split("/"))
    return frozenset(d for d in SKIP_DIRS if d not in named)


def walk_files(
    base: Path,
    *,
    skip_dirs: frozenset[str] = SKIP_DIRS,
    follow_file_links: bool = False,
) -> Iterator[Path]:
    """Files under `base` in path order (entries of a directory sorted by name, directories
    visited where they sort). Symlinked directories are never entered; symlinked files are
    yielded only with `follow_file_links` (callers then check the target is in the workspace).
    Temporary files a crashed `atomic_write` left behind are not workspace files: skipped."""
    try:
        entries = sorted(os.scandir(base), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_symlink():
                if follow_file_links and entry.is_file():
                    yield Path(entry.path)
                continue
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in skip_dirs:
                    yield from walk_files(
                        Path(entry.path), skip_dirs=skip_dirs, follow_file_links=follow_file_links
                    )
            elif entry.is_file(follow_symlinks=False) and not is_temp_name(entry.name):
                yield Path(entry.path)
        except OSError:
            continue


def rel_posix(path: Path, base: Path) -> str:
    return path.relative_to(base).as_posix()
