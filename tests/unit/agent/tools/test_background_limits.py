"""Issue 37 item 3: background processes keep their limits when they start at once. Twenty
`background: true` starts in one step of the scripted model (the loop runs a step's calls
concurrently) give exactly 8 running processes with distinct ids and 12 clear refusals; `stop`, a
cancelled turn, the session's end and idle time then reach every one of them, which a scan of
/proc from outside confirms. One caller at its own cap (`shell_background_per_caller`, across its
sessions) leaves another free to start; a stop while a start is under way stops what it started;
a background process gets the per-command memory limit. Unsandboxed and, where bubblewrap runs
here, sandboxed."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.events import ToolCallStatus, TurnEnd, UserPrompt
from devagent.agent.sandbox.base import SandboxProvider
from devagent.agent.state import SessionState
from devagent.agent.tools import builtin_tools, processes
from devagent.agent.tools.base import ToolContext
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.processes import MAX_RUNNING, ProcessRegistry
from devagent.agent.tools.workspace import Workspace
from devagent.config import ConfigError, load_config
from tests.core_helpers import call, calls_by_id, collect, read_in_background, result_text
from tests.core_helpers import until as wait_until
from tests.process_scan import running
from tests.sandboxes import sandbox_of

PY = os.path.realpath(sys.executable)
WITHIN = 60.0  # seconds a condition may take on a loaded machine (a failure guard, never a pace)
TOOLS = builtin_tools()
STARTS = 20

LINGER = """\
import sys, time
print("ready", flush=True)
time.sleep(3600)  # a long-running process, until something stops it
"""


async def until(condition: Callable[[], object], what: str) -> None:
    """The shared poll, bounded by this file's longer WITHIN (twenty starts at once)."""
    await wait_until(condition, what, WITHIN)


def bg(command: str, cid: str) -> dict[str, Any]:
    return call("run_shell_command", {"command": command, "background": True}, cid)


def proc(cid: str, action: str, pid: str, **args: Any) -> dict[str, Any]:
    return call("background_process", {"action": action, "id": pid, **args}, cid)


def starts(marker: str, count: int, prefix: str = "s") -> list[dict[str, Any]]:
    """`count` background starts of the lingering script, each with its own marker argument."""
    return [bg(f"exec {PY} -u {marker}.py {marker}-{prefix}{i}", f"{prefix}{i}") for i in range(count)]


def live(marker: str) -> set[str]:
    """The markers (`MARKER-s3`) of the script's processes alive now, seen in /proc: the Python
    processes running `MARKER.py` (not the shells or sandboxes that started them)."""
    found = set()
    for pid in running(f"{marker}.py", argument=True):
        try:
            words = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        except OSError:
            continue
        found |= {w for w in words if w.startswith(f"{marker}-")}
    return found


@pytest.fixture
def marker(workspace: Path) -> Iterator[str]:
    """The lingering script's name, written in the workspace; whatever a failing test left
    running is killed afterwards."""
    name = f"bglimit-{uuid.uuid4().hex[:10]}"
    (workspace / f"{name}.py").write_text(LINGER)
    yield name
    for pid in running(name):
        os.kill(pid, signal.SIGKILL)


