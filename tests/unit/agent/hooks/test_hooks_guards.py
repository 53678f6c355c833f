"""Issue 37 items 5 and 9: hooks that guard fail closed. A real `devagent run` process with a
scripted model and a HOME of the test's own: a PreToolUse or UserPromptSubmit hook that cannot
start, is killed or prints without end blocks the call (or prompt) with its name in the reason,
unless the operator marked it advisory; a guard kept in the operator's home runs in the sandbox and
keeps `rm -rf build` from running; a misspelt event or hook type stops the start with the closest
name; a name devagent skips is said once; a hook printing without end is stopped at its cap and the
process stays small."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.a2a.test_hostile import bwrap_works
from tests.core_helpers import shell_call
from tests.hook_files import command, group
from tests.sandbox_user import for_sandbox_user
from tests.unit.test_cli import DEVAGENT, write_script
from tests.unit.test_headless import lines

ECHO = {"text": "Got: {last_tool_results}"}


def hermetic_env(tmp_path: Path) -> dict[str, str]:
    """A child's environment that reads nothing of the real HOME or config folder."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVAGENT_")}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(tmp_path / "xdg"),
        DEVAGENT_DATA_DIR=str(tmp_path / "data"),
        NO_COLOR="1",
    )
    return env


def settings_for(tmp_path: Path, hooks_file: Path, hooks: dict[str, Any]) -> Path:
    hooks_file.parent.mkdir(parents=True, exist_ok=True)
    hooks_file.write_text(json.dumps({"hooks": hooks}))
    settings = tmp_path / "config.toml"
    settings.write_text(f'hooks_file = "{hooks_file}"\n')
    return settings


def devagent_run(
    tmp_path: Path, settings: Path, args: list[str], *, prefix: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    argv = [*prefix, *DEVAGENT, "--config", str(settings), "run", *args]
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=120,
        env=hermetic_env(tmp_path),
        stdin=subprocess.DEVNULL,
    )


def stream(tmp_path: Path, settings: Path, workspace: Path, spec: str, *more: str) -> list[dict[str, Any]]:
    args = ["go", "-w", str(workspace), "-m", spec, "-a", "yolo", "--output-format", "stream-json", *more]
    out = devagent_run(tmp_path, settings, args)
    assert out.stdout, out.stderr
    return lines(out.stdout)


def final_call(events: list[dict[str, Any]], call_id: str) -> dict[str, Any]:
    return [e for e in events if e["type"] == "tool_call" and e["call_id"] == call_id][-1]


def notices(events: list[dict[str, Any]]) -> str:
    return "\n".join(e["text"] for e in events if e["type"] == "notice")


BLOCK_RM = """#!/bin/sh
if grep -q 'rm -rf'; then echo 'block-rm: no rm -rf in this project' >&2; exit 2; fi
exit 0
"""

GUARD_PY = """import json, sys
event = json.load(sys.stdin)
if "curl" in event["tool_input"].get("command", ""):
    print("guard.py: no downloads", file=sys.stderr)
    sys.exit(2)
"""


def test_issue37_item5_a_guard_in_the_home_folder_blocks_rm_in_the_sandbox(
    tmp_path: Path, workspace: Path
) -> None:
    """The operator's guards live in a home the sandbox hides (~/.claude/hooks, as Claude Code's
    docs place them): they are shown read-only to hooks, so the shell guard refuses `rm -rf build`
    (the folder stays) and the Python guard lets another command run instead of blocking all."""
    if not bwrap_works():
        pytest.skip("needs a working bubblewrap")
    scripts = tmp_path / "home" / ".claude" / "hooks"
    scripts.mkdir(parents=True)
    (scripts / "block-rm.sh").write_text(BLOCK_RM)
    (scripts / "block-rm.sh").chmod(0o755)
    (scripts / "guard.py").write_text(GUARD_PY)
    python_guard = command(f"{sys.executable} $HOME/.claude/hooks/guard.py")
    hooks = {"PreToolUse": [group("Bash", command("~/.claude/hooks/block-rm.sh"), python_guard)]}
    settings = settings_for(tmp_path, tmp_path / "home" / ".claude" / "settings.json", hooks)
    (workspace / "build").mkdir()
    (workspace / "build" / "out.o").write_text("object\n")
    for_sandbox_user(workspace)
    spec = write_script(
        tmp_path,
        [[shell_call("rm -rf build", cid="s1")], [shell_call("touch made.txt", cid="s2")], [ECHO]],
    )
    events = stream(tmp_path, settings, workspace, spec, "--sandbox")
    assert (workspace / "build" / "out.o").exists()  # the guard held
    refused = final_call(events, "s1")
    assert refused["status"] == "failed"
    assert "block-rm: no rm -rf in this project" in refused["error"]["message"]
    assert final_call(events, "s2")["status"] == "succeeded" and (workspace / "made.txt").exists()
    assert "failed" not in notices(events)


