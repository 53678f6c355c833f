"""Listing and search tools: list_directory, glob and grep. Walks open each subdirectory relative to
its parent and never enter symlinked directories, so nothing outside the workspace roots is listed,
even when a directory is swapped for a symlink while a tool runs; the temporary files a crash of a
write may leave behind are hidden."""

from __future__ import annotations

import asyncio
import base64
import bisect
import contextlib
import json
import os
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from devagent.agent.events import ToolErrorType, ToolKind
from devagent.agent.sandbox.confine import TEMP_PREFIX
from devagent.agent.tools._util import (
    SKIP_DIRS,
    bool_arg,
    explicit_skip_dirs,
    file_status,
    glob_match,
    glob_regex,
    human_size,
    in_thread,
    int_arg,
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
from devagent.agent.tools.base import Tool, ToolContext, ToolResult
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.remote_files import (
    FETCH_MAX_BYTES,
    SandboxFiles,
    is_dir_mode,
    is_regular,
    pruned,
    remote_files,
    within_batch,
)
from devagent.agent.tools.workspace import Workspace
from devagent.common.errors import DevagentError

# Defaults of the listing and search caps.
LIST_MAX_ENTRIES = 1000
GLOB_MAX_RESULTS = 500
GREP_MAX_MATCHES = 200  # matching lines shown
GREP_MAX_FILES = 500  # files listed or counted
GREP_MAX_COUNTED = 10_000  # matching lines counted
GREP_MAX_CONTEXT = 10  # context lines before or after a match
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
        if (remote := remote_files(ctx)) is not None:
            return await _list_remote(remote, path, ignore)
        return await in_thread(self._list, ctx.workspace, path, ignore)

    def _list(self, workspace: Workspace, path: str, ignore: list[str]) -> ToolResult:
        real = workspace.resolve(path, must_exist=True)
        try:
            fd = open_walk(workspace, real)
        except OSError as e:
            raise ToolFailure(
                f"cannot list {workspace.display(real)}: {e.strerror}", ToolErrorType.OS_ERROR
            ) from e
        if fd is None:
            raise ToolFailure(
                f"{path!r} is a file, not a directory; use read_file to read it",
                ToolErrorType.NOT_A_DIRECTORY,
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
            raise ToolFailure(
                f"cannot list {workspace.display(real)}: {e.strerror}", ToolErrorType.OS_ERROR
            ) from e
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
        return _listing(workspace.display(real), dirs, files, entries)


def _listing(display: str, dirs: list[str], files: list[str], entries: list[dict[str, Any]]) -> ToolResult:
    """list_directory's result: its folders, then its files."""
    lines = dirs + files
    shown = lines[:LIST_MAX_ENTRIES]
    header = f"{display}: {len(dirs)} director{'y' if len(dirs) == 1 else 'ies'}, {len(files)} file(s)"
    if len(lines) > LIST_MAX_ENTRIES:
        header += (
            f" (showing the first {LIST_MAX_ENTRIES}; list a subdirectory or leave names out with ignore)"
        )
    if not lines:
        return ToolResult(text=f"{display} is empty.", data={"path": display, "entries": []})
    return ToolResult(text=header + "\n" + "\n".join(shown), data={"path": display, "entries": entries})


async def _list_remote(files: SandboxFiles, path: str, ignore: list[str]) -> ToolResult:
    """list_directory through the session's sandbox: one listing, one batch of link targets."""
    workspace = files.workspace
    real = files.resolve(path)
    display = workspace.display(real)
    try:
        found = await files.walk(real, pruned(frozenset({".git"}), depth=1), path)
    except ToolFailure as failed:
        if failed.type == ToolErrorType.NOT_A_DIRECTORY:
            raise ToolFailure(
                f"{path!r} is a file, not a directory; use read_file to read it",
                ToolErrorType.NOT_A_DIRECTORY,
            ) from None
        raise
    found = sorted((e for e in found if not any(glob_match(p, e.rel) for p in ignore)), key=lambda e: e.rel)
    links = [e for e in found if e.kind == "l"]
    resolved = await files.real([real / e.rel for e in links]) if links else []
    targets = dict(zip([e.rel for e in links], resolved, strict=True))
    dirs: list[str] = []
    names: list[str] = []
    entries: list[dict[str, Any]] = []
    for e in found:
        if e.kind == "l":
            target = targets[e.rel]
            where = workspace.display(target) if target else "outside the workspace"
            is_dir = target is not None and e.target == "d"
            (dirs if is_dir else names).append(f"{e.rel}{'/' if is_dir else ''} -> {where}")
            entries.append({"name": e.rel, "type": "symlink", "target": where})
        elif e.kind == "d":
            dirs.append(f"{e.rel}/")
            entries.append({"name": e.rel, "type": "directory"})
        else:
            names.append(f"{e.rel}  ({human_size(e.size)})")
            entries.append({"name": e.rel, "type": "file", "size": e.size})
    return _listing(display, dirs, names, entries)


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
            raise ToolFailure("sort must be 'mtime' or 'name'", ToolErrorType.INVALID_ARGUMENTS)
        if (remote := remote_files(ctx)) is not None:
            return await _glob_remote(remote, pattern, path, sort == "mtime")
        return await in_thread(self._glob, ctx.workspace, pattern, path, sort == "mtime")

    def _glob(self, workspace: Workspace, pattern: str, path: str, by_mtime: bool) -> ToolResult:
        start = workspace.resolve(path, must_exist=True)
        status = file_status(start, workspace)
        if status is None or not stat.S_ISDIR(status.st_mode):
            raise ToolFailure(f"{path!r} is not a directory", ToolErrorType.NOT_A_DIRECTORY)
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
        return _globbed(workspace, found, pattern, workspace.display(start), by_mtime)


async def _glob_remote(files: SandboxFiles, pattern: str, path: str, by_mtime: bool) -> ToolResult:
    """glob through the session's sandbox: one walk; a link is listed when it resolves inside, to
    a file (one batch of link targets)."""
    workspace = files.workspace
    start = files.resolve(path)
    base, rest = split_glob(workspace, pattern, str(start), resolve=files.resolve)
    found: list[tuple[float, Path]] = []
    try:  # the walk tells a missing start, or one that is no folder: no stat first
        entries = await files.walk(base, pruned(explicit_skip_dirs(pattern)), pattern)
    except ToolFailure as e:
        if e.type not in (ToolErrorType.NOT_A_DIRECTORY, ToolErrorType.NOT_FOUND):
            raise
        if base == start or not is_dir_mode(await files.stat(start)):
            what = "does not exist" if e.type == ToolErrorType.NOT_FOUND else "is not a directory"
            raise ToolFailure(f"{path!r} {what}", ToolErrorType.NOT_A_DIRECTORY) from None
        single = await files.stat(base)  # a pattern without wildcards naming one file, or nothing
        if single is not None and stat.S_ISREG(single.st_mode):
            found.append((single.st_mtime, base))
        entries = []
    matching = [e for e in entries if is_regular(e) and glob_match(rest, e.rel)]
    links = [e for e in matching if e.kind == "l"]
    inside = await files.real([base / e.rel for e in links]) if links else []
    outside = {e.rel for e, real in zip(links, inside, strict=True) if real is None}
    found += [(e.mtime, base / e.rel) for e in matching if e.rel not in outside]
    return _globbed(workspace, found, pattern, workspace.display(start), by_mtime)


def _globbed(
    workspace: Workspace, found: list[tuple[float, Path]], pattern: str, where: str, by_mtime: bool
) -> ToolResult:
    """glob's result for the files found, as (mtime, path)."""
    if by_mtime:
        found.sort(key=lambda m: (-m[0], str(m[1])))
    else:
        found.sort(key=lambda m: str(m[1]))
    matches = [p for _t, p in found]
    shown = [workspace.display(p) for p in matches[:GLOB_MAX_RESULTS]]
    if not matches:
        return ToolResult(text=f"No files match {pattern!r} in {where}.", data={"files": []})
    header = f"{len(matches)} file(s) match {pattern!r} in {where}"
    header += " (newest first)" if by_mtime else " (by name)"
    if len(matches) > GLOB_MAX_RESULTS:
        header += f"; showing the first {GLOB_MAX_RESULTS}, narrow the pattern or path to see the rest"
    return ToolResult(
        text=header + ":\n" + "\n".join(shown),
        data={"files": shown, "total": len(matches), "truncated": len(matches) > GLOB_MAX_RESULTS},
    )


# --- grep ----------------------------------------------------------------------------------------
#
# Both engines give the same results in the same form: ripgrep only says which lines of which
# files match; each of those files is then read again through the confined walk, the lines
# checked, and the output (context lines included) made from that reading, as the pure Python
# search makes it from its own.


def ripgrep() -> str | None:
    """The ripgrep executable grep uses, or None for the pure Python search."""
    return shutil.which("rg") if USE_RIPGREP else None


class _RgUnsupported(DevagentError):
    """ripgrep refused a pattern Python accepts (look-around, back-references)."""


GREP_OUTPUTS = ("content", "files", "count")
_NEWLINE_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\n")


@dataclass(frozen=True, slots=True)
class GrepQuery:
    """What one grep call looks for, and how its results are shown."""

    pattern: str
    regex: re.Pattern[str]  # the pattern as Python compiled it (escaped when `fixed`)
    fixed: bool = False
    ignore_case: bool = False
    multiline: bool = False
    output: str = "content"  # content | files | count
    before: int = 0
    after: int = 0
    include: str | None = None

    def hits(self, text: str, lines: list[str]) -> list[int]:
        """The numbers (from 1) of the lines of a file that hold a match: in multiline mode every
        line a match spans, else every line the pattern matches on its own (without its `\\r`)."""
        if not self.multiline:
            return [n for n, line in enumerate(lines, start=1) if self.regex.search(line.rstrip("\r"))]
        newlines = [m.start() for m in re.finditer("\n", text)]
        found: set[int] = set()
        for m in self.regex.finditer(text):
            first = bisect.bisect_left(newlines, m.start()) + 1
            last = bisect.bisect_left(newlines, max(m.start(), m.end() - 1)) + 1
            found.update(range(first, min(last, len(lines)) + 1))
        return sorted(found)

    def shown(self) -> str:
        return f"{self.pattern!r}" if self.fixed else f"/{self.pattern}/"


def grep_query(args: dict[str, Any]) -> GrepQuery:
    """A grep call's arguments, checked: a clear failure for a bad pattern or option."""
    pattern = str_arg(args, "pattern", allow_empty=False)
    fixed = bool_arg(args, "fixed_strings", False)
    ignore_case = bool_arg(args, "ignore_case", False)
    multiline = bool_arg(args, "multiline", False)
    output = opt_str_arg(args, "output", "content") or "content"
    if output not in GREP_OUTPUTS:
        raise ToolFailure(f"output must be one of {', '.join(GREP_OUTPUTS)}", ToolErrorType.INVALID_ARGUMENTS)
    context = int_arg(args, "context", 0)
    before, after = int_arg(args, "before", context), int_arg(args, "after", context)
    if max(before, after) > GREP_MAX_CONTEXT:
        raise ToolFailure(f"at most {GREP_MAX_CONTEXT} context lines", ToolErrorType.INVALID_ARGUMENTS)
    if not multiline and ("\n" in pattern or (not fixed and _NEWLINE_ESCAPE.search(pattern))):
        raise ToolFailure(
            "the pattern holds a line break, which a line never contains: set multiline to true "
            "to match across lines",
            ToolErrorType.INVALID_ARGUMENTS,
        )
    flags = (re.IGNORECASE if ignore_case else 0) | (re.MULTILINE if multiline else 0)
    try:
        regex = re.compile(re.escape(pattern) if fixed else pattern, flags)
    except re.error as e:
        raise ToolFailure(
            f"invalid regular expression {pattern!r}: {e}. Escape special characters such as ( [ . * "
            "with a backslash to match them literally, or set fixed_strings to true.",
            ToolErrorType.INVALID_REGEX,
        ) from e
    include = opt_str_arg(args, "include")
    if include:
        glob_regex(include)  # a clear failure for a broken glob
    return GrepQuery(pattern, regex, fixed, ignore_case, multiline, output, before, after, include)


def _clip(text: str) -> str:
    text = text.rstrip("\r\n")
    if len(text) > GREP_MAX_LINE_CHARS:
        return text[:GREP_MAX_LINE_CHARS] + "…"
    return text


def _lines(data: bytes) -> list[str]:
    """A file's lines without their `\\n` (a `\\r` before it is kept), no empty line after the
    last `\\n`."""
    lines = data.decode("utf-8", errors="replace").split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def _content_block(display: str, lines: list[str], hits: list[int], before: int, after: int) -> list[str]:
    """A file's matching lines as `path:N:text` with the context asked for as `path-N-text`,
    groups that do not touch separated by `--`, as grep and ripgrep print them."""
    shown: dict[int, bool] = {}  # line number: whether it matches
    for n in hits:
        for c in range(max(1, n - before), min(len(lines), n + after) + 1):
            shown.setdefault(c, False)
        shown[n] = True
    out: list[str] = []
    previous = 0
    for n in sorted(shown):
        if previous and n > previous + 1 and (before or after):
            out.append("--")
        mark = ":" if shown[n] else "-"
        out.append(f"{display}{mark}{n}{mark}{_clip(lines[n - 1])}")
        previous = n
    return out


class _Found:
    """A search's results, file by file in path order, up to the caps: matching lines for
    `content` (GREP_MAX_MATCHES); files (GREP_MAX_FILES) and lines counted (GREP_MAX_COUNTED)
    for `files` and `count`. `capped` once something was left out."""

    def __init__(self, query: GrepQuery) -> None:
        self.query = query
        self.out: list[str] = []
        self.matches = 0
        self.files = 0
        self.capped = False
        self.note = ""  # what else the model must know of the search (files it could not read)

    def add(self, display: str, lines: list[str], hits: list[int]) -> bool:
        """Adds one file's matching lines; True once the results are full (stop searching)."""
        q = self.query
        if not hits:
            return self.capped
        if q.output == "files":
            hits = hits[:1]
        room = (GREP_MAX_MATCHES if q.output == "content" else GREP_MAX_COUNTED) - self.matches
        if room <= 0 or (q.output != "content" and self.files >= GREP_MAX_FILES):
            self.capped = True
            return True
        if len(hits) > room:
            hits, self.capped = hits[:room], True
        if q.output == "content":
            if self.out and (q.before or q.after):
                self.out.append("--")
            self.out += _content_block(display, lines, hits, q.before, q.after)
        else:
            self.out.append(display if q.output == "files" else f"{display}:{len(hits)}")
        self.matches += len(hits)
        self.files += 1
        return self.capped


def _grep_python(workspace: Workspace, query: GrepQuery, base: Path) -> _Found:
    """The pure Python search: every directory and file opened through the confined walk,
    symlinks not followed."""
    found = _Found(query)
    fd = open_walk(workspace, base)
    if fd is None:  # one file
        try:
            data = _read_capped(open_file(base, workspace))
        except OSError:
            return found
        _search_file(found, workspace.display(base), data)
        return found
    try:
        with contextlib.closing(walk_files(fd, base, skip_dirs=SKIP_DIRS)) as walk:
            for entry in walk:
                if query.include and not glob_match(
                    query.include, rel_posix(entry.path, base), basename=True
                ):
                    continue
                try:
                    data = _read_capped(entry.open())
                except OSError:
                    continue
                if _search_file(found, workspace.display(entry.path), data):
                    break
    finally:
        os.close(fd)
    return found


def _search_file(found: _Found, display: str, data: bytes | None) -> bool:
    """Searches one file's bytes (None: too large; with a NUL byte: binary, skipped); True once
    the results are full."""
    if data is None or b"\x00" in data:
        return False
    lines = _lines(data)
    return found.add(display, lines, found.query.hits(data.decode("utf-8", errors="replace"), lines))


def _read_capped(f: BinaryIO) -> bytes | None:
    """A file's bytes, or None when it is larger than grep searches."""
    with f:
        if os.fstat(f.fileno()).st_size > GREP_MAX_FILESIZE:
            return None
        return f.read(GREP_MAX_FILESIZE + 1)


# A ripgrep hit: the file, the number of the first line of the match, and the lines it spans.
_Hit = tuple[Path, int, list[str]]


def _confirm_rg(workspace: Workspace, query: GrepQuery, hits: list[_Hit]) -> _Found:
    """ripgrep's hits, each checked against the file read again through the confined walk, in
    path order (component by component, as `rg --sort path` would).

    ripgrep does not follow symlinks unless told to (`-L`, never passed), but it walks by path
    strings, so a directory swapped for a symlink while it runs can make it read a file outside
    the workspace. So its output is only a hint: a line is reported only when the same lines are
    at the same line numbers of the file opened by `Workspace.locate`, and what is shown (the
    context too) is read from that file."""
    found = _Found(query)
    by_file: dict[Path, list[tuple[int, list[str]]]] = {}
    for path, n, texts in hits:
        by_file.setdefault(path, []).append((n, texts))
    for path in sorted(by_file, key=lambda p: p.parts):
        try:
            data = _read_capped(open_file(path, workspace))
        except (OSError, ToolFailure):
            continue
        if data is None or b"\x00" in data:
            continue
        lines = _lines(data)
        confirmed = {
            n + i
            for n, texts in by_file[path]
            if n >= 1 and lines[n - 1 : n - 1 + len(texts)] == texts
            for i in range(len(texts))
        }
        if found.add(workspace.display(path), lines, sorted(confirmed)):
            break
    return found


def _rg_command(rg: str, query: GrepQuery, base: Path) -> list[str]:
    cmd = [
        rg,
        "--json",
        "--no-config",
        "--no-ignore",
        "--hidden",
        "--crlf",  # `$` before a `\r\n` too, as the Python search sees each line without its `\r`
        "--max-filesize",
        str(GREP_MAX_FILESIZE),
    ]
    if query.fixed:
        cmd.append("--fixed-strings")
    if query.ignore_case:
        cmd.append("--ignore-case")
    if query.multiline:
        cmd.append("--multiline")
    if query.output == "files":
        cmd += ["--max-count", "1"]
    cmd += ["--regexp", query.pattern]
    if query.include:
        cmd += ["--glob", query.include]
    for d in sorted(SKIP_DIRS):
        cmd += ["--glob", f"!{d}"]
    cmd += ["--glob", f"!{TEMP_PREFIX}*"]  # what a crashed atomic write left behind
    return [*cmd, "--", str(base)]


def _rg_bound(query: GrepQuery) -> int:
    """How many lines (files for `files`) ripgrep reports before it is stopped: one more than the
    results can hold tells that some were left out."""
    if query.output == "content":
        return GREP_MAX_MATCHES
    return GREP_MAX_FILES if query.output == "files" else GREP_MAX_COUNTED


async def _grep_rg(rg: str, workspace: Workspace, query: GrepQuery, base: Path) -> _Found:
    """ripgrep's hits, confirmed and shown as the Python search shows its own. rg searches in
    parallel (no `--sort`, which makes it single-threaded), so files come in whatever order its
    threads finish; the hits are sorted by path here. When there are more than the results hold,
    rg is stopped once it reported one more (`_rg_bound`): the files kept are then those rg
    searched first (not always the same ones from run to run), sorted the same way."""
    proc = await asyncio.create_subprocess_exec(
        *_rg_command(rg, query, base),
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
    hits: list[_Hit] = []
    try:
        async with asyncio.timeout(GREP_TIMEOUT):
            capped = await _read_rg_hits(proc.stdout, _rg_bound(query), query.output == "files", hits)
            if capped:
                proc.kill()
            code = await proc.wait()
            stderr = (await errors).decode("utf-8", errors="replace")
    except TimeoutError as e:
        proc.kill()
        await proc.wait()
        raise ToolFailure(
            f"the search took longer than {GREP_TIMEOUT:.0f} s; narrow it with path or include",
            ToolErrorType.TIMEOUT,
        ) from e
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    finally:
        if not errors.done():
            errors.cancel()
    if code == 2 and not hits and "regex" in stderr.lower():
        raise _RgUnsupported(stderr)
    found = await in_thread(_confirm_rg, workspace, query, hits)
    found.capped = found.capped or capped
    return found


async def _read_rg_hits(stdout: asyncio.StreamReader, bound: int, by_file: bool, hits: list[_Hit]) -> bool:
    """Reads rg's JSON lines into `hits` until its output ends (False) or more than `bound` lines
    (files when `by_file`) were reported (True)."""
    count = 0
    while raw := await stdout.readline():
        msg = json.loads(raw)
        if msg.get("type") != "match":
            continue
        data = msg["data"]
        text = _rg_text(data["lines"])
        texts = (text[:-1] if text.endswith("\n") else text).split("\n")
        hits.append((Path(_rg_text(data["path"])), int(data["line_number"]), texts))
        count += 1 if by_file else len(texts)
        if count > bound:
            return True
    return False


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
        "Search file contents with a regular expression (Rust/Python syntax, matched per line unless "
        "`multiline`), or literal text with `fixed_strings`. Returns matching lines as `file:line:text` "
        "(with `context`, `before` or `after`: the lines around them as `file-line-text`, groups "
        "separated by `--`), files in path order, at most "
        f"{GREP_MAX_MATCHES} matching lines; `output: files` lists only the files that match, "
        "`output: count` the number of matching lines per file. Narrow with `path` (a directory or a "
        "file) and `include` (a glob such as `*.py` matched against file names, or `src/**/*.ts` "
        "against paths). Binary files, files over "
        f"{GREP_MAX_FILESIZE // (1024 * 1024)} MiB, `.git`, `node_modules`, virtualenvs and caches "
        "are skipped."
    )
    parameters = parameters_schema(
        ["pattern"],
        pattern=parameter(
            "string", "The regular expression (or, with fixed_strings, the text) to search for."
        ),
        path=parameter(
            "string", "Directory or file to search (relative to the workspace root; default: root)."
        ),
        include=parameter("string", "Only search files matching this glob, e.g. `*.py` or `*.{ts,tsx}`."),
        ignore_case=parameter("boolean", "Match case-insensitively. Default false."),
        fixed_strings=parameter("boolean", "Take the pattern as literal text, not a regular expression."),
        multiline=parameter(
            "boolean",
            "Let a match span lines (`\\n` in the pattern matches a line break; `.` does not unless "
            "the pattern starts with `(?s)`); every line a match spans is shown. Default false.",
        ),
        output=parameter(
            "string",
            "`content` (matching lines, the default), `files` (only the paths of files that match) "
            "or `count` (matching lines per file).",
            enum=list(GREP_OUTPUTS),
        ),
        context=parameter(
            "integer", "Lines to show before and after each match.", minimum=0, maximum=GREP_MAX_CONTEXT
        ),
        before=parameter(
            "integer",
            "Lines to show before each match (overrides context).",
            minimum=0,
            maximum=GREP_MAX_CONTEXT,
        ),
        after=parameter(
            "integer",
            "Lines to show after each match (overrides context).",
            minimum=0,
            maximum=GREP_MAX_CONTEXT,
        ),
    )
    kind = ToolKind.READ

    def describe(self, args: dict[str, Any]) -> str:
        where = f" in {args['path']}" if args.get("path") else ""
        inc = f" ({args['include']})" if args.get("include") else ""
        return f"Search for `{args.get('pattern', '')}`{where}{inc}"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        query = grep_query(args)
        path = opt_str_arg(args, "path", ".") or "."
        remote = remote_files(ctx)
        if remote is not None:
            base = remote.resolve(path)
            found, engine = await _grep_remote(remote, query, base, path), "python (in the sandbox's files)"
        else:
            base = await in_thread(ctx.workspace.resolve, path, must_exist=True)
            found, engine = await _grep_here(ctx.workspace, query, base)
        scope = f" in {ctx.workspace.display(base)}"
        if query.include:
            scope += f" (files matching {query.include})"
        return _grep_result(query, found, scope, engine)


async def _grep_here(workspace: Workspace, query: GrepQuery, base: Path) -> tuple[_Found, str]:
    """grep on this host: ripgrep where it is installed (and takes the pattern), else Python."""
    rg = ripgrep()
    engine = "python"
    if rg:
        try:
            found = await _grep_rg(rg, workspace, query, base)
            engine = "ripgrep"
        except _RgUnsupported:
            found = await in_thread(_grep_python, workspace, query, base)
    else:
        found = await in_thread(_grep_python, workspace, query, base)
    return found, engine


async def _grep_remote(files: SandboxFiles, query: GrepQuery, base: Path, path: str) -> _Found:
    """grep through the session's sandbox: one walk lists its files (links not followed, as here),
    one batch brings them over, and the Python search reads them as it reads files here."""
    workspace = files.workspace
    found = _Found(query)
    try:  # the walk tells a missing path, or a file: no stat first
        entries = await files.walk(base, pruned(SKIP_DIRS), path)
    except ToolFailure as e:
        if e.type != ToolErrorType.NOT_A_DIRECTORY:
            raise
        data = await files.read_bytes(base, path)  # one file
        if len(data) <= GREP_MAX_FILESIZE:
            _search_file(found, workspace.display(base), data)
        return found
    searched = sorted(
        (
            e
            for e in entries
            if e.kind == "f"
            and e.size <= GREP_MAX_FILESIZE
            and not (query.include and not glob_match(query.include, e.rel, basename=True))
        ),
        key=lambda e: e.rel.split("/"),
    )
    wanted = within_batch(searched)
    if len(wanted) < len(searched):  # the rest is not brought over
        found.note = (
            f"only the first {len(wanted)} of {len(searched)} files were searched (together over "
            f"{FETCH_MAX_BYTES >> 20} MiB). {_NARROW}"
        )
    got, _ = await files.fetch(base, wanted)
    for rel in wanted:
        if rel in got and _search_file(found, workspace.display(base / rel), got[rel]):
            break
    return found


_NARROW = "Narrow the search with path, include or a more specific pattern"


def _plural(n: int, word: str, plural: str = "") -> str:
    return f"{n} {word if n == 1 else plural or word + 's'}"


def _grep_result(query: GrepQuery, found: _Found, scope: str, engine: str) -> ToolResult:
    data = {
        "matches": found.matches,
        "files": found.files,
        "truncated": found.capped,
        "engine": engine,
        "output": query.output,
    }
    what = f"{query.shown()}{scope}"
    note = f"\n[Note: {found.note}]" if found.note else ""
    if not found.out:
        return ToolResult(text=f"No matches for {what}.{note}", data=data)
    if query.output == "count":
        header = f"{_plural(found.matches, 'matching line')} in {_plural(found.files, 'file')} for {what}"
        if found.capped:
            header += (
                f"; counting stopped there (at most {GREP_MAX_FILES} files and {GREP_MAX_COUNTED} lines), "
                f"so the counts are incomplete. {_NARROW}"
            )
    elif found.capped:
        cap = GREP_MAX_MATCHES if query.output == "content" else GREP_MAX_FILES
        more = f"{cap} matches for" if query.output == "content" else f"{cap} files match"
        header = f"More than {more} {what}; showing the first {cap}. {_NARROW}"
    elif query.output == "content":
        header = f"{_plural(found.matches, 'match', 'matches')} for {what}"
    else:
        header = f"{_plural(found.files, 'file')} {'matches' if found.files == 1 else 'match'} {what}"
    return ToolResult(text=header + ":\n" + "\n".join(found.out) + note, data=data)