def parallel_steps(marker: str, last: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Twenty starts in one step; then each started one's output read (until it is ready) in one
    step; then `last`."""
    ready = [proc(f"r{n}", "output", f"bg{n}", wait_for="ready") for n in range(1, MAX_RUNNING + 1)]
    return [{"items": starts(marker, STARTS)}, {"items": ready}, *last]


def check_parallel_starts(events: list[Any], marker: str) -> set[str]:
    """Exactly MAX_RUNNING of the starts ran, with distinct ids bg1..bg8, the others refused
    plainly; each started one printed "ready". The markers of those started."""
    calls = calls_by_id(events)
    started = {
        cid: c for cid, c in calls.items() if cid.startswith("s") and c.status is ToolCallStatus.SUCCEEDED
    }
    refused = {
        cid: c for cid, c in calls.items() if cid.startswith("s") and c.status is ToolCallStatus.FAILED
    }
    assert len(started) == MAX_RUNNING and len(refused) == STARTS - MAX_RUNNING, {
        cid: (c.status, result_text(c)) for cid, c in calls.items()
    }
    ids = sorted(c.output.data["background_id"] for c in started.values() if c.output is not None)
    assert ids == sorted(f"bg{n}" for n in range(1, MAX_RUNNING + 1)), ids
    for c in refused.values():
        assert c.error is not None and c.error.type == "too_many_processes", c.error
        assert c.error.message.startswith(
            f"{MAX_RUNNING} background processes of this session are running or starting, the most"
        ), c.error.message
    for n in range(1, MAX_RUNNING + 1):
        assert calls[f"r{n}"].status is ToolCallStatus.SUCCEEDED, result_text(calls[f"r{n}"])
        assert f"[bg{n}: running]" in result_text(calls[f"r{n}"]) and "ready" in result_text(calls[f"r{n}"])
    return {f"{marker}-{cid}" for cid in started}


@pytest.mark.parametrize("how", ["stop", "cancel", "session_end", "idle"])
async def test_issue37_item3_twenty_parallel_starts_eight_run_all_reached(
    sandboxing: bool,
    sandboxes: SandboxProvider | None,
    core_factory: Any,
    script: Any,
    workspace: Path,
    tmp_path: Path,
    marker: str,
    how: str,
) -> None:
    """Twenty starts in one step: eight run (bg1..bg8), twelve are refused; then `stop` of each
    (eight calls in one step), a cancelled turn, the session's end or its idle time leaves none of
    them running, seen from outside."""
    last: list[dict[str, Any]] = {
        "stop": [
            {"items": [proc(f"x{n}", "stop", f"bg{n}") for n in range(1, MAX_RUNNING + 1)]},
            {"items": [{"text": "stopped"}]},
        ],
        "cancel": [{"items": [{"wait_for": str(tmp_path / "never")}, {"text": "never said"}]}],
        "session_end": [{"items": [{"text": "running"}]}],
        "idle": [{"items": [{"text": "running"}]}],
    }[how]
    idle = {"shell_background_idle": 0.5} if how == "idle" else {}
    core = await core_factory(
        script(parallel_steps(marker, last)),
        approval_mode="yolo",
        data_dir=tmp_path / "data",
        sandboxes=sandboxes,
        **idle,
    )
    s = await core.create_session([workspace])
    events: list[Any] = []
    turn = s.advance(UserPrompt("start twenty"))
    reading = read_in_background(turn, events)
    if how == "cancel":
        reads = [f"r{n}" for n in range(1, MAX_RUNNING + 1)]
        done = {ToolCallStatus.SUCCEEDED, ToolCallStatus.FAILED}
        await until(
            lambda: all(r in calls_by_id(events) and calls_by_id(events)[r].status in done for r in reads),
            "the reads never ended",
        )
        await until(lambda: len(live(marker)) == MAX_RUNNING, "the eight never showed in /proc")
        await turn.cancel()
    await asyncio.wait_for(reading, WITHIN)
    started = check_parallel_starts(events, marker)
    if how != "cancel":
        assert isinstance(events[-1], TurnEnd) and events[-1].reason == "finished", events[-1]
    else:
        assert isinstance(events[-1], TurnEnd) and events[-1].reason == "cancelled", events[-1]
    if how == "session_end":
        await until(lambda: live(marker) == started, "the eight never showed in /proc")
        await core.end_session(s.id)
    await until(lambda: not running(marker), f"a background process outlived the {how}")
    if how != "session_end":  # an ended session's processes are forgotten
        kept = core.processes.processes(s.id)
        await until(lambda: all(p.ended for p in kept), "the registry never saw them end")
        assert len(kept) == MAX_RUNNING and all(p.state.startswith("stopped (") for p in kept), [
            p.state for p in kept
        ]


async def test_issue37_item3_second_caller_starts_while_first_is_at_its_cap(
    core_factory: Any, script: Any, workspace: Path, tmp_path: Path, marker: str
) -> None:
    """`shell_background_per_caller` = 4: caller alice's two sessions hold four between them (the
    fifth start, in her second session, is refused and names her cap), while caller bob still
    starts his; from outside, exactly those run, and the core's close ends them all."""
    core = await core_factory(
        "demo", approval_mode="yolo", data_dir=tmp_path / "data", shell_background_per_caller=4
    )
    turns = [
        ("alice", starts(marker, 3, "a")),
        ("alice", starts(marker, 3, "b")),
        ("bob", starts(marker, 3, "c")),
    ]
    results: dict[str, Any] = {}
    for identity, items in turns:
        s = await core.create_session(
            [workspace], identity=identity, model=script([{"items": items}, {"items": [{"text": "ok"}]}])
        )
        results |= calls_by_id(await collect(s.advance(UserPrompt("start"))))
    ok = {cid for cid, c in results.items() if c.status is ToolCallStatus.SUCCEEDED}
    refused = {cid: c for cid, c in results.items() if c.status is ToolCallStatus.FAILED}
    assert sorted(ok) == ["a0", "a1", "a2", "b0", "c0", "c1", "c2"], ok
    assert sorted(cid[0] for cid in refused) == ["b", "b"], refused
    for c in refused.values():
        assert c.error is not None and c.error.type == "too_many_processes"
        assert c.error.message.startswith(
            "caller 'alice' has 4 background processes running or starting across its sessions"
        ), c.error.message
    await until(lambda: live(marker) == {f"{marker}-{cid}" for cid in ok}, "the started ones never ran")
    await core.close()
    await until(lambda: not running(marker), "a background process outlived the core")


