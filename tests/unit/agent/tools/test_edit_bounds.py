"""A missed `edit` on a long file: the closest lines found at a bounded cost and still the right
ones; and what a tolerant match writes: the model's new_string as given, re-indented only where
the indentation shift was what was tolerated (real upstream changes replayed)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from devagent.agent.tools import builtin_tools
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.matching import replace_in
from tests import real_patches as rp
from tests.unit.agent.tools.test_tools import make_ctx


def _module(n: int) -> list[str]:
    """A Python module of `n` lines, every function different (names, numbers, calls)."""
    lines: list[str] = []
    k = 0
    while len(lines) < n:
        lines += [
            f"def handler_{k}(request, limit={k % 17}):",
            f'    """Handle request {k} within the limit."""',
            f"    items = fetch_items(request.user_{k % 7}, page={k % 5})",
            f"    total_{k} = sum(item.price * {k % 9 + 1} for item in items)",
            f"    if total_{k} > limit:",
            f'        raise ValueError("over the limit in handler {k}")',
            f"    return render(request, 'page_{k}.html', total=total_{k})",
            "",
        ]
        k += 1
    return lines[:n]


def _misquoted(lines: list[str]) -> list[str]:
    """The lines as a model remembering them wrongly quotes them: a letter changed in every
    identifier of each line, so not one line of the quote is in the file."""
    word = re.compile(r"\b([a-z])([a-z]{3,})")
    return [word.sub(lambda m: m.group(1) + "x" + m.group(2)[1:], line) for line in lines]


@pytest.mark.parametrize("how", ["one line changed", "every line changed"])
async def test_issue37_item7_a_miss_on_5000_lines_is_quick_and_points_at_the_place(
    ws: Path, how: str
) -> None:
    lines = _module(5000)
    (ws / "big.py").write_text("\n".join(lines) + "\n")
    start = 3203  # 0-based: a line inside handler_400, in the middle of the file
    quote = lines[start : start + 6]
    if how == "every line changed":
        quote = _misquoted(quote)
        assert not any(q in lines for q in quote if q)
    else:
        quote[2] = '        raise ValueError("over the limit")'
        assert quote[2] not in lines
    edit = builtin_tools()["edit"]
    args = {"path": "big.py", "old_string": "\n".join(quote) + "\n", "new_string": "pass\n"}
    began = time.monotonic()
    with pytest.raises(ToolFailure) as info:
        await edit.run(args, make_ctx(ws, seen=True))
    took = time.monotonic() - began
    print(f"\nmissed edit on 5,000 lines ({how}): {took:.3f} s")
    message = info.value.message
    assert info.value.type == "edit_no_match"
    first = re.search(r"The closest in the file, lines (\d+)-(\d+) \((\d+)% similar\):", message)
    assert first is not None, message
    assert (int(first.group(1)), int(first.group(2))) == (start + 1, start + 6)
    assert f"{start + 1:>6}\t{lines[start]}" in message and f"{start + 6:>6}\t{lines[start + 5]}" in message
    assert took < 30  # a generous bound: the unbounded search took minutes on a file this long


def test_issue37_item7_a_long_quote_on_a_long_file_stays_bounded() -> None:
    lines = _module(5000)
    quote = _misquoted(lines[1601:1801])  # 200 lines, none of them in the file but blank ones
    began = time.monotonic()
    with pytest.raises(ToolFailure) as info:
        replace_in("\n".join(lines) + "\n", "\n".join(quote) + "\n", "x", replace_all=False, path="big.py")
    print(f"\nmissed 200-line edit on 5,000 lines: {time.monotonic() - began:.3f} s")
    assert "The closest in the file, lines 1602-1801" in info.value.message


@pytest.mark.parametrize(
    ("content", "old", "new", "want"),
    [
        # The file's trailing whitespace on lines the model left alone is not put back.
        ("a = 1   \nb = 2\t\nc = 3\n", "a = 1\nb = 2\n", "a = 1\nb = 20\n", "a = 1\nb = 20\nc = 3\n"),
        # A line of whitespace only that the model gave empty stays empty.
        (
            "def f():\n\treturn 1\n\t\n\ndef g():\n",
            "\treturn 1\n\n\ndef g():\n",
            "\treturn 2\n\n\ndef g():\n",
            "def f():\n\treturn 2\n\n\ndef g():\n",
        ),
        # The model's own trailing whitespace is written too.
        ("x = 1  \ny = 2\n", "x = 1\ny = 2\n", "x = 1 \ny = 3  \n", "x = 1 \ny = 3  \n"),
    ],
)
def test_issue37_item7_trailing_whitespace_tolerance_writes_new_string_as_given(
    content: str, old: str, new: str, want: str
) -> None:
    done = replace_in(content, old, new, replace_all=False, path="a.py")
    assert "trailing whitespace" in done.tolerated
    assert done.text == want


def test_issue37_item7_an_indentation_shift_is_the_only_rewrite() -> None:
    # Quoted one level shallower and without the file's trailing spaces: the new lines take the
    # file's indentation, and nothing else of the file's comes back.
    content = "class A:\n    def f(self):  \n        return 1\n"
    old, new = "def f(self):\n    return 1\n", "def f(self):\n    return 2\n"
    done = replace_in(content, old, new, replace_all=False, path="a.py")
    assert done.text == "class A:\n    def f(self):\n        return 2\n"
    assert "indentation" in done.tolerated


# Upstream OctoPrint commits that change whitespace-only lines (tab-indented files, some CRLF):
# with the model's copy of the old lines missing their trailing whitespace, the tolerant match
# wrote the file's whitespace back where the commit's new lines have none.
OCTOPRINT = (
    "OctoPrint/OctoPrint@a6253b7f4899:Cura/util/profile.py",
    "OctoPrint/OctoPrint@2d2285861f0a:src/octoprint/plugin/core.py",
    "OctoPrint/OctoPrint@b34ba2fa220e:Cura/gui/configWizard.py",
    "OctoPrint/OctoPrint@949b6c1a1e2d:Cura/gui/preview3d.py",
)


@pytest.mark.skipif(not rp.DATA.exists(), reason=f"no real-patch data at {rp.DATA}")
async def test_issue37_item7_octoprint_commits_written_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    edit = builtin_tools()["edit"]
    replayed: list[str] = []
    for n, record in enumerate(r for r in rp.records() if r["repo"] == "OctoPrint/OctoPrint"):
        stripped = [rp.perturb("trailing whitespace", h["old"], "", 1) for h in record["hunks"]]
        text = record["before"]
        # Only where each hunk's stripped old text is found by tolerance alone (not elsewhere exactly).
        if all(old == h["old"] for old, h in zip(stripped, record["hunks"], strict=True)) or any(
            old != h["old"] and old in text for old, h in zip(stripped, record["hunks"], strict=True)
        ):
            continue
        root = tmp_path / f"r{n}"
        root.mkdir()
        path = rp.place(record, root)
        ctx = make_ctx(root, seen=True)
        for old, h in zip(stripped, record["hunks"], strict=True):
            await edit.run({"path": record["path"], "old_string": old, "new_string": h["new"]}, ctx)
        assert path.read_bytes() == record["after"].encode("utf-8"), record["id"]
        replayed.append(record["id"])
    assert set(OCTOPRINT) <= set(replayed)
    print(f"\n{len(replayed)} OctoPrint commits replayed with stripped old lines, each byte for byte")


@pytest.mark.skipif(not rp.DATA.exists(), reason=f"no real-patch data at {rp.DATA}")
def test_issue37_item7_real_misses_point_at_the_place() -> None:
    """Each real commit's first hunk quoted with a letter changed in every word of its lines (no
    line of the quote is in the file): the first place the hint names is where the hunk is."""
    hits, tried = 0, 0
    word = re.compile(r"\b([a-z])([a-z]{3,})")
    began = time.monotonic()
    for record in rp.records():
        hunk = record["hunks"][0]
        quote = [word.sub(lambda m: m.group(1) + "x" + m.group(2)[1:], b) for b, _ in rp._lines(hunk["old"])]
        if not any(word.search(b) for b, _ in rp._lines(hunk["old"])):
            continue
        tried += 1
        text = record["before"]
        with pytest.raises(ToolFailure) as info:
            replace_in(text, "\n".join(quote) + "\n", "x\n", replace_all=False, path="f.py")
        first = re.search(r"The closest in the file, lines? (\d+)", info.value.message)
        hits += first is not None and int(first.group(1)) == hunk["start"]
    print(f"\n{hits} of {tried} real misses pointed at the place ({time.monotonic() - began:.1f} s)")
    assert tried >= 250 and hits >= tried * 0.95
