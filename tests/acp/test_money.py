"""Issue 31 item 5 through ACP: the editor's cap on a turn's cost in `_meta.max_cost_usd`, on
`session/new` (every turn of the session) or on `session/prompt` (this turn and those after it);
the turn stops before the model request that would begin past it and the prompt is answered with
a JSON-RPC error carrying the reason."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

pytest.importorskip("acp", reason="agent-client-protocol is installed by scripts/test (pyproject.toml)")

from acp import RequestError, text_block

from tests.acp.conftest import acp_argv
from tests.acp.test_python_sdk import TIMEOUT, EditorClient, agent, start
from tests.conftest import ScriptFile

STEP = [
    {"tool_call": {"name": "list_directory", "args": {"path": "."}}},
    {"usage": {"input_tokens": 1000, "output_tokens": 100}},
]


async def test_issue31_item5_acp_a_task_cap_in_meta_stops_the_turn_with_the_reason(
    acp_env: dict[str, str], work_dir: Path, script: ScriptFile, tmp_path: Path
) -> None:
    env = {**acp_env, "DEVAGENT_PRICES": json.dumps({"scripted": {"input": 10, "output": 100}})}
    client = EditorClient()
    argv = acp_argv(script([STEP] * 20 + [[{"text": "done"}]]))
    async with agent(client, argv, env, work_dir, tmp_path / "err.log") as (conn, _):
        await start(conn)
        capped = await asyncio.wait_for(
            conn.new_session(cwd=str(work_dir), mcp_servers=[], max_cost_usd=0.03), TIMEOUT
        )
        with pytest.raises(RequestError) as stopped:
            await asyncio.wait_for(
                conn.prompt(session_id=capped.session_id, prompt=[text_block("go")]), TIMEOUT
            )
        other = await asyncio.wait_for(conn.new_session(cwd=str(work_dir), mcp_servers=[]), TIMEOUT)
        with pytest.raises(RequestError) as by_prompt:
            await asyncio.wait_for(
                conn.prompt(session_id=other.session_id, prompt=[text_block("go")], max_cost_usd=0.05),
                TIMEOUT,
            )
        with pytest.raises(RequestError) as bad:
            await asyncio.wait_for(
                conn.prompt(session_id=other.session_id, prompt=[text_block("go")], max_cost_usd="lots"),
                TIMEOUT,
            )
    assert "Stopped by the task's cost cap: this task has cost $0.0400, its cap is $0.0300" in str(
        stopped.value
    )
    assert "this task has cost $0.0600, its cap is $0.0500" in str(by_prompt.value), by_prompt.value
    assert "max_cost_usd must be a number" in str(bad.value)
