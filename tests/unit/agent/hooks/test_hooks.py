"""Hooks in Claude Code's format, run by a real `devagent run` process with a scripted model: the
operator's hooks file blocks, allows, asks, adds context and sees results; a hook that fails or
hangs never ends the turn; a workspace's hooks are never read."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.hooks.config import HooksFileError, load_hooks
from tests.core_helpers import shell_call, write_call
from tests.hook_files import command, group, logged, logger, settings_with_hooks
from tests.unit.test_cli import DEVAGENT, run, write_script
from tests.unit.test_headless import lines

ECHO = {"text": "Got: {last_tool_results}"}


def run_stream(
    tmp_path: Path, workspace: Path, settings: Path, spec: str, *args: str
) -> list[dict[str, Any]]:
    argv = ["--config", str(settings), "run", *args, "-w", str(workspace), "-m", spec]
    out = run([*argv, "--output-format", "stream-json"], tmp_path)
    assert out.stdout, out.stderr
    events = lines(out.stdout)
    events[-1]["exit_code"] = out.returncode
    return events


def final_call(events: list[dict[str, Any]], call_id: str) -> dict[str, Any]:
    return [e for e in events if e["type"] == "tool_call" and e["call_id"] == call_id][-1]


GUARD = "cat > \"$CLAUDE_PROJECT_DIR/../seen.json\"; echo 'no shell commands here: ask the team' >&2; exit 2"


@pytest.mark.parametrize("matcher", ["Bash", "run_shell_command", "Bash|Write", "^run_shell"])
def test_issue32_item1_pretooluse_exit_2_blocks_a_shell_command_in_yolo_mode(
    tmp_path: Path, workspace: Path, matcher: str
) -> None:
    settings = settings_with_hooks(tmp_path, {"PreToolUse": [group(matcher, command(GUARD))]})
    spec = write_script(tmp_path, [[shell_call("touch ran.txt", cid="s1")], [ECHO]])
    events = run_stream(tmp_path, workspace, settings, spec, "go", "-a", "yolo")
    assert not (workspace / "ran.txt").exists()  # the command never ran
    shown = final_call(events, "s1")
    assert shown["status"] == "failed" and "no shell commands here" in shown["error"]["message"]
    result = events[-1]
    assert "no shell commands here: ask the team" in result["result"]  # the model's next request had it
    seen = json.loads((workspace.parent / "seen.json").read_text())
    assert seen["hook_event_name"] == "PreToolUse" and seen["tool_name"] == "Bash"
    assert seen["devagent_tool_name"] == "run_shell_command"
    assert seen["tool_input"]["command"] == "touch ran.txt" and seen["permission_mode"] == "bypassPermissions"
    assert seen["cwd"] == str(workspace.resolve()) and seen["session_id"] == result["session_id"]


def test_issue32_item1_a_matcher_for_another_tool_lets_the_call_run(tmp_path: Path, workspace: Path) -> None:
    settings = settings_with_hooks(tmp_path, {"PreToolUse": [group("Write|Edit", command(GUARD))]})
    spec = write_script(tmp_path, [[shell_call("touch ran.txt", cid="s1")], [ECHO]])
    events = run_stream(tmp_path, workspace, settings, spec, "go", "-a", "yolo")
    assert (workspace / "ran.txt").exists() and final_call(events, "s1")["status"] == "succeeded"


def deny_json(reason: str) -> str:
    out = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                  "permissionDecisionReason": reason}}  # fmt: skip
    return f"echo '{json.dumps(out)}'"


def test_issue32_item1_json_permission_deny_refuses_with_its_reason(tmp_path: Path, workspace: Path) -> None:
    settings = settings_with_hooks(
        tmp_path, {"PreToolUse": [group("Write", command(deny_json("generated files are read-only")))]},
        settings_file=True,
    )  # fmt: skip
    spec = write_script(tmp_path, [[write_call("gen.txt", "x\n", cid="w1")], [ECHO]])
    events = run_stream(tmp_path, workspace, settings, spec, "go", "-a", "yolo")
    assert not (workspace / "gen.txt").exists()
    assert "generated files are read-only" in final_call(events, "w1")["error"]["message"]
    assert "generated files are read-only" in events[-1]["result"]


def permission(decision: str) -> str:
    out = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": decision}}
    return f"echo '{json.dumps(out)}'"


def test_issue32_item1_G3_allow_answers_the_question_and_ask_asks_in_yolo(
    tmp_path: Path, workspace: Path
) -> None:
    settings = settings_with_hooks(
        tmp_path,
        {
            "PreToolUse": [
                group("Write", command(permission("allow"))),
                group("Bash", command(permission("ask"))),
            ]
        },
    )
    spec = write_script(tmp_path, [[write_call("a.txt", "a\n", cid="w1")], [{"text": "written"}]])
    events = run_stream(tmp_path, workspace, settings, spec, "go", "-a", "ask")
    assert events[-1]["exit_code"] == 0 and (workspace / "a.txt").read_text() == "a\n"  # never asked

    spec = write_script(tmp_path, [[shell_call("touch ran.txt", cid="s1")], [ECHO]])
    events = run_stream(tmp_path, workspace, settings, spec, "go", "-a", "yolo")
    result = events[-1]
    assert result["exit_code"] == 4 and result["subtype"] == "permission_required"
    assert [p["call_id"] for p in result["pending"]] == ["s1"] and not (workspace / "ran.txt").exists()


def test_issue32_item1_G3_allow_never_lifts_the_policy(tmp_path: Path, workspace: Path) -> None:
    """Plan mode refuses writes; a hook's allow does not change that."""
    settings = settings_with_hooks(tmp_path, {"PreToolUse": [group("*", command(permission("allow")))]})
    spec = write_script(tmp_path, [[write_call("a.txt", "a\n", cid="w1")], [ECHO]])
    events = run_stream(tmp_path, workspace, settings, spec, "go", "-a", "plan")
    assert not (workspace / "a.txt").exists()
    assert final_call(events, "w1")["error"]["type"] == "denied_by_policy"


