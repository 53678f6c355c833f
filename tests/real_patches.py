"""Replaying real upstream commits through `edit` and `apply_patch`, as they are and altered the
way models err, and judging each file written against the commit.

The data (`commits.jsonl`, described by the README beside it) lives outside the repository:
`$DEVAGENT_REAL_PATCHES` when set, else the first `shared/data/real-patches/commits.jsonl` found in
a folder above the checkout (`../shared/...` beside it first), else the machine's
`/work/shared/data/real-patches/commits.jsonl` (a clean clone elsewhere, as CI makes, finds it too).
Each record is one commit changing one file: `before`, `after` and the `git diff -U3` hunks as
`old`/`new` texts, each `old` unique in the text the hunks before it left.

A perturbation alters a hunk's `old` and `new` alike (the model's copy of the file and its new
lines): trailing whitespace stripped, indentation shifted one level (out where every line has a
level to lose, else in), the indentation's tabs and spaces swapped (a level of four spaces for a
tab), ASCII quotes made typographic. A replay's outcome for a record is one of: `first try` (every
hunk applied exactly and the file is right), `tolerated` (right, with some hunk matched
tolerantly), `refused` (a hunk was refused and the file is as the hunks before it left it), `wrong`
(a file was written that is not what it should be).

What the file should be, hunk by hunk: where the alteration left a hunk's old text as it was, the
edit is exact and its new text is written as given (typographic quotes in new lines, say); else
the commit's text, but for stripped trailing whitespace, where an edit writes the model's new text
as given (tolerance relaxes the match, not what is written) and a patch writes the lines it changes
as given and keeps the file's for its context lines.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections import Counter
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
_IN_SHARED = Path("shared", "data", "real-patches", "commits.jsonl")
# Where the data is looked for, in order, when $DEVAGENT_REAL_PATCHES is not set.
PLACES = (*(folder / _IN_SHARED for folder in ROOT.parents), Path("/work") / _IN_SHARED)


def _data() -> Path:
    if named := os.environ.get("DEVAGENT_REAL_PATCHES"):
        return Path(named)
    return next((p for p in PLACES if p.is_file()), PLACES[0])


DATA = _data()

PERTURBATIONS = ("none", "trailing whitespace", "indentation", "tabs and spaces", "typographic quotes")
OUTCOMES = ("first try", "tolerated", "refused", "wrong")
Record = dict[str, Any]


@cache
def records() -> tuple[Record, ...]:
    with DATA.open(encoding="utf-8") as f:
        return tuple(json.loads(line) for line in f)


def sample(n: int) -> list[Record]:
    """A deterministic sample of `n` records that covers every kind of file: CRLF and mixed line
    endings, tab indentation, non-ASCII text, a missing final newline, several hunks; the rest
    taken at even steps through the file."""
    recs = records()
    wanted: list[Callable[[Record], bool]] = [
        lambda r: r["style"]["newline"] == "mixed",
        lambda r: r["style"]["newline"] == "crlf" and len(r["hunks"]) > 1,
        lambda r: r["style"]["newline"] == "crlf",
        lambda r: r["style"]["indent"] == "tabs" and r["style"]["newline"] == "lf",
        lambda r: not r["before"].endswith("\n"),
        lambda r: any(ord(c) > 127 for h in r["hunks"] for c in h["old"] + h["new"]),
        lambda r: len(r["hunks"]) >= 8,
        lambda r: r["style"]["indent"] == "none",
    ]
    chosen: list[Record] = []
    for want in wanted:
        chosen.append(next(r for r in recs if want(r) and r not in chosen))
    step = max(1, len(recs) // max(1, n - len(chosen)))
    for r in recs[::step]:
        if len(chosen) >= n:
            break
        if r not in chosen:
            chosen.append(r)
    return chosen


# --- perturbations ------------------------------------------------------------------------------


def _lines(text: str) -> list[tuple[str, str]]:
    out = []
    for piece in re.findall(r"[^\n]*\n|[^\n]+$", text):
        body = piece.rstrip("\n")
        term = piece[len(body) :]
        if body.endswith("\r") and term:
            body, term = body[:-1], "\r\n"
        out.append((body, term))
    return out


def _unit(record: Record) -> str:
    return "\t" if record["style"]["indent"] == "tabs" else "    "


def _lead(body: str) -> str:
    return body[: len(body) - len(body.lstrip(" \t"))]


def _curly(body: str) -> str:
    out = []
    for i, c in enumerate(body):
        after_word = i > 0 and (body[i - 1].isalnum() or body[i - 1] in ")]}.,")
        if c == '"':
            out.append("\u201d" if after_word else "\u201c")
        elif c == "'":
            out.append("\u2019" if after_word else "\u2018")
        else:
            out.append(c)
    return "".join(out)


def _swap_tabs(body: str) -> str:
    lead = _lead(body)
    if "\t" in lead:
        new = lead.replace("\t", "    ")
    else:
        new = "\t" * (len(lead) // 4) + " " * (len(lead) % 4)
    return new + body[len(lead) :]


def _shift_direction(hunk: dict[str, str], unit: str) -> int:
    bodies = [b for text in (hunk["old"], hunk["new"]) for b, _ in _lines(text) if b.strip()]
    return -1 if all(b.startswith(unit) for b in bodies) else 1


def perturb(kind: str, text: str, unit: str, direction: int) -> str:
    """A hunk text as a model erring this way would write it."""
    out = []
    for body, term in _lines(text):
        if kind == "trailing whitespace":
            body = body.rstrip()
        elif kind == "indentation" and body.strip():
            body = body[len(unit) :] if direction < 0 else unit + body
        elif kind == "tabs and spaces":
            body = _swap_tabs(body)
        elif kind == "typographic quotes":
            body = _curly(body)
        out.append(body + term)
    return "".join(out)


def hunks(record: Record, kind: str) -> list[tuple[str, str]]:
    """The record's hunks (old, new) as the model writes them under a perturbation."""
    unit = _unit(record)
    out = []
    for h in record["hunks"]:
        d = _shift_direction(h, unit)
        out.append((perturb(kind, h["old"], unit, d), perturb(kind, h["new"], unit, d)))
    return out


