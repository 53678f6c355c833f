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
ambiguous and refused. An edit's match found only at another indentation is refused too when, at
the quote's own indentation, a block reads as the quote with one line misremembered
(`indentation_rival`): the model may have meant that one. A match records what it tolerated, so
the result can say so, and `adapt` writes the replacement lines the way the file has them: lines
the model did not change keep the file's text (but for an edit's trailing whitespace: tolerance
relaxes the match, and new_string is written with the model's), changed lines are re-indented by
the same shift in the file's tabs or spaces, and their quotes read as ASCII when the quote's were.

Nothing here is written to disk: the callers (the `edit` and `apply_patch` tools) decide.
"""

from __future__ import annotations

import difflib
import operator
import re
from collections import Counter
from dataclasses import dataclass, field

from devagent.agent.events import ToolErrorType
from devagent.agent.tools.failure import ToolFailure
from devagent.common.errors import DevagentError

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


class Ambiguous(DevagentError):
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
    window: list[str],
    quote: list[str],
    new: list[str],
    match: Match,
    *,
    aligned: bool = False,
    as_given: bool = False,
) -> tuple[list[str], list[int]] | None:
    """The replacement lines for a matched window, the file's way: a new line the model left as
    it was in its quote is the file's own line; the others are re-indented the way the file
    indents the quote (`_Reindent`) and, when the match read typographic punctuation as ASCII,
    read the same way (`aligned`: the file aligns with spaces after tabs somewhere). `as_given`
    (an edit's new_string): a line left as it was keeps the model's trailing whitespace, not the
    file's, and one of whitespace only is the model's, like a changed line. Also the index in
    `window` of the line each output line is (-1 for new ones). None when a new line cannot be
    re-indented without guessing (`_Reindent`)."""
    out: list[str] = []
    origin: list[int] = []
    punct = PUNCTUATION in match.tolerated
    reindent = (
        _Reindent(window, quote, match.shift, TABS in match.tolerated, aligned) if match.shift else None
    )
    ops = difflib.SequenceMatcher(None, quote, new, autojunk=False).get_opcodes()
    for tag, i1, _i2, j1, j2 in ops:
        for k in range(j1, j2):
            kept = i1 + k - j1 if tag == "equal" else -1
            if kept >= 0 and not as_given:
                out.append(window[kept])
            elif kept >= 0 and window[kept].strip():
                out.append(window[kept].rstrip() + _trailing(new[k]))
            else:
                line = ascii_punctuation(new[k]) if punct else new[k]
                if reindent is not None:
                    shifted = reindent(line)
                    if shifted is None:
                        return None
                    line = shifted
                out.append(line)
            origin.append(kept)
    return out, origin


def dominant_terminator(lines: list[tuple[str, str]]) -> str:
    """The line ending most of these lines have ("\\n" when none has one)."""
    counts = Counter(term for _, term in lines if term)
    return "\r\n" if counts["\r\n"] > counts["\n"] else "\n"


def describe(tolerated: set[str], shift: Shift | None, *, as_given: bool = False) -> str:
    """What a match tolerated, in words, for the tool's result ("" for an exact one); `as_given`:
    the new text was written with the model's trailing whitespace (an edit's), not the file's."""
    parts: list[str] = []
    if LINE_ENDINGS in tolerated:
        parts.append("line endings (the file's CRLF kept)")
    if TRAILING_WHITESPACE in tolerated:
        kept = "new_string's written as given" if as_given else "the file's kept on unchanged lines"
        parts.append(f"trailing whitespace ({kept})")
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

