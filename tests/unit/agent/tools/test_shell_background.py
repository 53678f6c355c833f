"""Issue 30 item 4: background processes, through the real loop with a scripted model: started (an
id back at once), their output read, a server queried from another command, their input written
and echoed, listed, stopped; asked like commands where they act; bounded; and nothing of them
left after the turn is cancelled, the session ends or idles, or the core closes. Each runs
unsandboxed and, where bubblewrap runs here, sandboxed (with the network allowed where the test
needs loopback between commands). The real server's stop (SIGTERM, SIGKILL) is in
tests/wire/test_shell_background.py."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.events import (
    Decision,
    GenericDetails,
    NeedsInput,
    Resume,
    ToolCallStatus,
    ToolKind,
    TurnEnd,
    UserPrompt,
)
from devagent.agent.policy import approval
from devagent.agent.sandbox.base import SandboxProvider
from devagent.agent.state import SessionState
from devagent.agent.tools import builtin_tools, processes
from devagent.agent.tools.base import ToolContext
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.processes import NewestText, ProcessRegistry
from devagent.agent.tools.workspace import Workspace
from tests.core_helpers import call, calls_by_id, collect, read_in_background, result_text, until
from tests.process_scan import running
from tests.sandboxes import bwrap_or_skip, provider

PY = os.path.realpath(sys.executable)
WITHIN = 30.0  # seconds a condition may take on a loaded machine (a failure guard, never a pace)
TOOLS = builtin_tools()

ECHO = """\
import sys
print("ready", flush=True)
for line in sys.stdin:
    print("echo:", line.strip(), flush=True)
print("input closed", flush=True)
"""
LINGER = """\
import sys, time
print("ready", flush=True)
time.sleep(3600)  # a long-running process, until something stops it
"""


# A web server on a port it picks itself (a port picked here and handed to it could be taken
# meanwhile, by another test's server even): it writes the port down before it says it serves.
SERVE = """\
import functools, http.server, pathlib
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=".")
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
pathlib.Path("port.txt").write_text(str(server.server_port))
print(f"Serving HTTP on 127.0.0.1 port {server.server_port}", flush=True)
server.serve_forever()
"""


def bg(command: str, cid: str) -> dict[str, Any]:
    return call("run_shell_command", {"command": command, "background": True}, cid)


def proc(cid: str, action: str, pid: str = "bg1", **args: Any) -> dict[str, Any]:
    return call("background_process", {"action": action, **({"id": pid} if pid else {}), **args}, cid)


@pytest.fixture
def marker() -> Iterator[str]:
    """A name for the test's processes (an argument or part of their command lines); whatever
    of them a failing test left running is killed afterwards."""
    name = f"bgtest-{uuid.uuid4().hex[:10]}"
    yield name
    for pid in running(name):
        os.kill(pid, signal.SIGKILL)


@pytest.fixture(params=["unsandboxed", "sandboxed"])
def sandboxes(request: pytest.FixtureRequest) -> SandboxProvider | None:
    """Runs the test with the core's commands unsandboxed, then in bubblewrap (network allowed:
    the host's, so loopback reaches from one command to another) where it runs here."""
    if request.param == "sandboxed":
        return provider(bwrap_or_skip(network=True))
    return None


async def test_issue30_item4_background_server_queried_from_another_command(
    sandboxing: bool, yolo_core: Any, script: Any, workspace: Path
) -> None:
    """A web server started in the background (an id back at once), its output read once it
    listens, queried with curl from another command, its request log read, listed, stopped; no
    process of it is left."""
    (workspace / "hello.txt").write_text("hello from the workspace\n")
    serve = f"serve-{uuid.uuid4().hex[:8]}.py"  # its name finds it in the process table
    (workspace / serve).write_text(SERVE)
    server = f"{PY} -u {serve}"
    spec = script(
        [
            {"items": [bg(server, "start")]},
            {"items": [proc("ready", "output", wait_for="Serving HTTP")]},
            {
                "items": [
                    call(
                        "run_shell_command",
                        {"command": "curl -s http://127.0.0.1:$(cat port.txt)/hello.txt"},
                        "curl",
                    )
                ]
            },
            {"items": [proc("log", "output", wait_for="GET /hello.txt")]},
            {"items": [proc("list", "list", pid="")]},
            {"items": [proc("stop", "stop")]},
            {"items": [{"text": "done"}]},
        ]
    )
    core = await yolo_core(spec)
    s = await core.create_session([workspace])
    events = await collect(s.advance(UserPrompt("serve and query")))
    calls = calls_by_id(events)
    assert isinstance(events[-1], TurnEnd) and events[-1].reason == "finished", events[-1]
    assert all(c.status is ToolCallStatus.SUCCEEDED for c in calls.values()), [
        result_text(c) for c in calls.values()
    ]
    assert result_text(calls["start"]).startswith("Started in the background as bg1.")
    assert calls["start"].output is not None and calls["start"].output.data["sandboxed"] is sandboxing
    port = (workspace / "port.txt").read_text()
    assert f"Serving HTTP on 127.0.0.1 port {port}" in result_text(calls["ready"])
    assert result_text(calls["ready"]).endswith("[bg1: running]")
    assert result_text(calls["curl"]) == "hello from the workspace\nexit code 0"
    assert '"GET /hello.txt HTTP/1.1" 200' in result_text(calls["log"])
    assert result_text(calls["list"]).startswith("bg1: running, started ") and server in result_text(
        calls["list"]
    )
    assert result_text(calls["stop"]).endswith("[bg1: stopped (stopped on request)]")
    await until(lambda: not running(serve), "the server was still running")


