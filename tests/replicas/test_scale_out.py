"""Scale-out acceptance (issue 10 items 3 and 5): three `devagent serve` replicas on one PostgreSQL
database behind a round-robin balancer without sticky sessions. Every message of a conversation
may land on another replica; one replica writes a conversation at a time; live events, cancels and
interrupted turns are seen from every replica."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.a2a.helpers import auth, call, client_tool, dev_meta, parts_of, rpc, text_of, v03_message
from tests.conftest import Script, process_ended
from tests.core_helpers import call_then_text, shell_call, write_call
from tests.replicas.conftest import LEASE_SECONDS, StartCluster
from tests.replicas.helpers import SSE, WITHIN, event_key, final_state, status_text, tool_status, tool_update

pytestmark = pytest.mark.postgres


def tc(name: str, args: dict[str, Any], cid: str) -> dict[str, Any]:
    return {"tool_call": {"name": name, "args": args, "id": cid}}


def gate_command(name: str = "go") -> str:
    """A shell command that runs until the test creates the file `name` in the workspace (bounded,
    so a command orphaned by a killed replica ends by itself); it writes its pid first."""
    return f"echo $$ > {name}.pid; timeout 120 sh -c 'until [ -f {name} ]; do sleep 0.1; done'; echo released"


def executing(call_id: str) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda frames: "EXECUTING" in tool_status(frames, call_id)


@asynccontextmanager
async def gated_turn(c: httpx.AsyncClient, url: str, workspace: Path) -> AsyncIterator[tuple[SSE, str]]:
    """A turn streamed from the replica at `url` whose command `g1` waits for the gate `go`: its
    stream and task id once the command runs; after the block the gate is open, the stream closed."""
    m = v03_message("wait for the gate", settings={"workspace_path": str(workspace)})
    stream = SSE(c, url, rpc("message/stream", {"message": m}), auth())
    try:
        await stream.wait_for(executing("g1"))
        yield stream, stream.frames[0]["result"]["id"]
    finally:
        (workspace / "go").touch()
        await stream.aclose()


async def tasks_get(c: httpx.AsyncClient, url: str, task_id: str) -> dict[str, Any]:
    got = await call(c, url, rpc("tasks/get", {"id": task_id}), auth())
    assert "error" not in got, got
    task: dict[str, Any] = got["result"]
    return task


WRITE_THEN_ANSWER = [
    {"items": [write_call("hello.txt", "hi\n", "c1")]},
    {"items": [{"text": "I wrote hello.txt."}]},
    {"items": [{"text": "Second turn: {last_user}"}]},
]


async def test_appendix_flow_across_replicas(
    script: Script, start_cluster: StartCluster, workspace: Path
) -> None:
    """issue 10 item 3/5, A1 A3 A6 B9 B10: the RFC appendix through the balancer; the prompt, the
    confirmation and the follow-up each land on another replica; the file is written once."""
    cl = await start_cluster(script(WRITE_THEN_ANSWER))
    async with httpx.AsyncClient(timeout=WITHIN) as c:
        m = v03_message("write hello", settings={"workspace_path": str(workspace)})
        s1 = SSE(c, cl.url, rpc("message/stream", {"message": m}), auth())
        await s1.finish()
        evs = s1.results()
        assert evs[0]["kind"] == "task" and evs[0]["status"]["state"] == "submitted"
        task_id, ctx = evs[0]["id"], evs[0]["contextId"]
        assert evs[1]["status"]["state"] == "working" and dev_meta(evs[1])["kind"] == "STATE_CHANGE"
        pending = [u for e in evs if (u := tool_update(e))]
        assert pending and pending[-1]["status"] == "PENDING" and pending[-1]["tool_call_id"] == "c1"
        assert pending[-1]["confirmation_request"]["file_edit_details"]["new_content"] == "hi\n"
        assert evs[-1]["status"]["state"] == "input-required" and evs[-1]["final"] is True
        assert sum(1 for e in evs if e.get("final")) == 1
        assert not (workspace / "hello.txt").exists()

        conf = {"tool_call_id": "c1", "selected_option_id": "proceed_once"}
        m = v03_message(data=[conf], task_id=task_id, context_id=ctx)
        s2 = SSE(c, cl.url, rpc("message/stream", {"message": m}), auth())
        await s2.finish()
        evs2 = s2.results()
        assert s2.backend != s1.backend, "the confirmation must land on another replica"
        assert tool_status(s2.frames, "c1") == ["EXECUTING", "SUCCEEDED"], tool_status(s2.frames, "c1")
        assert text_of(evs2) == "I wrote hello.txt."
        assert evs2[-1]["status"]["state"] == "completed" and evs2[-1]["final"] is True
        assert sum(1 for e in evs2 if e.get("final")) == 1
        assert (workspace / "hello.txt").read_text() == "hi\n"
        written = (workspace / "hello.txt").stat().st_mtime_ns

        m = v03_message("and now?", task_id=task_id, context_id=ctx)
        s3 = SSE(c, cl.url, rpc("message/stream", {"message": m}), auth())
        await s3.finish()
        evs3 = s3.results()
        assert len({s1.backend, s2.backend, s3.backend}) == 3, (s1.backend, s2.backend, s3.backend)
        assert text_of(evs3) == "Second turn: and now?"
        assert [e for e in evs3 if tool_update(e) is not None] == []
        assert evs3[-1]["status"]["state"] == "completed" and sum(1 for e in evs3 if e.get("final")) == 1

        for r in cl.replicas:  # every replica reads the same finished task, its whole history
            got = await tasks_get(c, r.url, task_id)
            assert got["status"]["state"] == "completed", (r.index, got["status"])
            said = history_text(got)
            assert "I wrote hello.txt." in said and "Second turn: and now?" in said, (r.index, said)
    assert (workspace / "hello.txt").read_text() == "hi\n"
    assert (workspace / "hello.txt").stat().st_mtime_ns == written
    assert all(n >= 1 for n in cl.balancer.counts), cl.balancer.counts


WEATHER = client_tool(
    "get_weather", "Current weather for a location", {"location": {"type": "string"}}, ["location"]
)
CONFIG = client_tool("read_config", "Read a file on the client's machine", {"file_path": {"type": "string"}})


def client_message(text: str | None, *parts: dict[str, Any], task_id: str | None = None) -> dict[str, Any]:
    ps: list[dict[str, Any]] = [{"kind": "text", "text": text}] if text is not None else []
    msg = v03_message(task_id=task_id)
    msg["parts"] = ps + list(parts)
    return msg


def tool_calls_of(task: dict[str, Any]) -> list[dict[str, Any]]:
    for p in (task["status"].get("message") or {}).get("parts") or []:
        if "tool_calls" in (p.get("data") or {}):
            calls: list[dict[str, Any]] = p["data"]["tool_calls"]
            return calls
    return []


def history_text(task: dict[str, Any]) -> str:
    out = []
    for m in [*task.get("history", []), task["status"].get("message") or {}]:
        if m.get("role") == "agent":
            out += [p["text"] for p in m.get("parts", []) if "text" in p]
    for a in task.get("artifacts") or []:  # a plain client's answer (issue 21 item 2)
        if a.get("name") == "reply":
            out += [p["text"] for p in a.get("parts", []) if "text" in p]
    return "".join(out)


async def test_client_tools_across_replicas(
    script: Script, start_cluster: StartCluster, workspace: Path
) -> None:
    """issue 10 item 3/5, C1 C2 C3 C4: client tools defined on one replica, their calls answered
    through others (with the taskId, then matched by call id without it), the turn completes."""
    steps = [
        {"items": [tc("get_weather", {"location": "San Francisco, CA"}, "w1")]},
        {"items": [tc("read_config", {"file_path": "/etc/app.conf"}, "r2")]},
        {"items": [{"text": "Done: {last_tool_results}"}]},
    ]
    cl = await start_cluster(script(steps))
    tools = {"kind": "data", "data": {"tools": [WEATHER, CONFIG]}}
    tools["metadata"] = {"type": "tool-definitions", "format": "langchain", "count": 2}
    async with httpx.AsyncClient(timeout=WITHIN) as c:
        headers = auth(ext=False)

        async def send(msg: dict[str, Any]) -> tuple[dict[str, Any], int]:
            r = await c.post(cl.url, json=rpc("message/send", {"message": msg}), headers=headers)
            body = r.json()
            assert "error" not in body, body
            return body["result"], int(r.headers["x-balancer-backend"])

        t, b1 = await send(client_message("weather, then config", tools))
        assert t["status"]["state"] == "input-required"
        assert tool_calls_of(t) == [
            {"id": "w1", "name": "get_weather", "args": {"location": "San Francisco, CA"}}
        ]
        assert dev_meta(t)["client_tools"] == {"accepted": ["get_weather", "read_config"], "rejected": []}

        reply = {
            "kind": "data",
            "data": {"tool_results": [{"tool_call_id": "w1", "result": {"temp": "18C"}}]},
        }
        t2, b2 = await send(client_message(None, reply, task_id=t["id"]))
        assert b2 != b1
        assert t2["id"] == t["id"] and t2["status"]["state"] == "input-required"
        assert tool_calls_of(t2) == [
            {"id": "r2", "name": "read_config", "args": {"file_path": "/etc/app.conf"}}
        ]

        reply = {"kind": "data", "data": {"tool_results": [{"tool_call_id": "r2", "result": "debug=true"}]}}
        t3, b3 = await send(client_message(None, reply))  # no taskId: matched by the call id
        assert len({b1, b2, b3}) == 3
        assert t3["id"] == t["id"] and t3["status"]["state"] == "completed", t3["status"]
        assert "Done: debug=true" in history_text(t3)
        assert dev_meta(t3)["tool_stats"] == {
            "get_weather": {"calls": 1, "failures": 0},
            "read_config": {"calls": 1, "failures": 0},
        }
        for r in cl.replicas:
            got = await tasks_get(c, r.url, t["id"])
            assert got["status"]["state"] == "completed", (r.index, got["status"])


async def test_confirmation_raced_through_two_replicas_runs_once(
    script: Script, start_cluster: StartCluster, workspace: Path
) -> None:
    """issue 10 item 3/5, A1 A6 B9 B10: the same confirmation sent at once to two replicas: the
    command runs exactly once, one answer wins, the other is refused or told it was answered, and
    no replica reads the task as failed."""
    steps = [
        {"items": [shell_call("echo x >> count.txt", "s1")]},
        {"items": [{"text": "counted"}]},
    ]
    cl = await start_cluster(script(steps))  # approval: ask (the server's default)
    async with httpx.AsyncClient(timeout=WITHIN) as c:
        m = v03_message("count", settings={"workspace_path": str(workspace)})
        s = SSE(c, cl.url, rpc("message/stream", {"message": m}), auth())
        await s.finish()
        evs = s.results()
        assert evs[-1]["status"]["state"] == "input-required", evs[-1]
        assert tool_status(s.frames, "s1")[-1] == "PENDING"
        task_id, ctx = evs[0]["id"], evs[0]["contextId"]

        conf = {"tool_call_id": "s1", "selected_option_id": "proceed_once"}
        bodies = [
            rpc(
                "message/stream",
                {"message": v03_message(data=[conf], task_id=task_id, context_id=ctx)},
                rid=i,
            )
            for i in (1, 2)
        ]
        races = [SSE(c, cl.replicas[i].url, bodies[i], auth()) for i in (0, 1)]
        for r in races:
            await r.finish()

        assert (workspace / "count.txt").read_text() == "x\n", "the command must run exactly once"
        outcomes = []
        for r in races:
            assert r.error is None, r.error
            errored = next((f.get("error") or f for f in r.frames if "error" in f or "http_error" in f), None)
            results = [f["result"] for f in r.frames if "result" in f]
            outcomes.append((errored, final_state(results), tool_status(r.frames, "s1")))
        winners = [o for o in outcomes if o[0] is None and o[1] == "completed" and "SUCCEEDED" in o[2]]
        assert len(winners) == 1, outcomes
        loser = next(o for o in outcomes if o is not winners[0])
        assert loser[0] is not None or loser[1] != "failed", (
            outcomes
        )  # a JSON-RPC error, or an answer that is no failure

        deadline = time.monotonic() + WITHIN
        views = []
        for rep in cl.replicas:
            while True:
                got = await tasks_get(c, rep.url, task_id)
                state = got["status"]["state"]
                assert state != "failed", (rep.index, got["status"])
                if state == "completed" or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.2)
            history = [
                [p.get("text") or (p.get("data") or {}).get("status") for p in h["parts"]]
                for h in got["history"]
            ]
            # (the reply once in the history; the final status message repeats it whole)
            streamed = history_text({**got, "status": {}, "artifacts": []}).count("counted")
            views.append((rep.index, state, streamed, history))
        # every replica reads the task completed, with the whole history: the command ran, and the
        # answer's text is in it once
        assert all(v[1] == "completed" and v[2] == 1 for v in views), (outcomes, views)
    assert (workspace / "count.txt").read_text() == "x\n"


async def test_resubscribe_on_another_replica_streams_the_rest(
    script: Script, start_cluster: StartCluster, workspace: Path
) -> None:
    """issue 10 item 3/5, A1 A3 A6: while a turn runs on replica A, replica B reads the task as
    working and `tasks/resubscribe` on B delivers the rest of the live events, once each, ending
    with the final state, exactly as A's own stream got them."""
    steps = call_then_text(shell_call(gate_command(), "g1"), "after the gate")
    cl = await start_cluster(script(steps), approval="yolo")
    a, b = cl.replicas[0], cl.replicas[1]
    async with httpx.AsyncClient(timeout=WITHIN) as c:
        async with gated_turn(c, a.url, workspace) as (sa, task_id):
            got = await tasks_get(c, b.url, task_id)
            assert got["status"]["state"] == "working", got["status"]

            sb = SSE(c, b.url, rpc("tasks/resubscribe", {"id": task_id}), auth())
            await sb.wait_for(lambda frames: len(frames) >= 1)
            gate_index = len(sa.frames)
            (workspace / "go").touch()
            await sa.finish()
            await sb.finish()
        a_evs = sa.results()
        b_evs = sb.results()
        assert final_state(a_evs) == "completed" and text_of(a_evs) == "after the gate"
        assert tool_status(sa.frames, "g1")[-1] == "SUCCEEDED"
        assert b_evs[-1].get("final") is True and b_evs[-1]["status"]["state"] == "completed", b_evs[-1]
        assert sum(1 for e in b_evs if e.get("final")) == 1
        a_keys = [event_key(e) for e in a_evs if e.get("kind") == "status-update"]
        b_keys = [event_key(e) for e in b_evs if e.get("kind") == "status-update"]
        after_gate = [event_key(e) for e in a_evs[gate_index:] if e.get("kind") == "status-update"]
        assert len(b_keys) >= len(after_gate), (b_keys, after_gate)
        assert b_keys == a_keys[len(a_keys) - len(b_keys) :], (
            "B's live events are A's last ones, none doubled"
        )
        assert "after the gate" in "".join(p.get("text", "") for e in b_evs for p in parts_of(e))