def test_issue32_item1_posttooluse_sees_the_output_and_its_reason_reaches_the_model(
    tmp_path: Path, workspace: Path
) -> None:
    seen = tmp_path / "post.json"
    hook = f"cat > {seen}; echo '{json.dumps({'decision': 'block', 'reason': 'lint: 2 warnings'})}'"
    settings = settings_with_hooks(tmp_path, {"PostToolUse": [group("Bash", command(hook))]})
    spec = write_script(tmp_path, [[shell_call("echo hello-from-the-command", cid="s1")], [ECHO]])
    events = run_stream(tmp_path, workspace, settings, spec, "go", "-a", "yolo")
    data = json.loads(seen.read_text())
    assert data["hook_event_name"] == "PostToolUse" and data["tool_name"] == "Bash"
    assert "hello-from-the-command" in data["tool_response"]["stdout"]
    assert data["tool_response"]["exit_code"] == 0
    assert "[PostToolUse hook] lint: 2 warnings" in events[-1]["result"]
    assert final_call(events, "s1")["status"] == "succeeded"


def test_issue32_item1_userpromptsubmit_context_reaches_the_model(tmp_path: Path, workspace: Path) -> None:
    seen = tmp_path / "prompt.json"
    context = {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "use make"}}
    settings = settings_with_hooks(
        tmp_path,
        {
            "UserPromptSubmit": [{"hooks": [command(f"cat > {seen}; echo '{json.dumps(context)}'")]}],
            "SessionStart": [group("startup", command("echo the branch is main"))],
        },
    )
    spec = write_script(tmp_path, [[{"text": "I read: {last_user}"}]])
    events = run_stream(tmp_path, workspace, settings, spec, "build it")
    assert json.loads(seen.read_text())["prompt"] == "build it"
    assert "use make" in events[-1]["result"]
    listed = run(["sessions", "--json", "-w", str(workspace)], tmp_path)
    assert json.loads(listed.stdout)[0]["title"] == "build it"


def test_issue32_item1_sessionstart_stdout_is_context_on_the_first_prompt(
    tmp_path: Path, workspace: Path
) -> None:
    settings = settings_with_hooks(
        tmp_path, {"SessionStart": [group("startup", command("echo the branch is main"))]}
    )
    spec = write_script(tmp_path, [[{"text": "I read: {last_user}"}]])
    events = run_stream(tmp_path, workspace, settings, spec, "hello")
    assert "the branch is main" in events[-1]["result"]


