"""Issue 43 item 2: a background process in a pseudo-terminal (`tty: true`), through the real loop
with a scripted model: an interactive Python REPL typed into (`1+1<Enter>` shows `2`), a program
redrawing its screen with cursor movements read as the final screen, Ctrl-C interrupting a
`sleep`, the size chosen, the lines that scrolled off; stopping, cancelling and the session's end
leave no process. Each runs unsandboxed and, where bubblewrap runs here, sandboxed."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.events import ToolCallStatus, TurnEnd, UserPrompt
from devagent.agent.state import SessionState
from devagent.agent.tools import builtin_tools
from devagent.agent.tools.base import ToolContext
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.processes import ProcessRegistry
from devagent.agent.tools.tty_keys import keys
from devagent.agent.tools.tty_screen import printed
from devagent.agent.tools.workspace import Workspace
from tests.core_helpers import call, calls_by_id, collect, read_in_background, result_text, until
from tests.process_scan import running

PY = os.path.realpath(sys.executable)
WITHIN = 30.0  # seconds a condition may take on a loaded machine (a failure guard, never a pace)
TOOLS = builtin_tools()

# A full-screen program without curses: it clears the screen, then rewrites a counter in place
# (cursor moves, erase to the end of the line, colours, a bell, a window title), then waits for Enter.
COUNTER = """\
import sys
w = sys.stdout.write
w("\\033]0;a title\\007\\033[H\\033[2J")
w("counter " + ("on a tty" if sys.stdout.isatty() and sys.stdin.isatty() else "NOT on a tty") + "\\n")
for i in range(1, 201):
    w(f"\\033[2;1Hcount: {i}\\033[K")
    w(f"\\033[3;1H\\033[1;31mred {i}\\033[0m\\007")
    sys.stdout.flush()
w("\\033[5;10Hdone\\r\\n")
sys.stdout.flush()
line = sys.stdin.readline()
print("got", repr(line), flush=True)
"""
ISATTY = "import sys; sys.stdin.isatty(), sys.stdout.isatty()"
SLEEP = "import time; time.sleep(3600)"


def tty(command: str, cid: str, **size: int) -> dict[str, Any]:
    return call("run_shell_command", {"command": command, "tty": True, **size}, cid)


def proc(cid: str, action: str, pid: str = "bg1", **args: Any) -> dict[str, Any]:
    return call("background_process", {"action": action, **({"id": pid} if pid else {}), **args}, cid)


def screen(text: str) -> list[str]:
    """The screen's lines in a read's result (after its `--- the screen` line, before the status)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("--- the screen ("))
    return lines[start + 1 : -1]


def controls(text: str) -> list[str]:
    """The control characters `text` holds, line ends aside."""
    return [c for c in text if c != "\n" and (ord(c) < 32 or 0x7F <= ord(c) < 0xA0)]


@pytest.fixture
def marker() -> Iterator[str]:
    """A name for the test's processes; whatever of them a failing test left is killed afterwards."""
    name = f"ttytest-{uuid.uuid4().hex[:10]}"
    yield name
    for pid in running(name):
        os.kill(pid, signal.SIGKILL)


async def test_issue43_item2_python_repl_typed_into(
    sandboxing: bool, yolo_core: Any, script: Any, workspace: Path, marker: str
) -> None:
    """Python's REPL sees a terminal (it prompts `>>>`, which it does only on one): `1+1<Enter>`
    shows `2` on the screen; Ctrl-C interrupts a statement running in it (its traceback, then a
    new prompt); stopping it leaves nothing running."""
    spec = script(
        [
            {"items": [tty(f"{PY} -q -i -c pass {marker}", "start")]},
            {"items": [proc("prompt", "output", wait_for=">>>")]},
            {"items": [proc("sum", "input", input="1+1<Enter>", wait_for="\n>>>")]},
            {"items": [proc("isatty", "input", input=f"{ISATTY}<Enter>")]},
            {"items": [proc("isatty2", "output", wait_for=">>>")]},
            {"items": [proc("sleep", "input", input=f"{SLEEP}<Enter>", wait_for="3600)\n")]},
            {"items": [proc("interrupt", "input", input="<C-c>", wait_for=">>>")]},
            {"items": [proc("stop", "stop")]},
            {"items": [{"text": "done"}]},
        ]
    )
    core = await yolo_core(spec)
    s = await core.create_session([workspace])
    events = await collect(s.advance(UserPrompt("use the REPL")))
    calls = calls_by_id(events)
    assert isinstance(events[-1], TurnEnd) and events[-1].reason == "finished", events[-1]
    assert all(c.status is ToolCallStatus.SUCCEEDED for c in calls.values()), [
        result_text(c) for c in calls.values()
    ]
    started = calls["start"].output
    assert started is not None and started.data["tty"] == {"rows": 24, "cols": 80}
    assert started.data["sandboxed"] is sandboxing
    assert screen(result_text(calls["prompt"])) == [">>>"]
    assert screen(result_text(calls["sum"])) == [">>> 1+1", "2", ">>>"]
    assert result_text(calls["sum"]).startswith("--- the screen (24x80), cursor at line 3, column 5 ---\n")
    isatty = result_text(calls["isatty"]) + result_text(calls["isatty2"])
    assert "(True, True)" in isatty and "NameError" not in isatty
    shown = screen(result_text(calls["interrupt"]))
    assert shown[-2:] == ["KeyboardInterrupt", ">>>"], shown
    assert "^CTraceback (most recent call last):" in shown  # interrupted while running, not at the prompt
    assert result_text(calls["stop"]).endswith("[bg1: stopped (stopped on request)]")
    assert all(not controls(result_text(c)) for c in calls.values())
    await until(lambda: not running(marker), "the REPL was still running")


