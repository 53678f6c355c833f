"""Issue 28 item 14 (ACP v1's stable `session/resume` and `session/close`): the Python SDK's
client side drives real `devagent acp` subprocesses. A session is resumed by a new process on the
same database without its history being replayed, and goes on where it stopped; closing it
cancels its running turn (the command killed), stops the MCP server only it used, refuses later
prompts, and leaves it stored, so that it can be resumed again."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("acp", reason="agent-client-protocol is installed by scripts/test (pyproject.toml)")

from acp import RequestError, text_block
from acp.schema import McpServerStdio

from tests.acp.conftest import acp_argv
from tests.acp.test_python_sdk import TIMEOUT, EditorClient, agent, new_session_id, start
from tests.conftest import ScriptFile
from tests.core_helpers import shell_call, write_call
from tests.mcp_servers import SERVER

HISTORY_KINDS = ("user_message_chunk", "agent_message_chunk", "agent_thought_chunk", "tool_call")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_issue28_item14_acp_resume_in_a_new_process_goes_on_without_replay(
    acp_env: dict[str, str], work_dir: Path, script: ScriptFile, tmp_path: Path
) -> None:
    steps = [
        [{"thinking": "Say hello."}, {"text": "First answer."}],
        [{"text": "Second answer, to: {last_user}"}],
    ]
    path = script(steps)
    first = EditorClient()
    async with agent(first, acp_argv(path), acp_env, work_dir, tmp_path / "err.log") as (conn, _):
        await start(conn)
        sid = await new_session_id(conn, work_dir)
        resp = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("hello")]), TIMEOUT)
        assert resp.stop_reason == "end_turn" and first.text() == "First answer."

    # A new process on the same database: the state is in the store, not in the first process.
    second = EditorClient()
    async with agent(second, acp_argv(path), acp_env, work_dir, tmp_path / "err.log") as (conn, _):
        init = await start(conn)
        assert init.agent_capabilities is not None
        caps = init.agent_capabilities.session_capabilities
        assert caps is not None and caps.resume is not None and caps.close is not None
        assert init.agent_capabilities.load_session is True  # load (with replay) stays offered

        resumed = await asyncio.wait_for(
            conn.resume_session(cwd=str(work_dir), session_id=sid, mcp_servers=[]), TIMEOUT
        )
        assert resumed.modes is not None and resumed.modes.current_mode_id == "ask"
        # The commands come after the answer; nothing of the history came before or with them.
        await second.until(lambda: "available_commands_update" in second.kinds())
        assert not [k for k in second.kinds() if k in HISTORY_KINDS], second.kinds()

        resp = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("again")]), TIMEOUT)
        assert resp.stop_reason == "end_turn"
        assert second.text() == "Second answer, to: again"  # the script's second step: one conversation

        with pytest.raises(RequestError) as unknown:
            await conn.resume_session(cwd=str(work_dir), session_id="no-such-session", mcp_servers=[])
        assert unknown.value.code == -32002


async def test_issue28_item14_acp_close_cancels_the_turn_and_frees_the_session(
    acp_env: dict[str, str], work_dir: Path, script: ScriptFile, tmp_path: Path
) -> None:
    # An MCP server the editor names for this session; it records its process id when it starts.
    server = tmp_path / "mcp_server.py"
    server.write_text("import os, sys\nopen(sys.argv[1], 'w').write(str(os.getpid()))\n" + SERVER)
    mcp_pid_file = tmp_path / "mcp.pid"
    probe = McpServerStdio(
        name="probe", command=sys.executable, args=[str(server), str(mcp_pid_file)], env=[]
    )
    # The command records its process id, then waits for a file nobody creates.
    command = "echo started; echo $$ > pid; while [ ! -f release ]; do sleep 0.05; done; echo released"
    steps = [
        [shell_call(command, "sh")],
        # never played: the cancelled turn ends its transcript with a response of its own
        [{"text": "unused"}],
        [{"text": "Back after the close: {last_user}"}],
    ]
    env = {**acp_env, "DEVAGENT_MCP_CLIENT_COMMANDS": sys.executable}
    client = EditorClient()
    argv = acp_argv(script(steps), "--approval", "yolo")
    async with agent(client, argv, env, work_dir, tmp_path / "err.log") as (conn, _):
        await start(conn)
        new = await asyncio.wait_for(conn.new_session(cwd=str(work_dir), mcp_servers=[probe]), TIMEOUT)
        sid = new.session_id
        prompt = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("run it")]))
        await client.until(lambda: any("started" in str(u.get("content")) for u in client.calls("sh")))
        command_pid = int((work_dir / "pid").read_text())
        mcp_pid = int(mcp_pid_file.read_text())  # started before the model's first request
        assert not _gone(mcp_pid)

        await asyncio.wait_for(conn.close_session(session_id=sid), TIMEOUT)
        # The running turn was cancelled as by session/cancel, its command killed; the MCP server
        # that only this session used has stopped.
        assert (await asyncio.wait_for(prompt, TIMEOUT)).stop_reason == "cancelled"
        assert client.calls("sh")[-1]["status"] == "failed"
        assert _gone(command_pid)
        assert _gone(mcp_pid)

        # Closed: a prompt is refused and nothing more is said about the session.
        heard = len(client.updates)
        with pytest.raises(RequestError) as refused:
            await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("still there?")]), TIMEOUT)
        assert refused.value.code == -32602 and "no open session" in str(refused.value)
        assert len(client.updates) == heard
        # Closing what is closed (or was never open) is no error.
        await asyncio.wait_for(conn.close_session(session_id=sid), TIMEOUT)
        await asyncio.wait_for(conn.close_session(session_id="never-opened"), TIMEOUT)

        # The session stays stored: resumed on the same connection, it goes on.
        await asyncio.wait_for(
            conn.resume_session(cwd=str(work_dir), session_id=sid, mcp_servers=[]), TIMEOUT
        )
        resp = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("hello")]), TIMEOUT)
        assert resp.stop_reason == "end_turn"
        assert "Back after the close: hello" in client.text()


async def test_issue28_item14_acp_close_withdraws_a_pending_permission(
    acp_env: dict[str, str], work_dir: Path, script: ScriptFile, tmp_path: Path
) -> None:
    steps = [
        [write_call("w.txt", "no\n", "w")],
        # never played: the cancelled turn ends its transcript with a response of its own
        [{"text": "unused"}],
        [{"text": "Resumed: {last_user}"}],
    ]
    path = script(steps)
    first = EditorClient()
    first.hanging = True
    async with agent(first, acp_argv(path), acp_env, work_dir, tmp_path / "err.log") as (conn, _):
        await start(conn)
        sid = await new_session_id(conn, work_dir)
        prompt = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("write it")]))
        await asyncio.wait_for(first.asked.wait(), TIMEOUT)
        await asyncio.wait_for(conn.close_session(session_id=sid), TIMEOUT)
        assert (await asyncio.wait_for(prompt, TIMEOUT)).stop_reason == "cancelled"
        withdrawn = first.calls("w")[-1]
        assert withdrawn["status"] == "failed" and "cancelled" in str(withdrawn["rawOutput"]), withdrawn
    assert not (work_dir / "w.txt").exists()

    # Not left waiting in the store: resumed elsewhere, nothing is asked again.
    second = EditorClient(answers=["proceed_once"])
    async with agent(second, acp_argv(path), acp_env, work_dir, tmp_path / "err.log") as (conn, _):
        await start(conn)
        await asyncio.wait_for(
            conn.resume_session(cwd=str(work_dir), session_id=sid, mcp_servers=[]), TIMEOUT
        )
        resp = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("next")]), TIMEOUT)
        assert resp.stop_reason == "end_turn" and second.text() == "Resumed: next"
        assert second.permissions == []
    assert not (work_dir / "w.txt").exists()
