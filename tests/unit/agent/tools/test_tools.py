"""Unit tests of the built-in tools (G2) and their workspace confinement (G4)."""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.events import ExecuteDetails, FileDiff, ToolKind
from devagent.agent.state import SessionState
from devagent.agent.tools import builtin_tools, freshness
from devagent.agent.tools import read as read_mod
from devagent.agent.tools import search as search_mod
from devagent.agent.tools._util import read_text
from devagent.agent.tools.base import ToolContext, ToolResult
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.memory import read_memory
from devagent.agent.tools.shell import root_command
from devagent.agent.tools.workspace import Workspace

TOOLS = builtin_tools()


def make_ctx(root: Path, *, seen: bool = False, **kw: Any) -> ToolContext:
    """A tool context on the workspace `root`; with `seen`, the session has read every file now
    under it (see `seen_files`), so edits of them are not refused for want of a read."""
    ctx = ToolContext(
        workspace=Workspace([root]), state=SessionState(workspace_roots=[str(root)]), call_id="c1", **kw
    )
    if seen:
        seen_files(ctx, *(p for p in sorted(root.rglob("*")) if p.is_file()))
    return ctx


def seen_files(ctx: ToolContext, *paths: Path) -> ToolContext:
    """The session has read each of these files whole as they are now: their marks recorded as
    read_file records them (from the disk; a test with a client's buffers reads through read_file)."""
    for path in paths:
        real = ctx.workspace.resolve(str(path))
        freshness.remember(ctx.state, real, freshness.mark_of(read_text(real, ctx.workspace)))
    return ctx


@pytest.fixture
def ctx(ws: Path) -> ToolContext:
    return make_ctx(ws)


async def run(name: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    return await TOOLS[name].run(args, ctx)


async def fails(name: str, args: dict[str, Any], ctx: ToolContext, type_: str) -> ToolFailure:
    with pytest.raises(ToolFailure) as info:
        await TOOLS[name].run(args, ctx)
    assert info.value.type == type_, info.value.message
    return info.value


# --- the registry --------------------------------------------------------------------------------


def test_g2_builtin_tools_registry() -> None:
    """G2: every built-in tool is there, with a schema the model can use."""
    assert set(TOOLS) == {
        "read_file",
        "read_many_files",
        "write_file",
        "edit",
        "apply_patch",
        "list_directory",
        "glob",
        "grep",
        "run_shell_command",
        "background_process",
        "save_memory",
        "write_todos",
        "web_fetch",
        "web_search",
        "ask_user",
        "task",
    }
    for name, tool in TOOLS.items():
        assert tool.name == name
        assert len(tool.description) > 40
        params = tool.parameters
        assert params["type"] == "object"
        assert params["additionalProperties"] is False
        assert "required" in params
        for prop in params["properties"].values():
            assert prop.get("description"), (name, prop)
    assert TOOLS["write_file"].kind is ToolKind.EDIT
    assert TOOLS["edit"].kind is ToolKind.EDIT
    assert TOOLS["save_memory"].kind is ToolKind.EDIT
    assert TOOLS["run_shell_command"].kind is ToolKind.EXECUTE
    assert TOOLS["write_todos"].kind is ToolKind.INTERNAL
    assert TOOLS["ask_user"].kind is ToolKind.QUESTION
    assert TOOLS["read_file"].kind is ToolKind.READ


def test_g2_describe() -> None:
    assert TOOLS["write_file"].describe({"path": "src/app.py", "content": ""}) == "Write src/app.py"
    assert TOOLS["read_file"].describe({"path": "a.txt"}) == "Read a.txt"
    assert TOOLS["edit"].describe({"path": "a.txt"}) == "Edit a.txt"
    assert TOOLS["run_shell_command"].describe({"command": "ls -la"}) == "ls -la"
    assert "*.py" in TOOLS["glob"].describe({"pattern": "*.py"})
    assert "TODO" in TOOLS["grep"].describe({"pattern": "TODO"})
    # Bad arguments do not break describe.
    assert TOOLS["read_many_files"].describe({}) == "Read files"


async def test_g2_invalid_arguments(ctx: ToolContext) -> None:
    await fails("read_file", {}, ctx, "invalid_arguments")
    await fails("read_file", {"path": 3}, ctx, "invalid_arguments")
    await fails("read_file", {"path": "a", "offset": "x"}, ctx, "invalid_arguments")
    await fails("write_file", {"path": "a.txt"}, ctx, "invalid_arguments")
    await fails("edit", {"path": "a.txt", "old_string": "x"}, ctx, "invalid_arguments")
    await fails(
        "edit",
        {"path": "a.txt", "old_string": "", "new_string": "x", "replace_all": "yes"},
        ctx,
        "invalid_arguments",
    )
    await fails("read_many_files", {"paths": "a.txt"}, ctx, "invalid_arguments")
    await fails("glob", {}, ctx, "invalid_arguments")
    await fails("grep", {"pattern": ""}, ctx, "invalid_arguments")
    await fails("run_shell_command", {"command": ["ls"]}, ctx, "invalid_arguments")
    await fails("run_shell_command", {"command": "ls", "timeout": -1}, ctx, "invalid_arguments")
    await fails("save_memory", {"fact": "  "}, ctx, "invalid_arguments")
    await fails("write_todos", {"todos": "x"}, ctx, "invalid_arguments")


# --- read_file -----------------------------------------------------------------------------------


async def test_g2_read_file_whole(ws: Path, ctx: ToolContext) -> None:
    (ws / "a.txt").write_text("one\ntwo\n")
    res = await run("read_file", {"path": "a.txt"}, ctx)
    assert res.text == "1\tone\n2\ttwo\n"  # each line after its number and a tab
    assert res.data["total_lines"] == 2


async def test_g2_read_file_offset_limit_header(ws: Path, ctx: ToolContext) -> None:
    (ws / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 101)))
    res = await run("read_file", {"path": "a.txt", "offset": 10, "limit": 5}, ctx)
    assert "10\tline 10\n11\tline 11\n12\tline 12\n13\tline 13\n14\tline 14\n" in res.text
    assert "line 15" not in res.text
    assert "lines 10-14 of 100" in res.text
    assert "offset=15" in res.text
    await fails("read_file", {"path": "a.txt", "offset": 500}, ctx, "invalid_arguments")


