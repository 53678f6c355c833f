"""Diagnostics after edits (issue 43 item 1): after a write the model sees what the project's own
checkers find that the write introduced (a language server, else ruff for Python), never the
file's older problems; refuse mode undoes the write; language servers end with their session."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.events import ToolCallStatus, ToolCallUpdate, TurnEnd, UserPrompt
from devagent.agent.state import SessionState
from devagent.agent.tools import builtin_tools, freshness, language_servers
from devagent.agent.tools.base import ToolContext
from devagent.agent.tools.diagnostics import introduced
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.findings import Diagnostic
from devagent.agent.tools.workspace import Workspace
from devagent.config import ConfigError, load_config
from tests.conftest import process_ended
from tests.core_helpers import call, collect, text_of
from tests.npm import ensure_installed
from tests.sandboxes import bwrap_or_skip, provider

TOOLS = builtin_tools()
VENV_BIN = str(Path(sys.executable).parent)
SYSTEM_PATH = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != VENV_BIN]
JS = Path(__file__).parent / "js"
JS_BIN = JS / "node_modules" / ".bin"

# A file with older problems: an unused import and an undefined name, which no edit below adds.
OLD_PY = (
    "import os\n\n\ndef total(items):\n    return sum(items) + missing_before\n\n\nprint(total([1, 2]))\n"
)
# The edit introduces one undefined name, `undefined_after`, on line 8.
PY_EDIT = {"path": "app.py", "old_string": "[1, 2]", "new_string": "[1, undefined_after]"}

# A TypeScript file with an older type error (line 2); the edit adds one on line 6.
OLD_TS = "export const flag: boolean = 1;\n\nexport function twice(n: number): number {\n  return n * 2;\n}\n"
OLD_TS += "export const count: number = twice(2);\n"
TS_EDIT = {"path": "app.ts", "old_string": "twice(2)", "new_string": '"two"'}


def path_with(*folders: str) -> str:
    """A PATH of `folders` and the system's, without the test's own virtualenv (whose ruff and
    language servers a test chooses to show or not)."""
    return os.pathsep.join([*folders, *SYSTEM_PATH])


def bin_with(tmp_path: Path, *programs: str) -> str:
    """A folder holding only `programs` (links to the test virtualenv's), for a PATH that shows
    them and no other checker of the virtualenv; the test is skipped when one is missing."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for program in programs:
        found = shutil.which(program, path=VENV_BIN)
        if found is None:
            pytest.skip(f"{program} is not installed in {VENV_BIN}")
        (folder / program).symlink_to(found)
    return str(folder)


async def edit_through_the_loop(
    core_factory: Any, script: Any, workspace: Path, file: str, edit: dict[str, Any], **settings: Any
) -> tuple[list[Any], Any, Any]:
    """The scripted model reads `file`, makes `edit`, then says the last tool result; the events,
    the edit's final update and the core."""
    spec = script(
        [
            [call("read_file", {"path": file})],
            [call("edit", edit, "e1")],
            [{"text": "Result: {last_tool_results}"}],
        ]
    )
    core = await core_factory(spec, approval_mode="yolo", **settings)
    session = await core.create_session([workspace], approval_mode="yolo")
    events = await collect(session.advance(UserPrompt("edit it")))
    assert isinstance(events[-1], TurnEnd) and events[-1].reason == "finished", events[-1]
    done = [e.call for e in events if isinstance(e, ToolCallUpdate) and e.call.id == "e1"][-1]
    return events, done, (core, session)


async def test_issue43_item1_ruff_fallback_reports_exactly_the_undefined_name_the_edit_introduced(
    core_factory: Any, script: Any, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No language server on the PATH, ruff there: the edit's result names the new undefined
    name on line 8, and neither the file's older undefined name nor its unused import."""
    monkeypatch.setenv("PATH", path_with(bin_with(workspace.parent, "ruff")))
    if shutil.which("basedpyright-langserver") or shutil.which("pyright-langserver"):
        pytest.skip("a Python language server is on the system's PATH: the fallback is not used")
    (workspace / "app.py").write_text(OLD_PY)
    events, done, _ = await edit_through_the_loop(core_factory, script, workspace, "app.py", PY_EDIT)
    assert done.status is ToolCallStatus.SUCCEEDED
    said = text_of(events)
    shown = "Diagnostics (ruff): this write introduced:\n  line 8: error [F821]: "
    shown += "Undefined name `undefined_after`\n"
    assert shown in said, said
    assert "missing_before" not in said.split("Diagnostics (ruff)", 1)[1]
    assert "F401" not in said
    assert done.output.data["diagnostics"] == [
        {"line": 8, "message": "Undefined name `undefined_after`", "code": "F821", "severity": "error"}
    ]
    assert (workspace / "app.py").read_text() == OLD_PY.replace("[1, 2]", "[1, undefined_after]")


async def test_issue43_item1_refuse_mode_undoes_the_write(
    core_factory: Any, script: Any, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """edit_diagnostics = refuse: the edit is undone (the file as before) and fails with the
    diagnostic; an edit that introduces nothing goes through."""
    monkeypatch.setenv("PATH", path_with(bin_with(workspace.parent, "ruff")))
    (workspace / "app.py").write_text(OLD_PY)
    _, done, _ = await edit_through_the_loop(
        core_factory, script, workspace, "app.py", PY_EDIT, edit_diagnostics="refuse"
    )
    assert done.status is ToolCallStatus.FAILED and done.error is not None
    assert done.error.type == "diagnostics"
    assert "Nothing was written" in done.error.message
    assert "line 8: error" in done.error.message and "undefined_after" in done.error.message
    assert (workspace / "app.py").read_text() == OLD_PY
    good = {"path": "app.py", "old_string": "[1, 2]", "new_string": "[1, 2, 3]"}
    _, done, _ = await edit_through_the_loop(
        core_factory, script, workspace, "app.py", good, edit_diagnostics="refuse"
    )
    assert done.status is ToolCallStatus.SUCCEEDED, done.error
    assert "[1, 2, 3]" in (workspace / "app.py").read_text()


async def test_issue43_item1_off_and_no_checker_installed(
    core_factory: Any, script: Any, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """off: nothing is checked; with no checker on the PATH the write is made and says nothing."""
    (workspace / "app.py").write_text(OLD_PY)
    monkeypatch.setenv("PATH", path_with(bin_with(workspace.parent, "ruff")))
    events, done, _ = await edit_through_the_loop(
        core_factory, script, workspace, "app.py", PY_EDIT, edit_diagnostics="off"
    )
    assert done.status is ToolCallStatus.SUCCEEDED and "Diagnostics" not in text_of(events)
    (workspace / "app.py").write_text(OLD_PY)
    monkeypatch.setenv("PATH", path_with())
    if shutil.which("ruff") or shutil.which("basedpyright-langserver") or shutil.which("pyright-langserver"):
        pytest.skip("a Python checker is on the system's PATH")
    events, done, _ = await edit_through_the_loop(core_factory, script, workspace, "app.py", PY_EDIT)
    assert done.status is ToolCallStatus.SUCCEEDED and "Diagnostics" not in text_of(events)


def test_issue43_item1_what_counts_as_introduced() -> None:
    """An old diagnostic matches a new one by message on the line the edit moved it to, else by
    code and message; each old one accounts for one new one."""
    old = "a\nb\nc\n"
    new = "x\ny\na\nb\nc\n"  # two lines added above: a old one on line 3 is now on line 5
    before = (Diagnostic(3, "bad c", "E1"), Diagnostic(1, "bad a", "E2"))
    after = (Diagnostic(5, "bad c", "E1"), Diagnostic(3, "bad a", "E2"), Diagnostic(1, "bad x", "E3"))
    assert introduced(before, after, old, new) == [Diagnostic(1, "bad x", "E3")]
    # the same message twice where it was once: one of them is new
    twice = (Diagnostic(5, "bad c", "E1"), Diagnostic(2, "bad c", "E1"))
    assert introduced(before[:1], twice, old, new) == [Diagnostic(2, "bad c", "E1")]
    # a changed line's old diagnostic still matches by code and message
    assert introduced((Diagnostic(2, "m", "C"),), (Diagnostic(4, "m", "C"),), "a\nb\n", "a\nB\nq\nr\n") == []
    assert introduced(None, after, None, new) == sorted(after, key=lambda d: d.line)


def test_issue43_item1_the_setting(tmp_path: Path) -> None:
    assert load_config(environ={}).edit_diagnostics == "warn"
    assert load_config(environ={"DEVAGENT_EDIT_DIAGNOSTICS": "Refuse"}).edit_diagnostics == "refuse"
    settings = tmp_path / "settings.toml"
    settings.write_text('[devagent]\nedit_diagnostics = "off"\n')
    assert load_config(environ={"DEVAGENT_CONFIG": str(settings)}).edit_diagnostics == "off"
    with pytest.raises(ConfigError, match=r"edit_diagnostics .*must be one of warn, refuse, off"):
        load_config(environ={"DEVAGENT_EDIT_DIAGNOSTICS": "loud"})


def processes_in(folder: Path) -> list[int]:
    """The live processes whose working directory is `folder` (a language server and what it
    started run there)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/cwd") == str(folder.resolve()) and not process_ended(
                    int(entry)
                ):
                    found.append(int(entry))
            except OSError:
                continue
    return found


def command_lines(pids: list[int]) -> str:
    lines = []
    for pid in pids:
        with contextlib.suppress(OSError):
            lines.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
    return "\n".join(lines)


async def test_issue43_item1_language_server_reports_exactly_the_python_error_and_ends_with_the_session(
    core_factory: Any, script: Any, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """basedpyright on the PATH: the edit's result names the new undefined name as the language
    server words it, and not the file's older undefined name; once the session is released, the
    server and everything it started are gone."""
    monkeypatch.setenv("PATH", path_with(bin_with(workspace.parent, "ruff", "basedpyright-langserver")))
    (workspace / "app.py").write_text(OLD_PY)
    events, done, (core, session) = await edit_through_the_loop(
        core_factory, script, workspace, "app.py", PY_EDIT
    )
    said = text_of(events)
    assert done.status is ToolCallStatus.SUCCEEDED
    shown = "Diagnostics (basedpyright): this write introduced:\n"
    shown += '  line 8: error [reportUndefinedVariable]: "undefined_after" is not defined\n'
    assert shown in said, said
    assert "missing_before" not in said.split("Diagnostics (basedpyright)", 1)[1]
    assert [d["line"] for d in done.output.data["diagnostics"]] == [8]
    running = processes_in(workspace)
    assert "basedpyright" in command_lines(running), command_lines(running)
    await core.release(session.id)
    assert processes_in(workspace) == [], command_lines(processes_in(workspace))


@pytest.mark.npm
async def test_issue43_item1_language_server_reports_exactly_the_typescript_type_error(
    core_factory: Any, script: Any, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """typescript-language-server (tests/unit/agent/tools/js) on the PATH: an edit that assigns a string to a
    number reports that type error on its line, not the file's older one; the server ends with
    the core."""
    ensure_installed(JS, JS_BIN / "typescript-language-server", "typescript-language-server")
    monkeypatch.setenv("PATH", path_with(str(JS_BIN)))
    (workspace / "app.ts").write_text(OLD_TS)
    events, done, (core, _) = await edit_through_the_loop(core_factory, script, workspace, "app.ts", TS_EDIT)
    said = text_of(events)
    assert done.status is ToolCallStatus.SUCCEEDED
    shown = "Diagnostics (typescript-language-server): this write introduced:\n"
    shown += "  line 6: error [2322]: Type 'string' is not assignable to type 'number'.\n"
    assert shown in said, said
    assert "'boolean'" not in said.split("Diagnostics (", 1)[1]
    assert done.output.data["diagnostics"] == [
        {
            "line": 6,
            "message": "Type 'string' is not assignable to type 'number'.",
            "code": "2322",
            "severity": "error",
        }
    ]
    assert processes_in(workspace)
    await core.close()
    assert processes_in(workspace) == [], command_lines(processes_in(workspace))


async def test_issue43_item1_a_failing_language_server_never_fails_the_write(
    core_factory: Any, script: Any, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A "language server" that exits at once: the write is made, ruff answers instead, and the
    broken server is not started again by the next write."""
    folder = Path(bin_with(workspace.parent, "ruff"))
    starts = workspace.parent / "starts"
    fake = folder / "basedpyright-langserver"
    fake.write_text(f"#!/bin/sh\necho started >> {starts}\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", path_with(str(folder)))
    (workspace / "app.py").write_text(OLD_PY)
    again = {"path": "app.py", "old_string": "[1, undefined_after]", "new_string": "[1, 2, also_new]"}
    spec = script(
        [
            [call("read_file", {"path": "app.py"})],
            [call("edit", PY_EDIT, "e1")],
            [call("edit", again, "e2")],
            [{"text": "done"}],
        ]
    )
    core = await core_factory(spec, approval_mode="yolo")
    session = await core.create_session([workspace], approval_mode="yolo")
    events = await collect(session.advance(UserPrompt("edit it")))
    done = {e.call.id: e.call for e in events if isinstance(e, ToolCallUpdate)}
    assert done["e1"].status is ToolCallStatus.SUCCEEDED and done["e2"].status is ToolCallStatus.SUCCEEDED
    assert done["e1"].output.data["diagnostics_source"] == "ruff"
    assert [d["message"] for d in done["e2"].output.data["diagnostics"]] == ["Undefined name `also_new`"]
    assert starts.read_text() == "started\n"
    assert "[1, 2, also_new]" in (workspace / "app.py").read_text()


def _tree(leaders: list[int]) -> list[int]:
    """The processes `leaders` and everything below them."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry))
    found, todo = [], list(leaders)
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


async def test_issue43_item1_checkers_run_in_the_sandbox(
    core_factory: Any, script: Any, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the shell sandbox on, the language server runs in it as commands do (bwrap leads it)
    and reports the edit's undefined name as outside it; it and all it started end with the
    session."""
    sandboxes = provider(bwrap_or_skip())
    venv = Path(sys.executable).parent.resolve()
    private = [p for p in (Path("/tmp"), Path("/run")) if venv.is_relative_to(p)]
    if private:  # a clone under /tmp: the sandbox's own /tmp hides the venv the servers run from
        pytest.skip(f"the test's virtualenv {venv} is under {private[0]}, which the sandbox keeps private")
    tools = workspace / ".tools"  # in the workspace: the sandbox shows it (its /tmp is its own)
    tools.mkdir()
    for program in ("ruff", "basedpyright-langserver"):
        found = shutil.which(program, path=VENV_BIN)
        if found is None:
            pytest.skip(f"{program} is not installed in {VENV_BIN}")
        (tools / program).symlink_to(found)
    monkeypatch.setenv("PATH", path_with(str(tools)))
    (workspace / "app.py").write_text(OLD_PY)
    events, done, (core, session) = await edit_through_the_loop(
        core_factory, script, workspace, "app.py", PY_EDIT, sandboxes=sandboxes
    )
    said = text_of(events)
    assert '"undefined_after" is not defined' in said, said
    assert done.output.data["diagnostics_source"] == "basedpyright"
    assert "missing_before" not in said.split("Diagnostics (", 1)[1]
    pids = core.language_servers.pids(session.id)
    assert pids and "bwrap" in command_lines(pids), command_lines(pids)
    tree = _tree(pids)
    assert len(tree) > len(pids)  # bwrap, and the server below it
    await core.release(session.id)
    assert all(process_ended(pid) for pid in tree), command_lines(tree)


async def test_issue43_item1_servers_are_kept_for_a_bounded_number_of_sessions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At most MAX_SESSIONS sessions keep servers (the least recently used one's stop), and a
    session whose calls have not used them for IDLE_SECONDS loses them."""
    monkeypatch.setattr(language_servers, "MAX_SESSIONS", 2)
    registry = language_servers.LanguageServerRegistry()
    first = registry.of("a")
    registry.of("b")
    assert registry.of("a") is first  # a use: "b" is now the least recently used
    registry.of("c")
    assert list(registry._sessions) == ["a", "c"]
    monkeypatch.setattr(language_servers, "IDLE_SECONDS", 0.0)
    registry.of("d")
    assert list(registry._sessions) == ["d"]
    await registry.close()


async def test_issue43_item1_apply_patch_in_refuse_mode_puts_every_file_back(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A patch whose second file gets an undefined name, refuse mode: both files are as before
    and the call fails with the diagnostic; in warn mode the patch's result carries it."""
    monkeypatch.setenv("PATH", path_with(bin_with(ws.parent, "ruff")))
    (ws / "a.py").write_text("A = 1\n")
    (ws / "b.py").write_text("B = 2\n")
    patch = "\n".join(
        [
            "*** Begin Patch",
            "*** Update File: a.py",
            "@@",
            "-A = 1",
            "+A = 10",
            "*** Update File: b.py",
            "@@",
            "-B = 2",
            "+B = nowhere",
            "*** End Patch",
        ]
    )
    state = SessionState(workspace_roots=[str(ws)])
    for name in ("a.py", "b.py"):
        freshness.remember(state, (ws / name).resolve(), freshness.mark_of((ws / name).read_text()))

    def ctx(mode: str) -> ToolContext:
        return ToolContext(workspace=Workspace([ws]), state=state, diagnostics=mode)

    with pytest.raises(ToolFailure) as refused:
        await TOOLS["apply_patch"].run({"input": patch}, ctx("refuse"))
    assert refused.value.type == "diagnostics" and "Undefined name `nowhere`" in refused.value.message
    assert (ws / "a.py").read_text() == "A = 1\n" and (ws / "b.py").read_text() == "B = 2\n"
    result = await TOOLS["apply_patch"].run({"input": patch}, ctx("warn"))
    assert "line 1: error [F821]: Undefined name `nowhere`" in result.text
    assert (ws / "b.py").read_text() == "B = nowhere\n"