async def test_issue30_item4_background_input_echoed(
    sandboxing: bool, yolo_core: Any, script: Any, workspace: Path, marker: str
) -> None:
    """Text written to a background process's input reaches it (echoed back in its output);
    closing its input ends it, and its exit is read."""
    (workspace / f"{marker}.py").write_text(ECHO)
    spec = script(
        [
            {"items": [bg(f"{PY} -u {marker}.py", "start")]},
            {"items": [proc("ready", "output", wait_for="ready")]},
            {"items": [proc("hello", "input", input="hello\n", wait_for="echo: hello")]},
            {"items": [proc("bye", "input", input="bye\n", close_input=True, wait_for="input closed")]},
            {"items": [proc("end", "output", timeout=WITHIN)]},
            {"items": [proc("again", "input", input="more\n")]},
            {"items": [{"text": "done"}]},
        ]
    )
    core = await yolo_core(spec)
    s = await core.create_session([workspace])
    calls = calls_by_id(await collect(s.advance(UserPrompt("echo"))))
    assert "echo: hello" in result_text(calls["hello"]) and "[bg1: running]" in result_text(calls["hello"])
    assert "echo: bye" in result_text(calls["bye"]) and "input closed" in result_text(calls["bye"])
    assert result_text(calls["end"]).endswith("[bg1: exited with code 0]")
    assert calls["again"].status is ToolCallStatus.FAILED
    assert "has ended" in result_text(calls["again"])
    assert not running(marker)


async def test_issue30_item4_cancel_stops_background_processes(
    sandboxing: bool, yolo_core: Any, script: Any, workspace: Path, tmp_path: Path, marker: str
) -> None:
    """Cancelling a turn stops the session's background processes: none is left."""
    (workspace / f"{marker}.py").write_text(LINGER)
    spec = script(
        [
            {"items": [bg(f"{PY} -u {marker}.py", "start")]},
            {"items": [proc("ready", "output", wait_for="ready")]},
            {"items": [{"wait_for": str(tmp_path / "never")}, {"text": "never said"}]},
        ]
    )
    core = await yolo_core(spec)
    s = await core.create_session([workspace])
    turn = s.advance(UserPrompt("go"))
    events: list[Any] = []
    reading = read_in_background(turn, events)
    await until(
        lambda: any(
            c.status is ToolCallStatus.SUCCEEDED for cid, c in calls_by_id(events).items() if cid == "ready"
        ),
        "the process never became ready",
    )
    assert running(marker)
    await turn.cancel()
    await asyncio.wait_for(reading, WITHIN)
    assert isinstance(events[-1], TurnEnd) and events[-1].reason == "cancelled"
    await until(lambda: not running(marker), "a background process outlived the cancel")
    stopped = core.processes.processes(s.id)
    assert [p.state for p in stopped] == ["stopped (a turn was cancelled)"]


async def test_issue30_item4_session_end_and_core_close_stop_them(
    yolo_core: Any, script: Any, workspace: Path, marker: str
) -> None:
    """A session that ends (its door closed it) stops its processes, another session's keep
    running; the core's close stops the rest."""
    (workspace / f"{marker}.py").write_text(LINGER)
    steps = [
        {"items": [bg(f"{PY} -u {marker}.py first", "start")]},
        {"items": [proc("ready", "output", wait_for="ready")]},
        {"items": [{"text": "running"}]},
    ]
    core = await yolo_core(script(steps))
    one = await core.create_session([workspace])
    steps[0] = {"items": [bg(f"{PY} -u {marker}.py second", "start")]}
    two = await core.create_session([workspace], model=script(steps))
    await collect(one.advance(UserPrompt("go")))
    await collect(two.advance(UserPrompt("go")))
    assert running(f"{marker}.py first") and running(f"{marker}.py second")
    await core.release(one.id)
    await until(lambda: not running(f"{marker}.py first"), "the ended session's process was still running")
    assert running(f"{marker}.py second")
    await core.close()
    await until(lambda: not running(marker), "a process outlived the core")