async def test_issue43_item2_tui_read_as_its_final_screen(
    sandboxing: bool, yolo_core: Any, script: Any, workspace: Path, marker: str
) -> None:
    """A program that clears the screen and redraws a counter in place reads as the screen a
    terminal would show at the end (not its escape sequences, not its 200 drawings); its title,
    bell and colours are no characters of the text; Enter reaches it."""
    (workspace / f"{marker}.py").write_text(COUNTER)
    spec = script(
        [
            {"items": [tty(f"{PY} {marker}.py", "start")]},
            {"items": [proc("drawn", "output", wait_for="done")]},
            {"items": [proc("enter", "input", input="<Enter>", wait_for="got")]},
            {"items": [proc("end", "output", timeout=WITHIN)]},
            {"items": [{"text": "done"}]},
        ]
    )
    core = await yolo_core(spec)
    s = await core.create_session([workspace])
    calls = calls_by_id(await collect(s.advance(UserPrompt("run the counter"))))
    drawn = result_text(calls["drawn"])
    assert screen(drawn) == ["counter on a tty", "count: 200", "red 200", "", "         done"], drawn
    assert "--- the screen (24x80), cursor at line 6, column 1 ---" in drawn
    assert "count: 199" not in drawn and "a title" not in drawn and "lines scrolled off" not in drawn
    assert screen(result_text(calls["enter"]))[-1] == "got '\\n'"
    assert result_text(calls["end"]).endswith("[bg1: exited with code 0]")
    assert all(not controls(result_text(c)) for c in calls.values())
    assert not running(marker)


async def test_issue43_item2_ctrl_c_interrupts_a_sleep(
    sandboxing: bool, yolo_core: Any, script: Any, workspace: Path, marker: str
) -> None:
    """`<C-c>` typed into the terminal interrupts the `sleep` the command runs: the command ends
    as one interrupted (exit code 130), before it prints what follows the sleep, and nothing of it
    is left."""
    naptime = f"3600.{int(marker[-6:], 16)}"  # a sleep no other test runs
    spec = script(
        [
            {"items": [tty(f"echo ready {marker}; sleep {naptime}; echo after", "start")]},
            {"items": [proc("ready", "output", wait_for="ready")]},
            {"items": [proc("interrupt", "input", input="<C-c>")]},
            {"items": [proc("end", "output", timeout=WITHIN)]},
            {"items": [{"text": "done"}]},
        ]
    )
    core = await yolo_core(spec)
    s = await core.create_session([workspace])
    calls = calls_by_id(await collect(s.advance(UserPrompt("sleep"))))
    assert running(naptime) == []
    end = result_text(calls["end"])
    assert end.endswith("[bg1: exited with code 130]"), end
    assert "after" not in end and f"ready {marker}" in end
    assert not running(marker)


async def test_issue43_item2_size_and_scrolled_lines(
    sandboxing: bool, yolo_core: Any, script: Any, workspace: Path, marker: str
) -> None:
    """The terminal has the size asked for (the program reads it); lines that scroll off the
    screen's top come with the next read, once."""
    spec = script(
        [
            {"items": [tty(f"stty size; seq 1 30; echo {marker}; read x", "start", rows=10, cols=40)]},
            {"items": [proc("first", "output", wait_for=marker)]},
            {"items": [proc("again", "output")]},
            {"items": [proc("stop", "stop")]},
            {"items": [{"text": "done"}]},
        ]
    )
    core = await yolo_core(spec)
    s = await core.create_session([workspace])
    calls = calls_by_id(await collect(s.advance(UserPrompt("count"))))
    first = result_text(calls["first"])
    # 32 lines written (the size, 30 numbers, the marker) and the cursor on a 33rd: 23 scrolled off.
    assert first.startswith("--- 23 lines scrolled off the screen since the last read ---\n10 40\n1\n"), first
    assert screen(first) == [*map(str, range(23, 31)), marker]
    assert "--- the screen (10x40), cursor at line 10, column 1 ---" in first
    again = result_text(calls["again"])
    assert "scrolled off" not in again and screen(again) == screen(first)
    await until(lambda: not running(marker), "it was still running")