async def test_g2_read_file_caps_large_files(ws: Path, ctx: ToolContext) -> None:
    (ws / "big.txt").write_text("".join(f"{i}\n" for i in range(1, 5001)))
    res = await run("read_file", {"path": "big.txt"}, ctx)
    assert res.text.startswith("[Showing lines 1-2000 of 5000")
    assert "offset=2001" in res.text
    assert res.data["truncated"] is True
    # A byte cap too: 300 lines of 1 KiB exceed 256 KiB.
    (ws / "wide.txt").write_text(("x" * 1023 + "\n") * 300)
    res = await run("read_file", {"path": "wide.txt"}, ctx)
    assert len(res.text) <= 256 * 1024 + 200
    assert "of 300" in res.text


async def test_g2_read_file_refuses_binary_and_dirs(ws: Path, ctx: ToolContext) -> None:
    (ws / "blob.bin").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00")
    err = await fails("read_file", {"path": "blob.bin"}, ctx, "binary_file")
    assert "binary" in err.message
    (ws / "d").mkdir()
    await fails("read_file", {"path": "d"}, ctx, "is_directory")
    await fails("read_file", {"path": "missing.txt"}, ctx, "not_found")


# --- G4: every refusal ---------------------------------------------------------------------------


@pytest.fixture
def escape_link(ws: Path, outside: Path) -> Path:
    """A symlink inside the workspace pointing at a directory outside it."""
    link = ws / "escape"
    link.symlink_to(outside, target_is_directory=True)
    (ws / "secret_link.txt").symlink_to(outside / "secret.txt")
    return link


@pytest.mark.parametrize(
    "path", ["../outside/secret.txt", "/etc/passwd", "escape/secret.txt", "secret_link.txt"]
)
async def test_g4_read_refused(ctx: ToolContext, escape_link: Path, path: str) -> None:
    err = await fails("read_file", {"path": path}, ctx, "path_outside_workspace")
    assert "outside the workspace" in err.message


@pytest.mark.parametrize("path", ["../outside/new.txt", "/etc/passwd", "escape/new.txt", "secret_link.txt"])
async def test_g4_write_refused(ctx: ToolContext, escape_link: Path, outside: Path, path: str) -> None:
    await fails("write_file", {"path": path, "content": "pwned"}, ctx, "path_outside_workspace")
    with pytest.raises(ToolFailure) as info:
        await TOOLS["write_file"].confirmation({"path": path, "content": "pwned"}, ctx)
    assert info.value.type == "path_outside_workspace"
    assert not (outside / "new.txt").exists()
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"


@pytest.mark.parametrize(
    "path", ["../outside/secret.txt", "/etc/passwd", "escape/secret.txt", "secret_link.txt"]
)
async def test_g4_edit_refused(ctx: ToolContext, escape_link: Path, outside: Path, path: str) -> None:
    args = {"path": path, "old_string": "TOP", "new_string": "NO"}
    await fails("edit", args, ctx, "path_outside_workspace")
    with pytest.raises(ToolFailure) as info:
        await TOOLS["edit"].confirmation(args, ctx)
    assert info.value.type == "path_outside_workspace"
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"