async def test_issue30_item4_idle_session_stops_them(
    yolo_core: Any, script: Any, workspace: Path, marker: str
) -> None:
    """A session idle for `shell_background_idle` seconds (no turn, no call using its
    processes) has them stopped."""
    (workspace / f"{marker}.py").write_text(LINGER)
    spec = script(
        [
            {"items": [bg(f"{PY} -u {marker}.py", "start")]},
            {"items": [proc("ready", "output", wait_for="ready")]},
            {"items": [{"text": "running"}]},
        ]
    )
    core = await yolo_core(spec, shell_background_idle=0.5)
    s = await core.create_session([workspace])
    await collect(s.advance(UserPrompt("go")))
    await until(lambda: not running(marker), "an idle session's process was still running")
    await until(lambda: core.processes.processes(s.id)[0].ended, "the registry never saw it end")
    assert core.processes.processes(s.id)[0].state == "stopped (its session was idle for 0.5 s)"


async def test_issue30_item4_restart_tells_the_model_it_is_gone(
    core_factory: Any, script: Any, workspace: Path, sqlite_url: str, tmp_path: Path, marker: str
) -> None:
    """A background process belongs to the server process that started it: a session opened by
    another (a restart) is told it is gone, by id and in the list."""
    (workspace / f"{marker}.py").write_text(LINGER)
    spec = script(
        [
            {"items": [bg(f"{PY} -u {marker}.py", "start")]},
            {"items": [{"text": "started"}]},
            {"items": [proc("read", "output"), proc("list", "list", pid="")]},
            {"items": [{"text": "gone"}]},
        ]
    )
    first = await core_factory(spec, approval_mode="yolo", data_dir=tmp_path / "data")
    s = await first.create_session([workspace], session_id="restarted")
    await collect(s.advance(UserPrompt("start it")))
    await first.close()
    assert not running(marker)
    second = await core_factory(spec, approval_mode="yolo", data_dir=tmp_path / "data")
    s = await second.get_session("restarted")
    assert s is not None
    calls = calls_by_id(await collect(s.advance(UserPrompt("read it"))))
    assert calls["read"].status is ToolCallStatus.FAILED
    assert f"bg1 (`{PY} -u {marker}.py`) is gone: it was started by a server process" in result_text(
        calls["read"]
    )
    assert result_text(calls["list"]).startswith("bg1 (`")
    assert "is gone" in result_text(calls["list"])


async def test_issue30_item4_a_process_leaving_its_group_is_stopped_too(ws: Path, marker: str) -> None:
    """Unsandboxed, a process the command started in a session of its own (setsid) still ends
    when the background process is stopped: its supervisor keeps everything below it."""
    registry = ProcessRegistry(0, lambda _sid: False)
    ctx = ToolContext(
        workspace=Workspace([ws]), state=SessionState(workspace_roots=[str(ws)]), processes=registry.of("s")
    )
    command = (
        f"setsid {PY} -c 'import time; time.sleep(3600)' {marker}-away & "
        f"exec {PY} -u -c 'import time; print(\"ready\", flush=True); time.sleep(3600)' {marker}-main"
    )
    try:
        await TOOLS["run_shell_command"].run({"command": command, "background": True}, ctx)
        away, main = (f"{marker}-away", f"{marker}-main")
        await until(lambda: running(away, argument=True) and running(main, argument=True), "both never ran")
        assert os.getsid(running(away, argument=True)[0]) != os.getsid(running(main, argument=True)[0])
        res = await TOOLS["background_process"].run({"action": "stop", "id": "bg1"}, ctx)
        assert "[bg1: stopped (stopped on request)]" in res.text
        await until(lambda: not running(marker), "the process that left the group was still running")
    finally:
        await registry.close()


