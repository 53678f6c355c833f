"""Hooks under `devagent wire`: a call a PreToolUse hook blocks is a ToolResult error carrying
the hook's reason, the model reads it, and the end of input ends the session (SessionEnd)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.core_helpers import shell_call
from tests.hook_files import blocking, logged, logger, write_hooks
from tests.wire.conftest import WireProc, events


def test_issue32_item1_W4_wire_shows_a_blocked_call_as_an_error_with_the_reason(
    start_wire: Callable[..., WireProc], work_dir: Path, wire_env: dict[str, str], tmp_path: Path
) -> None:
    log = tmp_path / "events.log"
    hooks = write_hooks(
        tmp_path,
        {
            "PreToolUse": [blocking("Bash", "no package installs here")],
            "SessionEnd": [{"hooks": [logger(log)]}],
        },
    )
    wire_env["DEVAGENT_HOOKS_FILE"] = str(hooks)
    wire_env["DEVAGENT_APPROVAL"] = "yolo"
    steps = [
        {"items": [shell_call("pip install leftpad", "s1")]},
        {"items": [{"text": "model saw: {last_tool_results}"}]},
    ]
    w = start_wire(steps)
    w.initialize()
    w.prompt("install it")
    msgs, _ = w.until(lambda m: m.get("id") == "p1", timeout=60)
    [result] = [e["return_value"] for e in events(msgs, "ToolResult") if e["tool_call_id"] == "s1"]
    assert result["is_error"] and "no package installs here" in json.dumps(result)
    said = "".join(e.get("text", "") for e in events(msgs, "ContentPart"))
    assert "model saw:" in said and "no package installs here" in said
    assert w.close() == 0
    assert logged(log) == [["SessionEnd", "other"]]