@pytest.mark.parametrize("path", ["..", "../outside", "/etc", "escape"])
async def test_g4_list_refused(ctx: ToolContext, escape_link: Path, path: str) -> None:
    await fails("list_directory", {"path": path}, ctx, "path_outside_workspace")


@pytest.mark.parametrize(
    "args",
    [
        {"pattern": "*.txt", "path": ".."},
        {"pattern": "*", "path": "/etc"},
        {"pattern": "../outside/*.txt"},
        {"pattern": "/etc/*"},
        {"pattern": "*.txt", "path": "escape"},
        {"pattern": "**/../../outside/*"},
    ],
)
async def test_g4_glob_refused(ctx: ToolContext, escape_link: Path, args: dict[str, Any]) -> None:
    await fails("glob", args, ctx, "path_outside_workspace")


async def test_g4_glob_and_grep_do_not_follow_escaping_symlinks(
    ws: Path, ctx: ToolContext, escape_link: Path
) -> None:
    """G4: a walk from the root never enters a symlink pointing outside."""
    (ws / "ok.txt").write_text("TOP of the workspace\n")
    res = await run("glob", {"pattern": "**/*.txt"}, ctx)
    assert res.data["files"] == ["ok.txt"]
    res = await run("grep", {"pattern": "TOP"}, ctx)
    assert "SECRET" not in res.text
    assert "ok.txt:1:TOP of the workspace" in res.text
    res = await run("read_many_files", {"paths": ["**/*.txt"]}, ctx)
    assert "SECRET" not in res.text
    assert "secret_link.txt (a symlink pointing outside the workspace)" in res.text


@pytest.mark.parametrize("path", ["..", "../outside", "/etc", "escape", "secret_link.txt"])
async def test_g4_grep_refused(ctx: ToolContext, escape_link: Path, path: str) -> None:
    await fails("grep", {"pattern": "SECRET", "path": path}, ctx, "path_outside_workspace")


@pytest.mark.parametrize("directory", ["..", "/tmp", "escape"])
async def test_g4_shell_directory_refused(ctx: ToolContext, escape_link: Path, directory: str) -> None:
    args = {"command": "cat secret.txt", "directory": directory}
    await fails("run_shell_command", args, ctx, "path_outside_workspace")
    with pytest.raises(ToolFailure) as info:
        await TOOLS["run_shell_command"].confirmation(args, ctx)
    assert info.value.type == "path_outside_workspace"


@pytest.mark.parametrize("path", ["../outside/secret.txt", "/etc/passwd", "escape/*.txt"])
async def test_g4_read_many_refused(ctx: ToolContext, escape_link: Path, path: str) -> None:
    await fails("read_many_files", {"paths": [path]}, ctx, "path_outside_workspace")


async def test_g4_memory_file_outside_refused(ws: Path, ctx: ToolContext, escape_link: Path) -> None:
    ctx.memory_file = "../outside/AGENTS.md"
    await fails("save_memory", {"fact": "x"}, ctx, "path_outside_workspace")
    assert read_memory(ctx.workspace, "../outside/secret.txt") == ""


# --- read_many_files -----------------------------------------------------------------------------


async def test_g2_read_many_files(ws: Path, ctx: ToolContext) -> None:
    (ws / "src").mkdir()
    (ws / "src" / "a.py").write_text("A = 1\n")
    (ws / "src" / "b.py").write_text("B = 2")
    (ws / "src" / "blob.bin").write_bytes(b"\x00\x01\x02")
    (ws / "README.md").write_text("# readme\n")
    res = await run(
        "read_many_files", {"paths": ["README.md", "src/*.py", "src/blob.bin", "nothing/*.x"]}, ctx
    )
    assert res.text.startswith("--- README.md ---\n# readme\n")
    assert "--- src/a.py ---\nA = 1\n" in res.text
    assert "--- src/b.py ---\nB = 2\n" in res.text
    assert "src/blob.bin (binary)" in res.text
    assert "nothing/*.x (does not exist)" in res.text
    assert res.data["files"] == ["README.md", "src/a.py", "src/b.py"]


async def test_g2_read_many_files_directory_exclude_and_cap(
    ws: Path, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "d").mkdir()
    for i in range(5):
        (ws / "d" / f"f{i}.txt").write_text(f"file {i}\n" * 10)
    (ws / "d" / "x.lock").write_text("lock\n")
    res = await run("read_many_files", {"paths": ["d"], "exclude": ["*.lock"]}, ctx)
    assert "x.lock" not in res.text
    assert res.data["files"] == [f"d/f{i}.txt" for i in range(5)]
    monkeypatch.setattr(read_mod, "MANY_MAX_TOTAL_BYTES", 100)
    res = await run("read_many_files", {"paths": ["d/*.txt"]}, ctx)
    assert len(res.data["files"]) < 5
    assert "output limit was reached" in res.text