async def test_issue30_item4_asked_like_commands(
    core_factory: Any, script: Any, workspace: Path, tmp_path: Path, marker: str
) -> None:
    """Starting one is asked like any command and writing to its input is asked unless the mode
    runs commands; reading its output, listing and stopping never ask. In plan mode only those
    run."""
    tool = TOOLS["background_process"]
    for mode, start, write, read in (
        ("ask", "ask", "ask", "run"),
        ("auto-edit", "ask", "ask", "run"),
        ("yolo", "run", "run", "run"),
        ("plan", "deny", "deny", "run"),
    ):
        state = SessionState(workspace_roots=[str(workspace)], approval_mode=mode)
        args = {"command": "npm start", "background": True}
        assert approval.decide(ToolKind.EXECUTE, "run_shell_command", args, state).verdict == start
        write_args = {"action": "input", "id": "bg1", "input": "y\n"}
        assert approval.decide(tool.kind_for(write_args), tool.name, write_args, state).verdict == write
        for action in ("output", "list", "stop"):
            args = {"action": action, "id": "bg1"}
            assert approval.decide(tool.kind_for(args), tool.name, args, state).verdict == read
    # Through the loop, in "ask" mode: the start waits for permission, then reading runs unasked,
    # writing waits again.
    (workspace / f"{marker}.py").write_text(ECHO)
    spec = script(
        [
            {"items": [bg(f"{PY} -u {marker}.py", "start")]},
            {"items": [proc("ready", "output", wait_for="ready")]},
            {"items": [proc("write", "input", input="hi\n")]},
        ]
    )
    core = await core_factory(spec, data_dir=tmp_path / "data")
    s = await core.create_session([workspace], approval_mode="ask")
    events = await collect(s.advance(UserPrompt("go")))
    assert isinstance(events[-1], NeedsInput) and [c.id for c in events[-1].calls] == ["start"]
    events = await collect(s.advance(Resume([Decision("start", "proceed_once")])))
    assert isinstance(events[-1], NeedsInput) and [c.id for c in events[-1].calls] == ["write"]
    waiting = events[-1].calls[0]
    assert waiting.kind is ToolKind.EXECUTE and waiting.confirmation is not None
    assert waiting.confirmation.details == GenericDetails(
        description=f"Write 'hi\\n' to the input of bg1 (`{PY} -u {marker}.py`)"
    )
    assert calls_by_id(events)["ready"].status is ToolCallStatus.SUCCEEDED  # ran unasked
    await core.close()
    assert not running(marker)


def test_issue30_item4_output_buffer_keeps_the_newest() -> None:
    """Between reads the buffer keeps the newest characters and a read says how many it dropped."""
    buf = NewestText(cap=10)
    buf.add("0123456789")
    assert buf.unread() == ("0123456789", 0)
    buf.mark_read()
    buf.add("abcdefghijklmnopqrstuvwxyz")
    assert buf.unread() == ("qrstuvwxyz", 16)
    buf.mark_read()
    assert buf.unread() == ("", 0)


async def test_issue30_item4_limits_and_unknown_ids(
    ws: Path, monkeypatch: pytest.MonkeyPatch, marker: str
) -> None:
    """A session runs at most MAX_RUNNING at once; an id it never had is named as such; without a
    registry (a context that has none) background processes are refused."""
    monkeypatch.setattr(processes, "MAX_RUNNING", 1)
    registry = ProcessRegistry(0, lambda _sid: False)
    ctx = ToolContext(
        workspace=Workspace([ws]), state=SessionState(workspace_roots=[str(ws)]), processes=registry.of("s")
    )
    try:
        await TOOLS["run_shell_command"].run(
            {"command": f"exec sleep 3600 # {marker}", "background": True}, ctx
        )
        with pytest.raises(ToolFailure) as refused:
            await TOOLS["run_shell_command"].run({"command": "true", "background": True}, ctx)
        assert refused.value.type == "too_many_processes"
        with pytest.raises(ToolFailure) as unknown:
            await TOOLS["background_process"].run({"action": "output", "id": "bg7"}, ctx)
        assert unknown.value.message == "there is no background process bg7 (action `list` shows them)"
    finally:
        await registry.close()
    assert not running(marker)
    with pytest.raises(ToolFailure) as unavailable:
        await TOOLS["run_shell_command"].run(
            {"command": "true", "background": True}, replace(ctx, processes=None)
        )
    assert unavailable.value.type == "unsupported"


async def test_issue30_item4_registry_bounded_across_sessions(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the registry remembers of sessions whose processes have all ended is bounded: past
    SESSIONS_KEPT, the one used longest ago is forgotten (its ids are then told ended)."""
    monkeypatch.setattr(processes, "SESSIONS_KEPT", 1)
    registry = ProcessRegistry(0, lambda _sid: False)
    state = SessionState(workspace_roots=[str(ws)])
    ctx = ToolContext(workspace=Workspace([ws]), state=state, processes=registry.of("a"))
    try:
        await TOOLS["run_shell_command"].run({"command": "exit 0", "background": True}, ctx)
        await until(lambda: registry.processes("a")[0].ended, "it never ended")
        ctx = replace(ctx, processes=registry.of("b"))
        await TOOLS["run_shell_command"].run({"command": "exit 0", "background": True}, ctx)
        assert registry.processes("a") == [] and [p.id for p in registry.processes("b")] == ["bg2"]
        with pytest.raises(ToolFailure) as ended:
            await TOOLS["background_process"].run(
                {"action": "output", "id": "bg1"}, replace(ctx, processes=registry.of("a"))
            )
        assert ended.value.message == "bg1 (`exit 0`) has ended and is no longer kept"
    finally:
        await registry.close()
