"""Interoperability: kimi-cli's own Node SDK (`@moonshot-ai/kimi-agent-sdk`, pinned in js/) drives
devagent as its executable, through a prompt with an external tool call and an approval (W9)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.npm import ensure_installed

JS = Path(__file__).parent / "js"

pytestmark = pytest.mark.npm


def test_kimi_agent_sdk_drives_devagent(tmp_path: Path, wire_env: dict[str, str], work_dir: Path) -> None:
    ensure_installed(JS, JS / "node_modules" / "@moonshot-ai" / "kimi-agent-sdk", "kimi-agent-sdk")
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "steps": [
                    {
                        "items": [
                            {"text": "opening"},
                            {
                                "tool_call": {
                                    "id": "tc-1",
                                    "name": "open_in_ide",
                                    "args": {"path": "README.md"},
                                }
                            },
                        ]
                    },
                    {
                        "items": [
                            {"text": "running"},
                            {
                                "tool_call": {
                                    "id": "tc-2",
                                    "name": "run_shell_command",
                                    "args": {"command": "echo from-sdk"},
                                }
                            },
                        ]
                    },
                    {"items": [{"text": "done: {last_tool_results}"}]},
                ]
            }
        )
    )
    # The SDK runs `EXECUTABLE --session ID --work-dir DIR --wire --no-thinking`, as it runs kimi.
    exe = tmp_path / "devagent-exe"
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m devagent "$@"\n')
    exe.chmod(0o755)
    env = dict(wire_env)
    env["DEVAGENT_MODEL"] = f"scripted:{script}"
    out = subprocess.run(
        ["node", str(JS / "drive.mjs"), str(exe), str(work_dir), str(uuid.uuid4())],
        capture_output=True,
        text=True,
        env=env,
        cwd=work_dir,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["result"] == {"status": "finished"}
    assert summary["errors"] == [], summary["errors"]
    assert summary["calls"] == ["README.md"]  # the SDK's handler ran the external tool
    (approval,) = summary["approvals"]
    assert approval["sender"] == "run_shell_command" and approval["tool_call_id"] == "tc-2"
    results = {r["tool_call_id"]: r["return_value"] for r in summary["toolResults"]}
    assert results["tc-1"]["output"] == "Opened README.md"
    assert "from-sdk" in results["tc-2"]["output"]
    assert "from-sdk" in summary["text"]
    types = summary["types"]
    assert types[0] == "TurnBegin" and types[-1] == "TurnEnd"
    for t in ("StepBegin", "ContentPart", "ToolCall", "StatusUpdate", "ApprovalRequest", "ApprovalResponse"):
        assert t in types
    assert {"help", "clear"} <= set(summary["slashCommands"])  # from the initialize answer