async def test_issue37_item3_stop_while_starting_stops_what_started(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, marker: str
) -> None:
    """A session's processes stopped while one of its starts is under way (its place taken, its
    process not yet started): the start, once done, stops what it started and says so; its place
    counted while it started; nothing is left running."""
    gate = asyncio.Event()
    real_start = processes.start_command

    async def held_start(*args: Any, **kw: Any) -> Any:
        await gate.wait()
        return await real_start(*args, **kw)

    monkeypatch.setattr(processes, "start_command", held_start)
    monkeypatch.setattr(processes, "MAX_RUNNING", 1)
    registry = ProcessRegistry(0, lambda _sid: False)
    ctx = ToolContext(
        workspace=Workspace([workspace]),
        state=SessionState(workspace_roots=[str(workspace)]),
        processes=registry.of("s"),
    )
    command = {"command": f"exec {PY} -u {marker}.py {marker}-late", "background": True}
    try:
        starting = asyncio.create_task(TOOLS["run_shell_command"].run(command, ctx))
        await until(lambda: registry.held("s") == 1, "the start never took its place")
        with pytest.raises(ToolFailure) as full:
            await TOOLS["run_shell_command"].run({"command": "true", "background": True}, ctx)
        assert full.value.type == "too_many_processes"
        stopping = asyncio.create_task(registry.stop_session("s", "a turn was cancelled"))
        await asyncio.sleep(0)  # the stop has marked the start under way before it may go on
        assert not stopping.done()
        gate.set()
        with pytest.raises(ToolFailure) as stopped:
            await starting
        assert stopped.value.message == "bg1 was stopped as it started: a turn was cancelled"
        await asyncio.wait_for(stopping, WITHIN)
        assert [p.state for p in registry.processes("s")] == ["stopped (a turn was cancelled)"]
        assert not running(marker)
    finally:
        await registry.close()


async def test_issue37_item3_background_process_gets_the_memory_limit(
    sandboxing: bool, sandboxes: SandboxProvider | None, ws: Path
) -> None:
    """A background process runs under the per-command limits (`command_memory_mb`: `ulimit -d`,
    which its children inherit and cannot raise), as a foreground command does."""
    registry = ProcessRegistry(0, lambda _sid: False)
    ctx = ToolContext(
        workspace=Workspace([ws]),
        state=SessionState(workspace_roots=[str(ws)]),
        processes=registry.of("s"),
        command_memory_mb=300,
        sandbox=sandbox_of(sandboxes, [ws]),
    )
    try:
        await TOOLS["run_shell_command"].run(
            {"command": "ulimit -d; ulimit -d 400000", "background": True}, ctx
        )
        res = await TOOLS["background_process"].run({"action": "output", "id": "bg1", "timeout": WITHIN}, ctx)
        lines = res.text.splitlines()
        assert lines[0] == str(300 * 1024), res.text
        assert "ulimit" in lines[1] and lines[-1] == "[bg1: exited with code 1]", res.text
    finally:
        await registry.close()


def test_issue37_item3_per_caller_setting(tmp_path: Path) -> None:
    """`shell_background_per_caller` comes from the settings file and the environment (16 by
    default, 0 for no cap of its own); a negative one is refused."""
    assert load_config(environ={}).shell_background_per_caller == 16
    toml = tmp_path / "c.toml"
    toml.write_text("[devagent]\nshell_background_per_caller = 3\n")
    assert load_config(environ={"DEVAGENT_CONFIG": str(toml)}).shell_background_per_caller == 3
    assert load_config(environ={"DEVAGENT_SHELL_BACKGROUND_PER_CALLER": "0"}).shell_background_per_caller == 0
    with pytest.raises(ConfigError):
        load_config(environ={"DEVAGENT_SHELL_BACKGROUND_PER_CALLER": "-1"})


def test_issue37_item3_ids_are_taken_before_the_start(ws: Path) -> None:
    """Places taken one after another without any start finishing get distinct ids, continue
    after the session's recorded ones, and count against the session's limit."""
    registry = ProcessRegistry(0, lambda _sid: False, per_caller=0)
    records = [{"id": "bg3", "command": "x", "started_by": "elsewhere"}]
    slots = [registry.reserve("s", "", records) for _ in range(MAX_RUNNING)]
    assert [s.pid for s in slots] == [f"bg{n}" for n in range(4, 4 + MAX_RUNNING)]
    with pytest.raises(ToolFailure) as full:
        registry.reserve("s", "", records)
    assert full.value.type == "too_many_processes"
    assert registry.reserve("other", "", records).pid == "bg4"  # another session's own count
