"""The patch format `apply_patch` takes (the "V4A" format OpenAI's models write), parsed, and an
update's chunks applied to a file's text.

    *** Begin Patch
    *** Add File: path            every following line starts with "+": the new file's lines
    *** Delete File: path
    *** Update File: path
    *** Move to: new/path         optional, right after Update File
    @@ def enclosing():           a chunk; the text after "@@" (optional) is a line of the file
                                  to jump to first; several "@@" lines jump in turn
     context line                 " " unchanged, "-" removed, "+" added
    -old line
    +new line
    *** End of File               optional: the chunk's lines end the file
    *** End Patch

Parsing is forgiving where nothing can be misread: spaces around the markers, a heredoc wrapper
(`<<'EOF'` ... `EOF`) around the patch, a first chunk without its "@@", an empty line standing
for an empty context line, a git-style hunk header (`@@ -12,7 +12,8 @@ def f():`). Everything
else is an error naming the line.

An update's chunks are found in the file in order, each after the one before, with the tolerant
matcher (`matching.seek`): exactly first, then ignoring trailing whitespace, then indentation,
then typographic punctuation. A chunk with "@@" lines is sought after the last of them and may be
the first of several places there (that is what the lines are for); one without must be the only
place. Lines the patch leaves unchanged keep the file's text and line endings; a file without a
final newline keeps lacking one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from devagent.agent.events import ToolErrorType
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.matching import (
    Ambiguous,
    Match,
    adapt,
    aligns,
    candidates_text,
    describe,
    describe_kinds,
    dominant_terminator,
    places_text,
    seek,
    split_lines,
)

BEGIN = "*** Begin Patch"
END = "*** End Patch"
ADD = "*** Add File: "
DELETE = "*** Delete File: "
UPDATE = "*** Update File: "
MOVE = "*** Move to: "
END_OF_FILE = "*** End of File"
_GIT_HEADER = re.compile(r"^-\d+(?:,\d+)? \+\d+(?:,\d+)? @@ ?(.*)$")


@dataclass(slots=True)
class Chunk:
    """One "@@" section of an update: the lines to jump to first, the old lines (context and
    removed) and the new lines (context and added), and whether they end the file."""

    anchors: list[str] = field(default_factory=list)
    old: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    at_end: bool = False
    line: int = 0  # the patch line it starts on (1-based)


@dataclass(slots=True)
class FileOp:
    action: Literal["add", "delete", "update"]
    path: str
    line: int  # the patch line of its header (1-based)
    content: str = ""  # an added file's text
    move_to: str | None = None
    chunks: list[Chunk] = field(default_factory=list)


def _invalid(message: str, line: int | None = None) -> ToolFailure:
    where = f" (patch line {line})" if line is not None else ""
    return ToolFailure(f"invalid patch{where}: {message}. Nothing was changed.", ToolErrorType.INVALID_PATCH)


def _unwrap(text: str) -> list[str]:
    """The patch's lines, a heredoc wrapper around it taken off."""
    lines = text.strip().split("\n")
    lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    if (
        len(lines) >= 4
        and lines[0].strip() in ("<<EOF", "<<'EOF'", '<<"EOF"')
        and lines[-1].strip().endswith("EOF")
    ):
        lines = lines[1:-1]
    return lines


_UNIFIED_FILE = re.compile(r"^(?:--- |\+\+\+ |diff --git )")
_UNIFIED_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")


def _unified_diff(lines: list[str]) -> ToolFailure | None:
    """The refusal of a unified diff (`--- a/x`, `+++ b/x`, `@@ -1,3 +1,4 @@`), saying how to
    write it as a patch of this form; None when the text is not one."""
    if not (any(_UNIFIED_FILE.match(x) for x in lines) and any(_UNIFIED_HUNK.match(x) for x in lines)):
        return None
    paths = [x[4:].strip().removeprefix("b/") for x in lines if x.startswith("+++ ")]
    headers = [f"*** Update File: {p}" for p in dict.fromkeys(paths) if p and p != "/dev/null"]
    named = f" Here: {', '.join(repr(h) for h in headers)}." if headers else ""
    return ToolFailure(
        "this is a unified diff (`--- a/...`, `+++ b/...`, `@@ -1,3 +1,4 @@`): apply_patch takes the "
        "V4A form instead, without `---`/`+++` lines; each file starts with '*** Update File: PATH' "
        f"(or '*** Add File: PATH', '*** Delete File: PATH').{named} For example:\n"
        "*** Begin Patch\n"
        "*** Update File: src/app.py\n"
        "@@ def greet():\n"
        "     context line\n"
        '-    print("Hi")\n'
        '+    print("Hello")\n'
        "*** End Patch\n"
        "Lines are ' ' context, '-' removed and '+' added as in a unified diff; the '@@' line names "
        "a line of the file above the change (or is bare). Nothing was changed.",
        ToolErrorType.INVALID_PATCH,
    )