def expected_texts(record: Record, kind: str, tool: str = "edit") -> list[str]:
    """The file's text after each hunk, as it should be, through `edit` or `apply_patch`."""
    text = record["before"]
    out = []
    for h, (old_p, new_p) in zip(record["hunks"], hunks(record, kind), strict=True):
        assert text.count(h["old"]) == 1
        if old_p != h["old"] and kind == "trailing whitespace" and tool == "edit" and old_p in text:
            # Stripped, it is still in the file exactly (a first line left blank now starts at the
            # end of the line before it): an exact edit there.
            text = text.replace(old_p, new_p, 1)
            out.append(text)
            continue
        if old_p == h["old"] or (kind == "trailing whitespace" and tool == "edit"):
            new = new_p  # an exact edit, or one whose match tolerated trailing whitespace: as given
        elif kind == "trailing whitespace":
            new = _context_kept(h["old"], old_p, new_p, h["new"])
        else:
            new = h["new"]
        text = text.replace(h["old"], new, 1)
        out.append(text)
    return out


def _context_kept(old: str, old_p: str, new_p: str, new: str) -> str:
    """A hunk's new text where the altered hunk's unchanged lines are the file's and its changed
    lines are as it gives them (each ended as the commit ends it)."""
    old_l, old_pl, new_pl, new_l = _lines(old), _lines(old_p), _lines(new_p), _lines(new)
    a = [b for b, _ in old_pl]
    b = [b for b, _ in new_pl]
    out = []
    for tag, i1, _i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        for k in range(j1, j2):
            if tag == "equal":
                body, term = old_l[i1 + k - j1]
            else:
                body, term = new_pl[k][0], new_l[k][1]
            out.append(body + term)
    return "".join(out)


def v4a(record: Record, kind: str) -> str:
    """The record's change as one apply_patch patch: an '@@' section per hunk."""
    lines = ["*** Begin Patch", f"*** Update File: {record['path']}"]
    for old, new in hunks(record, kind):
        a = [b for b, _ in _lines(old)]
        b = [b for b, _ in _lines(new)]
        lines.append("@@")
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
            if tag == "equal":
                lines += [" " + x for x in a[i1:i2]]
                continue
            lines += ["-" + x for x in a[i1:i2]]
            lines += ["+" + x for x in b[j1:j2]]
    lines.append("*** End Patch")
    return "\n".join(lines) + "\n"


# --- judging ------------------------------------------------------------------------------------


def judge(tolerated: bool, refused: bool, written: list[str], expected: list[str], before: str) -> str:
    """A replay's outcome. `written`: the file after each hunk that was applied (for a patch,
    one text); `refused`: the next one was refused and the file is still `written[-1]` (or
    `before`)."""
    for got, want in zip(written, expected, strict=False):
        if got != want:
            return "wrong"
    if refused:
        return "refused"
    return "tolerated" if tolerated else "first try"


