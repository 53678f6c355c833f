"""File tools: read, read many, write, edit, list, glob and grep. Every file and directory is
opened through the confined walk (`Workspace.locate`, `_confine`: from an open root descriptor,
openat2 RESOLVE_BENEATH or component by component with O_NOFOLLOW, the final open relative to the
parent's descriptor), and walks open each subdirectory relative to its parent and never enter
symlinked directories, so nothing outside the workspace roots is read, listed or written, even when
a directory is swapped for a symlink while a tool runs. A hard link inside
the workspace to a file outside it is read like any file (the names are one file and cannot be
told apart); it is never written through. The file IO runs in a thread, off the event loop.
Writes are atomic (`_util.atomic_write`: a temporary
file renamed over the target), so a crash never leaves a truncated file and a hard link to a file
outside the workspace is never written through; the temporary files a crash may leave behind are
hidden from list_directory, glob, grep and read_many_files."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import os
import re
import shutil
import stat
from pathlib import Path
from typing import Any, BinaryIO

from devagent.agent.events import ConfirmationDetails, FileDiff, ToolKind
from devagent.agent.tools._util import (
    BINARY_SNIFF_BYTES,
    GLOB_MAGIC,
    SKIP_DIRS,
    TEMP_PREFIX,
    atomic_write,
    bool_arg,
    count_lines,
    explicit_skip_dirs,
    file_diff,
    file_status,
    fs_failure,
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
    read_text,
    rel_posix,
    sniff_binary,
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


def _open_text(workspace: Workspace, path: str) -> BinaryIO:
    """The text file `path` open for reading (confined), or a ToolFailure."""
    try:
        f = open_file(workspace.absolute(path), workspace)
    except OSError as e:
        raise fs_failure(e, path) from e
    try:
        if sniff_binary(f):
            size = os.fstat(f.fileno()).st_size
            raise ToolFailure(
                f"{path!r} is a binary file ({human_size(size)}); only text files can be read", "binary_file"
            )
    except BaseException:
        f.close()
        raise
    return f


def _read_file(workspace: Workspace, path: str, offset: int, limit: int) -> tuple[str, int, int, int, bool]:
    with _open_text(workspace, path) as f:
        return _read_lines(f, offset, limit, MAX_BYTES)


def _read_lines(raw: BinaryIO, offset: int, limit: int, max_bytes: int) -> tuple[str, int, int, int, bool]:
    """Lines offset..offset+limit-1 (1-based) of a text file, at most max_bytes of them.
    Returns (text, first line shown, last line shown, total lines, some lines were cut)."""
    out: list[str] = []
    size = 0
    total = 0
    last = offset - 1
    cut_lines = False
    full = False
    with io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="") as f:
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
    parameters = parameters_schema(
        ["path"],
        path=parameter("string", "The file to read, relative to the workspace root (or absolute inside it)."),
        offset=parameter("integer", "The first line to read, counting from 1. Default: 1.", minimum=1),
        limit=parameter("integer", f"How many lines to read. Default and maximum: {MAX_LINES}.", minimum=1),
    )
    kind = ToolKind.READ

    def describe(self, args: dict[str, Any]) -> str:
        return f"Read {args.get('path', '')}"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = str_arg(args, "path")
        offset = int_arg(args, "offset", 1, minimum=1)
        limit = min(int_arg(args, "limit", MAX_LINES, minimum=1), MAX_LINES)
        files = ctx.backends.files
        if files is None:
            text, first, last, total, cut = await in_thread(_read_file, ctx.workspace, path, offset, limit)
        else:  # the client's view of the file (an editor's buffer, unsaved changes included)
            real = await in_thread(ctx.workspace.resolve, path)
            content = await files.read_text(real)
            if content is None:
                raise ToolFailure(f"{path!r} does not exist", "not_found")
            text, first, last, total, cut = _read_lines(
                io.BytesIO(content.encode("utf-8")), offset, limit, MAX_BYTES
            )
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
    matches of a glob. Returns (real path, display path) pairs; each is opened later through the
    confined walk again, so what the listing found cannot be swapped for something outside."""
    found: list[tuple[Path, str]] = []
    try:
        candidates = _candidates(workspace, entry)
    except ToolFailure as e:
        if e.type != "not_found":
            raise  # outside the workspace: refused, not skipped
        skipped.append(f"{entry} (does not exist)")
        return found
    if not candidates:
        skipped.append(f"{entry} (no files match)")
    for p, is_link in candidates:
        display = workspace.display(p)
        if any(glob_match(x, display, basename=True) for x in exclude):
            continue
        if is_link:
            try:
                real = workspace.resolve(p)
            except ToolFailure as e:
                if e.type == "path_outside_workspace":
                    skipped.append(f"{display} (a symlink pointing outside the workspace)")
                continue
            status = file_status(real, workspace)
            if status is None or not stat.S_ISREG(status.st_mode):
                continue  # a symlink to a directory or to nothing
            p = real
        found.append((p, display))
    return found


