"""File tools (G2): read, read many, write, edit, list, glob and grep. Every path goes through
`Workspace.resolve`, and walks never enter symlinked directories, so nothing outside the
workspace roots is read or written (G4). Writes are atomic (`_util.atomic_write`: a temporary
file renamed over the target), so a crash never leaves a truncated file and a hard link to a file
outside the workspace is never written through; the temporary files a crash may leave behind are
hidden from list_directory, glob, grep and read_many_files."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from devagent.agent.events import ConfirmationDetails, FileDiff, ToolKind
from devagent.agent.tools._util import (
    GLOB_MAGIC,
    SKIP_DIRS,
    TEMP_PREFIX,
    atomic_write,
    bool_arg,
    count_lines,
    explicit_skip_dirs,
    file_diff,
    glob_match,
    glob_regex,
    human_size,
    int_arg,
    is_binary,
    is_temp_name,
    opt_str_arg,
    read_text,
    rel_posix,
    split_glob,
    str_arg,
    str_list_arg,
    walk_files,
)
from devagent.agent.tools.base import Tool, ToolContext, ToolFailure, ToolResult, Workspace

# Defaults of the read caps.
MAX_LINES = 2000
MAX_BYTES = 256 * 1024
MAX_LINE_CHARS = 2000
MANY_MAX_TOTAL_BYTES = 512 * 1024
MANY_MAX_FILES = 200
LIST_MAX_ENTRIES = 1000
GLOB_MAX_RESULTS = 500
GREP_MAX_MATCHES = 200
GREP_MAX_LINE_CHARS = 500
GREP_MAX_FILESIZE = 1024 * 1024
GREP_TIMEOUT = 60.0

# Set to False to force grep's pure Python search even when ripgrep is installed.
USE_RIPGREP = True


def _existing_file(ctx: ToolContext, path: str) -> Path:
    real = ctx.workspace.resolve(path, must_exist=True)
    if real.is_dir():
        raise ToolFailure(
            f"{path!r} is a directory; use list_directory or glob to see its files", "is_directory"
        )
    return real


def _refuse_binary(real: Path, path: str) -> None:
    if is_binary(real):
        raise ToolFailure(
            f"{path!r} is a binary file ({human_size(real.stat().st_size)}); only text files can be read",
            "binary_file",
        )


def _read_lines(real: Path, offset: int, limit: int, max_bytes: int) -> tuple[str, int, int, int, bool]:
    """Lines offset..offset+limit-1 (1-based) of a text file, at most max_bytes of them.
    Returns (text, first line shown, last line shown, total lines, some lines were cut)."""
    out: list[str] = []
    size = 0
    total = 0
    last = offset - 1
    cut_lines = False
    full = False
    with open(real, encoding="utf-8", errors="replace", newline="") as f:
        for total, line in enumerate(f, start=1):
            if total < offset or full:
                continue
            if total >= offset + limit:
                full = True
                continue
            if len(line) > MAX_LINE_CHARS:
                ending = "\n" if line.endswith("\n") else ""
                line = line[:MAX_LINE_CHARS] + f"… [line cut at {MAX_LINE_CHARS} characters]" + ending
                cut_lines = True
            encoded = len(line.encode("utf-8", errors="replace"))
            if size + encoded > max_bytes and out:
                full = True
                continue
            out.append(line)
            size += encoded
            last = total
    return "".join(out), offset, last, total, cut_lines


class ReadFile(Tool):
    name = "read_file"
    description = (
        "Read a text file of the workspace. Returns the file's content exactly (no line numbers). "
        f"Large files are cut at {MAX_LINES} lines or {MAX_BYTES // 1024} KiB; a header then says which "
        "lines were shown and which `offset` to pass to read on. Use `offset` (1-based first line) and "
        "`limit` (number of lines) to read part of a file. Binary files are refused."
    )
    parameters = {  # noqa: RUF012 - a read-only schema shared by all instances
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "The file to read, relative to the workspace root (or absolute inside it).",
            },
            "offset": {
                "type": "integer",
                "minimum": 1,
                "description": "The first line to read, counting from 1. Default: 1.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": f"How many lines to read. Default and maximum: {MAX_LINES}.",
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    }
    kind = ToolKind.READ

    def describe(self, args: dict[str, Any]) -> str:
        return f"Read {args.get('path', '')}"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = str_arg(args, "path")
        offset = int_arg(args, "offset", 1, minimum=1)
        limit = min(int_arg(args, "limit", MAX_LINES, minimum=1), MAX_LINES)
        real = _existing_file(ctx, path)
        _refuse_binary(real, path)
        text, first, last, total, cut = await asyncio.to_thread(_read_lines, real, offset, limit, MAX_BYTES)
        if total == 0:
            return ToolResult(text="[the file is empty]", data={"path": path, "total_lines": 0})
        if offset > total:
            raise ToolFailure(
                f"offset {offset} is past the end of {path!r}, which has {total} lines", "invalid_arguments"
            )
        truncated = first > 1 or last < total
        header = ""
        if truncated:
            more = f" To read more, call read_file with offset={last + 1}." if last < total else ""
            header = f"[Showing lines {first}-{last} of {total} of {path}.{more}]\n\n"
        if cut:
            header += f"[Some lines longer than {MAX_LINE_CHARS} characters were cut.]\n\n"
        return ToolResult(
            text=header + text,
            data={
                "path": path,
                "start_line": first,
                "end_line": last,
                "total_lines": total,
                "truncated": truncated,
            },
        )


def _expand(
    workspace: Workspace, entry: str, exclude: list[str], skipped: list[str]
) -> list[tuple[Path, str]]:
    """The files an entry of read_many_files names: a file, every file of a directory, or the
    matches of a glob. Returns (real path, display path) pairs."""
    found: list[tuple[Path, str]] = []
    try:
        candidates = _candidates(workspace, entry)
    except ToolFailure as e:
        if e.type != "not_found":
            raise  # outside the workspace: refused, not skipped (G4)
        skipped.append(f"{entry} (does not exist)")
        return found
    if not candidates:
        skipped.append(f"{entry} (no files match)")
    for p in candidates:
        display = workspace.display(p)
        if any(glob_match(x, display, basename=True) for x in exclude):
            continue
        if not workspace.contains(p):
            skipped.append(f"{display} (a symlink pointing outside the workspace)")
            continue
        found.append((Path(os.path.realpath(p)), display))
    return found


def _candidates(workspace: Workspace, entry: str) -> list[Path]:
    if GLOB_MAGIC.search(entry):
        base, rest = split_glob(workspace, entry)
        candidates = [
            p
            for p in walk_files(base, skip_dirs=explicit_skip_dirs(entry), follow_file_links=True)
            if glob_match(rest, rel_posix(p, base))
        ]
    else:
        real = workspace.resolve(entry, must_exist=True)
        if real.is_dir():
            candidates = list(walk_files(real, follow_file_links=True))
        else:
            candidates = [real]
    return candidates


def _read_many(workspace: Workspace, paths: list[str], exclude: list[str]) -> tuple[str, dict[str, Any]]:
    skipped: list[str] = []
    files: list[tuple[Path, str]] = []
    seen: set[Path] = set()
    for entry in paths:
        for real, display in _expand(workspace, entry, exclude, skipped):
            if real not in seen:
                seen.add(real)
                files.append((real, display))
    parts: list[str] = []
    total = 0
    shown: list[str] = []
    for i, (real, display) in enumerate(files):
        if len(shown) >= MANY_MAX_FILES or total >= MANY_MAX_TOTAL_BYTES:
            rest = len(files) - i
            skipped.append(f"{rest} more file(s) (the output limit was reached; read them separately)")
            break
        if is_binary(real):
            skipped.append(f"{display} (binary)")
            continue
        budget = min(MAX_BYTES, MANY_MAX_TOTAL_BYTES - total)
        text, _first, last, lines, _cut = _read_lines(real, 1, MAX_LINES, budget)
        note = ""
        if last < lines:
            note = f"\n[cut after line {last} of {lines}; use read_file with offset={last + 1} to read on]"
        if text and not text.endswith("\n"):
            text += "\n"
        parts.append(f"--- {display} ---\n{text}{note}")
        total += len(text.encode("utf-8", errors="replace"))
        shown.append(display)
    out = "\n".join(parts) if parts else "No files were read."
    if skipped:
        out += "\n\n[Skipped: " + "; ".join(skipped) + "]"
    return out, {"files": shown, "skipped": skipped}


class ReadManyFiles(Tool):
    name = "read_many_files"
    description = (
        "Read several text files at once. `paths` takes file paths, directories (all their files) and "
        "glob patterns such as `src/**/*.py`, relative to the workspace root. The result is each file's "
        "content after a `--- path ---` line. Binary files are skipped, and the total output is capped "
        f"({MANY_MAX_TOTAL_BYTES // 1024} KiB, {MANY_MAX_FILES} files); what was skipped is listed at "
        "the end."
    )
    parameters = {  # noqa: RUF012 - a read-only schema shared by all instances
        "type": "object",
        "properties": {
            "paths": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": 1,
                "description": "Files, directories or glob patterns (`*`, `?`, `**`, `{a,b}`) to read.",
            },
            "exclude": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Glob patterns of files to leave out, e.g. `*.lock` or `tests/**`.",
            },
        },
        "required": ["paths"],
        "additionalProperties": False,
    }
    kind = ToolKind.READ

    def describe(self, args: dict[str, Any]) -> str:
        paths = args.get("paths")
        if isinstance(paths, list) and paths:
            shown = ", ".join(str(p) for p in paths[:3]) + (", …" if len(paths) > 3 else "")
            return f"Read {shown}"
        return "Read files"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        paths = str_list_arg(args, "paths", required=True)
        exclude = str_list_arg(args, "exclude", required=False)
        text, data = await asyncio.to_thread(_read_many, ctx.workspace, paths, exclude)
        return ToolResult(text=text, data=data)


class WriteFile(Tool):
    name = "write_file"
    description = (
        "Write a whole file in the workspace, replacing its content, or create it (and its parent "
        "directories). Give the complete content: nothing of the old file is kept. To change part of "
        "an existing file prefer `edit`. The user may be shown a diff and may change the content "
        "before it is written; the result says so when that happened."
    )
    parameters = {  # noqa: RUF012 - a read-only schema shared by all instances
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "The file to write, relative to the workspace root (or absolute inside it).",
            },
            "content": {"type": "string", "description": "The complete new content of the file."},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }
    kind = ToolKind.EDIT

    def describe(self, args: dict[str, Any]) -> str:
        return f"Write {args.get('path', '')}"

    def _plan(self, args: dict[str, Any], ctx: ToolContext) -> tuple[Path, str | None, str]:
        path = str_arg(args, "path")
        content = str_arg(args, "content", allow_empty=True)
        real = ctx.workspace.resolve(path)
        if real.is_dir():
            raise ToolFailure(f"{path!r} is a directory; give a file path", "is_directory")
        old = read_text(real) if real.exists() else None
        return real, old, content

    async def confirmation(self, args: dict[str, Any], ctx: ToolContext) -> ConfirmationDetails:
        real, old, new = self._plan(args, ctx)
        return file_diff(ctx.workspace, real, old, new)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        real, old, proposed = self._plan(args, ctx)
        return _write(ctx, real, old, proposed, "Created" if old is None else "Wrote")


def _write(ctx: ToolContext, real: Path, old: str | None, proposed: str | None, verb: str) -> ToolResult:
    """Writes the proposed content, or the user's version of it (B10), and describes the change."""
    modified = ctx.new_content is not None and ctx.new_content != proposed
    content = ctx.new_content if ctx.new_content is not None else proposed
    if content is None:  # pragma: no cover - callers pass one of the two
        raise ToolFailure("there is no content to write", "invalid_arguments")
    atomic_write(real, content)  # a crash leaves the old file or the new one (issue 10 item 1)
    display = ctx.workspace.display(real)
    text = f"{verb} {display} ({count_lines(content)} lines)."
    if modified:
        text += (
            " The user modified the proposed content before it was written; read the file again "
            "before editing it further."
        )
    diff: FileDiff = file_diff(ctx.workspace, real, old, content)
    return ToolResult(text=text, diff=diff, data={"path": display, "user_modified": modified})


