"""Issue 39 item 3: the sandbox is a component the core owns. `AgentCore` holds one provider,
chosen from the operator's settings (or the door's set-up); each session gets its own sandbox
from it, and its commands, tools and prompt use that one, with no process-wide state. The
interface starts a command with its limits, shows a path, describes itself, and reads and writes
the session's files within its roots only. `sandbox_backend` is the operator's: local, or
container where this build has it (refused here, naming why)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.events import ToolKind, TurnEnd, UserPrompt
from devagent.agent.policy.approval import options_for
from devagent.agent.sandbox.base import Limits, Sandbox, SandboxError, Streams, runs_sandboxed
from devagent.agent.sandbox.choose import setup_sandbox
from devagent.agent.sandbox.local import LocalProvider
from devagent.agent.sandbox.none import DirectProvider, SandboxMissing
from devagent.agent.settings import CoreConfig
from devagent.config import ConfigError, load_config
from tests.core_helpers import call, calls_by_id, collect, result_text
from tests.sandboxes import bwrap_or_skip, sandbox_of

SRC = Path(__file__).resolve().parents[2] / "src" / "devagent"


def test_issue39_item3_no_module_holds_the_sandbox() -> None:
    """No module keeps the sandbox in a global any more: the names that read or set it are gone
    from the source, and the shell tool holds no bubblewrap code."""
    gone = re.compile(r"\b(active_sandbox|sandbox_missing|use_sandbox|give_to_sandbox_user)\b")
    readers = [str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if gone.search(p.read_text())]
    assert readers == []
    shell = (SRC / "agent" / "tools" / "shell.py").read_text()
    assert "bwrap" not in shell and "probe" not in shell
    approval = (SRC / "agent" / "policy" / "approval.py").read_text()
    assert "tools.shell" not in approval and "isinstance" not in approval.split("def options_for")[1]


async def test_issue39_item3_each_session_gets_its_sandbox_from_the_core(
    core_factory: Any, script: Any, workspace: Path, tmp_path: Path
) -> None:
    """A core given bubblewrap (as a door sets it up) runs each session's commands in that
    session's own sandbox, over that session's roots; a core given none runs them directly. The
    tool result, the tool's definition and the prompt's environment say which."""
    bwrap = bwrap_or_skip()
    other = tmp_path / "other"
    other.mkdir()
    steps = [
        [call("run_shell_command", {"command": "echo hi > made.txt; cat made.txt"}, "c1")],
        [{"text": "ok"}],
    ]
    sandboxed = await core_factory(script(steps), approval_mode="yolo", sandboxes=LocalProvider(bwrap))
    plain = await core_factory(script(steps), approval_mode="yolo")
    assert sandboxed.sandboxes.kind == "local" and plain.sandboxes.kind == "none"

    one = await sandboxed.create_session([workspace])
    two = await sandboxed.create_session([other])
    assert one.sandbox is not two.sandbox and one.sandbox.kind == "local"
    assert one.sandbox.refuses(str(workspace)) is None
    events = await collect(one.advance(UserPrompt("go")))
    assert isinstance(events[-1], TurnEnd)
    done = calls_by_id(events)["c1"]
    assert result_text(done).startswith("hi\n") and done.output.data["sandboxed"] is True
    assert (workspace / "made.txt").read_text() == "hi\n"
    shell_def = next(d for d in one.tool_definitions() if d["name"] == "run_shell_command")
    assert "sandbox" in shell_def["description"]
    assert "Commands run in a sandbox (bubblewrap" in one.state.environment

    three = await plain.create_session([other])
    assert three.sandbox.kind == "none" and not runs_sandboxed(three.sandbox)
    events = await collect(three.advance(UserPrompt("go")))
    assert calls_by_id(events)["c1"].output.data["sandboxed"] is False
    assert "Commands run directly on the machine" in three.state.environment


async def test_issue39_item3_start_gives_a_process_with_its_limits(ws: Path) -> None:
    """`start` runs `bash -c` in the sandbox's workspace with the limits asked for, its output as
    a stream; bubblewrap gives it a private /tmp, directly it gets the server's."""
    choices: list[Any] = [None]
    if not isinstance(bwrap := _bwrap_here(), str):
        choices.append(bwrap)
    for choice in choices:
        sandbox = sandbox_of(choice, [ws])
        started = await sandbox.start(
            'ulimit -d; echo "$TMPDIR"; pwd',
            cwd=str(ws),
            env={"PATH": os.environ["PATH"]},
            limits=Limits(memory_mb=300),
            stdin="closed",
            streams=Streams(errors=True),
        )
        out, err = await started.proc.communicate()
        lines = out.decode().splitlines()
        assert lines[0] == str(300 * 1024), (out, err)
        assert lines[2] == str(ws.resolve())
        assert (lines[1] == "/tmp") is (choice is not None) and started.sandboxed is (choice is not None)
        assert sandbox.show_path(ws / "a.txt") == str(ws / "a.txt")