# --- write_file ----------------------------------------------------------------------------------


async def test_g2_write_file_new_with_diff(ws: Path, ctx: ToolContext) -> None:
    args = {"path": "src/app.py", "content": "print('hi')\n"}
    diff = await TOOLS["write_file"].confirmation(args, ctx)
    assert isinstance(diff, FileDiff)
    assert diff.file_name == "app.py"
    assert diff.file_path == str(ws / "src" / "app.py")
    assert diff.old_content is None
    assert diff.new_content == "print('hi')\n"
    assert "+++ b/src/app.py" in diff.formatted_diff
    assert "+print('hi')" in diff.formatted_diff
    assert not (ws / "src").exists()  # confirmation changes nothing
    res = await run("write_file", args, ctx)
    assert (ws / "src" / "app.py").read_text() == "print('hi')\n"
    assert res.diff is not None and res.diff.old_content is None
    assert "src/app.py" in res.text


async def test_g2_write_file_overwrite_diff(ws: Path, ctx: ToolContext) -> None:
    (ws / "a.txt").write_text("old\n")
    await run("read_file", {"path": "a.txt"}, ctx)
    diff = await TOOLS["write_file"].confirmation({"path": "a.txt", "content": "new\n"}, ctx)
    assert isinstance(diff, FileDiff)
    assert diff.old_content == "old\n"
    assert (
        "--- a/a.txt" in diff.formatted_diff
        and "-old" in diff.formatted_diff
        and "+new" in diff.formatted_diff
    )


async def test_g2_write_file_honours_new_content(ws: Path) -> None:
    """B10: the user's version replaces the proposal, and the model is told."""
    ctx = make_ctx(ws, new_content="user version\n")
    res = await run("write_file", {"path": "a.txt", "content": "model version\n"}, ctx)
    assert (ws / "a.txt").read_text() == "user version\n"
    assert res.diff is not None and res.diff.new_content == "user version\n"
    assert "user modified" in res.text


async def test_g2_write_file_into_directory_refused(ws: Path, ctx: ToolContext) -> None:
    (ws / "d").mkdir()
    await fails("write_file", {"path": "d", "content": "x"}, ctx, "is_directory")


# --- edit ----------------------------------------------------------------------------------------


async def test_g2_edit_replaces_once(ws: Path, ctx: ToolContext) -> None:
    (ws / "a.py").write_text("x = 1\ny = 2\n")
    await run("read_file", {"path": "a.py"}, ctx)
    args = {"path": "a.py", "old_string": "y = 2", "new_string": "y = 3"}
    diff = await TOOLS["edit"].confirmation(args, ctx)
    assert isinstance(diff, FileDiff)
    assert diff.old_content == "x = 1\ny = 2\n" and diff.new_content == "x = 1\ny = 3\n"
    assert "-y = 2\n+y = 3" in diff.formatted_diff
    res = await run("edit", args, ctx)
    assert (ws / "a.py").read_text() == "x = 1\ny = 3\n"
    assert res.diff is not None and res.diff.formatted_diff == diff.formatted_diff
    assert "replaced 1 occurrence" in res.text


async def test_g2_edit_not_found_error(ws: Path, ctx: ToolContext) -> None:
    (ws / "a.py").write_text("x = 1\n")
    args = {"path": "a.py", "old_string": "z = 1", "new_string": "z = 2"}
    err = await fails("edit", args, ctx, "edit_no_match")
    assert "old_string not found in a.py" in err.message and "Read the file again" in err.message
    # The confirmation fails the same way, so the core never asks about an edit that cannot apply.
    with pytest.raises(ToolFailure) as info:
        await TOOLS["edit"].confirmation(args, ctx)
    assert info.value.type == "edit_no_match"


async def test_g2_edit_multiple_matches(ws: Path, ctx: ToolContext) -> None:
    (ws / "a.py").write_text("a\na\na\n")
    await run("read_file", {"path": "a.py"}, ctx)
    args: dict[str, Any] = {"path": "a.py", "old_string": "a", "new_string": "b"}
    err = await fails("edit", args, ctx, "edit_multiple_matches")
    assert "found 3 times" in err.message and "replace_all" in err.message
    with pytest.raises(ToolFailure):
        await TOOLS["edit"].confirmation(args, ctx)
    res = await run("edit", {**args, "replace_all": True}, ctx)
    assert (ws / "a.py").read_text() == "b\nb\nb\n"
    assert "replaced 3 occurrences" in res.text


