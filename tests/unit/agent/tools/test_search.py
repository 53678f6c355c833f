"""grep's context lines, output modes, fixed strings and multiline patterns on both engines
(ripgrep and the pure Python search), glob's order, and the notes of capped results."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.state import SessionState
from devagent.agent.tools import builtin_tools
from devagent.agent.tools import search as search_mod
from devagent.agent.tools.base import ToolContext, ToolResult
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.workspace import Workspace

TOOLS = builtin_tools()


@pytest.fixture
def ctx(ws: Path) -> ToolContext:
    return ToolContext(workspace=Workspace([ws]), state=SessionState(workspace_roots=[str(ws)]), call_id="c1")


@pytest.fixture
def engine(grep_engine: str) -> str:
    return grep_engine


async def grep(ctx: ToolContext, engine: str | None = None, **args: Any) -> ToolResult:
    res = await TOOLS["grep"].run(args, ctx)
    if engine is not None:
        assert res.data["engine"] == engine
    return res


def body(res: ToolResult) -> list[str]:
    return res.text.splitlines()[1:]


def make_tree(ws: Path) -> None:
    (ws / "src").mkdir()
    (ws / "src" / "a.py").write_text(
        "import os\n\ndef main():\n    return os.getcwd()  # TODO\n\n\ndef other():\n    pass  # TODO\n"
    )
    (ws / "src" / "b.txt").write_text("one\ntwo TODO\nthree\n")
    (ws / "notes.md").write_text("a.b(c) literal\naxb(c) not literal\nA.B(C) upper\r\nend\n")


async def test_issue30_item5_grep_context_lines(ws: Path, ctx: ToolContext, engine: str) -> None:
    make_tree(ws)
    res = await grep(ctx, engine, pattern="TODO", context=1)
    assert body(res) == [
        "src/a.py-3-def main():",
        "src/a.py:4:    return os.getcwd()  # TODO",
        "src/a.py-5-",
        "--",
        "src/a.py-7-def other():",
        "src/a.py:8:    pass  # TODO",
        "--",
        "src/b.txt-1-one",
        "src/b.txt:2:two TODO",
        "src/b.txt-3-three",
    ]
    assert res.text.startswith("3 matches for /TODO/ in .:")
    res = await grep(ctx, engine, pattern="TODO", path="src/a.py", before=2)
    assert body(res) == [
        "src/a.py-2-",
        "src/a.py-3-def main():",
        "src/a.py:4:    return os.getcwd()  # TODO",
        "--",
        "src/a.py-6-",
        "src/a.py-7-def other():",
        "src/a.py:8:    pass  # TODO",
    ]
    # Groups that touch merge; `after` overrides `context`.
    res = await grep(ctx, engine, pattern="TODO", path="src/a.py", context=3, after=0)
    assert body(res) == [
        "src/a.py-1-import os",
        "src/a.py-2-",
        "src/a.py-3-def main():",
        "src/a.py:4:    return os.getcwd()  # TODO",
        "src/a.py-5-",
        "src/a.py-6-",
        "src/a.py-7-def other():",
        "src/a.py:8:    pass  # TODO",
    ]


async def test_issue30_item5_grep_files_and_count(ws: Path, ctx: ToolContext, engine: str) -> None:
    make_tree(ws)
    res = await grep(ctx, engine, pattern="TODO|literal", output="files")
    assert res.text == "3 files match /TODO|literal/ in .:\nnotes.md\nsrc/a.py\nsrc/b.txt"
    res = await grep(ctx, engine, pattern="TODO|literal", output="count")
    assert res.text == (
        "5 matching lines in 3 files for /TODO|literal/ in .:\nnotes.md:2\nsrc/a.py:2\nsrc/b.txt:1"
    )
    assert res.data["matches"] == 5 and res.data["files"] == 3 and res.data["truncated"] is False
    res = await grep(ctx, engine, pattern="nothing here", output="files")
    assert res.text == "No matches for /nothing here/ in .."


async def test_issue30_item5_grep_fixed_strings_and_case(ws: Path, ctx: ToolContext, engine: str) -> None:
    make_tree(ws)
    res = await grep(ctx, engine, pattern="a.b(c)", fixed_strings=True)
    assert body(res) == ["notes.md:1:a.b(c) literal"]
    assert res.text.startswith("1 match for 'a.b(c)' in .")
    res = await grep(ctx, engine, pattern="a.b(c)", fixed_strings=True, ignore_case=True)
    assert body(res) == ["notes.md:1:a.b(c) literal", "notes.md:3:A.B(C) upper"]
    # As a regular expression the same text is an error the model can act on.
    with pytest.raises(ToolFailure) as info:
        await grep(ctx, pattern="a.b(c")
    assert info.value.type == "invalid_regex" and "fixed_strings" in info.value.message
    # `$` matches before a CRLF line end on both engines.
    res = await grep(ctx, engine, pattern="upper$")
    assert body(res) == ["notes.md:3:A.B(C) upper"]


async def test_issue30_item5_grep_multiline(ws: Path, ctx: ToolContext, engine: str) -> None:
    make_tree(ws)
    res = await grep(ctx, engine, pattern=r"def main\(\):\n\s+return", multiline=True)
    assert body(res) == ["src/a.py:3:def main():", "src/a.py:4:    return os.getcwd()  # TODO"]
    res = await grep(ctx, engine, pattern=r"(?s)import os.*?def main", multiline=True, output="count")
    assert body(res) == ["src/a.py:3"]
    res = await grep(ctx, engine, pattern=r"^\n\ndef", multiline=True, context=1)
    assert body(res) == [
        "src/a.py-4-    return os.getcwd()  # TODO",
        "src/a.py:5:",
        "src/a.py:6:",
        "src/a.py:7:def other():",
        "src/a.py-8-    pass  # TODO",
    ]
    # Without multiline a line break in the pattern is refused with what to do.
    with pytest.raises(ToolFailure) as info:
        await grep(ctx, pattern=r"main\(\):\n")
    assert info.value.type == "invalid_arguments" and "multiline" in info.value.message


@pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep is not installed")
async def test_issue30_item5_grep_engines_agree(
    ws: Path, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same text, byte for byte, from ripgrep and from the Python search, for every option."""
    make_tree(ws)
    more = {"src/deep/c.py": "x = 'TODO'\n" * 3 + "y = 1\n", "src-x.py": "TODO dash\n", "empty.txt": ""}
    for name, text in more.items():
        (ws / name).parent.mkdir(exist_ok=True)
        (ws / name).write_text(text)
    queries: list[dict[str, Any]] = [
        {"pattern": "TODO|os"},
        {"pattern": "todo", "ignore_case": True, "context": 2},
        {"pattern": "TODO", "output": "files"},
        {"pattern": "TODO", "output": "count", "include": "*.py"},
        {"pattern": "(c)", "fixed_strings": True, "before": 1},
        {"pattern": r"'\n", "multiline": True, "after": 1},
        {"pattern": "^$"},
        {"pattern": r"^y = 1$", "multiline": True},
    ]
    for q in queries:
        monkeypatch.setattr(search_mod, "USE_RIPGREP", True)
        with_rg = await grep(ctx, "ripgrep", **q)
        monkeypatch.setattr(search_mod, "USE_RIPGREP", False)
        without = await grep(ctx, "python", **q)
        assert with_rg.text == without.text, q
        assert {**with_rg.data, "engine": ""} == {**without.data, "engine": ""}, q


