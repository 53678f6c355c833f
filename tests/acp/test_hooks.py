"""Hooks under `devagent acp` with the ACP Python SDK as the editor: a call a PreToolUse hook
blocks reaches the editor as a failed tool call carrying the hook's reason, and session/close
ends the session (its SessionEnd hook runs)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

pytest.importorskip("acp", reason="agent-client-protocol is installed by scripts/test (pyproject.toml)")

from acp import text_block

from tests.acp.conftest import acp_argv
from tests.acp.test_python_sdk import TIMEOUT, EditorClient, agent, new_session_id, start
from tests.conftest import ScriptFile
from tests.core_helpers import shell_call
from tests.hook_files import blocking, logged, logger, write_hooks


async def test_issue32_item1_acp_shows_a_blocked_call_failed_with_the_reason_and_close_ends_the_session(
    acp_env: dict[str, str], work_dir: Path, script: ScriptFile, tmp_path: Path
) -> None:
    log = tmp_path / "events.log"
    hooks = write_hooks(
        tmp_path,
        {
            "PreToolUse": [blocking("Bash", "no network tools in this project")],
            "SessionEnd": [{"hooks": [logger(log)]}],
        },
    )
    env = {**acp_env, "DEVAGENT_HOOKS_FILE": str(hooks)}
    path = script([[shell_call("curl example.com", "s1")], [{"text": "understood: {last_tool_results}"}]])
    editor = EditorClient()
    async with agent(editor, acp_argv(path, "--approval", "yolo"), env, work_dir, tmp_path / "err.log") as (
        conn,
        _,
    ):
        await start(conn)
        sid = await new_session_id(conn, work_dir)
        resp = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("fetch it")]), TIMEOUT)
        assert resp.stop_reason == "end_turn"
        final = editor.calls("s1")[-1]
        assert final["status"] == "failed"
        assert "no network tools in this project" in json.dumps(final)
        assert "no network tools in this project" in editor.text()
        await asyncio.wait_for(conn.close_session(session_id=sid), TIMEOUT)
    assert logged(log) == [["SessionEnd", "other"]]