async def test_g2_edit_creates_file_with_empty_old_string(ws: Path, ctx: ToolContext) -> None:
    args = {"path": "new/file.txt", "old_string": "", "new_string": "hello\n"}
    diff = await TOOLS["edit"].confirmation(args, ctx)
    assert isinstance(diff, FileDiff) and diff.old_content is None
    await run("edit", args, ctx)
    assert (ws / "new" / "file.txt").read_text() == "hello\n"
    # Again: the file exists now, so an empty old_string is refused.
    await fails("edit", args, ctx, "file_exists")
    await fails("edit", {"path": "nope.txt", "old_string": "a", "new_string": "b"}, ctx, "not_found")


async def test_g2_edit_no_change_and_crlf(ws: Path, ctx: ToolContext) -> None:
    (ws / "w.txt").write_bytes(b"one\r\ntwo\r\n")
    await run("read_file", {"path": "w.txt"}, ctx)
    await fails("edit", {"path": "w.txt", "old_string": "one", "new_string": "one"}, ctx, "edit_no_change")
    await run("edit", {"path": "w.txt", "old_string": "one\ntwo", "new_string": "1\n2"}, ctx)
    assert (ws / "w.txt").read_bytes() == b"1\r\n2\r\n"


async def test_g2_edit_honours_new_content(ws: Path) -> None:
    (ws / "a.py").write_text("x = 1\n")
    ctx = make_ctx(ws, new_content="x = 42\n")
    await run("read_file", {"path": "a.py"}, ctx)
    res = await run("edit", {"path": "a.py", "old_string": "x = 1", "new_string": "x = 2"}, ctx)
    assert (ws / "a.py").read_text() == "x = 42\n"
    assert res.diff is not None and res.diff.old_content == "x = 1\n" and res.diff.new_content == "x = 42\n"
    assert "user modified" in res.text


# --- list_directory ------------------------------------------------------------------------------


async def test_g2_list_directory(ws: Path, ctx: ToolContext, escape_link: Path) -> None:
    (ws / ".git").mkdir()
    (ws / "src").mkdir()
    (ws / "b.txt").write_text("12345")
    (ws / "a.txt").write_text("")
    res = await run("list_directory", {}, ctx)
    lines = res.text.splitlines()[1:]
    assert lines[0] == "src/"  # directories first
    assert "escape -> outside the workspace" in lines  # a symlink out is shown, not followed (G4)
    assert "secret_link.txt -> outside the workspace" in lines
    assert "src/" in lines
    assert not any(".git" in line for line in lines)
    names = [line.split()[0] for line in lines]
    assert names.index("src/") < names.index("a.txt") < names.index("b.txt")
    assert "b.txt  (5 B)" in lines
    assert any(line.startswith("secret_link.txt -> outside the workspace") for line in lines)
    res = await run("list_directory", {"path": "src"}, ctx)
    assert "empty" in res.text
    await fails("list_directory", {"path": "a.txt"}, ctx, "not_a_directory")
    res = await run("list_directory", {"ignore": ["*.txt"]}, ctx)
    assert "a.txt" not in res.text


# --- glob ----------------------------------------------------------------------------------------


async def test_g2_glob_sorted_by_mtime_and_name(ws: Path, ctx: ToolContext) -> None:
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / "node_modules").mkdir()
    (ws / "node_modules" / "dep.py").write_text("")
    now = time.time()
    for i, name in enumerate(["src/b.py", "src/pkg/a.py", "top.py"]):
        p = ws / name
        p.write_text("")
        os.utime(p, (now - 100 + i * 10, now - 100 + i * 10))
    res = await run("glob", {"pattern": "**/*.py"}, ctx)
    assert res.data["files"] == ["top.py", "src/pkg/a.py", "src/b.py"]
    res = await run("glob", {"pattern": "**/*.py", "sort": "name"}, ctx)
    assert res.data["files"] == ["src/b.py", "src/pkg/a.py", "top.py"]
    res = await run("glob", {"pattern": "*.py"}, ctx)
    assert res.data["files"] == ["top.py"]
    res = await run("glob", {"pattern": "*.py", "path": "src"}, ctx)
    assert res.data["files"] == ["src/b.py"]
    res = await run("glob", {"pattern": "src/**/*.{py,js}", "sort": "name"}, ctx)
    assert res.data["files"] == ["src/b.py", "src/pkg/a.py"]
    res = await run("glob", {"pattern": "node_modules/*.py"}, ctx)
    assert res.data["files"] == ["node_modules/dep.py"]
    res = await run("glob", {"pattern": "*.rs"}, ctx)
    assert "No files match" in res.text


