"""Lines as the model reads them: each prefixed by its number and a tab (`12\tdef f():`), the
form `read_file` returns and a write's result shows the edited region in."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

# Lines of context shown around each changed part of a file, and at most how many lines a
# write's result shows in all.
CONTEXT_LINES = 3
MAX_REGION_LINES = 60
MAX_REGION_LINE_CHARS = 300


def numbered(lines: Iterable[str], first: int) -> str:
    """Lines (with their line endings) prefixed by their numbers, from `first`."""
    return "".join(f"{n}\t{line}" for n, line in enumerate(lines, start=first))


def edited_region(old: str, new: str) -> str:
    """The parts of `new` that differ from `old`, each with a few lines of context, numbered as
    in `new`; parts apart are separated by a `...` line. Capped at MAX_REGION_LINES, with a note of
    what was left out. "" when nothing changed."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    # The common head and tail are cut first: the matcher then only sees the changed middle.
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    if head == len(a) == len(b):
        return ""
    matcher = difflib.SequenceMatcher(None, a[head : len(a) - tail], b[head : len(b) - tail], autojunk=False)
    spans: list[tuple[int, int]] = []  # [start, end) line indexes of `new` to show
    for opcode in matcher.get_opcodes():
        tag, _i1, _i2, j1, j2 = opcode
        if tag == "equal":
            continue
        start = max(0, head + j1 - CONTEXT_LINES)
        end = min(len(b), head + j2 + CONTEXT_LINES)
        if spans and start <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(end, spans[-1][1]))
        else:
            spans.append((start, end))
    return _render(b, spans)


def _render(lines: list[str], spans: list[tuple[int, int]]) -> str:
    out: list[str] = []
    shown = 0
    for k, (start, end) in enumerate(spans):
        if shown >= MAX_REGION_LINES:
            rest = sum(e - s for s, e in spans[k:])
            out.append(f"[... {rest} more lines of changed parts not shown; read the file to see them]\n")
            break
        if k:
            out.append("...\n")
        stop = min(end, start + MAX_REGION_LINES - shown)
        out.append(numbered((_cut(line) for line in lines[start:stop]), start + 1))
        if out[-1] and not out[-1].endswith("\n"):
            out.append("\n")
        shown += stop - start
        if stop < end:
            out.append(f"[... {end - stop} more lines not shown; read the file to see them]\n")
            break
    return "".join(out)


def _cut(line: str) -> str:
    if len(line) <= MAX_REGION_LINE_CHARS:
        return line
    ending = "\n" if line.endswith("\n") else ""
    return line[:MAX_REGION_LINE_CHARS] + "… [line cut]" + ending
