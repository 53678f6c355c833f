"""Listing and search tools: list_directory, glob and grep. Walks open each subdirectory relative to
its parent and never enter symlinked directories, so nothing outside the workspace roots is listed,
even when a directory is swapped for a symlink while a tool runs; the temporary files a crash of a
write may leave behind are hidden."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import shutil
import stat
from pathlib import Path
from typing import Any, BinaryIO

from devagent.agent.events import ToolKind
from devagent.agent.tools._util import (
    SKIP_DIRS,
    TEMP_PREFIX,
    bool_arg,
    explicit_skip_dirs,
    file_status,
    glob_match,
    glob_regex,
    human_size,
    in_thread,
    is_temp_name,
    open_file,
    open_walk,
    opt_str_arg,
    parameter,
    parameters_schema,
    rel_posix,
    split_glob,
    str_arg,
    str_list_arg,
    walk_files,
)
from devagent.agent.tools.base import Tool, ToolContext, ToolFailure, ToolResult, Workspace

# Defaults of the listing and search caps.
LIST_MAX_ENTRIES = 1000
GLOB_MAX_RESULTS = 500
GREP_MAX_MATCHES = 200
GREP_MAX_LINE_CHARS = 500
GREP_MAX_FILESIZE = 1024 * 1024
GREP_TIMEOUT = 60.0

# Set to False to force grep's pure Python search even when ripgrep is installed.
USE_RIPGREP = True


class ListDirectory(Tool):
    name = "list_directory"
    description = (
        "List a directory of the workspace: directories first (marked with a trailing `/`), then files "
        "with their sizes; symlinks show their target. `.git` is left out. Use glob to find files "
        "recursively."
    )
    parameters = parameters_schema(
        [],
        path=parameter("string", "The directory, relative to the workspace root. Default: the root."),
        ignore=parameter(
            "array", "Glob patterns of entry names to leave out, e.g. `*.pyc`.", items={"type": "string"}
        ),
    )
    kind = ToolKind.READ

    def describe(self, args: dict[str, Any]) -> str:
        return f"List {args.get('path') or '.'}"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = opt_str_arg(args, "path", ".") or "."
        ignore = str_list_arg(args, "ignore", required=False)
        return await in_thread(self._list, ctx.workspace, path, ignore)

    def _list(self, workspace: Workspace, path: str, ignore: list[str]) -> ToolResult:
        real = workspace.resolve(path, must_exist=True)
        try:
            fd = open_walk(workspace, real)
        except OSError as e:
            raise ToolFailure(f"cannot list {workspace.display(real)}: {e.strerror}", "os_error") from e
        if fd is None:
            raise ToolFailure(
                f"{path!r} is a file, not a directory; use read_file to read it", "not_a_directory"
            )
        try:
            return self._entries(workspace, real, fd, ignore)
        finally:
            os.close(fd)

    def _entries(self, workspace: Workspace, real: Path, fd: int, ignore: list[str]) -> ToolResult:
        try:
            # The directory listed is the one opened through the confined walk.
            scanned = sorted(os.scandir(fd), key=lambda e: e.name)
        except OSError as e:
            raise ToolFailure(f"cannot list {workspace.display(real)}: {e.strerror}", "os_error") from e
        dirs: list[str] = []
        files: list[str] = []
        entries: list[dict[str, Any]] = []
        for entry in scanned:
            if (
                entry.name == ".git"
                or is_temp_name(entry.name)
                or any(glob_match(p, entry.name) for p in ignore)
            ):
                continue
            try:
                if entry.is_symlink():
                    # Its target, resolved by the confined walk (never looked at when outside).
                    try:
                        target: Path | None = workspace.resolve(real / entry.name)
                    except ToolFailure:
                        target = None
                    where = workspace.display(target) if target else "outside the workspace"
                    status = file_status(target, workspace) if target else None
                    is_dir = status is not None and stat.S_ISDIR(status.st_mode)
                    line = f"{entry.name}{'/' if is_dir else ''} -> {where}"
                    (dirs if is_dir else files).append(line)
                    entries.append({"name": entry.name, "type": "symlink", "target": where})
                elif entry.is_dir(follow_symlinks=False):
                    dirs.append(f"{entry.name}/")
                    entries.append({"name": entry.name, "type": "directory"})
                else:
                    size = entry.stat(follow_symlinks=False).st_size  # relative to the open directory
                    files.append(f"{entry.name}  ({human_size(size)})")
                    entries.append({"name": entry.name, "type": "file", "size": size})
            except OSError:
                continue
        lines = dirs + files
        shown = lines[:LIST_MAX_ENTRIES]
        display = workspace.display(real)
        header = f"{display}: {len(dirs)} director{'y' if len(dirs) == 1 else 'ies'}, {len(files)} file(s)"
        if len(lines) > LIST_MAX_ENTRIES:
            header += f" (showing the first {LIST_MAX_ENTRIES})"
        if not lines:
            return ToolResult(text=f"{display} is empty.", data={"path": display, "entries": []})
        return ToolResult(text=header + "\n" + "\n".join(shown), data={"path": display, "entries": entries})


class Glob(Tool):
    name = "glob"
    description = (
        "Find files by glob pattern, e.g. `**/*.py`, `src/**/test_*.{js,ts}` or `*.md` (top level "
        "only: `*` does not cross `/`, `**` matches any number of directories). Patterns are relative "
        "to `path` (default: the workspace root). Returns paths relative to the workspace root, newest "
        f"first by default, at most {GLOB_MAX_RESULTS}. `.git`, `node_modules`, virtualenvs and caches "
        "are skipped unless the pattern names them."
    )
    parameters = parameters_schema(
        ["pattern"],
        pattern=parameter("string", "The glob pattern to match file paths against."),
        path=parameter("string", "Directory to search from (relative to the workspace root; default: root)."),
        sort=parameter("string", "`mtime` (newest first, the default) or `name`.", enum=["mtime", "name"]),
    )
    kind = ToolKind.READ

    def describe(self, args: dict[str, Any]) -> str:
        where = f" in {args['path']}" if args.get("path") else ""
        return f"Find files matching `{args.get('pattern', '')}`{where}"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        pattern = str_arg(args, "pattern")
        path = opt_str_arg(args, "path", ".") or "."
        sort = opt_str_arg(args, "sort", "mtime")
        if sort not in ("mtime", "name"):
            raise ToolFailure("sort must be 'mtime' or 'name'", "invalid_arguments")
        return await in_thread(self._glob, ctx.workspace, pattern, path, sort == "mtime")

    def _glob(self, workspace: Workspace, pattern: str, path: str, by_mtime: bool) -> ToolResult:
        start = workspace.resolve(path, must_exist=True)
        status = file_status(start, workspace)
        if status is None or not stat.S_ISDIR(status.st_mode):
            raise ToolFailure(f"{path!r} is not a directory", "not_a_directory")
        base, rest = split_glob(workspace, pattern, str(start))
        found: list[tuple[float, Path]] = []  # (mtime, path)
        fd = open_walk(workspace, base)
        if fd is None:
            # A pattern without wildcards naming one file.
            status = file_status(base, workspace)
            if status is not None and stat.S_ISREG(status.st_mode):
                found.append((status.st_mtime, base))
        else:
            try:
                skip = explicit_skip_dirs(pattern)
                for e in walk_files(fd, base, skip_dirs=skip, follow_file_links=True):
                    if not glob_match(rest, rel_posix(e.path, base)):
                        continue
                    try:
                        if e.is_link:  # listed only when it resolves inside, to a file
                            status = file_status(workspace.resolve(e.path), workspace)
                        else:
                            status = e.lstat()
                    except (ToolFailure, OSError):
                        continue
                    if status is not None and stat.S_ISREG(status.st_mode):
                        found.append((status.st_mtime, e.path))
            finally:
                os.close(fd)
        if by_mtime:
            found.sort(key=lambda m: (-m[0], str(m[1])))
        else:
            found.sort(key=lambda m: str(m[1]))
        matches = [p for _t, p in found]
        shown = [workspace.display(p) for p in matches[:GLOB_MAX_RESULTS]]
        where = workspace.display(start)
        if not matches:
            return ToolResult(text=f"No files match {pattern!r} in {where}.", data={"files": []})
        header = f"{len(matches)} file(s) match {pattern!r} in {where}"
        header += " (newest first)" if by_mtime else " (by name)"
        if len(matches) > GLOB_MAX_RESULTS:
            header += f"; showing the first {GLOB_MAX_RESULTS}, narrow the pattern to see the rest"
        return ToolResult(
            text=header + ":\n" + "\n".join(shown),
            data={"files": shown, "total": len(matches), "truncated": len(matches) > GLOB_MAX_RESULTS},
        )


# --- grep ----------------------------------------------------------------------------------------


def ripgrep() -> str | None:
    """The ripgrep executable grep uses, or None for the pure Python search."""
    return shutil.which("rg") if USE_RIPGREP else None


class _RgUnsupported(Exception):
    """ripgrep refused a pattern Python accepts (look-around, back-references)."""


def _clip(text: str) -> str:
    text = text.rstrip("\r\n")
    if len(text) > GREP_MAX_LINE_CHARS:
        return text[:GREP_MAX_LINE_CHARS] + "…"
    return text


def _grep_python(
    workspace: Workspace, regex: re.Pattern[str], base: Path, include: str | None
) -> tuple[list[tuple[str, int, str]], bool]:
    """The pure Python search: every directory and file opened through the confined walk,
    symlinks not followed."""
    matches: list[tuple[str, int, str]] = []
    fd = open_walk(workspace, base)
    if fd is None:  # one file
        try:
            data = _read_capped(open_file(base, workspace))
        except OSError:
            return matches, False
        return _grep_data(workspace.display(base), data, regex, matches)
    try:
        with contextlib.closing(walk_files(fd, base, skip_dirs=SKIP_DIRS)) as walk:
            for entry in walk:
                if include and not glob_match(include, rel_posix(entry.path, base), basename=True):
                    continue
                try:
                    data = _read_capped(entry.open())
                except OSError:
                    continue
                _grep_data(workspace.display(entry.path), data, regex, matches)
                if len(matches) > GREP_MAX_MATCHES:
                    return matches[:GREP_MAX_MATCHES], True
    finally:
        os.close(fd)
    return matches, False


def _read_capped(f: BinaryIO) -> bytes | None:
    """A file's bytes, or None when it is larger than grep searches."""
    with f:
        if os.fstat(f.fileno()).st_size > GREP_MAX_FILESIZE:
            return None
        return f.read(GREP_MAX_FILESIZE + 1)