def parse(text: str) -> list[FileOp]:
    """The file operations of a patch, or a ToolFailure ("invalid_patch") naming the line."""
    lines = _unwrap(text)
    if not lines or lines[0].strip() != BEGIN:
        raise _unified_diff(lines) or _invalid(f"the first line must be {BEGIN!r}", 1)
    if len(lines) < 2 or lines[-1].strip() != END:
        raise _invalid(f"the last line must be {END!r}", len(lines))
    ops: list[FileOp] = []
    i = 1
    last = len(lines) - 1
    while i < last:
        header = lines[i].strip()
        if not header:
            i += 1
            continue
        if header.startswith(ADD):
            op = FileOp("add", _path(header, ADD, i + 1), i + 1)
            i = _parse_added(lines, i + 1, last, op)
        elif header.startswith(DELETE):
            op = FileOp("delete", _path(header, DELETE, i + 1), i + 1)
            i += 1
        elif header.startswith(UPDATE):
            op = FileOp("update", _path(header, UPDATE, i + 1), i + 1)
            i = _parse_update(lines, i + 1, last, op)
        else:
            raise _unified_diff(lines[i:last]) or _invalid(
                f"{lines[i]!r} is not a file header; each file starts with '*** Add File: PATH', "
                "'*** Delete File: PATH' or '*** Update File: PATH'",
                i + 1,
            )
        ops.append(op)
    if not ops:
        raise _invalid("it changes no file")
    return ops


def _path(header: str, marker: str, line: int) -> str:
    path = header[len(marker) :].strip()
    if not path:
        raise _invalid(f"{marker.strip()!r} needs a path", line)
    return path


def _is_header(line: str) -> bool:
    s = line.strip()
    return s == END or any(s.startswith(m) for m in (ADD, DELETE, UPDATE))


def _parse_added(lines: list[str], i: int, last: int, op: FileOp) -> int:
    out: list[str] = []
    while i < last and not _is_header(lines[i]):
        if not lines[i].startswith("+"):
            raise _invalid(f"in an added file every line starts with '+'; got {lines[i]!r}", i + 1)
        out.append(lines[i][1:] + "\n")
        i += 1
    op.content = "".join(out)
    return i


def _parse_update(lines: list[str], i: int, last: int, op: FileOp) -> int:
    if i < last and lines[i].strip().startswith(MOVE):
        op.move_to = _path(lines[i].strip(), MOVE, i + 1)
        i += 1
    chunk: Chunk | None = None
    while i < last and not _is_header(lines[i]):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith("@@"):
            if chunk is None or chunk.old or chunk.new or chunk.at_end:
                chunk = Chunk(line=i + 1)
                op.chunks.append(chunk)
            anchor = _anchor(stripped)
            if anchor:
                chunk.anchors.append(anchor)
        elif stripped == END_OF_FILE:
            if chunk is None or not (chunk.old or chunk.new):
                raise _invalid(f"{END_OF_FILE!r} must follow a chunk's lines", i + 1)
            chunk.at_end = True
        else:
            if chunk is None or chunk.at_end:
                chunk = Chunk(line=i + 1)
                op.chunks.append(chunk)
            _chunk_line(chunk, line, i + 1)
        i += 1
    if not op.chunks or not any(c.old or c.new for c in op.chunks):
        raise _invalid(f"'*** Update File: {op.path}' has no changes", op.line)
    for c in op.chunks:
        if not (c.old or c.new):
            raise _invalid("a chunk ('@@') has no lines", c.line)
        if c.old == c.new:
            raise _invalid("a chunk changes nothing: it has no '+' or '-' line", c.line)
    return i


def _anchor(stripped: str) -> str:
    rest = stripped[2:].strip()
    git = _GIT_HEADER.match(rest)
    if git:  # "@@ -12,7 +12,8 @@ def f():": the text after the numbers
        return git.group(1).strip()
    return rest[:-2].rstrip() if rest.endswith("@@") else rest


def _chunk_line(chunk: Chunk, line: str, number: int) -> None:
    if line == "":
        chunk.old.append("")  # an empty line for an empty context line
        chunk.new.append("")
        return
    sign, body = line[0], line[1:]
    if sign == " ":
        chunk.old.append(body)
        chunk.new.append(body)
    elif sign == "-":
        chunk.old.append(body)
    elif sign == "+":
        chunk.new.append(body)
    else:
        raise _invalid(
            f"{line!r}: in an update every line starts with ' ' (context), '-' (removed) or '+' "
            "(added), or is an '@@' line",
            number,
        )


# --- applying an update to a file's text --------------------------------------------------------


@dataclass(slots=True)
class _Placed:
    start: int  # file line
    size: int
    lines: list[str]  # the replacement, without line endings
    origin: list[int]  # per replacement line: the file line it is, or -1 for a new one


