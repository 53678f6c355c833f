"""Issue 30 item 4: a shell command's long output (its head and tail, the whole of it saved outside
the workspace where read_file pages through it, never written), and the per-call timeout within
the operator's maximum."""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.events import ToolCallStatus, UserPrompt
from devagent.agent.sandbox.local import Bubblewrap
from devagent.agent.state import SessionState
from devagent.agent.tools import builtin_tools
from devagent.agent.tools.base import ToolContext
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.output import HeadTail, head_and_tail
from devagent.agent.tools.saved_outputs import SavedOutputs
from devagent.agent.tools.workspace import Workspace
from devagent.config import ConfigError, load_config
from tests.core_helpers import call, calls_by_id, collect, result_text
from tests.sandboxes import bwrap_or_skip, sandbox_of

TOOLS = builtin_tools()
LINES = 100_000
PRINT_LINES = f"seq 1 {LINES} | sed 's/^/line /'"


def ctx_for(ws: Path, data: Path, **kw: Any) -> ToolContext:
    saved = SavedOutputs(data, 1 << 30)
    return ToolContext(
        workspace=Workspace([ws], read_only_roots=(saved.folder("s1"),)),
        state=SessionState(workspace_roots=[str(ws)]),
        call_id="c1",
        session_id="s1",
        saved_outputs=saved,
        **kw,
    )


async def test_issue30_item4_long_output_head_tail_and_whole_readable(
    core_factory: Any, script: Any, workspace: Path, tmp_path: Path
) -> None:
    """A command printing 100,000 lines: its result holds the first and the last lines and says
    which lines were left out and where the whole output is; read_file pages through that file
    by lines (offset and limit), in the real loop."""
    data = tmp_path / "data"
    saved = Path(os.path.realpath(data)) / "outputs" / "long" / "c1.txt"
    spec = script(
        [
            {"items": [call("run_shell_command", {"command": PRINT_LINES}, "c1")]},
            {"items": [call("read_file", {"path": str(saved), "offset": 50_000, "limit": 3}, "c2")]},
            {"items": [call("read_file", {"path": str(saved), "offset": LINES}, "c3")]},
            {"items": [{"text": "read it"}]},
        ]
    )
    core = await core_factory(spec, approval_mode="yolo", data_dir=data)
    s = await core.create_session([workspace], session_id="long")
    calls = calls_by_id(await collect(s.advance(UserPrompt("print a lot"))))
    assert all(c.status is ToolCallStatus.SUCCEEDED for c in calls.values()), calls
    text = result_text(calls["c1"])
    assert text.startswith("line 1\nline 2\n")
    assert text.endswith(f"line {LINES - 1}\nline {LINES}\nexit code 0")
    assert f"left out here; the whole output ({LINES} lines) is in {saved} …]" in text
    assert len(text) < 40_000
    assert calls["c1"].output is not None and calls["c1"].output.data["saved_output"] == str(saved)
    page = result_text(calls["c2"])
    assert page.endswith("50000\tline 50000\n50001\tline 50001\n50002\tline 50002\n")
    assert f"[Showing lines 50000-50002 of {LINES} of {saved}." in page
    assert result_text(calls["c3"]).endswith(f"{LINES}\tline {LINES}\n")
    assert saved.read_text() == "".join(f"line {i}\n" for i in range(1, LINES + 1))
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    assert stat.S_IMODE(saved.parent.stat().st_mode) == 0o700
    assert not any(p.name == "c1.txt" for p in workspace.rglob("*"))  # outside the workspace