async def test_g2_glob_capped(ws: Path, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(10):
        (ws / f"f{i}.txt").write_text("")
    monkeypatch.setattr(search_mod, "GLOB_MAX_RESULTS", 3)
    res = await run("glob", {"pattern": "*.txt"}, ctx)
    assert len(res.data["files"]) == 3 and res.data["total"] == 10
    assert "showing the first 3" in res.text


# --- grep ----------------------------------------------------------------------------------------


def make_grep_tree(ws: Path) -> None:
    (ws / "src").mkdir()
    (ws / "src" / "a.py").write_text("import os\n\ndef main():\n    return os.getcwd()  # TODO\n")
    (ws / "src" / "b.txt").write_text("todo: nothing\nTODO later\n")
    (ws / "data.bin").write_bytes(b"TODO\x00\x01")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("TODO in git\n")
    (ws / ".hidden.md").write_text("a TODO hidden\n")


async def test_g2_grep(ws: Path, ctx: ToolContext, grep_engine: str) -> None:
    make_grep_tree(ws)
    res = await run("grep", {"pattern": "TODO"}, ctx)
    assert res.data["engine"] == grep_engine
    assert res.text.splitlines()[1:] == [
        ".hidden.md:1:a TODO hidden",
        "src/a.py:4:    return os.getcwd()  # TODO",
        "src/b.txt:2:TODO later",
    ]
    res = await run("grep", {"pattern": "todo", "ignore_case": True, "include": "*.txt"}, ctx)
    assert res.text.splitlines()[1:] == ["src/b.txt:1:todo: nothing", "src/b.txt:2:TODO later"]
    res = await run("grep", {"pattern": r"def \w+\(", "path": "src"}, ctx)
    assert res.text.splitlines()[1:] == ["src/a.py:3:def main():"]
    res = await run("grep", {"pattern": "os", "path": "src/a.py"}, ctx)
    assert res.text.splitlines()[1:] == ["src/a.py:1:import os", "src/a.py:4:    return os.getcwd()  # TODO"]
    res = await run("grep", {"pattern": "nomatch_xyz"}, ctx)
    assert res.text.startswith("No matches")


async def test_g2_grep_invalid_regex(ws: Path, ctx: ToolContext, grep_engine: str) -> None:
    err = await fails("grep", {"pattern": "foo("}, ctx, "invalid_regex")
    assert "foo(" in err.message


async def test_g2_grep_capped(
    ws: Path, ctx: ToolContext, grep_engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "many.txt").write_text("hit\n" * 50)
    monkeypatch.setattr(search_mod, "GREP_MAX_MATCHES", 10)
    res = await run("grep", {"pattern": "hit"}, ctx)
    assert len(res.text.splitlines()) == 11
    assert res.data["truncated"] is True
    assert "More than 10 matches" in res.text


@pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep is not installed")
async def test_g2_grep_rg_and_fallback_agree(
    ws: Path, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_grep_tree(ws)
    (ws / "src" / "deep").mkdir()
    (ws / "src" / "deep" / "c.py").write_text("x = 'TODO'\n")
    (ws / "src-x.py").write_text("TODO dash\n")
    with_rg = await run("grep", {"pattern": "TODO|os"}, ctx)
    monkeypatch.setattr(search_mod, "USE_RIPGREP", False)
    without = await run("grep", {"pattern": "TODO|os"}, ctx)
    assert with_rg.text == without.text
    # A pattern only Python supports (look-ahead) falls back instead of failing.
    monkeypatch.setattr(search_mod, "USE_RIPGREP", True)
    res = await run("grep", {"pattern": "TODO(?= later)"}, ctx)
    assert res.text.splitlines()[1:] == ["src/b.txt:2:TODO later"]


@pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep is not installed")
async def test_grep_rg_stderr_flood_does_not_stall(
    ws: Path, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """issue 12 item 5: ripgrep's stderr is read while its stdout is. An rg that writes 160 MB of
    errors (more than the 128 MB the subprocess reader buffers) before its matches is not stalled;
    read only afterwards, the stderr pipe fills, rg blocks on it and grep ends only at its timeout
    (an hour here: the test fails by hanging)."""
    make_grep_tree(ws)
    noisy = tmp_path / "noisy-rg"
    noisy.write_text(
        f"#!/bin/sh\nhead -c 167772160 /dev/zero | tr '\\0' 'e' >&2\nexec {shutil.which('rg')} \"$@\"\n"
    )
    noisy.chmod(0o755)
    monkeypatch.setattr(search_mod, "ripgrep", lambda: str(noisy))
    monkeypatch.setattr(search_mod, "GREP_TIMEOUT", 3600.0)
    res = await asyncio.wait_for(run("grep", {"pattern": "TODO", "path": "src"}, ctx), 600)
    assert res.data["engine"] == "ripgrep"
    assert res.text.splitlines()[1:] == [
        "src/a.py:4:    return os.getcwd()  # TODO",
        "src/b.txt:2:TODO later",
    ]


# --- run_shell_command ---------------------------------------------------------------------------


def test_g2_root_command() -> None:
    assert root_command("git status") == "git"
    assert root_command("GIT_PAGER=cat git log -1") == "git"
    assert root_command("  ls -la | wc -l") == "ls"
    assert root_command("echo 'unbalanced") == "echo"


async def test_g2_shell_confirmation(ws: Path, ctx: ToolContext) -> None:
    (ws / "sub").mkdir()
    details = await TOOLS["run_shell_command"].confirmation(
        {"command": "git status", "directory": "sub"}, ctx
    )
    assert details == ExecuteDetails(
        command="git status", working_directory=str(ws / "sub"), root_command="git"
    )


async def test_g2_shell_runs_and_reports_exit_code(ws: Path, ctx: ToolContext) -> None:
    (ws / "sub").mkdir()
    res = await run("run_shell_command", {"command": "pwd; echo err >&2", "directory": "sub"}, ctx)
    assert res.text == f"{ws / 'sub'}\nerr\nexit code 0"
    assert res.data["exit_code"] == 0
    res = await run("run_shell_command", {"command": "echo failing; exit 3"}, ctx)
    assert res.text.endswith("exit code 3")
    assert res.data["exit_code"] == 3
    res = await run("run_shell_command", {"command": "true"}, ctx)
    assert res.text == "(no output)\nexit code 0"
    # stdin is closed: a program reading it gets EOF at once instead of hanging.
    res = await run("run_shell_command", {"command": "cat; echo done", "timeout": 5}, ctx)
    assert "done" in res.text


async def test_g2_shell_output_keeps_head_and_tail(ws: Path, ctx: ToolContext) -> None:
    res = await run("run_shell_command", {"command": "seq 1 20000"}, ctx)
    assert res.text.startswith("1\n2\n3\n")
    assert res.text.endswith("19999\n20000\nexit code 0")
    assert "[… lines " in res.text and "characters) left out here" in res.text
    assert res.data["truncated"] is True
    assert res.data["saved_output"] is None  # a context with nowhere to save it


async def test_g2_shell_streams_live_output(ws: Path) -> None:
    seen: list[str] = []

    async def live(text: str) -> None:
        seen.append(text)

    ctx = make_ctx(ws, live=live)
    res = await run("run_shell_command", {"command": "for i in 1 2 3; do echo line$i; sleep 0.2; done"}, ctx)
    assert res.text.startswith("line1\nline2\nline3\n")
    assert len(seen) >= 3
    # Growing output: each update extends the previous one, and the last one is complete.
    for before, after in itertools.pairwise(seen):
        assert after.startswith(before)
    assert seen[0].startswith("line1") and "line3" not in seen[0]
    assert seen[-1] == "line1\nline2\nline3\n"


def _alive(pid: int) -> bool:
    """A pid is alive unless it is gone or a zombie (a dead process not yet reaped by init)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def _wait_pid_file(path: Path) -> int:
    for _ in range(200):
        if path.exists() and path.read_text().strip():
            return int(path.read_text().strip())
        await asyncio.sleep(0.02)
    raise AssertionError("the command never wrote its pid")


async def test_g2_shell_timeout_kills_group(ws: Path) -> None:
    ctx = make_ctx(ws, shell_timeout=0.5, shell_timeout_max=0.5)
    start = time.monotonic()
    err = await fails(
        "run_shell_command",
        {"command": "echo started; sleep 30 & echo $! > pid; wait", "timeout": 10},
        ctx,
        "timeout",
    )
    assert time.monotonic() - start < 5
    assert "timed out after 0.5 s (the server's maximum; 10 s was asked for)" in err.message
    assert "started" in err.message
    pid = int((ws / "pid").read_text())
    assert not _alive(pid)


async def test_g2_shell_cancel_event_kills_process_group(ws: Path, ctx: ToolContext) -> None:
    task = asyncio.create_task(run("run_shell_command", {"command": "sleep 30 & echo $! > pid; wait"}, ctx))
    pid = await _wait_pid_file(ws / "pid")
    assert _alive(pid)
    ctx.cancelled.set()
    with pytest.raises(ToolFailure) as info:
        await asyncio.wait_for(task, 5)
    assert info.value.type == "cancelled"
    assert not _alive(pid)


async def test_g2_shell_task_cancel_kills_process_group(ws: Path, ctx: ToolContext) -> None:
    """Cancelling the coroutine (the turn is cancelled) leaves no orphan behind."""
    task = asyncio.create_task(
        run("run_shell_command", {"command": "sleep 30 & echo $! > pid; sleep 30"}, ctx)
    )
    pid = await _wait_pid_file(ws / "pid")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert not _alive(pid)


async def test_g2_shell_term_ignored_gets_killed(
    ws: Path, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    from devagent.agent.sandbox import groups

    monkeypatch.setattr(groups, "KILL_GRACE", 0.3)
    task = asyncio.create_task(
        run(
            "run_shell_command",
            {"command": "trap '' TERM; echo $$ > pid; while true; do sleep 0.1; done"},
            ctx,
        )
    )
    pid = await _wait_pid_file(ws / "pid")
    ctx.cancelled.set()
    with pytest.raises(ToolFailure):
        await asyncio.wait_for(task, 5)
    assert not _alive(pid)


async def test_g2_shell_background_process_does_not_hang(ws: Path, ctx: ToolContext) -> None:
    start = time.monotonic()
    res = await run("run_shell_command", {"command": "sleep 3 & echo $! > pid; echo hi"}, ctx)
    assert time.monotonic() - start < 2.5
    assert res.text.startswith("hi\n")
    pid = int((ws / "pid").read_text())
    os.kill(pid, 9)


# --- save_memory ---------------------------------------------------------------------------------


async def test_g2_save_memory_creates_file(ws: Path, ctx: ToolContext) -> None:
    diff = await TOOLS["save_memory"].confirmation({"fact": "Use tabs"}, ctx)
    assert isinstance(diff, FileDiff) and diff.old_content is None and diff.file_name == "AGENTS.md"
    res = await run("save_memory", {"fact": "Use tabs"}, ctx)
    assert (ws / "AGENTS.md").read_text() == "## devagent memories\n\n- Use tabs\n"
    assert res.diff is not None
    await run("save_memory", {"fact": "Run tests\nwith make test"}, ctx)
    assert (
        ws / "AGENTS.md"
    ).read_text() == "## devagent memories\n\n- Use tabs\n- Run tests with make test\n"
    assert read_memory(ctx.workspace, "AGENTS.md").endswith("- Run tests with make test\n")


async def test_g2_save_memory_into_existing_guide(ws: Path, ctx: ToolContext) -> None:
    (ws / "AGENTS.md").write_text("# Guide\n\nBuild with make.\n")
    await run("save_memory", {"fact": "one"}, ctx)
    assert (ws / "AGENTS.md").read_text() == "# Guide\n\nBuild with make.\n\n## devagent memories\n\n- one\n"
    (ws / "AGENTS.md").write_text("# Guide\n\n## devagent memories\n\n- one\n\n## Other\n\ntext\n")
    await run("save_memory", {"fact": "two"}, ctx)
    assert (ws / "AGENTS.md").read_text() == (
        "# Guide\n\n## devagent memories\n\n- one\n- two\n\n## Other\n\ntext\n"
    )


async def test_g2_save_memory_custom_file_and_new_content(ws: Path) -> None:
    ctx = make_ctx(ws, memory_file="GEMINI.md", new_content="## devagent memories\n\n- edited\n")
    await run("save_memory", {"fact": "original"}, ctx)
    assert (ws / "GEMINI.md").read_text() == "## devagent memories\n\n- edited\n"
    assert read_memory(ctx.workspace, "GEMINI.md") == "## devagent memories\n\n- edited\n"
    assert read_memory(ctx.workspace, "MISSING.md") == ""


# --- write_todos ---------------------------------------------------------------------------------


async def test_g2_write_todos(ctx: ToolContext) -> None:
    todos = [
        {"description": "Read the code", "status": "completed"},
        {"description": "Fix the bug", "status": "in_progress"},
        {"description": "Run tests", "status": "pending"},
        {"description": "Refactor", "status": "cancelled"},
    ]
    res = await run("write_todos", {"todos": todos}, ctx)
    assert ctx.state.todos == todos
    assert "1. [x] Read the code" in res.text
    assert "2. [>] Fix the bug  (in progress)" in res.text
    assert "3. [ ] Run tests" in res.text
    assert "4. [-] Refactor  (cancelled)" in res.text
    res = await run("write_todos", {"todos": []}, ctx)
    assert ctx.state.todos == []
    assert "empty" in res.text


async def test_g2_write_todos_validation(ctx: ToolContext) -> None:
    two = [{"description": "a", "status": "in_progress"}, {"description": "b", "status": "in_progress"}]
    err = await fails("write_todos", {"todos": two}, ctx, "invalid_arguments")
    assert "at most one" in err.message
    await fails("write_todos", {"todos": [{"description": "a", "status": "done"}]}, ctx, "invalid_arguments")
    await fails("write_todos", {"todos": [{"status": "pending"}]}, ctx, "invalid_arguments")
    assert ctx.state.todos == []
