"""A subagent through the ACP door (a real `devagent acp`, the Python SDK's client side): its write
is asked with `session/request_permission` for the call under the task call, titled with the
subagent, and its calls are `tool_call` updates whose `_meta` names the task call."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("acp", reason="agent-client-protocol is installed by scripts/test (pyproject.toml)")

from acp import text_block

from tests.acp.conftest import acp_argv
from tests.acp.test_python_sdk import TIMEOUT, EditorClient, agent, start
from tests.core_helpers import notes_by_a_subagent


async def test_issue31_item3_acp_subagent_write_asked_through_the_editor(
    acp_env: dict[str, str], work_dir: Path, tmp_path: Path
) -> None:
    spec = notes_by_a_subagent(tmp_path / "sub.json")
    client = EditorClient(answers=["proceed_once"])
    argv = acp_argv(Path(spec.removeprefix("scripted:")))
    async with agent(client, argv, acp_env, work_dir, tmp_path / "err.log") as (conn, _):
        await start(conn)
        new = await asyncio.wait_for(conn.new_session(cwd=str(work_dir), mcp_servers=[]), TIMEOUT)
        resp = await asyncio.wait_for(
            conn.prompt(session_id=new.session_id, prompt=[text_block("make notes")]), TIMEOUT
        )
    assert resp.stop_reason == "end_turn"
    assert (work_dir / "notes.txt").read_text() == "hello\n"
    [asked] = client.permissions
    assert asked["toolCall"]["toolCallId"] == "t1/w1"
    assert asked["toolCall"]["title"] == "write the notes: Write notes.txt"
    nested = client.calls("t1/w1")
    assert nested[0]["sessionUpdate"] == "tool_call"
    assert all(u["_meta"] == {"devagent": {"parentToolCallId": "t1"}} for u in nested)
    assert nested[-1]["status"] == "completed"
    assert client.calls("t1")[-1]["rawOutput"]["outcome"] == "finished"
    assert client.text() == "parent: I wrote notes.txt."