async def test_issue43_item2_cancel_and_session_end_leave_no_process(
    sandboxing: bool, yolo_core: Any, script: Any, workspace: Path, tmp_path: Path, marker: str
) -> None:
    """A pty process (which leads a session of its own, its terminal's) is stopped with the rest:
    a cancelled turn stops it, so does the end of its session; nothing is left either time."""
    steps = [
        {"items": [tty(f"{PY} -q -i -c pass {marker}", "start")]},
        {"items": [proc("ready", "output", wait_for=">>>")]},
        {"items": [{"wait_for": str(tmp_path / "never")}, {"text": "never said"}]},
    ]
    core = await yolo_core(script(steps))
    s = await core.create_session([workspace])
    turn = s.advance(UserPrompt("go"))
    events: list[Any] = []
    reading = read_in_background(turn, events)
    await until(lambda: "ready" in calls_by_id(events), "the REPL never prompted")
    assert running(marker)
    await turn.cancel()
    await asyncio.wait_for(reading, WITHIN)
    await until(lambda: not running(marker), "a pty process outlived the cancel")
    assert [p.state for p in core.processes.processes(s.id)] == ["stopped (a turn was cancelled)"]

    steps[2] = {"items": [{"text": "running"}]}
    other = await core.create_session([workspace], model=script(steps))
    await collect(other.advance(UserPrompt("go")))
    assert running(marker)
    await core.release(other.id)
    await until(lambda: not running(marker), "a pty process outlived its session")


def test_issue43_item2_key_notation() -> None:
    """Keys by name, case-insensitive; anything else, `<div>` included, is literal text."""
    assert keys("1+1<Enter>") == b"1+1\r"
    assert keys("<C-c><c-D><C-[>") == b"\x03\x04\x1b"
    assert keys("<Up><down><Tab><S-Tab><Esc>:wq<CR>") == b"\x1b[A\x1b[B\t\x1b[Z\x1b:wq\r"
    assert keys("<BS><Del><F1><F12><PageUp><Space>") == b"\x7f\x1b[3~\x1bOP\x1b[24~\x1b[5~ "
    assert keys("<div>a<lt>b>é<C-ab>") == "<div>a<b>é<C-ab>".encode()
    assert printed("\x1b[1;31mred\x1b[0m\r\n\x1b]0;t\x07>>> \x07") == "red\n>>> "


async def test_issue43_item2_size_arguments_checked(ws: Path) -> None:
    """A size without `tty`, or outside the bounds, is refused before anything starts."""
    registry = ProcessRegistry(0, lambda _sid: False)
    ctx = ToolContext(
        workspace=Workspace([ws]), state=SessionState(workspace_roots=[str(ws)]), processes=registry.of("s")
    )
    try:
        for args in ({"rows": 10}, {"tty": True, "cols": 5000}, {"tty": True, "rows": 1}):
            with pytest.raises(ToolFailure) as refused:
                await TOOLS["run_shell_command"].run({"command": "true", **args}, ctx)
            assert refused.value.type == "invalid_arguments"
        assert registry.processes("s") == []
    finally:
        await registry.close()


async def test_issue43_item2_stop_reaches_a_program_ignoring_its_signals(
    sandboxing: bool, yolo_core: Any, script: Any, workspace: Path, marker: str
) -> None:
    """A pty program that ignores SIGTERM, SIGHUP and Ctrl-C is still stopped, with what it runs:
    the supervisor (unsandboxed) or the sandbox's end kills what outlives the grace."""
    naptime = f"3600.{int(marker[-6:], 16)}"
    spec = script(
        [
            {"items": [tty(f"trap '' TERM HUP INT; echo ready {marker}; sleep {naptime}", "start")]},
            {"items": [proc("ready", "output", wait_for="ready")]},
            {"items": [proc("interrupt", "input", input="<C-c>")]},
            {"items": [proc("stop", "stop")]},
            {"items": [{"text": "done"}]},
        ]
    )
    core = await yolo_core(spec)
    s = await core.create_session([workspace])
    calls = calls_by_id(await collect(s.advance(UserPrompt("stubborn"))))
    assert result_text(calls["interrupt"]).endswith("[bg1: running]")  # Ctrl-C ignored
    assert result_text(calls["stop"]).endswith("[bg1: stopped (stopped on request)]")
    await until(lambda: not running(marker) and not running(naptime), "it was still running")
