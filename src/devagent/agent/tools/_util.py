"""Helpers shared by the built-in tools: argument checks, text/binary detection, diffs, globs and a
workspace walker that never follows symlinked directories (G4)."""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from devagent.agent.events import FileDiff
from devagent.agent.tools.base import ToolFailure, Workspace

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
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(content)


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
    yielded only with `follow_file_links` (callers then check the target is in the workspace)."""
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
            elif entry.is_file(follow_symlinks=False):
                yield Path(entry.path)
        except OSError:
            continue


def rel_posix(path: Path, base: Path) -> str:
    return path.relative_to(base).as_posix()