async def test_issue30_item4_saved_output_is_read_only(ws: Path, tmp_path: Path) -> None:
    """The saved output is readable and nothing else: write_file and edit are refused there,
    read_many_files and list_directory do not reach it, and another session's saved outputs
    are not even readable."""
    ctx = ctx_for(ws, tmp_path / "data")
    res = await TOOLS["run_shell_command"].run({"command": "seq 1 30000"}, ctx)
    saved = res.data["saved_output"]
    assert saved is not None and Path(saved).is_file()
    for name, args in (
        ("write_file", {"path": saved, "content": "x"}),
        ("edit", {"path": saved, "old_string": "1", "new_string": "2"}),
    ):
        with pytest.raises(ToolFailure) as refused:
            await TOOLS[name].run(args, ctx)
        assert refused.value.type == "read_only_path", refused.value.message
    for name, args in (
        ("read_many_files", {"paths": [saved]}),
        ("list_directory", {"path": str(Path(saved).parent)}),
    ):
        with pytest.raises(ToolFailure) as refused:
            await TOOLS[name].run(args, ctx)
        assert refused.value.type in ("read_only_path", "path_outside_workspace"), refused.value.message
    assert Path(saved).read_text().startswith("1\n2\n")  # untouched
    other = replace(ctx, session_id="s2", call_id="c9")
    other.workspace = Workspace([ws], read_only_roots=(ctx.saved_outputs.folder("s2"),))  # type: ignore[union-attr]
    with pytest.raises(ToolFailure) as refused:
        await TOOLS["read_file"].run({"path": saved}, other)
    assert refused.value.type == "path_outside_workspace"


async def test_issue30_item4_short_output_saves_nothing(ws: Path, tmp_path: Path) -> None:
    """Output that fits is given whole, and no file is kept for it."""
    ctx = ctx_for(ws, tmp_path / "data")
    res = await TOOLS["run_shell_command"].run({"command": "seq 1 100"}, ctx)
    assert res.text == "".join(f"{i}\n" for i in range(1, 101)) + "exit code 0"
    assert res.data["saved_output"] is None and res.data["truncated"] is False
    assert list((tmp_path / "data" / "outputs" / "s1").iterdir()) == []


def test_issue30_item4_saved_outputs_bounded_in_total(tmp_path: Path) -> None:
    """Saved outputs stay within their total: the oldest files go first; a file is capped, with a
    note at its end."""
    saved = SavedOutputs(tmp_path, 3000)
    for i in range(5):
        f = saved.open("s", f"c{i}")
        assert f is not None
        f.write(b"x" * 900)
        path = f.finish(keep=True)
        assert path is not None
        os.utime(path, (1000 + i, 1000 + i))
    saved.prune()
    assert sorted(p.name for p in saved.folder("s").iterdir()) == ["c2.txt", "c3.txt", "c4.txt"]
    big = SavedOutputs(tmp_path / "b", 1000)
    f = big.open("s", "c")
    assert f is not None
    f.write(b"y" * 1500)
    path = f.finish(keep=True)
    assert path is not None
    assert path.read_bytes().startswith(b"y" * 1000 + b"\n[the output went on for 500 B more, not saved")
    saved.remove("s")
    assert not saved.folder("s").exists()


async def test_issue30_item4_clear_removes_saved_outputs(
    core_factory: Any, script: Any, workspace: Path, tmp_path: Path
) -> None:
    """/clear forgets the conversation and with it the saved outputs it named."""
    data = tmp_path / "data"
    spec = script(
        [
            {"items": [call("run_shell_command", {"command": "seq 1 30000"}, "c1")]},
            {"items": [{"text": "ok"}]},
        ]
    )
    core = await core_factory(spec, approval_mode="yolo", data_dir=data)
    s = await core.create_session([workspace], session_id="cleared")
    await collect(s.advance(UserPrompt("go")))
    folder = Path(os.path.realpath(data)) / "outputs" / "cleared"
    assert (folder / "c1.txt").is_file()
    await collect(s.advance(UserPrompt("/clear")))
    assert not folder.exists()