def _walk_candidates(
    workspace: Workspace, base: Path, skip_dirs: frozenset[str], match: str | None
) -> list[tuple[Path, bool]]:
    fd = open_walk(workspace, base)
    if fd is None:
        return []
    try:
        return [
            (e.path, e.is_link)
            for e in walk_files(fd, base, skip_dirs=skip_dirs, follow_file_links=True)
            if match is None or glob_match(match, rel_posix(e.path, base))
        ]
    finally:
        os.close(fd)


def _candidates(workspace: Workspace, entry: str) -> list[tuple[Path, bool]]:
    """(path, is a symlink to locate) of the files an entry names."""
    if GLOB_MAGIC.search(entry):
        base, rest = split_glob(workspace, entry)
        return _walk_candidates(workspace, base, explicit_skip_dirs(entry), rest)
    real = workspace.resolve(entry, must_exist=True)
    status = file_status(real, workspace)
    if status is not None and stat.S_ISDIR(status.st_mode):
        return _walk_candidates(workspace, real, SKIP_DIRS, None)
    return [(real, False)]


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
        budget = min(MAX_BYTES, MANY_MAX_TOTAL_BYTES - total)
        try:
            with open_file(real, workspace) as f:
                if sniff_binary(f):
                    skipped.append(f"{display} (binary)")
                    continue
                text, _first, last, lines, _cut = _read_lines(f, 1, MAX_LINES, budget)
        except OSError as e:  # changed since it was listed (removed, swapped for a symlink...)
            skipped.append(f"{display} ({fs_failure(e, display).message})")
            continue
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
    parameters = parameters_schema(
        ["paths"],
        paths=parameter(
            "array",
            "Files, directories or glob patterns (`*`, `?`, `**`, `{a,b}`) to read.",
            items={"type": "string"},
            minItems=1,
        ),
        exclude=parameter(
            "array",
            "Glob patterns of files to leave out, e.g. `*.lock` or `tests/**`.",
            items={"type": "string"},
        ),
    )
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
        text, data = await in_thread(_read_many, ctx.workspace, paths, exclude)
        return ToolResult(text=text, data=data)


class WriteFile(Tool):
    name = "write_file"
    description = (
        "Write a whole file in the workspace, replacing its content, or create it (and its parent "
        "directories). Give the complete content: nothing of the old file is kept. To change part of "
        "an existing file prefer `edit`. The user may be shown a diff and may change the content "
        "before it is written; the result says so when that happened."
    )
    parameters = parameters_schema(
        ["path", "content"],
        path=parameter(
            "string", "The file to write, relative to the workspace root (or absolute inside it)."
        ),
        content=parameter("string", "The complete new content of the file."),
    )
    kind = ToolKind.EDIT

    def describe(self, args: dict[str, Any]) -> str:
        return f"Write {args.get('path', '')}"

    def _plan(
        self, args: dict[str, Any], ctx: ToolContext, current: _Current | None = None
    ) -> tuple[Path, str | None, str]:
        path = str_arg(args, "path")
        content = str_arg(args, "content", allow_empty=True)
        real, old = current or _current(ctx.workspace, path)
        return real, old, content

    async def confirmation(self, args: dict[str, Any], ctx: ToolContext) -> ConfirmationDetails:
        current = await _client_current(ctx, args)
        real, old, new = await in_thread(self._plan, args, ctx, current)
        return file_diff(ctx.workspace, real, old, new)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        current = await _client_current(ctx, args)
        if current is not None:
            real, old, proposed = self._plan(args, ctx, current)
            return await _client_write(ctx, real, old, proposed, "Created" if old is None else "Wrote")

        def work() -> ToolResult:
            real, old, proposed = self._plan(args, ctx)
            return _write(ctx, real, old, proposed, "Created" if old is None else "Wrote")

        return await in_thread(work)


_Current = tuple[Path, str | None]


async def _client_current(ctx: ToolContext, args: dict[str, Any]) -> _Current | None:
    """With a client file backend: the real path the call names and the client's text of it (None
    when it does not exist). Without one: None (the tool reads the disk itself)."""
    files = ctx.backends.files
    if files is None:
        return None
    path = str_arg(args, "path")
    real = await in_thread(ctx.workspace.resolve, path)
    ctx.workspace.check_writable(real, path)
    status = await in_thread(file_status, real, ctx.workspace)
    if status is not None and stat.S_ISDIR(status.st_mode):
        raise ToolFailure(f"{path!r} is a directory; give a file path", "is_directory")
    return real, await files.read_text(real)


async def _client_write(
    ctx: ToolContext, real: Path, old: str | None, proposed: str | None, verb: str
) -> ToolResult:
    """`_write` through the client's file backend (the editor writes it, into its buffer)."""
    assert ctx.backends.files is not None
    content, modified = _content(ctx, proposed)
    await ctx.backends.files.write_text(real, content)
    return _written(ctx, real, old, content, modified, verb)