class Edit(Tool):
    name = "edit"
    description = (
        "Replace exact text in a file. `old_string` must match the file's current content exactly "
        "(whitespace and indentation included) and, unless `replace_all` is true, exactly once: include "
        "enough surrounding lines to make it unique. Read the file first. To create a new file, give "
        "an empty `old_string` and the content as `new_string`. The user may be shown a diff and may "
        "change the result before it is written."
    )
    parameters = {  # noqa: RUF012 - a read-only schema shared by all instances
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "The file to change, relative to the workspace root (or absolute inside it).",
            },
            "old_string": {
                "type": "string",
                "description": "The exact text to replace. Empty only to create a file that does not exist.",
            },
            "new_string": {"type": "string", "description": "The text to put in its place."},
            "replace_all": {
                "type": "boolean",
                "description": "Replace every occurrence instead of exactly one. Default false.",
            },
        },
        "required": ["path", "old_string", "new_string"],
        "additionalProperties": False,
    }
    kind = ToolKind.EDIT

    def describe(self, args: dict[str, Any]) -> str:
        return f"Edit {args.get('path', '')}"

    def _plan(self, args: dict[str, Any], ctx: ToolContext) -> tuple[Path, str | None, str, int]:
        """(real path, old content or None, new content, replacements) or a ToolFailure."""
        path = str_arg(args, "path")
        old_string = str_arg(args, "old_string", allow_empty=True)
        new_string = str_arg(args, "new_string", allow_empty=True)
        replace_all = bool_arg(args, "replace_all", False)
        real = ctx.workspace.resolve(path)
        if real.is_dir():
            raise ToolFailure(f"{path!r} is a directory; give a file path", "is_directory")
        if not real.exists():
            if old_string == "":
                return real, None, new_string, 1
            raise ToolFailure(
                f"{path!r} does not exist. To create it, call edit with an empty old_string "
                "(or use write_file).",
                "not_found",
            )
        if is_binary(real):
            raise ToolFailure(f"{path!r} is a binary file; it cannot be edited", "binary_file")
        content = read_text(real)
        if old_string == "":
            raise ToolFailure(
                f"{path!r} already exists; an empty old_string only creates new files. Give the text "
                "to replace, or use write_file to replace the whole file.",
                "file_exists",
            )
        if old_string == new_string:
            raise ToolFailure(
                "old_string and new_string are the same; nothing would change", "edit_no_change"
            )
        count = content.count(old_string)
        if count == 0 and "\r\n" in content and "\r\n" not in old_string and "\n" in old_string:
            # The file has Windows line endings and the model wrote Unix ones.
            old_string = old_string.replace("\n", "\r\n")
            new_string = new_string.replace("\r\n", "\n").replace("\n", "\r\n")
            count = content.count(old_string)
        if count == 0:
            raise ToolFailure(
                f"old_string not found in {path}; read the file again and copy the exact text to replace "
                "(whitespace and indentation included).",
                "edit_no_match",
            )
        if count > 1 and not replace_all:
            raise ToolFailure(
                f"old_string found {count} times in {path}; give more surrounding context to make it "
                "unique, or set replace_all to true to replace every occurrence.",
                "edit_multiple_matches",
            )
        new = (
            content.replace(old_string, new_string)
            if replace_all
            else content.replace(old_string, new_string, 1)
        )
        return real, content, new, count if replace_all else 1

    async def confirmation(self, args: dict[str, Any], ctx: ToolContext) -> ConfirmationDetails:
        real, old, new, _n = self._plan(args, ctx)
        return file_diff(ctx.workspace, real, old, new)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        if ctx.new_content is not None:
            # The user's whole new file replaces the proposal; the edit need not apply any more.
            path = str_arg(args, "path")
            real = ctx.workspace.resolve(path)
            if real.is_dir():
                raise ToolFailure(f"{path!r} is a directory; give a file path", "is_directory")
            old = read_text(real) if real.exists() else None
            try:
                proposed: str | None = self._plan(args, ctx)[2]
            except ToolFailure:
                proposed = None  # the edit no longer applies: whatever the user wrote is theirs
            return _write(ctx, real, old, proposed, "Edited" if old is not None else "Created")
        real, old, new, n = self._plan(args, ctx)
        result = _write(ctx, real, old, new, "Created" if old is None else "Edited")
        if old is not None:
            result.text = result.text.rstrip(".") + f": replaced {n} occurrence{'s' if n != 1 else ''}."
        return result