def test_issue30_item4_head_tail_counts_what_it_leaves_out() -> None:
    """The line between head and tail names the lines left out (numbers read_file takes) and
    the characters; short output is given whole."""
    text = "".join(f"{i}\n" for i in range(1, 100_001))
    out = head_and_tail(text, "/saved.txt")
    head, gap_tail = out.split("[… lines ", 1)
    gap, tail = gap_tail.split(" …]\n", 1)
    first, _, last = gap.split(" (")[0].partition(" to ")
    assert head.splitlines()[-1] == str(int(first) - 1)
    assert tail.splitlines()[0] == str(int(last) + 1)
    assert tail.endswith("100000\n")
    left_out = "".join(f"{i}\n" for i in range(int(first), int(last) + 1))
    assert (
        f"({len(left_out):,} characters) left out here; the whole output (100000 lines) is in /saved.txt"
        in out
    )
    small = HeadTail()
    small.feed("é".encode()[:1])
    small.feed("é".encode()[1:] + b"\nend", final=True)
    assert small.render() == "é\nend" and not small.elided


# --- the timeout ----------------------------------------------------------------------------------


async def test_issue30_item4_timeout_above_the_maximum_is_lowered(ws: Path) -> None:
    """A per-call timeout above `shell_timeout_max` is lowered to it (not refused), and the
    model is told; one within it is honoured although it is above the default."""
    ctx = ToolContext(
        workspace=Workspace([ws]),
        state=SessionState(workspace_roots=[str(ws)]),
        shell_timeout=0.2,
        shell_timeout_max=0.6,
    )
    with pytest.raises(ToolFailure) as timed_out:
        await TOOLS["run_shell_command"].run({"command": "echo begun; exec sleep 60", "timeout": 3600}, ctx)
    assert timed_out.value.type == "timeout"
    assert "timed out after 0.6 s (the server's maximum; 3600 s was asked for)" in timed_out.value.message
    assert "begun" in timed_out.value.message
    ctx = replace(ctx, shell_timeout_max=60)
    res = await TOOLS["run_shell_command"].run({"command": "sleep 1; echo done", "timeout": 30}, ctx)
    assert res.text == "done\nexit code 0"
    res = await TOOLS["run_shell_command"].run({"command": "echo fast", "timeout": 100}, ctx)
    assert res.text == (
        "fast\nexit code 0\n(the timeout asked for, 100 s, is more than the server allows: it had 60 s)"
    )


def test_issue30_item4_timeout_settings(tmp_path: Path) -> None:
    """shell_timeout_max and the other shell settings come from the settings file and the
    environment; nonsense is refused."""
    toml = tmp_path / "c.toml"
    toml.write_text("[devagent]\nshell_timeout_max = 900\nshell_background_idle = 60\nshell_outputs_mb = 8\n")
    config = load_config(environ={"DEVAGENT_CONFIG": str(toml)})
    assert (config.shell_timeout_max, config.shell_background_idle, config.shell_outputs_mb) == (900, 60, 8)
    config = load_config(environ={"DEVAGENT_SHELL_TIMEOUT_MAX": "30"})
    assert config.shell_timeout_max == 30.0 and config.shell_timeout == 120.0
    assert load_config(environ={}).shell_timeout_max == 600.0
    for env in ({"DEVAGENT_SHELL_TIMEOUT_MAX": "-1"}, {"DEVAGENT_SHELL_OUTPUTS_MB": "-5"}):
        with pytest.raises(ConfigError):
            load_config(environ=env)


# --- the sandbox ---------------------------------------------------------------------------------


async def test_issue30_item4_sandboxed_command_cannot_see_saved_outputs(ws: Path, tmp_path: Path) -> None:
    """The saved outputs are under the data directory, which the sandbox hides: a command cannot
    read (or change) what read_file may."""
    probed = bwrap_or_skip()
    data = tmp_path / "data"
    ctx = ctx_for(ws, data)
    saved = (await TOOLS["run_shell_command"].run({"command": "seq 1 30000"}, ctx)).data["saved_output"]
    ctx.sandbox = sandbox_of(Bubblewrap(probed.bwrap, probed.version, hidden=(data,)), ctx.workspace.roots)
    ctx.call_id = "c2"
    res = await TOOLS["run_shell_command"].run({"command": f"cat {saved} | head -1; echo x >> {saved}"}, ctx)
    assert res.data["sandboxed"] is True
    assert "No such file" in res.text, res.text
    assert Path(saved).read_text().endswith("30000\n")