# The search for the closest lines costs a bounded amount whatever the file and the quote. Windows
# that hold one of the quote's lines at its place come first (the old place of a quote with a line
# or two changed); else every window is ranked by the character triples a few of the quote's lines
# share with the window's lines at the same offsets (at most `_SAMPLED` quote lines, `_PAIR_BUDGET`
# line pairs in all). Only the best few windows of either are measured character by character, on
# at most `_MEASURED` lines each.
_SAMPLED = 8
_PAIR_BUDGET = 30_000
_SHORTLIST = 4
_MEASURED = 40
_COMMON = 50  # a line found more often than this in the file says nothing about the place
_TRIPLED = 200  # characters of a line whose triples are compared
_Triples = frozenset[tuple[str, str, str]]


def closest(lines: list[str], quote: list[str], limit: int = 2) -> list[tuple[int, float]]:
    """The starts of the windows of `lines` most like `quote` (as many lines), with their
    similarity (0..1), best first; at most `limit`, none below 0.5."""
    n = min(len(quote), len(lines))
    if n == 0:
        return []
    stripped = [ascii_punctuation(line).strip() for line in lines]
    target = [ascii_punctuation(q).strip() for q in quote[:n]]
    last = len(lines) - n
    found = _measured(_sharing_starts(stripped, target, last), stripped, target)
    if not found:
        triples = [_triples(line) for line in stripped]
        wanted = [_triples(line) for line in target]
        ranked, stride = _ranked_starts(triples, wanted, last)
        at = range(min(n, _MEASURED))
        settled = set()
        for s in ranked:  # the ranking scored every stride-th window: the best one near each
            near = range(max(0, s - stride), min(last, s + stride) + 1)
            settled.add(max(near, key=lambda t: (_shared(triples, wanted, t, at), -t)))
        found = _measured(sorted(settled), stripped, target)
    best: list[tuple[int, float]] = []
    for start, ratio in found:
        if any(abs(start - b) < n for b, _ in best):
            continue
        best.append((start, ratio))
        if len(best) == limit:
            break
    return best


def _measured(starts: list[int], stripped: list[str], target: list[str]) -> list[tuple[int, float]]:
    """These windows with their similarity to the quote, best first, none below 0.5."""
    n = len(target)
    scored = [(s, _similarity(stripped[s : s + n], target)) for s in starts]
    return sorted((x for x in scored if x[1] >= 0.5), key=lambda x: (-x[1], x[0]))


def _sharing_starts(stripped: list[str], target: list[str], last: int) -> list[int]:
    """At most `_SHORTLIST` window starts where most of the quote's lines are at their place,
    apart by at least half the quote (lines blank or common in the file left out)."""
    where: dict[str, list[int]] = {}
    for i, line in enumerate(stripped):
        if line:
            where.setdefault(line, []).append(i)
    votes: Counter[int] = Counter()
    for k, line in enumerate(target):
        found = where.get(line, ())
        if len(found) <= _COMMON:
            votes.update(min(max(i - k, 0), last) for i in found)
    return _pick(sorted(votes, key=lambda s: (-votes[s], s)), len(target))