def test_issue37_item5_a_guard_that_cannot_start_blocks_and_names_itself(
    tmp_path: Path, workspace: Path
) -> None:
    missing = str(tmp_path / "nowhere" / "check-commands.sh")
    hooks = {"PreToolUse": [group("Bash", command(missing))]}
    settings = settings_for(tmp_path, tmp_path / "hooks.json", hooks)
    spec = write_script(tmp_path, [[shell_call("touch ran.txt", cid="s1")], [ECHO]])
    events = stream(tmp_path, settings, workspace, spec)
    assert not (workspace / "ran.txt").exists()
    refused = final_call(events, "s1")
    assert refused["status"] == "failed" and refused["error"]["type"] == "blocked_by_hook"
    said = refused["error"]["message"]
    assert missing in said and "could not start (exit 127" in said and '"advisory": true' in said
    assert missing in events[-1]["result"]  # the model read why


@pytest.mark.parametrize(
    ("hook", "why"),
    [
        ("kill -9 $$", "killed by SIGKILL"),
        ("sleep 600", "did not finish within 1 s"),
    ],
)
def test_issue37_item5_a_guard_killed_or_out_of_time_blocks(
    tmp_path: Path, workspace: Path, hook: str, why: str
) -> None:
    settings = settings_for(
        tmp_path, tmp_path / "hooks.json", {"PreToolUse": [group("Bash", command(hook, timeout=1))]}
    )
    spec = write_script(tmp_path, [[shell_call("touch ran.txt", cid="s1")], [ECHO]])
    events = stream(tmp_path, settings, workspace, spec)
    assert not (workspace / "ran.txt").exists()
    said = final_call(events, "s1")["error"]["message"]
    assert why in said and f"`{hook}`" in said


def test_issue37_item5_an_advisory_guard_that_fails_only_warns_once(tmp_path: Path, workspace: Path) -> None:
    missing = str(tmp_path / "nowhere" / "lint-commands.sh")
    hooks = {
        "PreToolUse": [group("Bash", command(missing, advisory=True))],
        "UserPromptSubmit": [{"hooks": [command(missing, advisory=True)]}],
    }
    settings = settings_for(tmp_path, tmp_path / "hooks.json", hooks)
    spec = write_script(tmp_path, [[shell_call("touch ran.txt", cid="s1")], [{"text": "done"}]])
    events = stream(tmp_path, settings, workspace, spec)
    assert (workspace / "ran.txt").exists() and final_call(events, "s1")["status"] == "succeeded"
    assert events[-1]["result"] == "done"
    said = notices(events)
    assert said.count(f"The PreToolUse hook `{missing}` failed: it could not start") == 1
    assert said.count(f"The UserPromptSubmit hook `{missing}` failed: it could not start") == 1


def test_issue37_item5_a_prompt_guard_that_cannot_start_blocks_the_prompt(
    tmp_path: Path, workspace: Path
) -> None:
    hooks = {"UserPromptSubmit": [{"hooks": [command("no-such-scanner --secrets")]}]}
    settings = settings_for(tmp_path, tmp_path / "hooks.json", hooks)
    spec = write_script(tmp_path, [[{"text": "should not be asked"}]])
    events = stream(tmp_path, settings, workspace, spec)
    result = events[-1]
    assert result["is_error"] and "`no-such-scanner --secrets` failed" in json.dumps(result)
    assert not any(e.get("subtype") == "text" for e in events)  # the model was never asked


@pytest.mark.parametrize(
    ("hooks", "said"),
    [
        ({"PreToolUze": [group("Bash", command("true"))]}, "not a hooks event: did you mean 'PreToolUse'"),
        ({"PreToolUse": [group("Bash", {"type": "comand", "command": "true"})]}, "did you mean 'command'?"),
        ({"PreToolUse": [group("Bash", command("true", advisory="yes"))]}, "advisory must be true or false"),
    ],
)  # fmt: skip
def test_issue37_item5_a_misspelt_event_or_type_stops_the_start(
    tmp_path: Path, workspace: Path, hooks: dict[str, Any], said: str
) -> None:
    settings = settings_for(tmp_path, tmp_path / "hooks.json", hooks)
    spec = write_script(tmp_path, [[shell_call("touch ran.txt", cid="s1")], [ECHO]])
    out = devagent_run(tmp_path, settings, ["go", "-w", str(workspace), "-m", spec, "-a", "yolo"])
    assert out.returncode != 0 and said in out.stderr and "hooks_file" in out.stderr
    assert not (workspace / "ran.txt").exists()


