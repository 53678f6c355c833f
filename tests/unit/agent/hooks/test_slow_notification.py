"""Issue 37 item 4: a Notification hook slower than the lease's heartbeat (a desktop notifier, a
`uv run` script) fires after the turn stored its pause and gave up the session's lease; the
question stays standing. `devagent run` as a script runs it (a real subprocess, no terminal), on
SQLite and PostgreSQL, with a short lease so the heartbeat ticks many times while the hook runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import child_env
from tests.core_helpers import ask_call
from tests.hook_files import command, group, settings_with_hooks

DEVAGENT = [sys.executable, "-m", "devagent"]
HOOK_SECONDS = 6  # the issue's figure: longer than the default lease's heartbeat (10 s / 3)
LEASE_SECONDS = 1  # the heartbeat renews every third of it: ~18 ticks while the hook sleeps


def slow_notifier(tmp_path: Path) -> Path:
    """A devagent settings file whose Notification hook sleeps, then logs the event it read."""
    log = tmp_path / "notified.jsonl"
    hook = f"sleep {HOOK_SECONDS}; cat >> {log}; echo >> {log}"
    return settings_with_hooks(tmp_path, {"Notification": [group("", command(hook))]})


def notified(tmp_path: Path) -> list[dict[str, object]]:
    log = tmp_path / "notified.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def devagent(tmp_path: Path, db: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = child_env(tmp_path, "unused.db")
    env.update(
        HOME=str(tmp_path / "home"),
        XDG_CONFIG_HOME=str(tmp_path / "home" / ".config"),
        DEVAGENT_DB=db,
        DEVAGENT_LEASE_SECONDS=str(LEASE_SECONDS),
        NO_COLOR="1",
    )
    return subprocess.run(
        [*DEVAGENT, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def test_issue37_item4_G3_run_a_slow_notification_hook_leaves_the_question_standing(
    tmp_path: Path, workspace: Path, shared_db: str
) -> None:
    steps = {"steps": [[ask_call("Which colour?", ["red", "blue"], cid="q1")], [{"text": "ok"}]]}
    spec = tmp_path / "script.json"
    spec.write_text(json.dumps(steps))
    settings = slow_notifier(tmp_path)
    run = ["run", "-w", str(workspace), "--output-format", "json"]

    out = devagent(tmp_path, shared_db, "--config", str(settings), *run, "pick", "-m", f"scripted:{spec}")
    assert out.returncode == 4, out.stdout + out.stderr  # parked, not cancelled (130)
    result = json.loads(out.stdout)
    [pending] = result["pending"]
    assert pending["call_id"] == "q1" and pending["question"]["choices"] == ["red", "blue"]
    [event] = notified(tmp_path)  # the hook ran to its end, announcing the question
    assert event["hook_event_name"] == "Notification"
    assert event["notification_type"] == "elicitation_dialog"
    assert "took the lease over" not in out.stderr

    sessions = devagent(tmp_path, shared_db, "sessions", "--json", "-w", str(workspace))
    [stored] = json.loads(sessions.stdout)
    assert stored["id"] == result["session_id"] and stored["status"] == "awaiting_input", stored

    again = devagent(tmp_path, shared_db, *run, "--resume", result["session_id"], "--answer", "q1=blue")
    assert again.returncode == 0, again.stdout + again.stderr
    done = json.loads(again.stdout)
    assert done["subtype"] == "success" and done["session_id"] == result["session_id"], done