def _current(workspace: Workspace, path: str) -> tuple[Path, str | None]:
    """The real path a write would replace and its current text (None when it does not exist),
    read through the confined walk."""
    real = workspace.resolve(path)
    workspace.check_writable(real, path)
    status = file_status(real, workspace)
    if status is None:
        return real, None
    if stat.S_ISDIR(status.st_mode):
        raise ToolFailure(f"{path!r} is a directory; give a file path", "is_directory")
    try:
        return real, read_text(real, workspace)
    except FileNotFoundError:
        return real, None
    except OSError as e:
        raise fs_failure(e, path) from e


def _content(ctx: ToolContext, proposed: str | None) -> tuple[str, bool]:
    """What is written: the proposed content or the user's version of it, and whether the
    user changed it."""
    modified = ctx.new_content is not None and ctx.new_content != proposed
    content = ctx.new_content if ctx.new_content is not None else proposed
    if content is None:  # pragma: no cover - callers pass one of the two
        raise ToolFailure("there is no content to write", "invalid_arguments")
    return content, modified


def _write(ctx: ToolContext, real: Path, old: str | None, proposed: str | None, verb: str) -> ToolResult:
    """Writes the proposed content, or the user's version of it, and describes the change."""
    content, modified = _content(ctx, proposed)
    try:  # a crash leaves the old file or the new one; written through the confined walk
        atomic_write(real, content, ctx.workspace)
    except OSError as e:
        raise fs_failure(e, ctx.workspace.display(real)) from e
    return _written(ctx, real, old, content, modified, verb)


def _written(
    ctx: ToolContext, real: Path, old: str | None, content: str, modified: bool, verb: str
) -> ToolResult:
    display = ctx.workspace.display(real)
    n = count_lines(content)
    text = f"{verb} {display} ({n} line{'' if n == 1 else 's'})."
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
    parameters = parameters_schema(
        ["path", "old_string", "new_string"],
        path=parameter(
            "string", "The file to change, relative to the workspace root (or absolute inside it)."
        ),
        old_string=parameter(
            "string", "The exact text to replace. Empty only to create a file that does not exist."
        ),
        new_string=parameter("string", "The text to put in its place."),
        replace_all=parameter("boolean", "Replace every occurrence instead of exactly one. Default false."),
    )
    kind = ToolKind.EDIT

    def describe(self, args: dict[str, Any]) -> str:
        return f"Edit {args.get('path', '')}"

    def _plan(
        self, args: dict[str, Any], ctx: ToolContext, current: _Current | None = None
    ) -> tuple[Path, str | None, str, int]:
        """(real path, old content or None, new content, replacements) or a ToolFailure."""
        path = str_arg(args, "path")
        old_string = str_arg(args, "old_string", allow_empty=True)
        new_string = str_arg(args, "new_string", allow_empty=True)
        replace_all = bool_arg(args, "replace_all", False)
        real, content_or_none = current or _current(ctx.workspace, path)
        if content_or_none is None:
            if old_string == "":
                return real, None, new_string, 1
            raise ToolFailure(
                f"{path!r} does not exist. To create it, call edit with an empty old_string "
                "(or use write_file).",
                "not_found",
            )
        content = content_or_none
        if "\x00" in content[:BINARY_SNIFF_BYTES]:
            raise ToolFailure(f"{path!r} is a binary file; it cannot be edited", "binary_file")
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
        current = await _client_current(ctx, args)
        real, old, new, _n = await in_thread(self._plan, args, ctx, current)
        return file_diff(ctx.workspace, real, old, new)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        current = await _client_current(ctx, args)
        if current is None:
            return await in_thread(self._run, args, ctx)
        plan = self._change(args, ctx, current)
        result = await _client_write(ctx, *plan[:4])
        return self._say(result, plan[4], plan[1])

    def _run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        real, old, proposed, verb, n = self._change(args, ctx, None)
        return self._say(_write(ctx, real, old, proposed, verb), n, old)

    def _change(
        self, args: dict[str, Any], ctx: ToolContext, current: _Current | None
    ) -> tuple[Path, str | None, str | None, str, int | None]:
        """(real path, old content, proposed content, verb, replacements or None)."""
        if ctx.new_content is not None:
            # The user's whole new file replaces the proposal; the edit need not apply any more.
            path = str_arg(args, "path")
            real, old = current or _current(ctx.workspace, path)
            try:
                proposed: str | None = self._plan(args, ctx, (real, old))[2]
            except ToolFailure:
                proposed = None  # the edit no longer applies: whatever the user wrote is theirs
            return real, old, proposed, "Edited" if old is not None else "Created", None
        real, old, new, n = self._plan(args, ctx, current)
        return real, old, new, "Created" if old is None else "Edited", n

    @staticmethod
    def _say(result: ToolResult, n: int | None, old: str | None) -> ToolResult:
        if n is None:
            return result
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