def test_issue37_item5_what_devagent_skips_is_said_once(tmp_path: Path, workspace: Path) -> None:
    """Claude Code's events and hook types devagent does not run load with a warning each, once."""
    hooks = {
        "PermissionRequest": [group("", command("true"))],
        "PreToolUse": [group("Bash", {"type": "prompt", "prompt": "is it safe?"}, command("true"))],
    }
    settings = settings_for(tmp_path, tmp_path / "hooks.json", hooks)
    spec = write_script(tmp_path, [[shell_call("touch ran.txt", cid="s1")], [ECHO]])
    out = devagent_run(tmp_path, settings, ["go", "-w", str(workspace), "-m", spec, "-a", "yolo"])
    assert out.returncode == 0, out.stderr
    assert (workspace / "ran.txt").exists()
    assert out.stderr.count("devagent fires no 'PermissionRequest' event") == 1
    assert out.stderr.count("hooks of type 'prompt' are not run by devagent") == 1


HUGE = 400_000_000  # bytes the hook would print: far past its cap


def test_issue37_item9_a_hook_printing_without_end_is_stopped_and_memory_stays_small(
    tmp_path: Path, workspace: Path
) -> None:
    """A `yes` guard: stopped at its output cap (and the call blocked), the process's peak memory
    stays far below what it printed (before, the whole output was read: 862 MiB for this one)."""
    settings = settings_for(
        tmp_path, tmp_path / "hooks.json", {"PreToolUse": [group("Bash", command(f"yes | head -c {HUGE}"))]}
    )
    spec = write_script(tmp_path, [[shell_call("touch ran.txt", cid="s1")], [ECHO]])
    args = ["go", "-w", str(workspace), "-m", spec, "-a", "yolo", "--output-format", "stream-json"]
    # A fresh Python starts devagent and reports the peak memory of its children (devagent and
    # what it started): this test process's other children do not count.
    peak = "import resource, subprocess, sys; subprocess.run(sys.argv[1:]); " + (
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)"
    )
    out = devagent_run(tmp_path, settings, args, prefix=(sys.executable, "-c", peak))
    events = lines(out.stdout)
    assert not (workspace / "ran.txt").exists()
    said = final_call(events, "s1")["error"]["message"]
    assert "printed more than 256 KiB on its stdout and was stopped" in said
    peak_mib = int(out.stderr.strip().splitlines()[-1]) // 1024
    print(f"peak RSS of devagent run with a {HUGE // 10**6} MB hook: {peak_mib} MiB")
    assert peak_mib < 300


def test_issue37_item5_chat_shows_which_guard_could_not_start(tmp_path: Path, workspace: Path) -> None:
    """In a pseudo-terminal: `devagent chat` in yolo mode with a guard whose program is missing
    shows the call refused with the guard's name, and the folder the model meant to delete stays."""
    from tests.terminal.test_chat_pty import Term

    hooks = {"PreToolUse": [group("Bash", command("no-such-guard --strict"))]}
    settings = settings_for(tmp_path, tmp_path / "hooks.json", hooks)
    (workspace / "build").mkdir()
    spec = write_script(tmp_path, [[shell_call("rm -rf build", cid="s1")], [{"text": "the model went on"}]])
    env = {k: v for k, v in hermetic_env(tmp_path).items() if k.startswith(("XDG_", "DEVAGENT_"))}
    db = f"sqlite+aiosqlite:///{tmp_path / 'chat.db'}"
    args = ["--config", str(settings), "chat", "--model", spec, "--approval", "yolo", "--db", db]
    t = Term(args, tmp_path / "home", workspace, env)
    try:
        t.prompt()
        t.line("clean the build")
        shown = t.expect("the model went on")
        assert re.search(r"`no-such-guard --strict`\s+failed:\s+it\s+could\s+not\s+start", shown), shown
        assert (workspace / "build").is_dir()
        assert t.leave() == 0
    finally:
        t.close()