def _grep_data(
    display: str, data: bytes | None, regex: re.Pattern[str], matches: list[tuple[str, int, str]]
) -> tuple[list[tuple[str, int, str]], bool]:
    if data is None or b"\x00" in data:
        return matches, False
    for n, line in enumerate(data.decode("utf-8", errors="replace").split("\n"), start=1):
        if regex.search(line.rstrip("\r")):
            matches.append((display, n, _clip(line)))
            if len(matches) > GREP_MAX_MATCHES:
                return matches[:GREP_MAX_MATCHES], True
    return matches, False


def _confirm_rg(
    workspace: Workspace, matches: list[tuple[str, int, str, Path]]
) -> list[tuple[str, int, str]]:
    """ripgrep's matches, each checked against the file read again through the confined walk.

    ripgrep does not follow symlinks unless told to (`-L`, never passed), but it walks by path
    strings, so a directory swapped for a symlink while it runs can make it read a file outside
    the workspace. So its output is only a hint: a match is reported only when the same line is at
    the same line number of the file opened by `Workspace.locate`."""
    confirmed: list[tuple[str, int, str]] = []
    lines_of: dict[Path, list[str] | None] = {}
    for display, n, text, path in matches:
        if path not in lines_of:
            try:
                data = _read_capped(open_file(path, workspace))
            except (OSError, ToolFailure):
                data = None
            lines_of[path] = None if data is None else data.decode("utf-8", errors="replace").split("\n")
        lines = lines_of[path]
        if lines is not None and 0 < n <= len(lines) and _clip(lines[n - 1]) == text:
            confirmed.append((display, n, text))
    return confirmed