class ListDirectory(Tool):
    name = "list_directory"
    description = (
        "List a directory of the workspace: directories first (marked with a trailing `/`), then files "
        "with their sizes; symlinks show their target. `.git` is left out. Use glob to find files "
        "recursively."
    )
    parameters = {  # noqa: RUF012 - a read-only schema shared by all instances
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "The directory, relative to the workspace root. Default: the root.",
            },
            "ignore": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Glob patterns of entry names to leave out, e.g. `*.pyc`.",
            },
        },
        "required": [],
        "additionalProperties": False,
    }
    kind = ToolKind.READ

    def describe(self, args: dict[str, Any]) -> str:
        return f"List {args.get('path') or '.'}"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = opt_str_arg(args, "path", ".") or "."
        ignore = str_list_arg(args, "ignore", required=False)
        real = ctx.workspace.resolve(path, must_exist=True)
        if not real.is_dir():
            raise ToolFailure(
                f"{path!r} is a file, not a directory; use read_file to read it", "not_a_directory"
            )
        return await asyncio.to_thread(self._list, ctx.workspace, real, ignore)

    def _list(self, workspace: Workspace, real: Path, ignore: list[str]) -> ToolResult:
        dirs: list[str] = []
        files: list[str] = []
        entries: list[dict[str, Any]] = []
        try:
            scanned = sorted(os.scandir(real), key=lambda e: e.name)
        except OSError as e:
            raise ToolFailure(f"cannot list {workspace.display(real)}: {e.strerror}", "os_error") from e
        for entry in scanned:
            if (
                entry.name == ".git"
                or is_temp_name(entry.name)
                or any(glob_match(p, entry.name) for p in ignore)
            ):
                continue
            try:
                if entry.is_symlink():
                    target = Path(os.path.realpath(entry.path))
                    where = (
                        workspace.display(target) if workspace.contains(target) else "outside the workspace"
                    )
                    is_dir = workspace.contains(target) and target.is_dir()
                    line = f"{entry.name}{'/' if is_dir else ''} -> {where}"
                    (dirs if is_dir else files).append(line)
                    entries.append({"name": entry.name, "type": "symlink", "target": where})
                elif entry.is_dir(follow_symlinks=False):
                    dirs.append(f"{entry.name}/")
                    entries.append({"name": entry.name, "type": "directory"})
                else:
                    size = entry.stat(follow_symlinks=False).st_size
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
    parameters = {  # noqa: RUF012 - a read-only schema shared by all instances
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "The glob pattern to match file paths against."},
            "path": {
                "type": "string",
                "description": "Directory to search from (relative to the workspace root; default: root).",
            },
            "sort": {
                "type": "string",
                "enum": ["mtime", "name"],
                "description": "`mtime` (newest first, the default) or `name`.",
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }
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
        start = ctx.workspace.resolve(path, must_exist=True)
        if not start.is_dir():
            raise ToolFailure(f"{path!r} is not a directory", "not_a_directory")
        return await asyncio.to_thread(self._glob, ctx.workspace, pattern, str(start), sort == "mtime")

    def _glob(self, workspace: Workspace, pattern: str, start: str, by_mtime: bool) -> ToolResult:
        base, rest = split_glob(workspace, pattern, start)
        if not base.is_dir():
            # A pattern without wildcards naming one file.
            matches = [base] if base.is_file() else []
        else:
            skip = explicit_skip_dirs(pattern)
            matches = [
                p
                for p in walk_files(base, skip_dirs=skip, follow_file_links=True)
                if glob_match(rest, rel_posix(p, base)) and workspace.contains(p)
            ]
        if by_mtime:

            def mtime(p: Path) -> float:
                try:
                    return p.stat().st_mtime
                except OSError:
                    return 0.0

            matches.sort(key=lambda p: (-mtime(p), str(p)))
        else:
            matches.sort(key=lambda p: str(p))
        shown = [workspace.display(p) for p in matches[:GLOB_MAX_RESULTS]]
        where = workspace.display(Path(start))
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
    matches: list[tuple[str, int, str]] = []
    files = [base] if base.is_file() else walk_files(base, skip_dirs=SKIP_DIRS)
    for f in files:
        if include and base.is_dir() and not glob_match(include, rel_posix(f, base), basename=True):
            continue
        try:
            if f.stat().st_size > GREP_MAX_FILESIZE:
                continue
            data = f.read_bytes()
        except OSError:
            continue
        if b"\x00" in data:
            continue
        display = workspace.display(f)
        for n, line in enumerate(data.decode("utf-8", errors="replace").split("\n"), start=1):
            if regex.search(line.rstrip("\r")):
                matches.append((display, n, _clip(line)))
                if len(matches) > GREP_MAX_MATCHES:
                    return matches[:GREP_MAX_MATCHES], True
    return matches, False