async def test_cancel_on_another_replica_stops_the_turn(
    script: Script, start_cluster: StartCluster, workspace: Path
) -> None:
    """issue 10 item 3/5, A1 A6: `tasks/cancel` sent to replica B stops the turn running on A: the
    command is killed, A's stream ends `canceled`, every replica reads `canceled`."""
    steps = call_then_text(shell_call(gate_command(), "g1"), "never reached")
    cl = await start_cluster(script(steps), approval="yolo")
    a, b = cl.replicas[0], cl.replicas[1]
    async with httpx.AsyncClient(timeout=WITHIN) as c:
        async with gated_turn(c, a.url, workspace) as (sa, task_id):
            pid = int((workspace / "go.pid").read_text())
            got = await call(c, b.url, rpc("tasks/cancel", {"id": task_id}), auth())
            assert "error" not in got, got
            assert got["result"]["status"]["state"] == "canceled", got["result"]["status"]
            await sa.finish()
        a_evs = sa.results()
        assert final_state(a_evs) == "canceled", a_evs[-1]
        assert sum(1 for e in a_evs if e.get("final")) == 1
        assert "never reached" not in text_of(a_evs)
        deadline = time.monotonic() + WITHIN
        while not process_ended(pid):
            assert time.monotonic() < deadline, f"the command (pid {pid}) still runs after the cancel"
            await asyncio.sleep(0.1)
        for r in cl.replicas:
            got = await tasks_get(c, r.url, task_id)
            assert got["status"]["state"] == "canceled", (r.index, got["status"])


