"""Checked edits: after a write or an edit the model sees the changed part with line numbers and the
syntax errors the write introduced (Python through its compiler, other languages through
tree-sitter grammars); an operator setting refuses such writes instead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devagent.agent.events import ToolCallStatus, ToolCallUpdate, TurnEnd, UserPrompt
from devagent.agent.state import SessionState
from devagent.agent.tools import builtin_tools, region, syntax
from devagent.agent.tools.base import ToolContext, ToolResult
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.workspace import Workspace
from devagent.config import ConfigError, load_config
from tests.core_helpers import call, collect, text_of

TOOLS = builtin_tools()

APP = "def add(a, b):\n    return a + b\n\n\nprint(add(1, 2))\n"


def make_ctx(root: Path, **kw: Any) -> ToolContext:
    return ToolContext(
        workspace=Workspace([root]), state=SessionState(workspace_roots=[str(root)]), call_id="c1", **kw
    )


async def run(name: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    return await TOOLS[name].run(args, ctx)


async def read_then(ctx: ToolContext, name: str, args: dict[str, Any]) -> ToolResult:
    """The file is read first (an edit needs it), then the call made."""
    await run("read_file", {"path": args["path"]}, ctx)
    return await run(name, args, ctx)


async def test_issue30_item2_a_python_edit_that_breaks_the_syntax_reports_the_error_with_its_line(
    core_factory: Any, script: Any, workspace: Path
) -> None:
    """Through the loop: the model reads app.py, makes an edit that leaves a bracket open on line
    2, and the result it reads next names line 2 and Python's error; the file is written (warn)."""
    (workspace / "app.py").write_text(APP)
    broken = {"path": "app.py", "old_string": "return a + b", "new_string": "return (a + b"}
    spec = script(
        [
            [call("read_file", {"path": "app.py"})],
            [call("edit", broken, "e1")],
            [{"text": "Result: {last_tool_results}"}],
        ]
    )
    core = await core_factory(spec, approval_mode="auto-edit")
    s = await core.create_session([workspace], approval_mode="auto-edit")
    events = await collect(s.advance(UserPrompt("make it fancy")))
    assert isinstance(events[-1], TurnEnd) and events[-1].reason == "finished"
    said = text_of(events)
    assert "Syntax check (Python): this write introduced syntax errors:" in said, said
    assert "line 2, column" in said and "SyntaxError" in said and "`return (a + b`" in said
    # the changed part, numbered as the file is now
    assert "1\tdef add(a, b):\n2\t    return (a + b\n3\t\n" in said
    assert (workspace / "app.py").read_text() == APP.replace("return a + b", "return (a + b")
    done = [e.call for e in events if isinstance(e, ToolCallUpdate) and e.call.id == "e1"][-1]
    assert done.status is ToolCallStatus.SUCCEEDED


async def test_issue30_item2_an_already_broken_file_does_not_blame_the_edit(ws: Path) -> None:
    """A file that did not parse before: an edit elsewhere in it reports no error (Python stops at
    its first error; tree-sitter's errors that were there before are not counted again, wherever
    they moved)."""
    ctx = make_ctx(ws)
    (ws / "old.py").write_text("def broken(:\n    pass\n\nx = 1\n")
    res = await read_then(ctx, "edit", {"path": "old.py", "old_string": "x = 1", "new_string": "x = 2"})
    assert "Syntax check" not in res.text and "syntax_errors" not in res.data
    (ws / "old.js").write_text("let a = ;\nconst b = 1;\n")
    res = await read_then(
        ctx,
        "edit",
        {"path": "old.js", "old_string": "const b = 1;", "new_string": "const b = 2;\nlet c = 3;"},
    )
    assert "Syntax check" not in res.text
    # lines added above the old error move it: still the old error, not this write's
    res = await run(
        "edit", {"path": "old.js", "old_string": "let a = ;", "new_string": "// x\nlet a = ;"}, ctx
    )
    assert "Syntax check" not in res.text
    # a new error beside the old one is reported, and only it
    res = await run("edit", {"path": "old.js", "old_string": "let c = 3;", "new_string": "let c = (3;"}, ctx)
    assert res.data["syntax_errors"] and all(e["line"] == 4 for e in res.data["syntax_errors"]), res.text
    assert "let a" not in res.text.split("Syntax check", 1)[1]


