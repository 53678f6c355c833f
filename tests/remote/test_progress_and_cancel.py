"""A remote agent's progress lines, one per line, at the parent's doors (plain A2A status text,
`devagent run --output-format stream-json`, ACP; the wire door in tests/wire), and a cancel that
comes before the remote said its task's id."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.a2a.helpers import v03_message
from tests.a2a.procs import send_stream, serving, status_text
from tests.a2a.test_remote_agents import PLAIN, _delegate, _parent, _remote_settings
from tests.a2a.test_stream_limit import until
from tests.a2a.test_subagents import _reply
from tests.conftest import child_env
from tests.core_helpers import task_call, write_script
from tests.fakes.stepping_a2a_agent import stepping_a2a_agent

# the remote's status messages while it works: three progress lines, two of them in one message
STEPS = ["step 1/3", "step 2/3\nstep 3/3"]
LINES = ["stepper: step 1/3", "stepper: step 2/3", "stepper: step 3/3"]
ANSWER = "done in 3 steps"


def delegating_script(path: Path) -> str:
    """The parent's model: a `task` of type `stepper`, then its result."""
    return write_script(
        path,
        [
            {"items": [task_call("ask the remote", "count to three", "t1", agent="stepper")]},
            {"items": [{"text": "parent: {last_tool_results}"}]},
        ],
    )


async def test_issue38_item6_progress_lines_reach_a_plain_a2a_client_one_per_line(tmp_path: Path) -> None:
    """Each progress line is a status message of its own, naming the remote agent; the answer is
    the reply, said once."""
    with stepping_a2a_agent(STEPS, ANSWER) as agent:
        frames = await _delegate(tmp_path, "stepper", _remote_settings("stepper", agent.card_url))
    assert frames[-1]["status"]["state"] == "completed", frames
    said = [status_text(f) for f in frames if f.get("kind") == "status-update" and status_text(f)]
    assert [s for s in said if s.startswith("stepper: ")] == LINES, said
    assert _reply(frames) == f"parent: {ANSWER}"


def test_issue38_item6_progress_lines_in_stream_json(tmp_path: Path) -> None:
    """`devagent run --output-format stream-json`: one `notice` line per progress line, in order,
    then the result with the remote's answer."""
    ws = tmp_path / "ws"
    ws.mkdir()
    with stepping_a2a_agent(STEPS, ANSWER) as agent:
        config = tmp_path / "settings.toml"
        config.write_text(_remote_settings("stepper", agent.card_url))
        env = {**child_env(tmp_path, "run.db"), "DEVAGENT_CONFIG": str(config), "REMOTE_TOKEN": "t"}
        spec = delegating_script(tmp_path / "parent.json")
        argv = ["run", "go", "-w", str(ws), "-m", spec, "--output-format", "stream-json"]
        out = subprocess.run(
            [sys.executable, "-m", "devagent", *argv],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    notices = [x["text"] for x in lines if x["type"] == "notice"]
    assert notices == LINES, lines
    assert lines[-1]["type"] == "result" and lines[-1]["result"] == f"parent: {ANSWER}", lines[-1]


async def test_issue38_item6_progress_lines_reach_an_acp_editor(tmp_path: Path) -> None:
    """ACP (the Python SDK's client): the progress lines are message text, a line each, before
    the answer."""
    pytest.importorskip("acp", reason="agent-client-protocol is installed by scripts/test (pyproject.toml)")
    from acp import text_block

    from tests.acp.conftest import acp_argv
    from tests.acp.test_python_sdk import TIMEOUT, EditorClient, agent, start

    work = tmp_path / "work"
    work.mkdir()
    with stepping_a2a_agent(STEPS, ANSWER) as remote:
        config = tmp_path / "settings.toml"
        config.write_text(_remote_settings("stepper", remote.card_url))
        env = {**child_env(tmp_path, "acp.db"), "DEVAGENT_CONFIG": str(config), "REMOTE_TOKEN": "t"}
        spec = delegating_script(tmp_path / "parent.json")
        client = EditorClient(answers=[])
        argv = acp_argv(Path(spec.removeprefix("scripted:")))
        async with agent(client, argv, env, work, tmp_path / "err.log") as (conn, _):
            await start(conn)
            new = await asyncio.wait_for(conn.new_session(cwd=str(work), mcp_servers=[]), TIMEOUT)
            resp = await asyncio.wait_for(
                conn.prompt(session_id=new.session_id, prompt=[text_block("go")]), TIMEOUT
            )
    assert resp.stop_reason == "end_turn"
    assert client.text() == "".join(f"{line}\n" for line in LINES) + f"parent: {ANSWER}", client.text()


async def test_issue38_item6_a_cancel_before_the_remote_task_id_cancels_it_when_it_comes(
    tmp_path: Path,
) -> None:
    """The remote holds its first event (its task's id) while the parent's task is cancelled; the
    parent's turn ends canceled at once, and when the remote then says its task, that task is
    cancelled (the remote is told, for that id)."""
    with stepping_a2a_agent([], "", hold=True) as remote:
        args, env = _parent(tmp_path, "stepper", _remote_settings("stepper", remote.card_url))
        async with httpx.AsyncClient(timeout=60) as c:
            with serving(args, tmp_path / "parent.log", env=env) as parent:
                tasks: list[str] = []

                def first(frame: dict[str, Any]) -> None:
                    if not tasks and "id" in frame.get("result", {}):
                        tasks.append(frame["result"]["id"])

                turn = asyncio.create_task(send_stream(c, parent.url, v03_message("delegate"), first))
                await until(lambda: remote.started.is_set() and bool(tasks), "the remote got the message")
                cancel = {"jsonrpc": "2.0", "id": 2, "method": "tasks/cancel", "params": {"id": tasks[0]}}
                assert "result" in (await c.post(parent.url, json=cancel, headers=PLAIN)).json()
                assert (await turn).last_state == "canceled"
                assert remote.task_ids == [] and remote.cancelled == []
                remote.release.set()
                await until(lambda: bool(remote.cancelled), "the remote task cancelled")
                assert remote.cancelled == remote.task_ids, (remote.cancelled, remote.task_ids)