def _ranked_starts(triples: list[_Triples], wanted: list[_Triples], last: int) -> tuple[list[int], int]:
    """At most `_SHORTLIST` window starts, most promising first, apart by at least half the
    quote, scored by `_shared` on a sample of the quote's lines; and the step between the windows
    scored (1 but on a huge file)."""
    windows = last + 1
    sample = _sample(wanted, max(2, min(_SAMPLED, _PAIR_BUDGET // windows)))
    if not sample:
        return [], 1
    stride = max(1, -(-(len(sample) * windows) // _PAIR_BUDGET))
    starts = range(0, windows, stride)
    scores = [0.0] * len(starts)
    for k in sample:
        want, size = wanted[k], len(wanted[k])
        column = triples[k : k + windows : stride]
        shares = [len(want & have) / (size if size > len(have) else len(have)) for have in column]
        scores = list(map(operator.add, scores, shares))
    order = sorted((j for j in range(len(starts)) if scores[j] > 0), key=lambda j: (-scores[j], j))
    return _pick([starts[j] for j in order], len(wanted)), stride


def _pick(ordered: list[int], n: int) -> list[int]:
    """The first `_SHORTLIST` of these starts that are apart by at least half the quote's `n`."""
    picked: list[int] = []
    gap = max(1, n // 2)
    for s in ordered:
        if all(abs(s - p) >= gap for p in picked):
            picked.append(s)
            if len(picked) == _SHORTLIST:
                break
    return picked


def _shared(triples: list[_Triples], wanted: list[_Triples], start: int, at: range) -> float:
    """How much the window at `start` shares with the quote on the quote lines `at`: per line, the
    share of character triples in common."""
    total = 0.0
    for k in at:
        want, have = wanted[k], triples[start + k]
        if want and have:
            total += len(want & have) / max(len(want), len(have))
    return total


def _sample(wanted: list[_Triples], size: int) -> list[int]:
    """Offsets of at most `size` non-blank quote lines, spread over the quote."""
    offsets = [k for k, line in enumerate(wanted) if line]
    if len(offsets) <= size:
        return offsets
    step = len(offsets) / size
    return [offsets[int(k * step)] for k in range(size)]


def _triples(line: str) -> _Triples:
    """The line's runs of three characters (of its first `_TRIPLED`), so that a word spelt
    differently still shares most of them; none for a blank line."""
    if not line:
        return frozenset()
    padded = f" {line[:_TRIPLED]} "
    return frozenset(zip(padded, padded[1:], padded[2:], strict=False))


def _similarity(window: list[str], quote: list[str]) -> float:
    """How alike two runs of lines are, as difflib's ratio of their texts joined by line breaks
    would say, but measured line by line (lines that differ paired in order) so that its cost
    stays bounded: at most `_MEASURED` lines of each are compared."""
    a = [line + "\n" for line in window[:_MEASURED]]
    b = [line + "\n" for line in quote[:_MEASURED]]
    a[-1], b[-1] = a[-1][:-1], b[-1][:-1]
    total = sum(map(len, a)) + sum(map(len, b))
    if total == 0:
        return 1.0
    matched = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            matched += sum(len(x) for x in a[i1:i2])
        elif tag == "replace":
            matched += sum(_chars_matched(x, y) for x, y in zip(a[i1:i2], b[j1:j2], strict=False))
    return 2 * matched / total


def _chars_matched(x: str, y: str) -> int:
    """The characters two lines have in common: difflib's count for lines of ordinary length; for
    very long ones, counted in linear time in any order (an upper bound)."""
    if len(x) * len(y) > 40_000:
        return sum((Counter(x) & Counter(y)).values())
    return sum(m.size for m in difflib.SequenceMatcher(None, x, y, autojunk=False).get_matching_blocks())


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
    return _replace_tolerant(content, old, new, path, replace_all)


def _replace_exact(content: str, old: str, new: str, count: int, replace_all: bool, path: str) -> Replaced:
    if count > 1 and not replace_all:
        raise ToolFailure(
            f"old_string found {count} times in {path}; give more surrounding context to make it "
            "unique, or set replace_all to true to replace every occurrence.",
            ToolErrorType.EDIT_MULTIPLE_MATCHES,
        )
    if replace_all:
        return Replaced(content.replace(old, new), count)
    return Replaced(content.replace(old, new, 1), 1)


def _replace_tolerant(content: str, old: str, new: str, path: str, replace_all: bool) -> Replaced:
    file = split_lines(content)
    bodies = [body for body, _ in file]
    quote, quote_nl = quote_lines(old)
    new_lines, new_nl = quote_lines(new)
    try:
        match = seek(bodies, quote)
    except Ambiguous as e:
        if replace_all:
            raise ToolFailure(
                f"old_string not found in {path} exactly, and replace_all replaces only exact "
                f"occurrences. The closest lines, which differ from it in "
                f"{describe_kinds(e.tolerated)}:\n{places_text(bodies, e.starts, e.size)}\n"
                "Read the file again and copy the exact text to replace (whitespace and "
                "indentation included).",
                ToolErrorType.EDIT_NO_MATCH,
            ) from None
        raise ToolFailure(
            f"old_string is not in {path} exactly, and ignoring {describe_kinds(e.tolerated)} it "
            f"matches {len(e.starts)} places:\n{places_text(bodies, e.starts, e.size)}\n"
            "Give more surrounding lines, copied exactly from the file, to make it unique.",
            ToolErrorType.EDIT_MULTIPLE_MATCHES,
        ) from None
    if match is None:
        raise ToolFailure(
            f"old_string not found in {path}, not even ignoring {_ALL_TOLERANCES}.\n"
            f"{candidates_text(bodies, quote)}\n"
            "Read the file again and copy the exact text to replace (whitespace and indentation "
            "included).",
            ToolErrorType.EDIT_NO_MATCH,
        )
    rival = indentation_rival(bodies, quote, match)
    if rival is not None:
        raise _rival_failure(bodies, match, rival, path)
    window = file[match.start : match.start + match.size]
    adapted = adapt([b for b, _ in window], quote, new_lines, match, aligned=aligns(bodies), as_given=True)
    if adapted is None:
        raise ToolFailure(
            f"old_string matches lines {match.start + 1}-{match.start + match.size} of {path} only "
            f"ignoring {describe_kinds(match.tolerated)}, and new_string's indentation cannot be "
            "carried over to the file's without guessing (a line would need less than none, or the "
            "file aligns with spaces after tabs). Give old_string and new_string with the file's own "
            "indentation.",
            ToolErrorType.EDIT_NO_MATCH,
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
        content[:start] + "".join(pieces) + content[end:],
        1,
        describe(match.tolerated, match.shift, as_given=True),
    )


def _misquoted(window: list[str], quote: list[str]) -> bool:
    """Whether the quote reads as this window with one line misremembered: every other line the
    same, indentation included (trailing whitespace aside), and at least two such lines."""
    same = sum(1 for w, q in zip(window, quote, strict=True) if q.strip() and w.rstrip() == q.rstrip())
    differ = sum(1 for w, q in zip(window, quote, strict=True) if w.strip() != q.strip())
    return differ <= 1 and same >= 2


def indentation_rival(lines: list[str], quote: list[str], match: Match) -> tuple[int, float] | None:
    """When `match` was found only by shifting the quote's indentation: a place at the quote's own
    indentation that the quote reads as with one line misremembered (the model may have meant
    that one), as its start and similarity; else None."""
    if match.shift is None or not match.shift.delta:
        return None
    n = match.size
    for start, ratio in closest(lines, quote, limit=3):
        if abs(start - match.start) >= n and _misquoted(lines[start : start + n], quote):
            return start, ratio
    return None


def _rival_failure(lines: list[str], match: Match, rival: tuple[int, float], path: str) -> ToolFailure:
    start, ratio = rival
    n = match.size
    assert match.shift is not None
    way = "deeper" if match.shift.delta > 0 else "shallower"
    return ToolFailure(
        f"old_string is not in {path} exactly. Ignoring indentation it matches "
        f"{_span(match.start, n)}, indented {abs(match.shift.delta)} columns {way} than old_string; "
        f"but the text at {_span(start, n)}, at old_string's own indentation, is "
        f"{round(ratio * 100)}% like it. Which one is meant is not clear, so nothing was written. "
        "The two places:\n"
        f"{_span(match.start, n)}:\n{numbered(lines, match.start, n)}\n"
        f"{_span(start, n)}:\n{numbered(lines, start, n)}\n"
        "Copy the exact text of the place you mean (whitespace and indentation included).",
        ToolErrorType.EDIT_MULTIPLE_MATCHES,
    )


def describe_kinds(kinds: set[str]) -> str:
    order = (TRAILING_WHITESPACE, INDENTATION, TABS, LINE_ENDINGS, PUNCTUATION)
    named = [k for k in order if k in kinds] or [LINE_ENDINGS]
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]