def _rg_command(rg: str, pattern: str, base: Path, include: str | None, ignore_case: bool) -> list[str]:
    cmd = [
        rg,
        "--json",
        "--no-config",
        "--no-ignore",
        "--hidden",
        "--max-filesize",
        str(GREP_MAX_FILESIZE),
        "--regexp",
        pattern,
    ]
    if ignore_case:
        cmd.append("--ignore-case")
    if include:
        cmd += ["--glob", include]
    for d in sorted(SKIP_DIRS):
        cmd += ["--glob", f"!{d}"]
    cmd += ["--glob", f"!{TEMP_PREFIX}*"]  # what a crashed atomic write left behind
    return [*cmd, "--", str(base)]


async def _grep_rg(
    rg: str,
    workspace: Workspace,
    pattern: str,
    base: Path,
    include: str | None,
    ignore_case: bool,
) -> tuple[list[tuple[str, int, str]], bool]:
    """ripgrep's matches, sorted by path (component by component, as `rg --sort path` would) and
    line number. rg searches in parallel (no `--sort`, which makes it single-threaded), so files
    come in whatever order its threads finish; the matches are sorted here. When there are more
    than `GREP_MAX_MATCHES`, rg is stopped at the first `GREP_MAX_MATCHES` + 1 it reports: the
    matches kept are then the first `GREP_MAX_MATCHES` rg found (whole files in the order its
    threads finished them, so not always the same ones from run to run), sorted the same way."""
    proc = await asyncio.create_subprocess_exec(
        *_rg_command(rg, pattern, base, include, ignore_case),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=64 * 1024 * 1024,
    )
    assert proc.stdout is not None and proc.stderr is not None
    # stderr is drained while stdout is read: a flood of errors (unreadable
    # files, say) would otherwise fill its pipe and stall ripgrep until the timeout. Only the
    # tail is kept: it is read for one thing, whether the regex was refused.
    errors = asyncio.ensure_future(_tail(proc.stderr, RG_STDERR_TAIL))
    matches: list[tuple[str, int, str, Path]] = []
    capped = False
    try:
        async with asyncio.timeout(GREP_TIMEOUT):
            while True:
                raw = await proc.stdout.readline()
                if not raw:
                    break
                msg = json.loads(raw)
                if msg.get("type") != "match":
                    continue
                data = msg["data"]
                file = _rg_text(data["path"])
                line = _rg_text(data["lines"])
                path = Path(file)
                matches.append((workspace.display(path), int(data["line_number"]), _clip(line), path))
                if len(matches) > GREP_MAX_MATCHES:
                    capped = True
                    break
            if capped:
                proc.kill()
            code = await proc.wait()
            stderr = (await errors).decode("utf-8", errors="replace")
    except TimeoutError as e:
        proc.kill()
        await proc.wait()
        raise ToolFailure(
            f"the search took longer than {GREP_TIMEOUT:.0f} s; narrow it with path or include", "timeout"
        ) from e
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    finally:
        if not errors.done():
            errors.cancel()
    if code == 2 and not matches and "regex" in stderr.lower():
        raise _RgUnsupported(stderr)
    kept = sorted(matches[:GREP_MAX_MATCHES], key=lambda m: (m[3].parts, m[1]))
    confirmed = await in_thread(_confirm_rg, workspace, kept)
    return confirmed, capped