async def test_killed_replica_turn_reads_interrupted_and_others_go_on(
    script: Script, start_cluster: StartCluster, workspace: Path, tmp_path: Path
) -> None:
    """issue 10 item 3/5, A1 A3 A6 B9 B10: SIGKILL of the replica running a turn (mid shell
    command): once its lease expires, tasks/get through the balancer reads `failed` saying the turn
    was interrupted, and a new message continues the conversation on the survivors; a permission
    request of another task, pending before the kill, is still answered through them."""
    steps = [
        {"items": [write_call("p.txt", "P\n", "w0")]},
        {"items": [shell_call(gate_command(), "g1")]},
        # the next prompt plays step 2, or step 3 if the interrupted turn was closed with a
        # response of its own: both continue the same way
        {"items": [{"text": "continued: {last_user}"}]},
        {"items": [{"text": "continued: {last_user}"}]},
    ]
    cl = await start_cluster(script(steps), approval="yolo")
    other_ws = tmp_path / "ws2"
    other_ws.mkdir()
    async with httpx.AsyncClient(timeout=WITHIN) as c:
        # another conversation, in `ask` mode: its write waits for permission
        m = v03_message("write p", settings={"workspace_path": str(other_ws), "approval_mode": "ask"})
        sy = SSE(c, cl.url, rpc("message/stream", {"message": m}), auth())
        await sy.finish()
        y_evs = sy.results()
        assert (
            y_evs[-1]["status"]["state"] == "input-required" and tool_status(sy.frames, "w0")[-1] == "PENDING"
        )
        y_task, y_ctx = y_evs[0]["id"], y_evs[0]["contextId"]

        m = v03_message("write, then wait", settings={"workspace_path": str(workspace)})
        sx = SSE(c, cl.url, rpc("message/stream", {"message": m}), auth())
        try:
            await sx.wait_for(executing("g1"))
            assert sx.backend is not None
            x_task, x_ctx = sx.frames[0]["result"]["id"], sx.frames[0]["result"]["contextId"]
            cl.kill(sx.backend)
            await sx.finish()  # cut off with the replica

            states = []
            deadline = time.monotonic() + LEASE_SECONDS + WITHIN
            while True:
                got = await tasks_get(c, cl.url, x_task)
                states.append(got["status"]["state"])
                if states[-1] == "failed" or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.25)
            assert states[-1] == "failed", states
            assert set(states) <= {"working", "failed"}, states
            assert re.search(r"interrupt|server stopped", status_text(got)), got["status"]
            for r in cl.survivors():
                again = await tasks_get(c, r.url, x_task)
                assert again["status"]["state"] == "failed", (r.index, again["status"])

            m = v03_message("go on", context_id=x_ctx)
            s2 = SSE(c, cl.url, rpc("message/stream", {"message": m}), auth())
            await s2.finish()
            evs = s2.results()
            assert final_state(evs) == "completed", evs[-1]
            assert text_of(evs) == "continued: go on"
        finally:
            (workspace / "go").touch()
            await sx.aclose()
        assert (workspace / "p.txt").read_text() == "P\n"

        conf = {"tool_call_id": "w0", "selected_option_id": "proceed_once"}
        m = v03_message(data=[conf], task_id=y_task, context_id=y_ctx)
        s3 = SSE(c, cl.url, rpc("message/stream", {"message": m}), auth())
        await s3.finish()
        evs = s3.results()
        assert tool_status(s3.frames, "w0") == ["EXECUTING", "SUCCEEDED"], tool_status(s3.frames, "w0")
        assert (other_ws / "p.txt").read_text() == "P\n"
        # the next step's command asks in `ask` mode: the task waits again, nothing failed
        assert evs[-1]["status"]["state"] == "input-required", evs[-1]
        assert tool_status(s3.frames, "g1")[-1] == "PENDING"
        assert all(b != sx.backend for b in (s2.backend, s3.backend))


async def test_replicas_started_together_on_a_fresh_database(
    script: Script, start_cluster: StartCluster, workspace: Path
) -> None:
    """issue 10 item 5: three replicas started at the same moment on an empty database (the
    schema created concurrently) all serve turns."""
    cl = await start_cluster(script([{"items": [{"text": "hello from {last_user}"}]}]), together=True)
    async with httpx.AsyncClient(timeout=WITHIN) as c:
        for i in range(3):
            m = v03_message(f"turn {i}", settings={"workspace_path": str(workspace)})
            s = SSE(c, cl.url, rpc("message/stream", {"message": m}), auth())
            await s.finish()
            evs = s.results()
            assert final_state(evs) == "completed" and text_of(evs) == f"hello from turn {i}"
    assert cl.balancer.counts == [1, 1, 1]
    assert json.dumps(cl.balancer.stats())
