"""Tool calls over A2A: cancel option, modified content, shell live output, thoughts, errors,
cancellation and reconnection."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx

from tests.a2a.helpers import (
    auth,
    call,
    dev_meta,
    parts_of,
    results,
    rpc,
    server_and_client,
    stream,
    stream_message,
    text_of,
    tool_updates,
    v03_message,
)
from tests.conftest import Script
from tests.core_helpers import call_then_text, shell_call, write_call


async def _start(c: httpx.AsyncClient, url: str, text: str, ws: Path) -> list[dict[str, Any]]:
    m = v03_message(text, settings={"workspace_path": str(ws)})
    return results(await stream_message(c, url, m))


async def _confirm(
    c: httpx.AsyncClient,
    url: str,
    task: dict[str, Any],
    call_id: str,
    option: str,
    new_content: str | None = None,
) -> list[dict[str, Any]]:
    conf: dict[str, Any] = {"tool_call_id": call_id, "selected_option_id": option}
    if new_content is not None:
        conf["file_details"] = {"new_content": new_content}
    m = v03_message(data=[conf], task_id=task["id"], context_id=task["contextId"])
    return results(await stream_message(c, url, m))


WRITE = call_then_text(write_call("f.txt", "model\n", "w"), "result: {last_tool_results}")


async def test_cancel_option_skips_execution(script: Script, sqlite_url: str, workspace: Path) -> None:
    """B10 B7: the cancel option skips the call (CANCELLED), nothing is written, the turn ends."""
    async with server_and_client(script(WRITE), sqlite_url, workspace) as (srv, c):
        evs = await _start(c, srv.url, "write", workspace)
        evs2 = await _confirm(c, srv.url, evs[0], "w", "cancel")
        ups = tool_updates(evs2)
        assert ups[-1]["status"] == "CANCELLED" and "EXECUTING" not in [u["status"] for u in ups]
        assert evs2[-1]["status"]["state"] == "completed" and evs2[-1]["final"] is True
        assert not (workspace / "f.txt").exists()


async def test_modified_content_is_written(script: Script, sqlite_url: str, workspace: Path) -> None:
    """B10 B6: file_details.new_content replaces what the model proposed; the result is a diff."""
    async with server_and_client(script(WRITE), sqlite_url, workspace) as (srv, c):
        evs = await _start(c, srv.url, "write", workspace)
        evs2 = await _confirm(c, srv.url, evs[0], "w", "proceed_once", "user edit\n")
        ups = tool_updates(evs2)
        assert ups[0]["status"] == "EXECUTING" and ups[-1]["status"] == "SUCCEEDED"
        assert ups[-1]["output"]["diff"]["new_content"] == "user edit\n"
        assert "confirmation_request" not in ups[-1]
        assert (workspace / "f.txt").read_text() == "user edit\n"


SHELL = call_then_text(shell_call("for i in 1 2 3; do echo line$i; sleep 0.3; done", "sh"), "ok")


async def test_shell_live_output(script: Script, sqlite_url: str, workspace: Path) -> None:
    """B7 B8 B6: execute_details in the request; EXECUTING updates replace live_content as output
    comes; the whole ToolCall on every update."""
    async with server_and_client(script(SHELL), sqlite_url, workspace) as (srv, c):
        evs = await _start(c, srv.url, "run", workspace)
        pending = tool_updates(evs)[-1]
        det = pending["confirmation_request"]["execute_details"]
        assert "echo line" in det["command"] and det["working_directory"]
        evs2 = await _confirm(c, srv.url, evs[0], "sh", "proceed_once")
        ups = tool_updates(evs2)
        live = [u.get("live_content") for u in ups if u["status"] == "EXECUTING" and u.get("live_content")]
        assert len(live) >= 2, ups
        assert live[0] != live[-1] and live[-1].startswith(live[0].rstrip("\n").split("\n")[0])
        for u in ups:  # whole object every time
            assert u["tool_call_id"] == "sh" and u["tool_name"] == "run_shell_command"
            assert u["input_parameters"]["command"].startswith("for i")
        assert ups[-1]["status"] == "SUCCEEDED" and "line3" in ups[-1]["output"]["text"]


THINK = [{"items": [{"thinking": "**Planning** I will greet."}, {"text": "Hi!"}]}]


async def test_thoughts(script: Script, sqlite_url: str, workspace: Path) -> None:
    """B11 B4 B5: thinking arrives as AgentThought DataParts with kind THOUGHT, text as TEXT_CONTENT."""
    async with server_and_client(script(THINK), sqlite_url, workspace) as (srv, c):
        evs = await _start(c, srv.url, "hi", workspace)
        thoughts = [parts_of(e)[0]["data"] for e in evs if dev_meta(e).get("kind") == "THOUGHT"]
        assert thoughts and all(set(t) == {"subject", "description"} for t in thoughts)
        assert "greet" in "".join(t["description"] for t in thoughts)
        assert all(t["subject"] == "Planning" for t in thoughts), thoughts
        assert "**" not in "".join(t["description"] for t in thoughts)
        assert text_of(evs) == "Hi!"
        assert all(dev_meta(e).get("model") for e in evs[1:] if "status" in e)


ERR = [{"items": [{"error": {"message": "overloaded", "status": 503}}]}]


async def test_model_error_reported_and_conversation_usable(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """B5: a model error ends the task `failed` with `error` metadata; the same task and context
    still take messages."""
    async with server_and_client(script(ERR), sqlite_url, workspace) as (srv, c):
        evs = await _start(c, srv.url, "hi", workspace)
        assert evs[-1]["status"]["state"] == "failed" and evs[-1]["final"] is True
        assert "overloaded" in dev_meta(evs[-1])["error"]
        again = v03_message("retry", task_id=evs[0]["id"], context_id=evs[0]["contextId"])
        evs2 = results(await stream_message(c, srv.url, again))
        assert evs2[0]["status"]["state"] == "working"
        assert evs2[-1]["final"] is True and dev_meta(evs2[-1])["kind"] == "STATE_CHANGE"


SLOW = [{"items": [{"text": "start "}, {"sleep": 1.0}, {"text": "middle "}, {"sleep": 0.5}, {"text": "end"}]}]


async def test_resubscribe_after_disconnect(script: Script, sqlite_url: str, workspace: Path) -> None:
    """A6: the turn keeps running when the client goes away; tasks/resubscribe returns the task
    and the rest of the events and closes at the end; tasks/get has the whole history."""
    async with server_and_client(script(SLOW), sqlite_url, workspace) as (srv, c):
        m = v03_message("go", settings={"workspace_path": str(workspace)})
        first: list[dict[str, Any]] = []
        async with c.stream("POST", srv.url, json=rpc("message/stream", {"message": m}), headers=auth()) as r:
            async for line in r.aiter_lines():
                if line.startswith("data:"):
                    first.append(json.loads(line[5:])["result"])
                    if text_of(first):
                        break  # disconnect mid-turn
        task_id = first[0]["id"]
        evs = results(await stream(c, srv.url, rpc("tasks/resubscribe", {"id": task_id}), auth()))
        assert evs[0]["kind"] == "task"
        assert evs[-1]["status"]["state"] == "completed" and evs[-1]["final"] is True
        got = (await call(c, srv.url, rpc("tasks/get", {"id": task_id}), auth()))["result"]
        assert got["status"]["state"] == "completed"
        hist_text = "".join(
            p.get("text", "") for h in got["history"] if h["role"] == "agent" for p in h["parts"]
        )
        assert hist_text == "start middle end"


async def test_resubscribe_closes_at_input_required(script: Script, sqlite_url: str, workspace: Path) -> None:
    """A6, issue 11 (STREAM-SUB-002): resubscribing (v0.3) to a task waiting for a confirmation
    returns it and closes with a final status event saying input-required."""
    async with server_and_client(script(WRITE), sqlite_url, workspace, client_timeout=10) as (srv, c):
        evs = await _start(c, srv.url, "write", workspace)
        frames = await asyncio.wait_for(
            stream(c, srv.url, rpc("tasks/resubscribe", {"id": evs[0]["id"]}), auth()), 5
        )
        got = results(frames)
        assert got[0]["kind"] == "task"
        assert got[-1]["kind"] == "status-update" and got[-1]["final"] is True
        assert got[-1]["status"]["state"] == "input-required"


async def test_subscribe_to_parked_task_follows_it_to_its_end(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """Issue 11 (TCK STREAM-SUB-002, A2A 1.0 3.1.6): a 1.0 SubscribeToTask on a task parked at
    input-required returns the task, stays open while it waits, and ends with the terminal state
    the task reaches once answered."""
    async with server_and_client(script(WRITE), sqlite_url, workspace) as (srv, c):
        evs = await _start(c, srv.url, "write", workspace)
        task = evs[0]
        got: list[dict[str, Any]] = []
        subscribed = asyncio.Event()

        async def subscriber() -> None:
            body = rpc("SubscribeToTask", {"id": task["id"]})
            async with c.stream("POST", srv.url, json=body, headers=auth(v1=True)) as r:
                async for line in r.aiter_lines():
                    if line.startswith("data:"):
                        got.append(json.loads(line[5:])["result"])
                        subscribed.set()

        sub = asyncio.create_task(subscriber())
        await asyncio.wait_for(subscribed.wait(), 10)
        assert got[0]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert not sub.done()  # still open while the task waits
        answered = await _confirm(c, srv.url, task, "w", "proceed_once")
        assert answered[-1]["status"]["state"] == "completed"
        await asyncio.wait_for(sub, 20)
        assert "task" in got[0]
        last = got[-1].get("statusUpdate") or got[-1].get("task")
        assert last["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_cancel_running_task(script: Script, sqlite_url: str, workspace: Path) -> None:
    """A3: tasks/cancel stops a running turn; the stream ends `canceled` (final)."""
    long = [{"items": [{"text": "thinking about it"}, {"sleep": 20}, {"text": "never"}]}]
    async with server_and_client(script(long), sqlite_url, workspace) as (srv, c):
        m = v03_message("go", settings={"workspace_path": str(workspace)})
        seen: list[dict[str, Any]] = []
        got_text = asyncio.Event()

        async def reader() -> None:
            async with c.stream(
                "POST", srv.url, json=rpc("message/stream", {"message": m}), headers=auth()
            ) as r:
                async for line in r.aiter_lines():
                    if line.startswith("data:"):
                        seen.append(json.loads(line[5:])["result"])
                        if text_of(seen):
                            got_text.set()

        rt = asyncio.create_task(reader())
        await asyncio.wait_for(got_text.wait(), 10)
        res = await call(c, srv.url, rpc("tasks/cancel", {"id": seen[0]["id"]}), auth())
        assert res["result"]["status"]["state"] == "canceled"
        await asyncio.wait_for(rt, 10)
        assert seen[-1]["status"]["state"] == "canceled" and seen[-1]["final"] is True
        res = await call(c, srv.url, rpc("tasks/cancel", {"id": seen[0]["id"]}), auth())
        assert res["error"]["code"] == -32002


async def test_cancel_waiting_task(script: Script, sqlite_url: str, workspace: Path) -> None:
    """A3 B7: cancelling a task parked at input-required cancels the waiting call."""
    async with server_and_client(script(WRITE), sqlite_url, workspace) as (srv, c):
        evs = await _start(c, srv.url, "write", workspace)
        res = await call(c, srv.url, rpc("tasks/cancel", {"id": evs[0]["id"]}), auth())
        assert res["result"]["status"]["state"] == "canceled"
        ok = v03_message(
            data=[{"tool_call_id": "w", "selected_option_id": "proceed_once"}], task_id=evs[0]["id"]
        )
        frames = await stream_message(c, srv.url, ok)
        assert frames[0]["error"]["code"] == -32602  # nothing waits any more
        assert not (workspace / "f.txt").exists()