async def _grep_rg(
    rg: str,
    workspace: Workspace,
    pattern: str,
    base: Path,
    include: str | None,
    ignore_case: bool,
) -> tuple[list[tuple[str, int, str]], bool]:
    cmd = [
        rg,
        "--json",
        "--no-config",
        "--no-ignore",
        "--hidden",
        "--sort",
        "path",
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
    cmd += ["--", str(base)]
    proc = await asyncio.create_subprocess_exec(
        *cmd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=64 * 1024 * 1024,
    )
    assert proc.stdout is not None and proc.stderr is not None
    matches: list[tuple[str, int, str]] = []
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
                matches.append((workspace.display(Path(file)), int(data["line_number"]), _clip(line)))
                if len(matches) > GREP_MAX_MATCHES:
                    capped = True
                    break
            if capped:
                proc.kill()
            stderr = (await proc.stderr.read()).decode("utf-8", errors="replace")
            code = await proc.wait()
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
    if code == 2 and not matches and "regex" in stderr.lower():
        raise _RgUnsupported(stderr)
    return matches[:GREP_MAX_MATCHES], capped


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
    parameters = {  # noqa: RUF012 - a read-only schema shared by all instances
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "The regular expression to search for."},
            "path": {
                "type": "string",
                "description": "Directory or file to search (relative to the workspace root; default: root).",
            },
            "include": {
                "type": "string",
                "description": "Only search files matching this glob, e.g. `*.py` or `*.{ts,tsx}`.",
            },
            "ignore_case": {"type": "boolean", "description": "Match case-insensitively. Default false."},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }
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
        base = ctx.workspace.resolve(path, must_exist=True)
        rg = ripgrep()
        engine = "python"
        matches: list[tuple[str, int, str]]
        if rg:
            try:
                matches, capped = await _grep_rg(rg, ctx.workspace, pattern, base, include, ignore_case)
                engine = "ripgrep"
            except _RgUnsupported:
                matches, capped = await asyncio.to_thread(_grep_python, ctx.workspace, regex, base, include)
        else:
            matches, capped = await asyncio.to_thread(_grep_python, ctx.workspace, regex, base, include)
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
