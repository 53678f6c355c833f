"""The tolerant matcher behind `edit` and `apply_patch`: exact first, then each tolerance alone,
the replacement written the file's way, and the refusals the model reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devagent.agent.tools import builtin_tools
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.matching import Ambiguous, closest, replace_in, seek
from tests.unit.agent.tools.test_tools import make_ctx

CLASS = "class A:\n    def f(self):\n        return 1\n\n    def g(self):\n        return 2\n"


def replaced(content: str, old: str, new: str, **kw: Any) -> tuple[str, str]:
    r = replace_in(content, old, new, replace_all=kw.get("replace_all", False), path="a.py")
    return r.text, r.tolerated


def refused(content: str, old: str, new: str) -> ToolFailure:
    with pytest.raises(ToolFailure) as info:
        replace_in(content, old, new, replace_all=False, path="a.py")
    return info.value


def test_issue30_item1_exact_match_comes_first_and_says_nothing() -> None:
    text, tolerated = replaced(CLASS, "        return 1\n", "        return 10\n")
    assert text == CLASS.replace("return 1\n", "return 10\n") and tolerated == ""
    # An exact match wins over a tolerant one elsewhere: "a = 1" is exact at line 2 only.
    text, tolerated = replaced("a = 1  \na = 1\n", "a = 1\n", "a = 2\n")
    assert text == "a = 1  \na = 2\n" and tolerated == ""


@pytest.mark.parametrize(
    ("content", "old", "new", "want", "tolerated"),
    [
        pytest.param(
            "def f():  \n    a = 1\t\n    b = 2\n",
            "def f():\n    a = 1\n    b = 2\n",
            "def f():\n    a = 1\n    b = 3\n",
            "def f():\n    a = 1\n    b = 3\n",
            "trailing whitespace (new_string's written as given)",
            id="trailing-whitespace-tolerated-new-string-as-given",
        ),
        pytest.param(  # the model quoted the method as if it stood alone: 4 columns too shallow
            CLASS,
            "def f(self):\n    return 1\n",
            "def f(self):\n    if True:\n        return 3\n",
            CLASS.replace("        return 1\n", "        if True:\n            return 3\n"),
            "indentation (the file's is 4 columns deeper; the new lines were re-indented the same way)",
            id="indentation-too-shallow",
        ),
        pytest.param(
            "if x:\n    y = 1\n",
            "        if x:\n            y = 1\n",
            "        if x:\n            y = 2\n",
            "if x:\n    y = 2\n",
            "indentation (the file's is 8 columns shallower; the new lines were re-indented the same way)",
            id="indentation-too-deep",
        ),
        pytest.param(
            "a = 1\n\tif a:\n\t\tb = 2\n",
            "    if a:\n        b = 2\n",
            "    if a:\n        b = 3\n        c = 4\n",
            "a = 1\n\tif a:\n\t\tb = 3\n\t\tc = 4\n",
            "tabs against spaces (the file indents with tabs; the new lines do too)",
            id="spaces-for-tabs",
        ),
        pytest.param(
            "def f():\n    return 1\n",
            "def f():\n\treturn 1\n",
            "def f():\n\treturn 2\n",
            "def f():\n    return 2\n",
            "tabs against spaces (the file indents with spaces; the new lines do too)",
            id="tabs-for-spaces",
        ),
    ],
)
def test_issue30_item1_each_tolerance_alone(
    content: str, old: str, new: str, want: str, tolerated: str
) -> None:
    assert replaced(content, old, new) == (want, tolerated)


def test_issue30_item1_crlf_file_with_unix_old_string() -> None:
    text, tolerated = replaced("one\r\ntwo\r\nthree\r\n", "one\ntwo\n", "1\n2\n")
    assert text == "1\r\n2\r\nthree\r\n" and tolerated == "line endings (the file's CRLF kept)"
    # A file mixing line endings: each unchanged line keeps its own; new ones take the region's.
    text, _ = replaced("a\r\nb\nc\r\n", "a\nb\nc\n", "a\nB\nb\nc\n")
    assert text == "a\r\nB\r\nb\nc\r\n"


def test_issue30_item1_typographic_quotes_and_dashes_read_as_ascii() -> None:
    content = 'msg = "it\'s done"  # a - b\n'
    text, tolerated = replaced(content, "msg = “it’s done”  # a – b\n", "msg = “it’s finished”  # a — b\n")
    assert text == 'msg = "it\'s finished"  # a - b\n'
    assert tolerated == "typographic quotes and dashes (read as ASCII, in the new lines too)"


def test_issue30_item1_all_tolerances_at_once_and_unicode_text_kept() -> None:
    content = 'class Größe:\r\n\tdef f(self):  \r\n\t\treturn "naïve"\r\n'
    text, tolerated = replaced(
        content, "def f(self):\n    return “naïve”\n", "def f(self):\n    return “naïf”\n"
    )
    # The file's tabs, quotes and line endings; the model's trailing whitespace (none).
    assert text == 'class Größe:\r\n\tdef f(self):\r\n\t\treturn "naïf"\r\n'
    for what in ("line endings", "trailing whitespace", "indentation", "tabs against spaces", "typographic"):
        assert what in tolerated


def test_issue30_item1_ambiguous_tolerant_match_is_refused_with_the_places() -> None:
    err = refused("x = 1\nx = 1\n", "  x = 1\n", "y")
    assert err.type == "edit_multiple_matches"
    assert err.message == (
        "old_string is not in a.py exactly, and ignoring indentation it matches 2 places:\n"
        "line 1:\n     1\tx = 1\n"
        "line 2:\n     2\tx = 1\n"
        "Give more surrounding lines, copied exactly from the file, to make it unique."
    )


def test_issue30_item1_a_miss_shows_the_closest_lines_with_numbers() -> None:
    err = refused(CLASS, "def h(self):\n    return 1\n", "x")
    assert err.type == "edit_no_match"
    assert err.message == (
        "old_string not found in a.py, not even ignoring trailing whitespace, indentation, tabs against "
        "spaces, line endings, and typographic quotes and dashes.\n"
        "The closest in the file, lines 2-3 (95% similar):\n"
        "     2\t    def f(self):\n"
        "     3\t        return 1\n"
        "Read the file again and copy the exact text to replace (whitespace and indentation included)."
    )
    err = refused("alpha\n", "something else entirely\n", "x")
    assert "Nothing in the file is close to it." in err.message


def test_issue30_item1_a_word_changed_is_never_tolerated() -> None:
    # Tolerance covers whitespace and punctuation only: a different token is a miss, not a write.
    err = refused("total = price * count\n", "total = price * amount\n", "total = 0\n")
    assert err.type == "edit_no_match" and "1\ttotal = price * count" in err.message


def test_issue30_item1_new_lines_that_cannot_be_reindented_are_refused() -> None:
    # The file aligns with spaces after its tabs: the model's spaces could be either.
    content = "def f(a,\n\t  b):\n\treturn 1\n"
    old = "def f(a,\n      b):\n    return 1\n"
    err = refused(content, old, "def f(a,\n      b):\n    if a:\n        return 1\n")
    assert err.type == "edit_no_match"
    assert "cannot be carried over to the file's without guessing" in err.message


def test_issue30_item1_replace_all_stays_exact() -> None:
    text, _ = replaced("a\na\n", "a", "b", replace_all=True)
    assert text == "b\nb\n"


def test_issue30_item1_seek_finds_windows_by_passes() -> None:
    lines = ["def f():", "    x = 1  ", "    return x"]
    m = seek(lines, ["x = 1", "return x"])
    assert m is not None and (m.start, m.size) == (1, 2)
    assert seek(lines, ["x = 2"]) is None
    with pytest.raises(Ambiguous):
        seek(["a", "b", "a"], [" a"])
    # An anchored search takes the first place at or after its start.
    anchored = seek(["a", "b", "a"], [" a"], 1, first=True)
    assert anchored is not None and anchored.start == 2
    at_end = seek(["a", "b", "a"], ["a"], 0, first=True, at_end=True)
    assert at_end is not None and at_end.start == 2
    assert closest(lines, ["def g():", "    x = 1"])[0][0] == 0


async def test_issue30_item1_edit_tool_says_what_it_tolerated(ws: Path) -> None:
    (ws / "a.py").write_text(CLASS)
    edit = builtin_tools()["edit"]
    args = {
        "path": "a.py",
        "old_string": "def f(self):\n    return 1\n",
        "new_string": "def f(self):\n    return 5\n",
    }
    res = await edit.run(args, make_ctx(ws, seen=True))
    assert (ws / "a.py").read_text() == CLASS.replace("return 1", "return 5")
    assert res.text == (
        "Edited a.py (6 lines): replaced 1 occurrence. Not an exact match: tolerated indentation (the "
        "file's is 4 columns deeper; the new lines were re-indented the same way).\n\n"
        "The changed part of a.py now reads (line number, a tab, the line):\n"
        "1\tclass A:\n2\t    def f(self):\n3\t        return 5\n4\t\n5\t    def g(self):\n6\t        return 2"
    )


async def test_issue30_item1_edits_list_applies_in_order_all_or_none(ws: Path) -> None:
    (ws / "a.py").write_text(CLASS)
    edit = builtin_tools()["edit"]
    ctx = make_ctx(ws, seen=True)
    edits = [
        {"old_string": "return 1", "new_string": "return 11"},
        {"old_string": "return 11\n\n", "new_string": "return 11\n\n\n"},  # sees the first's result
        {"old_string": "return 2", "new_string": "return 22"},
    ]
    diff = await edit.confirmation({"path": "a.py", "edits": edits}, ctx)
    assert diff.new_content == CLASS.replace("return 1", "return 11\n").replace("return 2", "return 22")  # type: ignore[union-attr]
    res = await edit.run({"path": "a.py", "edits": edits}, ctx)
    assert (ws / "a.py").read_text() == diff.new_content  # type: ignore[union-attr]
    assert res.text == (
        "Edited a.py (7 lines): replaced 3 occurrences.\n\n"
        "The changed part of a.py now reads (line number, a tab, the line):\n1\tclass A:\n"
        "2\t    def f(self):\n3\t        return 11\n4\t\n5\t\n6\t    def g(self):\n7\t        return 22"
    )
    # One that fails: nothing written, the message names it.
    before = (ws / "a.py").read_text()
    bad = [{"old_string": "return 11", "new_string": "return 1"}, {"old_string": "nope", "new_string": "x"}]
    with pytest.raises(ToolFailure) as info:
        await edit.run({"path": "a.py", "edits": bad}, ctx)
    assert info.value.type == "edit_no_match"
    assert info.value.message.startswith("edits[1]: old_string not found in a.py")
    assert info.value.message.endswith("None of the edits was written.")
    assert (ws / "a.py").read_text() == before
    # Both forms at once, or an empty list: the arguments are wrong.
    for args in (
        {"path": "a.py", "edits": edits, "old_string": "x", "new_string": "y"},
        {"path": "a.py", "edits": []},
        {
            "path": "a.py",
            "edits": [{"old_string": "", "new_string": "x"}, {"old_string": "a", "new_string": "b"}],
        },
    ):
        with pytest.raises(ToolFailure) as info:
            await edit.run(args, ctx)
        assert info.value.type == "invalid_arguments"
