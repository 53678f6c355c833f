"""Hooks on a real `devagent serve` with its shell sandbox: a PreToolUse hook blocks a call, the
A2A client sees the call refused with the hook's reason, and the hook itself ran under the
sandbox's rules (not as root, nothing outside the workspace readable)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.a2a.helpers import v03_message
from tests.a2a.procs import confirmation, get_task, send_stream, serve_args, serving, status_tool_calls
from tests.a2a.test_hostile import bwrap_works, script
from tests.core_helpers import shell_call
from tests.hook_files import command, group, settings_with_hooks
from tests.sandbox_user import for_sandbox_user


def calls_seen(results: list[dict[str, Any]], call_id: str) -> list[dict[str, Any]]:
    out = []
    for r in results:
        if "status" in r:
            out += [c for c in status_tool_calls(r) if c["tool_call_id"] == call_id]
    return out


async def test_issue32_item1_B6_B7_a2a_shows_a_blocked_call_refused_and_the_hook_ran_sandboxed(
    tmp_path: Path,
) -> None:
    if not bwrap_works():
        pytest.skip("needs a working bubblewrap")
    ws = tmp_path / "root" / "ws"
    ws.mkdir(parents=True)
    secret = tmp_path / "operator-secret.txt"
    secret.write_text("s3cret\n")
    hook = (
        'cat > "$CLAUDE_PROJECT_DIR/hook-input.json"; id -u > "$CLAUDE_PROJECT_DIR/hook-uid"; '
        f'cat {secret} > "$CLAUDE_PROJECT_DIR/hook-read" 2>&1; '
        "echo 'deploys go through CI' >&2; exit 2"
    )
    settings = settings_with_hooks(tmp_path, {"PreToolUse": [group("Bash", command(hook))]})
    model = script(
        tmp_path / "s.json",
        [[shell_call("touch deployed.txt", "s1")], [{"text": "model saw: {last_tool_results}"}]],
    )
    args = [
        *serve_args(f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}", ws, model, "yolo"),
        "--sandbox",
        "--config",
        str(settings),
    ]
    for_sandbox_user(ws)
    with serving(args, tmp_path / "serve.log") as s:
        async with httpx.AsyncClient(timeout=120) as c:
            reply = await send_stream(c, s.url, v03_message("deploy", settings={"workspace_path": str(ws)}))
    assert not reply.errors and reply.last_state == "completed", reply.frames
    assert not (ws / "deployed.txt").exists()
    final = calls_seen(reply.results, "s1")[-1]
    assert final["status"] == "FAILED" and final["error"]["type"] == "blocked_by_hook"
    assert "deploys go through CI" in final["error"]["message"]
    said = json.dumps(reply.results[-1])
    assert "model saw:" in said and "deploys go through CI" in said
    event = json.loads((ws / "hook-input.json").read_text())
    assert event["tool_name"] == "Bash" and event["tool_input"]["command"] == "touch deployed.txt"
    assert (ws / "hook-uid").read_text().strip() != "0" or os.geteuid() != 0
    assert "s3cret" not in (ws / "hook-read").read_text()  # outside the workspace: not there


async def test_issue37_item5_serve_default_sandbox_runs_the_guard_kept_in_the_home(tmp_path: Path) -> None:
    """`devagent serve` (its sandbox on by default) with the operator's guard where Claude Code's
    docs put it, ~/.claude/hooks in a home the sandbox hides: the guard runs and refuses
    `rm -rf build`, and the folder stays."""
    if not bwrap_works():
        pytest.skip("needs a working bubblewrap")
    home = tmp_path / "home"
    guards = home / ".claude" / "hooks"
    guards.mkdir(parents=True)
    (guards / "block-rm.sh").write_text(
        "#!/bin/sh\nif grep -q 'rm -rf'; then echo 'block-rm: not here' >&2; exit 2; fi\n"
    )
    (guards / "block-rm.sh").chmod(0o755)
    hooks_file = home / ".claude" / "settings.json"
    hooks_file.write_text(
        json.dumps({"hooks": {"PreToolUse": [group("Bash", command("~/.claude/hooks/block-rm.sh"))]}})
    )
    settings = tmp_path / "config.toml"
    settings.write_text(f'hooks_file = "{hooks_file}"\n')
    ws = tmp_path / "root" / "ws"
    (ws / "build").mkdir(parents=True)
    (ws / "build" / "out.o").write_text("object\n")
    model = script(tmp_path / "s.json", [[shell_call("rm -rf build", "s1")], [{"text": "done"}]])
    db = f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}"
    args = [*serve_args(db, ws, model, "yolo"), "--config", str(settings)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVAGENT_")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    env["DEVAGENT_DATA_DIR"] = str(tmp_path / "data")
    with serving(args, tmp_path / "serve.log", env=env) as s:
        async with httpx.AsyncClient(timeout=120) as c:
            reply = await send_stream(c, s.url, v03_message("clean", settings={"workspace_path": str(ws)}))
        log = s.stderr()
    assert "Shell sandbox: on" in log, log
    assert not reply.errors and reply.last_state == "completed", reply.frames
    assert (ws / "build" / "out.o").exists()
    final = calls_seen(reply.results, "s1")[-1]
    assert final["status"] == "FAILED" and final["error"]["type"] == "blocked_by_hook"
    assert "block-rm: not here" in final["error"]["message"]


async def test_issue37_item4_A6_a_slow_notification_hook_leaves_the_task_input_required(
    tmp_path: Path, shared_db: str
) -> None:
    """A Notification hook slower than the lease's heartbeat fires after the turn stored its pause
    and gave up the conversation's lease: the task reads input-required (not canceled), on the
    stream and on tasks/get, with its call pending, and confirming it runs the call once. A short
    lease makes the heartbeat tick many times while the hook sleeps."""
    ws = tmp_path / "root" / "ws"
    ws.mkdir(parents=True)
    log = "$CLAUDE_PROJECT_DIR/notified.jsonl"
    hook = f'sleep 6; cat >> "{log}"; echo >> "{log}"'
    settings = settings_with_hooks(tmp_path, {"Notification": [group("", command(hook))]})
    write = {"tool_call": {"name": "write_file", "args": {"path": "w.txt", "content": "W\n"}, "id": "w1"}}
    model = script(tmp_path / "s.json", [[write], [{"text": "written"}]])
    args = [
        *serve_args(shared_db, ws, model, "ask"),
        *("--config", str(settings), "--lease-seconds", "1"),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVAGENT_")}
    env.update(HOME=str(tmp_path / "home"), XDG_CONFIG_HOME=str(tmp_path / "home" / ".config"))
    env["DEVAGENT_DATA_DIR"] = str(tmp_path / "data")
    with serving(args, tmp_path / "serve.log", env=env) as s:
        async with httpx.AsyncClient(timeout=120) as c:
            paused = await send_stream(c, s.url, v03_message("write w", settings={"workspace_path": str(ws)}))
            assert not paused.errors and paused.last_state == "input-required", paused.frames
            task = paused.results[0]
            got = await get_task(c, s.url, task["id"])
            assert got["status"]["state"] == "input-required", got["status"]
            assert [tc["tool_call_id"] for tc in status_tool_calls(got)] == ["w1"], got["status"]
            assert [tc["status"] for tc in status_tool_calls(got)] == ["PENDING"]
            [event] = [json.loads(line) for line in (ws / "notified.jsonl").read_text().split("\n") if line]
            assert event["notification_type"] == "permission_prompt", event
            done = await send_stream(c, s.url, confirmation(task, "w1"))
            assert not done.errors and done.last_state == "completed", done.frames
            assert (await get_task(c, s.url, task["id"]))["status"]["state"] == "completed"
        assert "took the lease over" not in s.stderr()
    assert (ws / "w.txt").read_text() == "W\n"
