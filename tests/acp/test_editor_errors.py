"""Issue 21 item 5, from outside: what an editor (acpx, the official TypeScript client; Zed)
showed of a real `devagent acp` subprocess. Error responses say what went wrong in `message`
(editors show that, not `data`); an editor that goes away while a permission request is open
leaves no traceback on stderr and exit code 0, the request stored; a new file costs no
`fs/read_text_file` (editors show a failed read as an error)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("acp", reason="agent-client-protocol is installed by scripts/test (pyproject.toml)")

from acp import RequestError, text_block

from tests.acp.conftest import acp_argv
from tests.acp.test_python_sdk import TIMEOUT, EditorClient, agent, start
from tests.conftest import ScriptFile
from tests.core_helpers import write_call


def _raw(argv: list[str], env: dict[str, str], cwd: Path, messages: list[dict[str, Any]]) -> list[Any]:
    """Send these lines; once every request is answered, close stdin. The answers, in order."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=cwd)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("".join(json.dumps(m) + "\n" for m in messages))
    proc.stdin.flush()
    want = {m["id"] for m in messages if "id" in m}
    got: dict[Any, Any] = {}
    try:
        while want - set(got):
            line = proc.stdout.readline()
            assert line, "devagent acp closed stdout before answering"
            msg = json.loads(line)
            if msg.get("id") in want:
                got[msg["id"]] = msg
        proc.stdin.close()
        assert proc.wait(timeout=300) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return [got[m["id"]] for m in messages if "id" in m]


def test_issue21_error_messages_say_what_went_wrong(
    acp_env: dict[str, str], work_dir: Path, script: ScriptFile
) -> None:
    init = {"protocolVersion": 1, "clientCapabilities": {}}
    answers = _raw(
        acp_argv(script([[{"text": "unused"}]])),
        acp_env,
        work_dir,
        [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
            # the SDK's schema refuses it: no sessionId
            {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"prompt": []}},
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "session/new",
                "params": {"cwd": "relative", "mcpServers": []},
            },
            {"jsonrpc": "2.0", "id": 4, "method": "session/fork", "params": {}},
            {"jsonrpc": "2.0", "id": 5, "method": "authenticate", "params": {"methodId": "x"}},
        ],
    )
    _, missing, relative, unknown, auth = (a.get("error") for a in answers)
    assert missing["code"] == -32602
    assert missing["message"].startswith("Invalid params: sessionId: Field required"), missing
    assert missing["data"]["errors"]  # the details stay in data
    assert relative["code"] == -32602
    assert relative["message"] == "Invalid params: cwd must be an existing absolute directory", relative
    assert relative["data"]["cwd"] == "relative"
    assert unknown == {
        "code": -32601,
        "message": "Method not found: session/fork",
        "data": {"method": "session/fork"},
    }
    assert auth["code"] == -32602 and auth["message"] == "Invalid params: devagent offers no auth methods"


async def test_issue21_error_messages_through_the_sdk_client(
    acp_env: dict[str, str], work_dir: Path, script: ScriptFile, tmp_path: Path
) -> None:
    steps = [[{"error": {"message": "the provider said no", "status": 429}}]]
    client = EditorClient()
    argv = acp_argv(script(steps), "--approval", "auto-edit")
    async with agent(client, argv, acp_env, work_dir, tmp_path / "err.log") as (conn, _):
        await start(conn)
        sid = (await conn.new_session(cwd=str(work_dir), mcp_servers=[])).session_id
        with pytest.raises(RequestError) as e:
            await conn.set_session_mode(session_id=sid, mode_id="yolo")
        assert str(e.value) == "Invalid params: yolo is not a mode this server allows (ask, auto-edit, plan)"
        with pytest.raises(RequestError) as e:
            await conn.prompt(session_id="nope", prompt=[text_block("hi")])
        assert str(e.value) == "Invalid params: no open session nope"
        with pytest.raises(RequestError) as e:
            await conn.load_session(cwd=str(work_dir), session_id="no-such-session", mcp_servers=[])
        assert (
            e.value.code == -32002 and str(e.value) == "Resource not found: no stored session no-such-session"
        )
        with pytest.raises(RequestError) as e:
            await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("hi")]), TIMEOUT)
        assert e.value.code == -32603 and "the provider said no" in str(e.value), str(e.value)


async def test_issue21_editor_goes_away_during_a_permission_request(
    acp_env: dict[str, str], work_dir: Path, script: ScriptFile, tmp_path: Path
) -> None:
    steps = [[write_call("later.txt", "ok\n", "lw")], [{"text": "Written after the editor came back."}]]
    path = script(steps)
    log = tmp_path / "err.log"
    first = EditorClient()
    first.hanging = True
    async with agent(first, acp_argv(path), acp_env, work_dir, log) as (conn, proc):
        await start(conn)
        sid = (await conn.new_session(cwd=str(work_dir), mcp_servers=[])).session_id
        pending = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("write later")]))
        await asyncio.wait_for(first.asked.wait(), TIMEOUT)
        proc.stdin.close()  # the editor goes away: stdin closes with the request open
        code = await asyncio.wait_for(proc.wait(), TIMEOUT)
        pending.cancel()
    assert code == 0
    err = log.read_text()
    assert "Traceback" not in err and "ConnectionError" not in err, err
    assert not (work_dir / "later.txt").exists()

    # The request was stored: the next editor is asked it again.
    second = EditorClient(answers=["proceed_once"])
    async with agent(second, acp_argv(path), acp_env, work_dir, log) as (conn, _):
        await start(conn)
        await asyncio.wait_for(conn.load_session(cwd=str(work_dir), session_id=sid, mcp_servers=[]), TIMEOUT)
        await second.until(lambda: "Written after" in second.text())
        assert second.permissions[0]["toolCall"]["toolCallId"] == "lw"
    assert (work_dir / "later.txt").read_text() == "ok\n"


async def test_issue21_a_new_file_costs_no_editor_read(
    acp_env: dict[str, str], work_dir: Path, script: ScriptFile, tmp_path: Path
) -> None:
    readme = str(work_dir / "README.md")
    steps = [
        [
            write_call("new.txt", "new\n", "n"),
            {"tool_call": {"name": "read_file", "args": {"path": "README.md"}, "id": "r"}},
            {"tool_call": {"name": "read_file", "args": {"path": "missing.txt"}, "id": "m"}},
        ],
        [{"text": "Got: {last_tool_results}"}],
    ]
    client = EditorClient(answers=["proceed_once"], buffers={readme: "# Unsaved\n"})
    async with agent(client, acp_argv(script(steps)), acp_env, work_dir, tmp_path / "err.log") as (conn, _):
        await start(conn, fs=True)
        sid = (await conn.new_session(cwd=str(work_dir), mcp_servers=[])).session_id
        resp = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("write")]), TIMEOUT)
        assert resp.stop_reason == "end_turn"
    assert client.writes == [(str(work_dir / "new.txt"), "new\n")]  # written through the editor
    assert client.reads == [readme]  # the existing file through the editor (its buffer), nothing else
    assert "# Unsaved" in client.text()
    assert client.calls("m")[-1]["status"] == "failed"
    assert client.calls("n")[-1]["status"] == "completed"