async def test_issue30_item5_capped_results_say_so_and_how_to_narrow(
    ws: Path, ctx: ToolContext, engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(6):
        (ws / f"f{i}.txt").write_text("hit\n" * 5)
    monkeypatch.setattr(search_mod, "GREP_MAX_MATCHES", 4)
    monkeypatch.setattr(search_mod, "GREP_MAX_FILES", 3)
    monkeypatch.setattr(search_mod, "GREP_MAX_COUNTED", 12)
    res = await grep(ctx, engine, pattern="hit", context=1)
    assert res.text.splitlines()[0] == (
        "More than 4 matches for /hit/ in .; showing the first 4. "
        "Narrow the search with path, include or a more specific pattern:"
    )
    assert sum(":" + "hit" in line for line in body(res)) == 4 and res.data["truncated"] is True
    res = await grep(ctx, engine, pattern="hit", output="files")
    assert res.text.splitlines()[0].startswith("More than 3 files match /hit/ in .; showing the first 3.")
    assert len(body(res)) == 3
    res = await grep(ctx, engine, pattern="hit", output="count")
    assert "the counts are incomplete. Narrow the search" in res.text.splitlines()[0]
    assert res.data["truncated"] is True and res.data["matches"] <= 12
    # Under the caps nothing is said.
    res = await grep(ctx, engine, pattern="hit", path="f0.txt", output="count")
    assert res.text == "5 matching lines in 1 file for /hit/ in f0.txt:\nf0.txt:5"


async def test_issue30_item5_glob_newest_first_and_capped(
    ws: Path, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = time.time()
    for i, name in enumerate(["old.py", "mid.py", "new.py", "sub/newest.py"]):
        p = ws / name
        p.parent.mkdir(exist_ok=True)
        p.write_text("")
        os.utime(p, (now - 100 + i * 10, now - 100 + i * 10))
    res = await TOOLS["glob"].run({"pattern": "**/*.py"}, ctx)
    assert res.data["files"] == ["sub/newest.py", "new.py", "mid.py", "old.py"]
    assert "(newest first)" in res.text
    monkeypatch.setattr(search_mod, "GLOB_MAX_RESULTS", 2)
    res = await TOOLS["glob"].run({"pattern": "**/*.py"}, ctx)
    assert res.data["files"] == ["sub/newest.py", "new.py"] and res.data["truncated"] is True
    assert "showing the first 2, narrow the pattern or path to see the rest" in res.text
    monkeypatch.setattr(search_mod, "LIST_MAX_ENTRIES", 2)
    res = await TOOLS["list_directory"].run({}, ctx)
    assert "(showing the first 2; list a subdirectory or leave names out with ignore)" in res.text
