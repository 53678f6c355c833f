"""Reading tools: read_file and read_many_files. Every file is opened through the confined walk
(`Workspace.locate`, `_confine`), so nothing outside the workspace roots is read; the file IO runs
in a thread, off the event loop."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from devagent.agent.events import ToolErrorType, ToolKind
from devagent.agent.tools import freshness, media
from devagent.agent.tools._util import (
    GLOB_MAGIC,
    SKIP_DIRS,
    explicit_skip_dirs,
    file_status,
    fs_failure,
    glob_match,
    human_size,
    in_thread,
    int_arg,
    open_file,
    open_walk,
    parameter,
    parameters_schema,
    rel_posix,
    sniff_binary,
    split_glob,
    str_arg,
    str_list_arg,
    walk_files,
)
from devagent.agent.tools.base import Tool, ToolContext, ToolResult
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.remote_files import (
    FETCH_MAX_BYTES,
    Entry,
    SandboxFiles,
    is_regular,
    pruned,
    remote_files,
    within_batch,
)
from devagent.agent.tools.workspace import Workspace

if TYPE_CHECKING:
    from devagent.agent.state import SessionState

# Defaults of the read caps.
MAX_LINES = 2000
MAX_BYTES = 256 * 1024
MAX_LINE_CHARS = 2000
MANY_MAX_TOTAL_BYTES = 512 * 1024
MANY_MAX_FILES = 200


def _open(workspace: Workspace, path: str) -> tuple[Path, BinaryIO]:
    """The real path `path` names and the file open for reading (confined to the workspace and its
    read-only roots), or a ToolFailure."""
    try:
        with workspace.locate(workspace.absolute(path), readable=True) as loc:
            return loc.path, os.fdopen(loc.open_file(), "rb")
    except OSError as e:
        raise fs_failure(e, path) from e


@dataclass(slots=True)
class _Lines:
    """Some lines of a text: `text` (lines `first`..`last` of `total`), whether some were cut at
    MAX_LINE_CHARS, and the freshness mark of the whole text."""

    text: str
    first: int
    last: int
    total: int
    cut: bool
    mark: str


def _read_lines(raw: BinaryIO, offset: int, limit: int, max_bytes: int, *, numbers: bool = False) -> _Lines:
    """Lines offset..offset+limit-1 (1-based) of a text file, at most max_bytes of them, each
    prefixed by its number and a tab when `numbers`. The whole file is read (its lines counted,
    its mark taken)."""
    out: list[str] = []
    size = 0
    total = 0
    last = offset - 1
    cut_lines = False
    full = False
    mark = freshness.TextHash()
    with io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="") as f:
        for total, line in enumerate(f, start=1):
            mark.update(line)
            if total < offset or full:
                continue
            if total >= offset + limit:
                full = True
                continue
            if len(line) > MAX_LINE_CHARS:
                ending = "\n" if line.endswith("\n") else ""
                line = line[:MAX_LINE_CHARS] + f"… [line cut at {MAX_LINE_CHARS} characters]" + ending
                cut_lines = True
            if numbers:
                line = f"{total}\t{line}"
            encoded = len(line.encode("utf-8", errors="replace"))
            if size + encoded > max_bytes and out:
                full = True
                continue
            out.append(line)
            size += encoded
            last = total
    return _Lines("".join(out), offset, last, total, cut_lines, mark.mark())


@dataclass(slots=True)
class _Read:
    """What read_file read of a text: its lines, the real path whose mark they carry (None: a
    PDF's text, which no edit applies to) and a note to put first."""

    lines: _Lines
    real: Path | None = None
    note: str = ""


def _read_disk(ctx: ToolContext, path: str, offset: int, limit: int, paging: bool) -> _Read | ToolResult:
    """read_file on the disk: a text's lines, or an image or PDF (`_read_media`)."""
    real, f = _open(ctx.workspace, path)
    with f:
        return _read_open(ctx, f, os.fstat(f.fileno()).st_size, real, path, (offset, limit, paging))


def _read_open(
    ctx: ToolContext, f: BinaryIO, size: int, real: Path, path: str, part: tuple[int, int, bool]
) -> _Read | ToolResult:
    """read_file of the open file `f` (`size` bytes) that `path` names."""
    offset, limit, _paging = part
    kind = media.media_type(f.read(media.HEAD_BYTES))
    f.seek(0)
    if kind is not None:
        return _read_media(ctx, f, size, kind, path, part)
    if sniff_binary(f):
        raise ToolFailure(
            f"{path!r} is a binary file ({human_size(size)}); only text files, images and PDFs can be read",
            ToolErrorType.BINARY_FILE,
        )
    return _Read(_read_lines(f, offset, limit, MAX_BYTES, numbers=True), real)


async def _read_remote(
    ctx: ToolContext, files: SandboxFiles, path: str, part: tuple[int, int, bool]
) -> _Read | ToolResult:
    """read_file through the session's sandbox (its workspace is not on this host)."""
    real = files.resolve(path)
    data = await files.read_bytes(real, path)
    return await in_thread(_read_open, ctx, io.BytesIO(data), len(data), real, path, part)


def _read_media(
    ctx: ToolContext, f: BinaryIO, size: int, kind: str, path: str, part: tuple[int, int, bool]
) -> _Read | ToolResult:
    """An image or PDF: attached for the model, or a PDF's text (its lines `part` asks for)."""
    offset, limit, paging = part
    too_large = media.too_large(kind, size, path)
    if too_large is not None:
        raise too_large
    data = f.read()
    if kind != media.PDF:
        return media.image(data, kind, path, ctx.media)
    document = media.pdf_document(data, path, ctx.media, paging)
    if document is not None:
        return document
    pdf = media.pdf_text(data, path)
    lines = _read_lines(io.BytesIO(pdf.text.encode("utf-8")), offset, limit, MAX_BYTES, numbers=True)
    more = f" (only its first {pdf.pages_read} pages)" if pdf.pages_read < pdf.pages else ""
    note = (
        f"[{path}: PDF, {pdf.pages} page{'' if pdf.pages == 1 else 's'}; its text follows{more}, each "
        "page after a [page N] line (the layout, images and tables are not kept).]\n"
    )
    return _Read(lines, None, note)


async def _read_client(
    ctx: ToolContext, path: str, offset: int, limit: int, paging: bool
) -> _Read | ToolResult:
    """read_file through the client: its view of a text file (an editor's buffer, unsaved changes
    included); an image or PDF is read from the disk."""
    assert ctx.backends.files is not None
    real = await in_thread(ctx.workspace.resolve, path)
    if await in_thread(_media_on_disk, ctx.workspace, real):
        return await in_thread(_read_disk, ctx, path, offset, limit, paging)
    content = await ctx.backends.files.read_text(real)
    if content is None:
        raise ToolFailure(f"{path!r} does not exist", ToolErrorType.NOT_FOUND)
    raw = io.BytesIO(content.encode("utf-8", errors="surrogatepass"))
    lines = _read_lines(raw, offset, limit, MAX_BYTES, numbers=True)
    lines.mark = freshness.mark_of(content)  # the client's text exactly, as an edit will see it
    return _Read(lines, real)


def _media_on_disk(workspace: Workspace, real: Path) -> bool:
    try:
        with open_file(real, workspace) as f:
            return media.media_type(f.read(media.HEAD_BYTES)) is not None
    except (OSError, ToolFailure):
        return False


class ReadFile(Tool):
    name = "read_file"
    description = (
        "Read a file of the workspace. A text file comes back line by line, each line prefixed by its "
        "line number and a tab (`12\\tdef main():`, \\t being the tab); the prefix is not part of the "
        f"file, so never copy it into an edit. Large files are cut at {MAX_LINES} lines or "
        f"{MAX_BYTES // 1024} KiB; a header then says which lines were shown and which `offset` to pass "
        "to read on. Use `offset` (1-based first line) and `limit` (number of lines) to read part of a "
        "file. Images (PNG, JPEG, GIF, WebP) are shown to you when your model can see images; a PDF is "
        "attached whole when your model reads PDFs, else (or with offset or limit) its text is "
        "returned. Other binary files are refused. Read a file before you edit or overwrite it."
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
        paging = args.get("offset") is not None or args.get("limit") is not None
        if ctx.workspace.in_read_only_root(path):  # the server's own folders, never the client's
            got = await in_thread(_read_disk, ctx, path, offset, limit, paging)
        elif (remote := remote_files(ctx)) is not None:
            got = await _read_remote(ctx, remote, path, (offset, limit, paging))
        elif ctx.backends.files is None:
            got = await in_thread(_read_disk, ctx, path, offset, limit, paging)
        else:
            got = await _read_client(ctx, path, offset, limit, paging)
        if isinstance(got, ToolResult):
            return got
        result = _shown(path, got, offset)
        if got.real is not None:  # the session has seen this file: it may edit it
            freshness.remember(ctx.state, got.real, got.lines.mark)
        return result


def _shown(path: str, got: _Read, offset: int) -> ToolResult:
    """read_file's result for some lines of a text."""
    lines = got.lines
    if lines.total == 0:
        return ToolResult(text=got.note + "[the file is empty]", data={"path": path, "total_lines": 0})
    if offset > lines.total:
        raise ToolFailure(
            f"offset {offset} is past the end of {path!r}, which has {lines.total} lines",
            ToolErrorType.INVALID_ARGUMENTS,
        )
    truncated = lines.first > 1 or lines.last < lines.total
    header = got.note
    if truncated:
        more = ""
        if lines.last < lines.total:
            more = f" To read more, call read_file with offset={lines.last + 1}."
        header += f"[Showing lines {lines.first}-{lines.last} of {lines.total} of {path}.{more}]\n\n"
    if lines.cut:
        header += f"[Some lines longer than {MAX_LINE_CHARS} characters were cut.]\n\n"
    return ToolResult(
        text=header + lines.text,
        data={
            "path": path,
            "start_line": lines.first,
            "end_line": lines.last,
            "total_lines": lines.total,
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
        if e.type != ToolErrorType.NOT_FOUND:
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
                if e.type == ToolErrorType.PATH_OUTSIDE_WORKSPACE:
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


def _read_many(
    workspace: Workspace, state: SessionState, paths: list[str], exclude: list[str]
) -> tuple[str, dict[str, Any]]:
    skipped: list[str] = []
    files: list[tuple[Path, str]] = []
    seen: set[Path] = set()
    for entry in paths:
        for real, display in _expand(workspace, entry, exclude, skipped):
            if real not in seen:
                seen.add(real)
                files.append((real, display))
    return _shown_many(state, files, lambda real: open_file(real, workspace), skipped)


def _shown_many(
    state: SessionState, files: list[tuple[Path, str]], opener: Callable[[Path], BinaryIO], skipped: list[str]
) -> tuple[str, dict[str, Any]]:
    """read_many_files' result for the files listed, each opened by `opener`."""
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
            with opener(real) as f:
                if sniff_binary(f):
                    skipped.append(f"{display} (binary)")
                    continue
                got = _read_lines(f, 1, MAX_LINES, budget)
        except OSError as e:  # changed since it was listed (removed, swapped for a symlink...)
            skipped.append(f"{display} ({fs_failure(e, display).message})")
            continue
        freshness.remember(state, real, got.mark)
        text, last, lines = got.text, got.last, got.total
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


async def _read_many_remote(
    files: SandboxFiles, state: SessionState, paths: list[str], exclude: list[str]
) -> tuple[str, dict[str, Any]]:
    """read_many_files through the session's sandbox: the files listed by walks in it, read in
    one batch (a link one by one, which the sandbox resolves and confines)."""
    skipped: list[str] = []
    listed: list[tuple[Path, str]] = []
    sizes: dict[Path, int] = {}
    for entry in paths:
        for real, display, size in await _expand_remote(files, entry, exclude, skipped):
            if real not in sizes:
                sizes[real] = size
                listed.append((real, display))
    named = [Entry("f", "f", sizes[real], 0.0, real.relative_to(files.root).as_posix()) for real, _ in listed]
    wanted = within_batch(named[:MANY_MAX_FILES])
    if len(wanted) < len(named):  # not brought over: said to be left out
        rest = len(named) - len(wanted)
        skipped.append(
            f"{rest} more file(s) (over {FETCH_MAX_BYTES >> 20} MiB together; read them separately)"
        )
        listed = listed[: len(wanted)]
    got, _ = await files.fetch(files.root, wanted)
    for rel in wanted:
        if rel not in got:  # a link (or changed meanwhile): read alone, through the sandbox
            with contextlib.suppress(ToolFailure):
                got[rel] = await files.read_bytes(files.root / rel)

    def opener(real: Path) -> BinaryIO:
        data = got.get(real.relative_to(files.root).as_posix())
        if data is None:
            raise FileNotFoundError(errno.ENOENT, "no longer there or leads outside the workspace")
        return io.BytesIO(data)

    return await in_thread(_shown_many, state, listed, opener, skipped)


async def _expand_remote(
    files: SandboxFiles, entry: str, exclude: list[str], skipped: list[str]
) -> list[tuple[Path, str, int]]:
    """As `_expand`, by walks in the sandbox; each file with its size."""
    workspace = files.workspace
    match: str | None = None
    try:
        if GLOB_MAGIC.search(entry):
            base, match = split_glob(workspace, entry, resolve=files.resolve)
            skip = explicit_skip_dirs(entry)
        else:
            base, skip = files.resolve(entry), SKIP_DIRS
            status = await files.stat(base)
            if status is None:
                skipped.append(f"{entry} (does not exist)")
                return []
            if not stat.S_ISDIR(status.st_mode):
                return [(base, workspace.display(base), status.st_size)]
        entries = await files.walk(base, pruned(skip), entry)
    except ToolFailure as failed:
        if failed.type != ToolErrorType.NOT_FOUND:
            raise
        skipped.append(f"{entry} (does not exist)")
        return []
    found = []
    for e in sorted(entries, key=lambda e: e.rel.split("/")):
        if not is_regular(e) or (match is not None and not glob_match(match, e.rel)):
            continue
        real = base / e.rel
        display = workspace.display(real)
        if not any(glob_match(x, display, basename=True) for x in exclude):
            found.append((real, display, e.size))
    if not found:
        skipped.append(f"{entry} (no files match)")
    return found


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
        if (remote := remote_files(ctx)) is not None:
            text, data = await _read_many_remote(remote, ctx.state, paths, exclude)
        else:
            text, data = await in_thread(_read_many, ctx.workspace, ctx.state, paths, exclude)
        return ToolResult(text=text, data=data)
