"""Issue 28 item 1 on a real `devagent serve` with its shell sandbox: the git directory the model
makes of its workspace folder runs nothing under a granted `git status`/`git diff`, inside the
sandbox either (where the workspace is writable, so the marker would land there)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.a2a.helpers import v03_message
from tests.a2a.procs import confirmation, send_stream, serve_args, serving, status_tool_calls
from tests.a2a.test_hostile import bwrap_works, script
from tests.wire.test_shell_grants import fake_git_dir_steps


async def play(
    client: httpx.AsyncClient, url: str, first: dict[str, Any], answers: dict[str, str]
) -> tuple[str | None, list[str]]:
    """Sends `first`, then answers every permission request by its tool call id (`answers`,
    else "cancel") until the task stops asking. The last state, and the ids asked."""
    asked: list[str] = []
    reply = await send_stream(client, url, first)
    while reply.last_state == "input-required":
        status = reply.results[-1]  # the task, or its last status update
        pending = [tc["tool_call_id"] for tc in status_tool_calls(status) if tc.get("status") == "PENDING"]
        assert len(pending) == 1, status
        asked.append(pending[0])
        ids = {"id": status.get("taskId") or status["id"], "contextId": status["contextId"]}
        reply = await send_stream(
            client, url, confirmation(ids, pending[0], answers.get(pending[0], "cancel"))
        )
    assert not reply.errors and reply.cut is None, reply.frames
    return reply.last_state, asked


async def test_issue28_item1_serve_sandboxed_granted_git_runs_nothing_from_a_git_directory_the_model_wrote(
    tmp_path: Path,
) -> None:
    if shutil.which("git") is None or not bwrap_works():
        pytest.skip("needs git and a working bubblewrap")
    ws = tmp_path / "root" / "ws"
    ws.mkdir(parents=True)
    (ws / "a.txt").write_text("a\n")
    (ws / "b.txt").write_text("b\n")
    marker = ws / "pwned"  # the only writable place inside the sandbox
    model = script(tmp_path / "s.json", [step["items"] for step in fake_git_dir_steps(marker)])
    args = [*serve_args(f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}", ws, model, "auto-edit"), "--sandbox"]
    with serving(args, tmp_path / "serve.log") as s:
        assert "Shell sandbox: on" in s.stderr()
        async with httpx.AsyncClient(timeout=120) as c:
            first = v03_message("look at the changes", settings={"workspace_path": str(ws)})
            state, asked = await play(c, s.url, first, {"g1": "proceed_always", "h1": "proceed_once"})
    assert state == "completed" and asked == ["g1", "h1"], (state, asked)
    assert (ws / "HEAD").exists() and (ws / "config").exists()  # the trap was laid
    assert not marker.exists(), marker.read_text()
