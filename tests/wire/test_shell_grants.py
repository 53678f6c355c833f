"""Issue 28 items 1 and 4 from outside, on a real `devagent wire` (no sandbox): what a session
grant ("approve_for_session") lets run unasked starts no program the model wrote or the workspace
brought, and reaches no path outside the workspace."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.core_helpers import shell_call, write_call
from tests.wire.conftest import Msg, WireProc, events, is_response

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

GIT = "git status --short; git diff --no-index a.txt b.txt"


def fake_git_dir_steps(marker: Path) -> list[dict[str, Any]]:
    """The model: a granted git command, then files that make the workspace folder a git
    directory whose configuration runs `marker`'s writer, then the granted command again."""
    evil = f'"echo ran >> {marker}; false"'
    config = f"[core]\n\tfsmonitor = {evil}\n[diff]\n\texternal = {evil}\n"
    return [
        {"items": [shell_call(GIT, "g1")]},
        {
            "items": [
                write_call("config", config),
                write_call("HEAD", "ref: refs/heads/main\n"),
                write_call("objects/keep", ""),
                write_call("refs/keep", ""),
            ]
        },
        {"items": [shell_call("printf 'ref: refs/heads/main\\n' > HEAD", "h1")]},
        {"items": [shell_call(GIT, "g2")]},
        {"items": [{"text": "done"}]},
    ]


def play(w: WireProc, answers: dict[str, str], rpc_id: str = "p1") -> tuple[list[Msg], list[str]]:
    """Runs a prompt's turn to its end, answering each approval request by its tool call id
    (`answers`; any other call is rejected). The messages, and the ids of the calls asked."""
    asked: list[str] = []
    seen: list[Msg] = []
    while True:
        msgs, last = w.until(lambda m: is_response(m, rpc_id) or m.get("method") == "request", timeout=60)
        seen += msgs
        if is_response(last, rpc_id):
            return seen, asked
        call_id = last["params"]["payload"].get("tool_call_id", "")
        asked.append(call_id)
        w.approve(last, answers.get(call_id, "reject"))


def auto_edit(wire_env: dict[str, str]) -> None:
    wire_env["DEVAGENT_APPROVAL"] = "auto-edit"  # edits run unasked, as in the report


def test_issue28_item1_wire_granted_git_runs_nothing_from_a_git_directory_the_model_wrote(
    start_wire: Callable[..., WireProc], work_dir: Path, wire_env: dict[str, str], tmp_path: Path
) -> None:
    """The fake git directory (HEAD, config with core.fsmonitor and diff.external, objects/,
    refs/) written into a workspace with no .git of its own; `git status`/`git diff` allowed for
    the session before. Writing HEAD is refused; made by a command the user approved, the folder
    is still never used as a git directory by the granted command: nothing writes the marker
    (outside the workspace, as the server's user)."""
    auto_edit(wire_env)
    (work_dir / "a.txt").write_text("a\n")
    (work_dir / "b.txt").write_text("b\n")
    marker = tmp_path / "pwned"
    w = start_wire(fake_git_dir_steps(marker))
    w.initialize()
    w.prompt("look at the changes")
    msgs, asked = play(w, {"g1": "approve_for_session", "h1": "approve"})
    assert asked == ["g1", "h1"], asked  # g2 ran under the grant
    results = {e["tool_call_id"]: e["return_value"] for e in events(msgs, "ToolResult")}
    assert not results["g2"]["is_error"], results["g2"]
    assert not marker.exists(), marker.read_text()
    assert (work_dir / "config").exists() and (work_dir / "HEAD").exists()  # the trap was laid
    head = [e for e in events(msgs, "ToolResult") if "HEAD" in e["return_value"].get("message", "")]
    assert any(e["return_value"]["is_error"] for e in head), head  # write_file HEAD was refused
    w.close()


def test_issue28_item1_wire_granted_git_status_runs_no_fsmonitor_the_workspace_brought(
    start_wire: Callable[..., WireProc], work_dir: Path, tmp_path: Path
) -> None:
    """A workspace arriving with its own .git/config `core.fsmonitor`: the user approves `git
    status` for the session (that run is the user's); in the next turn the granted `git status`
    runs it no more."""
    marker = tmp_path / "pwned"
    subprocess.run(["git", "init", "-q"], cwd=work_dir, check=True)
    with (work_dir / ".git" / "config").open("a") as f:
        f.write(f'[core]\n\tfsmonitor = "echo ran >> {marker}; false"\n')
    steps = [
        {"items": [shell_call("git status --short", "s1")]},
        {"items": [{"text": "first"}]},
        {"items": [shell_call("git status --short", "s2")]},
        {"items": [{"text": "second: {last_tool_results}"}]},
    ]
    w = start_wire(steps)
    w.initialize()
    w.prompt("status", "p1")
    _, asked = play(w, {"s1": "approve_for_session"}, "p1")
    assert asked == ["s1"]
    assert marker.exists()  # git status ran it once, as approved: the configuration is live
    marker.unlink()
    w.prompt("status again", "p2")
    msgs, asked = play(w, {}, "p2")
    assert asked == []  # granted
    assert "README.md" in "".join(e["return_value"]["output"] for e in events(msgs, "ToolResult"))
    assert not marker.exists()
    w.close()


def test_issue28_item4_wire_cat_granted_then_a_path_outside_is_asked_again(
    start_wire: Callable[..., WireProc], work_dir: Path, tmp_path: Path
) -> None:
    """After "allow for the session" of `cat README.md`, `cat /abs/.aws/credentials` (outside
    the workspace) is asked again; refused, the secret never reaches the model or the client."""
    creds = tmp_path / "home" / ".aws" / "credentials"
    creds.parent.mkdir(parents=True)
    creds.write_text("aws_secret_access_key = LEAKED-SECRET-28\n")
    steps = [
        {"items": [shell_call("cat README.md", "c1")]},
        {"items": [shell_call(f"cat {creds}", "c2")]},
        {"items": [shell_call("cat README.md", "c3")]},
        {"items": [{"text": "got: {last_tool_results}"}]},
    ]
    w = start_wire(steps)
    w.initialize()
    w.prompt("read")
    msgs, asked = play(w, {"c1": "approve_for_session"})
    assert asked == ["c1", "c2"], asked  # c3 ran under the grant
    assert "LEAKED-SECRET-28" not in str(w.received)
    results = {e["tool_call_id"]: e["return_value"] for e in events(msgs, "ToolResult")}
    assert results["c2"]["is_error"] and "# Demo" in results["c3"]["output"]
    w.close()