def _bwrap_here() -> Any:
    from devagent.agent.sandbox.probe import probe_bwrap

    return probe_bwrap()


@pytest.mark.parametrize("kind", ["none", "local"])
def test_issue39_item3_G4_file_operations_stay_in_the_roots(kind: str, ws: Path, outside: Path) -> None:
    """The sandbox's file operations reach files inside its roots only: a path outside, `..`
    out, or a symlink leading out is refused, and nothing outside is read, listed or changed."""
    choice = None if kind == "none" else LocalProvider(bwrap_or_skip())
    sandbox: Sandbox = sandbox_of(choice, [ws])
    sandbox.write_atomic("sub/a.txt", b"one")
    sandbox.write_atomic(ws / "sub" / "a.txt", b"two")
    assert sandbox.read_bytes("sub/a.txt") == b"two" and sandbox.list_dir("sub") == ["a.txt"]
    found = sandbox.stat("sub/a.txt")
    assert found is not None and found.st_size == 3 and sandbox.stat("nothing") is None
    sandbox.delete("sub/a.txt")
    sandbox.delete("sub")
    assert sandbox.list_dir(".") == []

    (ws / "link").symlink_to(outside)
    for path in (outside / "secret.txt", "../outside/secret.txt", "link/secret.txt"):
        with pytest.raises(SandboxError, match="outside the workspace"):
            sandbox.read_bytes(path)
        with pytest.raises(SandboxError, match="outside the workspace"):
            sandbox.write_atomic(path, b"x")
        with pytest.raises(SandboxError, match="outside the workspace"):
            sandbox.delete(path)
    with pytest.raises(SandboxError, match="outside the workspace"):
        sandbox.list_dir("link")
    with pytest.raises(SandboxError, match="never deleted"):
        sandbox.delete(".")
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n" and os.listdir(outside) == ["secret.txt"]


async def test_issue39_item3_a_sandbox_that_cannot_run_fails_closed(ws: Path) -> None:
    """On but unable to run here: the session's sandbox says so, starts nothing, and the shell
    tool's definition and permission options say it cannot run (never that it runs sandboxed)."""
    from devagent.agent.tools.shell import RunShellCommand

    missing = SandboxMissing("bwrap not installed: apt-get install bubblewrap")
    sandbox = DirectProvider(missing).for_session("s", [ws])
    assert sandbox.unavailable() == missing.message() and not runs_sandboxed(sandbox)
    with pytest.raises(SandboxError, match="cannot run on this server"):
        await sandbox.start("true", cwd=str(ws), env={}, limits=Limits())
    assert RunShellCommand(sandbox).definition()["description"].startswith("Unavailable: shell commands")
    options = options_for(ToolKind.EXECUTE, "run_shell_command", {"command": "ls"}, sandbox)
    assert not any("in the sandbox" in o.description for o in options)


def test_issue39_item3_sandbox_backend_is_the_operators(tmp_path: Path) -> None:
    """`sandbox_backend`: local by default, from the settings file or DEVAGENT_SANDBOX_BACKEND;
    anything else is refused; "container" is refused where this build has no container backend,
    naming why, even with the sandbox off."""
    assert load_config(environ={}).sandbox_backend == "local"
    toml = tmp_path / "c.toml"
    toml.write_text('[devagent]\nsandbox_backend = "Local"\n')
    assert load_config(environ={"DEVAGENT_CONFIG": str(toml)}).sandbox_backend == "local"
    with pytest.raises(ConfigError, match="sandbox_backend must be one of local, container"):
        load_config(environ={"DEVAGENT_SANDBOX_BACKEND": "kubernetes"})
    config = load_config(environ={"DEVAGENT_SANDBOX_BACKEND": "container"})
    assert config.sandbox_backend == "container"
    line = setup_sandbox(False, CoreConfig(), "serve")
    assert line.startswith("Shell sandbox: off (--no-sandbox)")