RG_STDERR_TAIL = 64 * 1024


async def _tail(stream: asyncio.StreamReader, keep: int) -> bytes:
    """Reads `stream` to its end; its last `keep` bytes."""
    tail = b""
    while chunk := await stream.read(65536):
        tail = (tail + chunk)[-keep:]
    return tail


def _rg_text(obj: dict[str, Any]) -> str:
    if "text" in obj:
        return str(obj["text"])
    return base64.b64decode(obj.get("bytes", "")).decode("utf-8", errors="replace")


class Grep(Tool):
    name = "grep"
    description = (
        "Search file contents with a regular expression (Rust/Python syntax, matched per line). "
        "Returns matching lines as `file:line:text`, files in path order, at most "
        f"{GREP_MAX_MATCHES} matches. Narrow with `path` (a directory or a file) and `include` (a glob "
        "such as `*.py` matched against file names, or `src/**/*.ts` against paths). Binary files, "
        f"files over {GREP_MAX_FILESIZE // (1024 * 1024)} MiB, `.git`, `node_modules`, virtualenvs and "
        "caches are skipped."
    )
    parameters = parameters_schema(
        ["pattern"],
        pattern=parameter("string", "The regular expression to search for."),
        path=parameter(
            "string", "Directory or file to search (relative to the workspace root; default: root)."
        ),
        include=parameter("string", "Only search files matching this glob, e.g. `*.py` or `*.{ts,tsx}`."),
        ignore_case=parameter("boolean", "Match case-insensitively. Default false."),
    )
    kind = ToolKind.READ

    def describe(self, args: dict[str, Any]) -> str:
        where = f" in {args['path']}" if args.get("path") else ""
        inc = f" ({args['include']})" if args.get("include") else ""
        return f"Search for `{args.get('pattern', '')}`{where}{inc}"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        pattern = str_arg(args, "pattern", allow_empty=False)
        path = opt_str_arg(args, "path", ".") or "."
        include = opt_str_arg(args, "include")
        ignore_case = bool_arg(args, "ignore_case", False)
        try:
            regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as e:
            raise ToolFailure(
                f"invalid regular expression {pattern!r}: {e}. Escape special characters such as ( [ . * "
                "with a backslash to match them literally.",
                "invalid_regex",
            ) from e
        if include:
            glob_regex(include)  # a clear failure for a broken glob
        base = await in_thread(ctx.workspace.resolve, path, must_exist=True)
        rg = ripgrep()
        engine = "python"
        matches: list[tuple[str, int, str]]
        if rg:
            try:
                matches, capped = await _grep_rg(rg, ctx.workspace, pattern, base, include, ignore_case)
                engine = "ripgrep"
            except _RgUnsupported:
                matches, capped = await in_thread(_grep_python, ctx.workspace, regex, base, include)
        else:
            matches, capped = await in_thread(_grep_python, ctx.workspace, regex, base, include)
        where = ctx.workspace.display(base)
        scope = f" in {where}" + (f" (files matching {include})" if include else "")
        if not matches:
            return ToolResult(
                text=f"No matches for /{pattern}/{scope}.", data={"matches": 0, "engine": engine}
            )
        header = f"{len(matches)} match{'es' if len(matches) != 1 else ''} for /{pattern}/{scope}"
        if capped:
            header = (
                f"More than {GREP_MAX_MATCHES} matches for /{pattern}/{scope}; showing the first "
                f"{GREP_MAX_MATCHES}. Narrow the search with path, include or a more specific pattern"
            )
        body = "\n".join(f"{f}:{n}:{t}" for f, n, t in matches)
        return ToolResult(
            text=header + ":\n" + body,
            data={"matches": len(matches), "truncated": capped, "engine": engine},
        )