def test_issue32_item1_userpromptsubmit_exit_2_blocks_the_prompt(tmp_path: Path, workspace: Path) -> None:
    settings = settings_with_hooks(
        tmp_path, {"UserPromptSubmit": [{"hooks": [command("echo 'no secrets in prompts' >&2; exit 2")]}]}
    )
    spec = write_script(tmp_path, [[{"text": "should not be asked"}]])
    events = run_stream(tmp_path, workspace, settings, spec, "my password is hunter2")
    result = events[-1]
    assert result["exit_code"] != 0 and result["is_error"]
    assert "no secrets in prompts" in json.dumps(result)
    assert not any(e.get("subtype") == "text" for e in events)  # the model was never asked


def test_issue32_item1_a_hanging_hook_times_out_and_the_turn_goes_on(tmp_path: Path, workspace: Path) -> None:
    """An advisory guard (a guard that is not blocks: issue 37 item 5) and a PostToolUse hook."""
    settings = settings_with_hooks(
        tmp_path,
        {
            "PreToolUse": [group("Bash", command("sleep 600", timeout=1, advisory=True))],
            "PostToolUse": [group("Bash", command("exit 7"))],
        },
    )
    spec = write_script(tmp_path, [[shell_call("touch ran.txt", cid="s1")], [{"text": "done"}]])
    events = run_stream(tmp_path, workspace, settings, spec, "go", "-a", "yolo")
    assert (workspace / "ran.txt").exists() and events[-1]["result"] == "done"
    said = " ".join(e["text"] for e in events if e["type"] == "notice")
    assert "did not finish within 1 s" in said and "exited with 7" in said


def test_issue32_item1_stop_hook_keeps_the_turn_going_once(tmp_path: Path, workspace: Path) -> None:
    marker = tmp_path / "stopped-once"
    hook = (
        f"if [ -e {marker} ]; then exit 0; fi; touch {marker}; "
        f"echo '{json.dumps({'decision': 'block', 'reason': 'run the tests first'})}'"
    )
    settings = settings_with_hooks(tmp_path, {"Stop": [{"hooks": [command(hook)]}]})
    spec = write_script(tmp_path, [[{"text": "all done"}], [{"text": "Told: {last_user}"}]])
    events = run_stream(tmp_path, workspace, settings, spec, "go")
    assert events[-1]["result"].endswith("Told: [Stop hook] run the tests first")


def test_issue32_item1_a_workspace_hooks_file_is_never_read(tmp_path: Path, workspace: Path) -> None:
    blocking = {"hooks": {"PreToolUse": [group("*", command("exit 2"))]}}
    for where in (
        ".claude/settings.json",
        ".claude/settings.local.json",
        ".devagent/hooks.json",
        "hooks.json",
    ):
        (workspace / where).parent.mkdir(parents=True, exist_ok=True)
        (workspace / where).write_text(json.dumps(blocking))
    (workspace / ".devagent" / "config.toml").write_text('hooks_file = "hooks.json"\n')
    spec = write_script(tmp_path, [[shell_call("touch ran.txt", cid="s1")], [{"text": "done"}]])
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "DEVAGENT_DATA_DIR": str(tmp_path / "data"),
    }
    argv = ["run", "go", "-w", str(workspace), "-m", spec, "-a", "yolo", "--output-format", "json"]
    out = subprocess.run(DEVAGENT + argv, capture_output=True, text=True, timeout=60, env=env, cwd=workspace)
    assert out.returncode == 0, out.stderr
    assert (workspace / "ran.txt").exists()


def test_issue32_item1_G6_events_at_the_session_points_across_a_park_and_resume(
    tmp_path: Path, workspace: Path
) -> None:
    """SessionStart (startup, then resume), Notification for a permission, SessionEnd: each logged
    by one hook that writes what it read."""
    log = tmp_path / "events.log"
    settings = settings_with_hooks(
        tmp_path, {e: [{"hooks": [logger(log)]}] for e in ("SessionStart", "Notification", "SessionEnd")}
    )
    spec = write_script(tmp_path, [[write_call("x.txt", "x\n", cid="w1")], [{"text": "done"}]])
    events = run_stream(tmp_path, workspace, settings, spec, "go")
    assert events[-1]["exit_code"] == 4
    sid = events[-1]["session_id"]
    events = run_stream(tmp_path, workspace, settings, spec, "--resume", sid, "--allow")
    assert events[-1]["exit_code"] == 0, events[-1]
    seen = logged(log)
    assert seen[0] == ["SessionStart", "startup"]
    assert ["Notification", "permission_prompt"] in seen
    assert seen.count(["SessionEnd", "other"]) == 2