async def test_issue30_item2_refuse_mode_writes_nothing(
    core_factory: Any, script: Any, workspace: Path
) -> None:
    """edit_syntax_check = refuse: the edit that breaks the syntax fails with the errors and the file
    keeps its content; asked in `ask` mode, it is refused before anyone is asked; a good edit goes
    through."""
    (workspace / "app.py").write_text(APP)
    bad = {"path": "app.py", "old_string": "return a + b", "new_string": "return a +"}
    good = {"path": "app.py", "old_string": "return a + b", "new_string": "return b + a"}
    spec = script(
        [
            [call("read_file", {"path": "app.py"})],
            [call("edit", bad, "bad")],
            [call("edit", good, "good")],
            [{"text": "done"}],
        ]
    )
    core = await core_factory(spec, edit_syntax_check="refuse")
    s = await core.create_session([workspace], approval_mode="ask")
    events = await collect(s.advance(UserPrompt("edit")))
    refused = [e.call for e in events if isinstance(e, ToolCallUpdate) and e.call.id == "bad"][-1]
    assert refused.status is ToolCallStatus.FAILED and refused.error is not None
    assert refused.error.type == "syntax_error", refused.error
    assert "Nothing was written" in refused.error.message and "line 2" in refused.error.message
    assert refused.confirmation is None  # nobody was asked about it
    assert (workspace / "app.py").read_text() == APP
    # the good edit waits for permission as usual
    assert [c.id for c in s.waiting_calls()] == ["good"]


async def test_issue30_item2_refuse_mode_at_run_time_and_the_users_own_content(ws: Path) -> None:
    ctx = make_ctx(ws, syntax_check="refuse")
    (ws / "data.json").write_text('{"a": 1}\n')
    with pytest.raises(ToolFailure) as info:
        await read_then(ctx, "write_file", {"path": "data.json", "content": '{"a": 1,\n "b": }\n'})
    assert info.value.type == "syntax_error" and "line 2" in info.value.message
    assert "JSON" in info.value.message
    assert (ws / "data.json").read_text() == '{"a": 1}\n'
    # what the user wrote instead is theirs: written, the errors reported
    ctx.new_content = '{"a": \n'
    res = await run("write_file", {"path": "data.json", "content": '{"a": 2}\n'}, ctx)
    assert (ws / "data.json").read_text() == '{"a": \n'
    assert "user modified" in res.text and res.data["syntax_errors"]
    # off: nothing is checked
    off = make_ctx(ws, syntax_check="off")
    res = await run("write_file", {"path": "new.py", "content": "def (:\n"}, off)
    assert "Syntax check" not in res.text


@pytest.mark.parametrize(
    "name,old,new,line,language",
    [
        ("web/app.js", "export const x = 1;\n", "export const x = 1;\nfunction f( {\n}\n", 2, "JavaScript"),
        ("web/app.ts", "let n: number = 1;\n", "let n: number = 1;\nlet m: = 2;\n", 2, "TypeScript"),
        ("web/App.tsx", "const A = () => <div/>;\n", "const A = () => <div>;\n", 1, "TSX"),
        ("package.json", '{\n  "name": "x"\n}\n', '{\n  "name": "x",\n  "version":\n}\n', 3, "JSON"),
        ("main.go", "package main\n", "package main\nfunc main() {\n", 2, "Go"),
        ("lib.rs", "fn main() {}\n", "fn main() {}\nfn f( {}\n", 2, "Rust"),
        ("conf.yaml", "a: 1\n", "a: 1\nb: [1, 2\n", 1, "YAML"),
        ("conf.toml", "a = 1\n", "a = 1\nb = \n", 2, "TOML"),
    ],
)
async def test_issue30_item2_other_languages_are_checked_through_tree_sitter(
    ws: Path, name: str, old: str, new: str, line: int, language: str
) -> None:
    ctx = make_ctx(ws)
    (ws / name).parent.mkdir(parents=True, exist_ok=True)
    (ws / name).write_text(old)
    res = await read_then(ctx, "write_file", {"path": name, "content": new})
    assert f"Syntax check ({language}): this write introduced syntax errors:" in res.text, res.text
    assert res.data["syntax_errors"][0]["line"] == line, res.data
    assert (ws / name).read_text() == new  # warn: written