def table(counts: dict[tuple[str, str], Counter[str]]) -> str:
    """The counts as a Markdown table: a row per tool and perturbation."""
    head = "| tool | alteration | " + " | ".join(OUTCOMES) + " |"
    rows = [head, "|" + " --- |" * (2 + len(OUTCOMES))]
    for (tool, kind), c in counts.items():
        rows.append(f"| {tool} | {kind} | " + " | ".join(str(c[o]) for o in OUTCOMES) + " |")
    return "\n".join(rows)


# --- replaying through the tool objects ---------------------------------------------------------


def _context(record: Record, root: Path) -> Any:
    """A session on `root` that has read the record's file (as read_file records it): the model
    edits what it read."""
    from devagent.agent.state import SessionState
    from devagent.agent.tools import freshness
    from devagent.agent.tools.base import ToolContext
    from devagent.agent.tools.workspace import Workspace

    # diagnostics and the syntax check off: what a replay checks is the file the tool writes. The
    # checker each write would start (a process per edit, thousands a run) is tested in
    # test_diagnostics.py; the syntax check (two compiles of the file per write, a quarter of a
    # replay's CPU) in test_checked_edits.py; both stay on in the replays through the real loop.
    ctx = ToolContext(
        workspace=Workspace([root]),
        state=SessionState(workspace_roots=[str(root)]),
        call_id="r",
        diagnostics="off",
        syntax_check="off",
    )
    real = ctx.workspace.resolve(record["path"])
    freshness.remember(ctx.state, real, freshness.mark_of(record["before"]))
    return ctx


def place(record: Record, root: Path) -> Path:
    """The record's `before` written (as bytes) at its path under `root`."""
    path = root / record["path"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(record["before"].encode("utf-8"))
    return path


async def replay_edit(record: Record, kind: str, root: Path) -> tuple[str, str]:
    """The record's hunks as `edit` calls, one per hunk, in order: the outcome, and the refusal's
    message when one was refused."""
    from devagent.agent.tools.failure import ToolFailure
    from devagent.agent.tools.write import Edit

    path, ctx, tool = place(record, root), _context(record, root), Edit()
    written: list[str] = []
    tolerated = False
    for old, new in hunks(record, kind):
        before = path.read_bytes()
        try:
            res = await tool.run({"path": record["path"], "old_string": old, "new_string": new}, ctx)
        except ToolFailure as e:
            if path.read_bytes() != before:
                return "wrong", e.message
            return judge(tolerated, True, written, expected_texts(record, kind), record["before"]), e.message
        tolerated = tolerated or "Not an exact match" in res.text
        written.append(path.read_bytes().decode("utf-8"))
    return judge(tolerated, False, written, expected_texts(record, kind), record["before"]), ""


async def replay_patch(record: Record, kind: str, root: Path) -> tuple[str, str]:
    """The record's hunks as one `apply_patch` call: the outcome, and the refusal's message."""
    from devagent.agent.tools.failure import ToolFailure
    from devagent.agent.tools.patch import ApplyPatch

    path, ctx = place(record, root), _context(record, root)
    try:
        res = await ApplyPatch().run({"input": v4a(record, kind)}, ctx)
    except ToolFailure as e:
        changed = path.read_bytes() != record["before"].encode("utf-8")
        return ("wrong" if changed else "refused"), e.message
    got = path.read_bytes().decode("utf-8")
    expected = expected_texts(record, kind, "apply_patch")[-1:]
    return judge("Not an exact match" in res.text, False, [got], expected, record["before"]), ""


async def replay_all(
    tool: str, root: Path, kinds: tuple[str, ...] = PERTURBATIONS
) -> tuple[dict[tuple[str, str], Counter[str]], list[tuple[str, str, str, str]]]:
    """Every record through one tool under each alteration, each in its own folder under
    `root`: the counts per (tool, alteration), and (alteration, record id, outcome, message) of
    every record refused or written wrong."""
    replay = replay_edit if tool == "edit" else replay_patch
    counts: dict[tuple[str, str], Counter[str]] = {}
    odd: list[tuple[str, str, str, str]] = []
    for k, kind in enumerate(kinds):
        c = counts.setdefault((tool, kind), Counter())
        for i, record in enumerate(records()):
            folder = root / f"{tool}-{k}-{i}"
            folder.mkdir()
            outcome, message = await replay(record, kind, folder)
            c[outcome] += 1
            if outcome in ("refused", "wrong"):
                odd.append((kind, record["id"], outcome, message))
    return counts, odd