def apply_update(content: str, chunks: list[Chunk], path: str) -> tuple[str, list[str]]:
    """The file's new text after the chunks, and what the matches tolerated (per chunk, in
    words); or a ToolFailure naming the chunk and the lines that were not found."""
    file = split_lines(content)
    bodies = [b for b, _ in file]
    cursor = 0
    aligned = aligns(bodies)
    placed: list[_Placed] = []
    notes: list[str] = []
    for n, chunk in enumerate(chunks, 1):
        which = f"chunk {n}" if len(chunks) > 1 else "the chunk"
        for anchor in chunk.anchors:
            found = seek(bodies, [anchor], cursor, first=True)
            if found is None:
                raise _not_found(
                    path, f"the line '@@ {anchor}' of {which} was", [anchor], bodies, cursor, anchor=True
                )
            cursor = found.start + 1
        if not chunk.old:
            at = cursor if chunk.anchors and not chunk.at_end else len(bodies)
            placed.append(_Placed(at, 0, list(chunk.new), [-1] * len(chunk.new)))
            cursor = at
            continue
        match, old, new = _seek_chunk(bodies, chunk, cursor, path, which)
        adapted = adapt(bodies[match.start : match.start + match.size], old, new, match, aligned=aligned)
        if adapted is None:
            raise ToolFailure(
                f"{path}: the lines of {which} match lines {match.start + 1}-{match.start + match.size} "
                f"only ignoring {describe_kinds(match.tolerated)}, and the indentation of its added lines "
                "cannot be carried over to the file's without guessing (a line would need less than "
                "none, or the file aligns with spaces after tabs). Give the lines with the file's own "
                "indentation. Nothing was changed.",
                ToolErrorType.PATCH_CONTEXT_NOT_FOUND,
            )
        lines, origin = adapted
        placed.append(
            _Placed(match.start, match.size, lines, [match.start + o if o >= 0 else -1 for o in origin])
        )
        if match.tolerated:
            notes.append(f"{which} tolerated {describe(match.tolerated, match.shift)}")
        cursor = match.start + match.size
    return _assemble(file, placed), notes


def _seek_chunk(
    bodies: list[str], chunk: Chunk, cursor: int, path: str, which: str
) -> tuple[Match, list[str], list[str]]:
    """Where a chunk's old lines are (at the end of the file first when it says so), and the
    old and new lines that matched: empty context lines at its end that the file lacks are
    dropped."""
    old, new = chunk.old, chunk.new
    while True:
        try:
            found = None
            if chunk.at_end:
                found = seek(bodies, old, cursor, first=bool(chunk.anchors), at_end=True)
            found = found or seek(bodies, old, cursor, first=bool(chunk.anchors))
        except Ambiguous as e:
            raise ToolFailure(
                f"{path}: the lines of {which} occur {len(e.starts)} times"
                f"{f' after line {cursor}' if cursor else ''}:\n{places_text(bodies, e.starts, e.size)}\n"
                "Add an '@@' line naming the class or function they are in, or more context lines, "
                "to tell which is meant. Nothing was changed.",
                ToolErrorType.PATCH_AMBIGUOUS,
            ) from None
        if found is not None:
            return found, old, new
        if len(old) > 1 and old[-1] == "" and new and new[-1] == "":
            old, new = old[:-1], new[:-1]
            continue
        raise _not_found(path, f"the lines of {which} were", chunk.old, bodies, cursor)


def _not_found(
    path: str, what: str, quote: list[str], bodies: list[str], cursor: int, *, anchor: bool = False
) -> ToolFailure:
    """`what` ("the lines of chunk 2 were") not found: the quote, and the closest lines."""
    after = f" after line {cursor}" if cursor else ""
    shown = "\n".join(quote)
    fix = (
        "After '@@' give a line of the file copied exactly (the class or function the change is in), "
        "or nothing."
        if anchor
        else "Read the file again and copy its current lines as the context (' ') and removed ('-') lines."
    )
    return ToolFailure(
        f"{path}: {what} not found{after}, not even ignoring trailing whitespace, "
        f"indentation, tabs against spaces and typographic quotes and dashes:\n{shown}\n"
        f"{candidates_text(bodies, quote)}\n{fix} Nothing was changed.",
        ToolErrorType.PATCH_CONTEXT_NOT_FOUND,
    )


def _assemble(file: list[tuple[str, str]], placed: list[_Placed]) -> str:
    """The file's lines with the chunks' replacements, each line ended the way the file ends
    its lines there."""
    out: list[tuple[str, str]] = []
    at = 0
    for p in placed:
        out += file[at : p.start]
        window = file[p.start : p.start + p.size]
        near = window or file[max(0, p.start - 1) : p.start + 1] or file
        term = dominant_terminator(near)
        for line, o in zip(p.lines, p.origin, strict=True):
            out.append((line, file[o][1] if o >= 0 and file[o][1] else term))
        at = p.start + p.size
    out += file[at:]
    if not out:
        return ""
    dominant = dominant_terminator(file)
    out = [(b, t or dominant) for b, t in out[:-1]] + [out[-1]]
    body, term = out[-1]
    ends_open = bool(file) and file[-1][1] == ""
    out[-1] = (body, "" if ends_open else (term or dominant))
    return "".join(b + t for b, t in out)