@pytest.mark.filterwarnings("ignore::SyntaxWarning", "ignore::DeprecationWarning")
def test_issue30_item2_the_checker_itself() -> None:
    """What is checked, and what comes back: nothing for unknown languages, huge files or a file
    that stays fine; a new file's errors are all its own."""
    assert syntax.introduced(Path("notes.txt"), "a", "b(") is None
    assert syntax.introduced(Path("big.py"), None, "x = 1\n" * 200_000) is None
    report = syntax.introduced(Path("ok.py"), "x = 1\n", "x = 2\n")
    assert report is not None and report.problems == ()
    report = syntax.introduced(Path("new.py"), None, "x = 1\nif x\n    pass\n")
    assert report is not None and [p.line for p in report.problems] == [2]
    assert syntax.language_of(Path("a.PY")) == "Python" and syntax.language_of(Path("a.md")) is None
    # what Python only warns about is no error
    report = syntax.introduced(Path("w.py"), None, 'x = "\\d"\ny = 1 is 1\n')
    assert report is not None and report.problems == ()


def test_issue30_item2_the_edited_region_is_numbered_and_capped() -> None:
    old = "".join(f"line {i}\n" for i in range(1, 201))
    new = old.replace("line 50\n", "line fifty\n").replace("line 150\n", "")
    shown = region.edited_region(old, new)
    assert shown.startswith("47\tline 47\n48\tline 48\n49\tline 49\n50\tline fifty\n51\tline 51\n")
    assert "\n...\n" in shown  # two parts apart
    # a deleted line: the lines around where it was
    assert "\n...\n147\tline 147\n148\tline 148\n149\tline 149\n150\tline 151\n151\tline 152\n" in shown
    assert region.edited_region(old, old) == ""
    huge = region.edited_region(old, old.replace("line", "LINE"))
    assert len(huge.splitlines()) == region.MAX_REGION_LINES + 1
    assert huge.endswith("more lines not shown; read the file to see them]\n")


async def test_issue30_item2_an_overwrite_shows_its_changed_part(ws: Path) -> None:
    ctx = make_ctx(ws)
    (ws / "a.txt").write_text("one\ntwo\nthree\n")
    res = await read_then(ctx, "write_file", {"path": "a.txt", "content": "one\n2\nthree\n"})
    assert res.text.startswith("Wrote a.txt (3 lines).\n\nThe changed part of a.txt now reads")
    assert res.text.endswith("1\tone\n2\t2\n3\tthree")
    # a new file is not shown back: the model has just written it
    res = await run("write_file", {"path": "b.txt", "content": "fresh\n"}, ctx)
    assert res.text == "Created b.txt (1 line)."
    res = await run("edit", {"path": "a.txt", "old_string": "2\n", "new_string": "two\n"}, ctx)
    assert res.text.startswith("Edited a.txt (3 lines): replaced 1 occurrence.\n\n")


def test_issue30_item2_the_setting(tmp_path: Path) -> None:
    assert load_config(environ={}).edit_syntax_check == "warn"
    config = load_config(environ={"DEVAGENT_EDIT_SYNTAX_CHECK": "Refuse"})
    assert config.edit_syntax_check == "refuse"
    settings = tmp_path / "config.toml"
    settings.write_text('[devagent]\nedit_syntax_check = "off"\n')
    assert load_config(environ={"DEVAGENT_CONFIG": str(settings)}).edit_syntax_check == "off"
    with pytest.raises(ConfigError, match=r"edit_syntax_check .*must be one of warn, refuse, off"):
        load_config(environ={"DEVAGENT_EDIT_SYNTAX_CHECK": "strict"})
