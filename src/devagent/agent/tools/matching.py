"""Finding the lines an edit or a patch replaces, exactly first and then tolerating the ways a
model's copy of a file goes wrong, and writing the replacement in the file's own style.

A model quotes the file it wants to change from memory of what it read. The quote is often right
but for details that carry no meaning to it: trailing whitespace dropped, the block indented one
level off (it quoted a method as if it stood alone), tabs written as spaces, typographic quotes
and dashes where the file has ASCII ones, Unix line endings for a Windows file. Each of those
makes an exact search fail although there is no doubt where the quote belongs.

`seek` looks for a quote (a list of lines) among a file's lines in passes, each looser than the
one before: the lines as they are (line endings aside), then ignoring trailing whitespace, then
ignoring indentation as long as the quote's indentation differs from the file's by one consistent
shift (tabs counted at a width that makes it consistent), then reading typographic quotes and
dashes as ASCII. The first pass that finds the quote decides: one place is a match, several are
ambiguous and refused. A match records what it tolerated, so the result can say so, and
`adapt` writes the replacement lines the way the file has them: lines the model did not change
keep the file's text, changed lines are re-indented by the same shift in the file's tabs or
spaces, and their quotes read as ASCII when the quote's were.

Nothing here is written to disk: the callers (the `edit` and `apply_patch` tools) decide.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from devagent.agent.tools.base import ToolFailure

# Typographic punctuation a model writes for ASCII, one character for one (so positions stay).
_PUNCTUATION = str.maketrans(
    {
        "\u2018": "'",  # ‘
        "\u2019": "'",  # ’
        "\u201a": "'",  # ‚
        "\u201b": "'",  # ‛
        "\u2032": "'",  # ′
        "\u201c": '"',  # “
        "\u201d": '"',  # ”
        "\u201e": '"',  # „
        "\u201f": '"',  # ‟
        "\u2033": '"',  # ″
        "\u2010": "-",  # ‐
        "\u2011": "-",  # ‑
        "\u2012": "-",  # ‒
        "\u2013": "-",  # –
        "\u2014": "-",  # —
        "\u2015": "-",  # ―
        "\u2212": "-",  # −
        "\u00a0": " ",  # no-break space
        "\u202f": " ",  # narrow no-break space
    }
)

TAB_WIDTHS = (4, 8, 2)

# What a match may tolerate, as the result names it.
LINE_ENDINGS = "line endings"
TRAILING_WHITESPACE = "trailing whitespace"
INDENTATION = "indentation"
TABS = "tabs against spaces"
PUNCTUATION = "typographic quotes and dashes"

# The passes, loosest last, and what each may tolerate beyond the one before.
_PASSES = ("exact", "trailing", "indent", "punctuation")


def ascii_punctuation(text: str) -> str:
    return text.translate(_PUNCTUATION)


def split_lines(text: str) -> list[tuple[str, str]]:
    """The lines of `text` as (body, terminator): "\\r\\n", "\\n", or "" for a last line without
    one. Only "\\n" ends a line (a form feed or U+2028 inside a line stays in it)."""
    out: list[tuple[str, str]] = []
    pieces = text.split("\n")
    for piece in pieces[:-1]:
        if piece.endswith("\r"):
            out.append((piece[:-1], "\r\n"))
        else:
            out.append((piece, "\n"))
    if pieces[-1]:
        out.append((pieces[-1], ""))
    return out


def quote_lines(text: str) -> tuple[list[str], bool]:
    """A quote's lines (carriage returns at their ends dropped) and whether it ends with a line
    break."""
    lines = [body for body, _ in split_lines(text)]
    return lines, text.endswith("\n")


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _width(indent: str, tab: int) -> int:
    col = 0
    for ch in indent:
        col = (col // tab + 1) * tab if ch == "\t" else col + 1
    return col


def _key(line: str, pass_: str) -> str:
    if pass_ == "exact":
        return line
    if pass_ == "trailing":
        return line.rstrip()
    if pass_ == "indent":
        return line.strip()
    return ascii_punctuation(line).strip()


@dataclass(frozen=True, slots=True)
class Shift:
    """How the quote's indentation maps onto the file's: `delta` columns added (at `tab` columns
    a tab), written with tabs when `tabs` (the file's lines indent with them)."""

    delta: int
    tab: int
    tabs: bool

    def render(self, width: int) -> str:
        """Indentation `width` columns wide, in the file's tabs or spaces."""
        return "\t" * (width // self.tab) + " " * (width % self.tab) if self.tabs else " " * width

    def apply(self, line: str) -> str | None:
        """The line re-indented the file's way; None when it would need negative indentation."""
        if not line.strip():
            return line
        indent = _indent(line)
        width = _width(indent, self.tab) + self.delta
        if width < 0:
            return None
        return self.render(width) + line[len(indent) :]


class _Reindent:
    """New lines indented the way the file indents the quote's lines: an indentation the quote
    has becomes the file's for it (alignment spaces after tabs included); a deeper one, the file's
    for its longest such prefix and the rest as the model wrote it (in the file's tabs or spaces
    when the model's differ); any other is shifted by width. A line of whitespace only is not
    shifted, only written in the file's tabs or spaces when the model's differ. None (refused) for
    a line whose spaces may be tabs or may be alignment, where the file aligns with spaces after
    tabs."""

    def __init__(
        self, window: list[str], quote: list[str], shift: Shift, convert: bool, aligned: bool
    ) -> None:
        votes: dict[str, Counter[str]] = {}
        for f, q in zip(window, quote, strict=True):
            if f.strip() and q.strip():
                votes.setdefault(_indent(q), Counter())[_indent(f)] += 1
        self.known = {q: c.most_common(1)[0][0] for q, c in votes.items()}
        self.shift = shift
        self.convert = convert
        # The file aligns with spaces after its tabs: spaces the model wrote for tabs cannot be
        # told from alignment.
        self.aligned = shift.tabs and aligned

    def __call__(self, line: str) -> str | None:
        lead = _indent(line)
        if not line.strip():  # whitespace only: in the file's tabs or spaces, never shifted
            return self.shift.render(_width(line, self.shift.tab)) if self.convert and line else line
        if lead in self.known:
            return self.known[lead] + line[len(lead) :]
        if self.convert and self.aligned:
            return None  # the model's spaces: tab levels, or alignment? Not a guess to write.
        prefix = max((q for q in self.known if lead.startswith(q)), key=len, default=None)
        if prefix is None:
            return self.shift.apply(line)
        rest = lead[len(prefix) :]
        width = _width(rest, self.shift.tab)
        if self.convert:
            rest = self.shift.render(width)
        return self.known[prefix] + rest + line[len(lead) :]


@dataclass(slots=True)
class Match:
    """Where a quote was found: file lines `start` to `start + size`, what it tolerated, and how
    its indentation maps onto the file's (None: identical)."""

    start: int
    size: int
    tolerated: set[str] = field(default_factory=set)
    shift: Shift | None = None


class Ambiguous(Exception):
    """The quote matches several places in the loosest pass that found it."""

    def __init__(self, starts: list[int], size: int, tolerated: set[str]) -> None:
        super().__init__(f"{len(starts)} places")
        self.starts = starts
        self.size = size
        self.tolerated = tolerated


def _shift(window: list[str], quote: list[str]) -> Shift | bool | None:
    """The consistent shift from the quote's indentation to the window's: None when they are
    the same, False when none is consistent."""
    pairs = [(f, q) for f, q in zip(window, quote, strict=True) if f.strip() and q.strip()]
    if all(_indent(f) == _indent(q) for f, q in pairs):
        return None
    tabs = any("\t" in _indent(f) for f, _ in pairs)
    for tab in TAB_WIDTHS:
        deltas = {_width(_indent(f), tab) - _width(_indent(q), tab) for f, q in pairs}
        if len(deltas) == 1:
            return Shift(deltas.pop(), tab, tabs)
    return False


def _trailing(line: str) -> str:
    return line[len(line.rstrip()) :]


def _tolerated(window: list[str], quote: list[str], shift: Shift | None) -> set[str]:
    """What a window the quote matched differs from it in."""
    found: set[str] = set()
    for f, q in zip(window, quote, strict=True):
        if f == q:
            continue
        if _trailing(f) != _trailing(q):
            found.add(TRAILING_WHITESPACE)
        if f.strip() != q.strip():
            found.add(PUNCTUATION)  # the keys matched, so only the punctuation differs
    if shift is not None:
        pairs = [(f, q) for f, q in zip(window, quote, strict=True) if f.strip() and q.strip()]
        if shift.delta:
            found.add(INDENTATION)
        file_tabs = any("\t" in _indent(f) for f, _ in pairs)
        quote_tabs = any("\t" in _indent(q) for _, q in pairs)
        if file_tabs != quote_tabs or not shift.delta:
            found.add(TABS)
    return found


def _window_fits(window: list[str], quote: list[str], pass_: str) -> tuple[bool, Shift | None]:
    """Whether a window whose keys equal the quote's is a match in this pass (the indentation
    passes need a consistent shift)."""
    if pass_ in ("exact", "trailing"):
        return True, None
    shift = _shift(window, quote)
    if shift is False:
        return False, None
    assert shift is None or isinstance(shift, Shift)
    return True, shift


def seek(
    lines: list[str],
    quote: list[str],
    start: int = 0,
    *,
    first: bool = False,
    at_end: bool = False,
) -> Match | None:
    """The place of `quote` among `lines` (bodies without terminators) at or after `start`, by
    the passes above; None when no pass finds it. Several places in the pass that finds it raise
    `Ambiguous`, unless `first` (an anchored search: the first place after `start` is meant).
    `at_end`: the quote must end at the last line."""
    n = len(quote)
    if n == 0 or n > len(lines) - start:
        return None
    for pass_ in _PASSES:
        keys = [_key(line, pass_) for line in lines]
        qkeys = [_key(line, pass_) for line in quote]
        candidates = range(len(lines) - n, len(lines) - n + 1) if at_end else range(start, len(lines) - n + 1)
        found: list[Match] = []
        for i in candidates:
            if i < start or keys[i] != qkeys[0] or keys[i : i + n] != qkeys:
                continue
            window = lines[i : i + n]
            fits, shift = _window_fits(window, quote, pass_)
            if not fits:
                continue
            found.append(Match(i, n, _tolerated(window, quote, shift), shift))
            if first:
                break
        if len(found) == 1:
            return found[0]
        if found:
            raise Ambiguous([m.start for m in found], n, set().union(*(m.tolerated for m in found)))
    return None


def aligns(lines: list[str]) -> bool:
    """Whether some of these lines are indented with tabs and then spaces (alignment)."""
    return any(re.match(r"\t+ ", line) for line in lines)


def adapt(
    window: list[str], quote: list[str], new: list[str], match: Match, *, aligned: bool = False
) -> tuple[list[str], list[int]] | None:
    """The replacement lines for a matched window, the file's way: a new line the model left as
    it was in its quote is the file's own line; the others are re-indented the way the file
    indents the quote (`_Reindent`) and, when the match read typographic punctuation as ASCII,
    read the same way (`aligned`: the file aligns with spaces after tabs somewhere). Also the
    index in `window` of the line each output line is (-1 for new ones). None when a new line
    cannot be re-indented without guessing (`_Reindent`)."""
    out: list[str] = []
    origin: list[int] = []
    punct = PUNCTUATION in match.tolerated
    reindent = (
        _Reindent(window, quote, match.shift, TABS in match.tolerated, aligned) if match.shift else None
    )
    ops = difflib.SequenceMatcher(None, quote, new, autojunk=False).get_opcodes()
    for tag, i1, _i2, j1, j2 in ops:
        for k in range(j1, j2):
            if tag == "equal":
                out.append(window[i1 + k - j1])
                origin.append(i1 + k - j1)
                continue
            line = ascii_punctuation(new[k]) if punct else new[k]
            if reindent is not None:
                shifted = reindent(line)
                if shifted is None:
                    return None
                line = shifted
            out.append(line)
            origin.append(-1)
    return out, origin


def dominant_terminator(lines: list[tuple[str, str]]) -> str:
    """The line ending most of these lines have ("\\n" when none has one)."""
    counts = Counter(term for _, term in lines if term)
    return "\r\n" if counts["\r\n"] > counts["\n"] else "\n"


def describe(tolerated: set[str], shift: Shift | None) -> str:
    """What a match tolerated, in words, for the tool's result ("" for an exact one)."""
    parts: list[str] = []
    if LINE_ENDINGS in tolerated:
        parts.append("line endings (the file's CRLF kept)")
    if TRAILING_WHITESPACE in tolerated:
        parts.append("trailing whitespace (the file's kept on unchanged lines)")
    if INDENTATION in tolerated and shift is not None and shift.delta:
        n = abs(shift.delta)
        way = "deeper" if shift.delta > 0 else "shallower"
        parts.append(
            f"indentation (the file's is {n} column{'s' if n != 1 else ''} {way}; the new lines were "
            "re-indented the same way)"
        )
    if TABS in tolerated and shift is not None:
        style = "tabs" if shift.tabs else "spaces"
        parts.append(f"tabs against spaces (the file indents with {style}; the new lines do too)")
    if PUNCTUATION in tolerated:
        parts.append("typographic quotes and dashes (read as ASCII, in the new lines too)")
    return "; ".join(parts)


# --- a miss: the closest lines ------------------------------------------------------------------


def closest(lines: list[str], quote: list[str], limit: int = 2) -> list[tuple[int, float]]:
    """The starts of the windows of `lines` most like `quote` (as many lines), with their
    similarity (0..1), best first; at most `limit`, none below 0.5."""
    n = len(quote)
    if not lines or n == 0:
        return []
    n = min(n, len(lines))
    stripped = [ascii_punctuation(line).strip() for line in lines]
    target = "\n".join(ascii_punctuation(q).strip() for q in quote[:n])
    where: dict[str, list[int]] = {}
    for i, line in enumerate(stripped):
        if line:
            where.setdefault(line, []).append(i)
    votes: Counter[int] = Counter()
    for k, q in enumerate(ascii_punctuation(line).strip() for line in quote[:n]):
        for i in where.get(q, ()):
            votes[i - k] += 1
    last = len(lines) - n
    voted = {min(max(s + d, 0), last) for s, _ in votes.most_common(20) for d in (-1, 0, 1)}
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    matcher.set_seq2(target)

    def score(starts: Iterable[int]) -> list[tuple[int, float]]:
        out = []
        for start in starts:
            matcher.set_seq1("\n".join(stripped[start : start + n]))
            if matcher.real_quick_ratio() >= 0.5 and matcher.quick_ratio() >= 0.5:
                out.append((start, matcher.ratio()))
        return [x for x in out if x[1] >= 0.5]

    # Windows sharing a line with the quote first; else every window (every few on a huge file,
    # so a miss never takes long).
    scored = score(sorted(voted)) or score(range(0, last + 1, max(1, (last + 1) // 2000)))
    scored.sort(key=lambda x: (-x[1], x[0]))
    best: list[tuple[int, float]] = []
    for start, ratio in scored:
        if any(abs(start - b) < n for b, _ in best):
            continue
        best.append((start, ratio))
        if len(best) == limit:
            break
    return best


def numbered(lines: list[str], start: int, count: int) -> str:
    """File lines `start`.. (0-based) as `read_file` numbers them: the 1-based number, a tab,
    the line."""
    end = min(len(lines), start + count)
    return "\n".join(f"{i + 1:>6}\t{lines[i]}" for i in range(start, end))


def candidates_text(lines: list[str], quote: list[str]) -> str:
    """The closest windows of the file for a quote that was not found, numbered, or a sentence
    saying nothing is close."""
    found = closest(lines, quote)
    if not found:
        return "Nothing in the file is close to it."
    parts = []
    for start, ratio in found:
        n = min(len(quote), len(lines) - start)
        head = f"The closest in the file, {_span(start, n)} ({round(ratio * 100)}% similar):"
        parts.append(f"{head}\n{numbered(lines, start, n)}")
    return "\n".join(parts)


def _span(start: int, size: int) -> str:
    return f"line {start + 1}" if size == 1 else f"lines {start + 1}-{start + size}"


def places_text(lines: list[str], starts: list[int], size: int) -> str:
    """The lines of the places an ambiguous quote matches (the first few), numbered."""
    shown = [f"{_span(s, size)}:\n{numbered(lines, s, size)}" for s in starts[:3]]
    more = f"\n(and {len(starts) - 3} more)" if len(starts) > 3 else ""
    return "\n".join(shown) + more


# --- an edit: old_string replaced by new_string in a file's text -------------------------------


@dataclass(slots=True)
class Replaced:
    """An edit applied to a text: the new text, how many places, and what was tolerated (in
    words, "" when it matched exactly)."""

    text: str
    count: int
    tolerated: str = ""


_ALL_TOLERANCES = (
    "trailing whitespace, indentation, tabs against spaces, line endings, and typographic quotes and dashes"
)


def replace_in(content: str, old: str, new: str, *, replace_all: bool, path: str) -> Replaced:
    """`old` replaced by `new` in `content`: where `old` occurs exactly (once, or every time with
    `replace_all`), else where it occurs exactly but for the file's CRLF line endings, else where
    exactly one place matches it tolerantly (`seek`). Otherwise a ToolFailure the model can act
    on: the places it matches, or the closest lines of the file."""
    count = content.count(old)
    if count == 0 and "\r\n" in content and "\r\n" not in old and "\n" in old:
        crlf = old.replace("\n", "\r\n")
        if content.count(crlf):
            fixed = new.replace("\r\n", "\n").replace("\n", "\r\n")
            done = _replace_exact(content, crlf, fixed, content.count(crlf), replace_all, path)
            done.tolerated = describe({LINE_ENDINGS}, None)
            return done
    if count:
        return _replace_exact(content, old, new, count, replace_all, path)
    return _replace_tolerant(content, old, new, path)


def _replace_exact(content: str, old: str, new: str, count: int, replace_all: bool, path: str) -> Replaced:
    if count > 1 and not replace_all:
        raise ToolFailure(
            f"old_string found {count} times in {path}; give more surrounding context to make it "
            "unique, or set replace_all to true to replace every occurrence.",
            "edit_multiple_matches",
        )
    if replace_all:
        return Replaced(content.replace(old, new), count)
    return Replaced(content.replace(old, new, 1), 1)


def _replace_tolerant(content: str, old: str, new: str, path: str) -> Replaced:
    file = split_lines(content)
    bodies = [body for body, _ in file]
    quote, quote_nl = quote_lines(old)
    new_lines, new_nl = quote_lines(new)
    try:
        match = seek(bodies, quote)
    except Ambiguous as e:
        raise ToolFailure(
            f"old_string is not in {path} exactly, and ignoring {describe_kinds(e.tolerated)} it "
            f"matches {len(e.starts)} places:\n{places_text(bodies, e.starts, e.size)}\n"
            "Give more surrounding lines, copied exactly from the file, to make it unique.",
            "edit_multiple_matches",
        ) from None
    if match is None:
        raise ToolFailure(
            f"old_string not found in {path}, not even ignoring {_ALL_TOLERANCES}.\n"
            f"{candidates_text(bodies, quote)}\n"
            "Read the file again and copy the exact text to replace (whitespace and indentation "
            "included).",
            "edit_no_match",
        )
    window = file[match.start : match.start + match.size]
    adapted = adapt([b for b, _ in window], quote, new_lines, match, aligned=aligns(bodies))
    if adapted is None:
        raise ToolFailure(
            f"old_string matches lines {match.start + 1}-{match.start + match.size} of {path} only "
            f"ignoring {describe_kinds(match.tolerated)}, and new_string's indentation cannot be "
            "carried over to the file's without guessing (a line would need less than none, or the "
            "file aligns with spaces after tabs). Give old_string and new_string with the file's own "
            "indentation.",
            "edit_no_match",
        )
    if "\r\n" not in old and any(term == "\r\n" for _, term in window):
        match.tolerated.add(LINE_ENDINGS)
    lines, origin = adapted
    term = dominant_terminator(window)
    pieces = [
        line + (window[o][1] if o >= 0 and window[o][1] else term)
        for line, o in zip(lines, origin, strict=True)
    ]
    if pieces and not new_nl:
        pieces[-1] = lines[-1]
    start = sum(len(b) + len(t) for b, t in file[: match.start])
    end = start + sum(len(b) + len(t) for b, t in window)
    if not quote_nl:
        end -= len(window[-1][1])  # the quote stopped before its last line's break: keep it
    return Replaced(
        content[:start] + "".join(pieces) + content[end:], 1, describe(match.tolerated, match.shift)
    )


def describe_kinds(kinds: set[str]) -> str:
    order = (TRAILING_WHITESPACE, INDENTATION, TABS, LINE_ENDINGS, PUNCTUATION)
    named = [k for k in order if k in kinds] or [LINE_ENDINGS]
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]