def test_issue32_item1_a_bad_hooks_file_stops_the_start_with_its_place(
    tmp_path: Path, workspace: Path
) -> None:
    settings = settings_with_hooks(tmp_path, {"PreToolUse": [group("Bash(", command("true"))]})
    out = run(["--config", str(settings), "run", "hi", "-w", str(workspace)], tmp_path)
    assert out.returncode != 0
    assert "hooks_file" in out.stderr and "PreToolUse[0].matcher" in out.stderr


def test_issue32_item1_hooks_file_format(tmp_path: Path) -> None:
    path = tmp_path / "h.json"
    path.write_text(
        json.dumps(
            {
                "hooks": {
                    "PreToolUse": [
                        group("Edit|Write", command("a")),
                        group("mcp__github__.*", command("b")),
                        group("", command("a"), {"type": "agent", "prompt": "check it"}),
                    ],
                    "PermissionRequest": [group("", command("c"))],  # not fired here: skipped
                }
            }
        )
    )
    hooks = load_hooks(path)
    assert [c.command for c in hooks.commands("PreToolUse", ["edit", "Edit", "MultiEdit"])] == ["a"]
    assert [c.command for c in hooks.commands("PreToolUse", ["github__search", "mcp__github__search"])] == [
        "b",
        "a",
    ]
    assert [c.command for c in hooks.commands("PreToolUse", ["MultiEditor"])] == ["a"]  # the "" group only
    assert not hooks.has("PermissionRequest")
    path.write_text('{"PreToolUse": [{"hooks": [{"type": "command", "command": ""}]}]}')
    with pytest.raises(HooksFileError, match=r"PreToolUse\[0\]\.hooks\[0\]\.command"):
        load_hooks(path)


def test_issue32_item1_mcp_and_client_tools_answer_to_claude_code_names() -> None:
    from devagent.agent.hooks.points import tool_names
    from devagent.agent.state import PendingCall

    assert tool_names(PendingCall("1", "github__search", {}, "mcp")) == (
        "github__search",
        "mcp__github__search",
    )
    assert tool_names(PendingCall("2", "edit", {}, "edit")) == ("edit", "Edit", "MultiEdit")
    assert tool_names(PendingCall("3", "apply_patch", {}, "edit"))[1:] == (
        "apply_patch",
        "Edit",
        "MultiEdit",
        "Write",
    )


def test_issue32_item1_info_names_the_hooks_file_and_counts_its_hooks(tmp_path: Path) -> None:
    settings = settings_with_hooks(
        tmp_path,
        {"PreToolUse": [group("Bash", command("a"), command("b"))], "Stop": [group("", command("c"))]},
    )
    out = run(["--config", str(settings), "info", "--json"], tmp_path)
    assert out.returncode == 0, out.stderr
    hooks = json.loads(out.stdout)["hooks"]
    assert hooks == {"file": str((tmp_path / "hooks.json").resolve()), "PreToolUse": 2, "Stop": 1}


def test_issue32_item1_a_hook_gets_the_clean_environment_of_commands(tmp_path: Path, workspace: Path) -> None:
    dump = tmp_path / "hook-env.txt"
    settings = settings_with_hooks(tmp_path, {"UserPromptSubmit": [{"hooks": [command(f"env > {dump}")]}]})
    spec = write_script(tmp_path, [[{"text": "ok"}]])
    env = {
        **os.environ,
        "DEVAGENT_DATA_DIR": str(tmp_path / "data"),
        "OPENAI_API_KEY": "sk-not-for-hooks",
        "DEVAGENT_API_KEY": "dk-not-for-hooks",
        "SOME_TOKEN": "t-not-for-hooks",
    }
    argv = [
        "--config",
        str(settings),
        "run",
        "hi",
        "-w",
        str(workspace),
        "-m",
        spec,
        "--output-format",
        "json",
    ]
    out = subprocess.run(DEVAGENT + argv, capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    seen = dump.read_text()
    assert "not-for-hooks" not in seen
    assert f"CLAUDE_PROJECT_DIR={workspace.resolve()}" in seen and "PATH=" in seen
