"""Client-supplied tools over A2A (C1-C7): definitions in a DataPart, calls returned to the client
as `tool_calls`, results coming back as `tool_results` or in the design's plain-text forms."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.a2a.helpers import (
    TOKEN,
    auth,
    call,
    client_tool,
    dev_meta,
    need_js_sdk,
    parts_of,
    results,
    rpc,
    run_js_client,
    running_server,
    stream,
    tool_updates,
)
from tests.conftest import Script

WEATHER = client_tool(
    "get_weather",
    "Get the current weather information for a given location",
    {
        "location": {"type": "string", "description": "The city and state"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    ["location"],
)
CONFIG = client_tool(
    "read_config", "Read a file on the client's machine", {"file_path": {"type": "string"}}, ["file_path"]
)
TOOLS = [WEATHER, CONFIG]


def tc(name: str, args: dict[str, Any], cid: str) -> dict[str, Any]:
    return {"tool_call": {"name": name, "args": args, "id": cid}}


def tools_part(tools: list[Any], *, count: bool = True, v1: bool = False) -> dict[str, Any]:
    md: dict[str, Any] = {"type": "tool-definitions", "format": "langchain"}
    if count:
        md["count"] = len(tools)
    if v1:
        return {"data": {"tools": tools}, "metadata": md}
    return {"kind": "data", "data": {"tools": tools}, "metadata": md}


def results_part(*items: dict[str, Any], v1: bool = False) -> dict[str, Any]:
    if v1:
        return {"data": {"tool_results": list(items)}}
    return {"kind": "data", "data": {"tool_results": list(items)}}


def message(
    text: str | None = None,
    *parts: dict[str, Any],
    task_id: str | None = None,
    context_id: str | None = None,
    v1: bool = False,
) -> dict[str, Any]:
    ps: list[dict[str, Any]] = []
    if text is not None:
        ps.append({"text": text} if v1 else {"kind": "text", "text": text})
    ps += parts
    m: dict[str, Any] = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER" if v1 else "user", "parts": ps}
    if not v1:
        m["kind"] = "message"
    if task_id:
        m["taskId"] = task_id
    if context_id:
        m["contextId"] = context_id
    return m


async def send(
    c: httpx.AsyncClient, url: str, msg: dict[str, Any], *, v1: bool = False, token: str = TOKEN
) -> Any:
    """Blocking `message/send` (the design's sample client) / 1.0 `SendMessage`; the whole answer."""
    method = "SendMessage" if v1 else "message/send"
    return await call(c, url, rpc(method, {"message": msg}), auth(token, ext=False, v1=v1))


async def send_ok(c: httpx.AsyncClient, url: str, msg: dict[str, Any], **kw: Any) -> dict[str, Any]:
    res = await send(c, url, msg, **kw)
    assert "error" not in res, res
    task: dict[str, Any] = res["result"]
    return task["task"] if "task" in task else task


async def stream_ok(
    c: httpx.AsyncClient, url: str, msg: dict[str, Any], *, ext: bool = False
) -> list[dict[str, Any]]:
    return results(await stream(c, url, rpc("message/stream", {"message": msg}), auth(ext=ext)))


def calls_of(status_or_event: dict[str, Any]) -> list[dict[str, Any]]:
    """The `tool_calls` of a status (or status event), checking the DataPart's metadata."""
    status = status_or_event.get("status", status_or_event)
    for p in (status.get("message") or {}).get("parts") or []:
        data = p.get("data") or {}
        if "tool_calls" in data:
            assert p["metadata"]["type"] == "tool-calls" and p["metadata"]["format"] == "langchain"
            calls: list[dict[str, Any]] = data["tool_calls"]
            return calls
    return []


def state(task: dict[str, Any]) -> str:
    s: str = task["status"]["state"]
    return s


def meta(task: dict[str, Any]) -> dict[str, Any]:
    return dev_meta(task)


def history_text(task: dict[str, Any]) -> str:
    out = []
    for m in [*task.get("history", []), task["status"].get("message") or {}]:
        if m.get("role") in ("agent", "ROLE_AGENT"):
            out += [p["text"] for p in m.get("parts", []) if "text" in p]
    for a in task.get("artifacts") or []:  # a plain client's answer (issue 21 item 2)
        if a.get("name") == "reply":
            out += [p["text"] for p in a.get("parts", []) if "text" in p]
    return "".join(out)


def said(evs: list[dict[str, Any]]) -> str:
    """Everything a stream's events say in text: status messages and (a plain client's reply,
    issue 21 item 2) artifact chunks."""
    out = []
    for e in evs:
        out += [p.get("text", "") for p in parts_of(e)]
        out += [p.get("text", "") for p in (e.get("artifact") or {}).get("parts") or []]
    return "".join(out)


async def test_c1_c4_single_call_message_send(script: Script, sqlite_url: str, workspace: Path) -> None:
    """C1 C2 C4 C7: blocking message/send with tools; the call comes back as `tool_calls` with
    input-required; the result continues the turn; stats in the task's metadata."""
    steps = [
        {"items": [tc("get_weather", {"location": "San Francisco, CA", "days": 3}, "w1")]},
        {"items": [{"text": "Weather: {last_tool_results}"}]},
    ]
    async with (
        running_server(script(steps), sqlite_url, workspace) as srv,
        httpx.AsyncClient(timeout=30) as c,
    ):
        task = await send_ok(c, srv.url, message("What's the weather in SF?", tools_part(TOOLS)))
        assert state(task) == "input-required"
        assert calls_of(task) == [
            {"id": "w1", "name": "get_weather", "args": {"location": "San Francisco, CA", "days": 3}}
        ]
        assert isinstance(calls_of(task)[0]["args"]["days"], int)  # not 3.0
        assert meta(task)["client_tools"] == {"accepted": ["get_weather", "read_config"], "rejected": []}
        reply = results_part({"tool_call_id": "w1", "name": "get_weather", "result": {"temp": "18C"}})
        done = await send_ok(c, srv.url, message(None, reply, task_id=task["id"]))
        assert state(done) == "completed"
        assert 'Weather: {"temp": "18C"}' in history_text(done)
        assert meta(done)["tool_stats"]["get_weather"] == {"calls": 1, "failures": 0}
        assert done["contextId"] == task["contextId"]


async def test_c5_several_calls_in_one_step_answered_in_two_messages(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """C4 C5: two client calls in one step (message/stream); answered one message at a time, the
    task keeps waiting for the other, announcing it again."""
    steps = [
        {
            "items": [
                tc("get_weather", {"location": "SF"}, "a"),
                tc("read_config", {"file_path": "/tmp/config.txt"}, "b"),
            ]
        },
        {"items": [{"text": "Both: {last_tool_results}"}]},
    ]
    async with (
        running_server(script(steps), sqlite_url, workspace) as srv,
        httpx.AsyncClient(timeout=30) as c,
    ):
        evs = await stream_ok(c, srv.url, message("weather and config", tools_part(TOOLS)))
        task_id = evs[0]["id"]
        assert evs[-1]["final"] is True and state(evs[-1]) == "input-required"
        assert [x["id"] for x in calls_of(evs[-1])] == ["a", "b"]
        evs = await stream_ok(
            c,
            srv.url,
            message(None, results_part({"tool_call_id": "b", "result": "debug=true"}), task_id=task_id),
        )
        assert state(evs[-1]) == "input-required" and evs[-1]["final"] is True
        assert calls_of(evs[-1]) == [{"id": "a", "name": "get_weather", "args": {"location": "SF"}}]
        evs = await stream_ok(
            c, srv.url, message(None, results_part({"tool_call_id": "a", "result": "sunny"}), task_id=task_id)
        )
        assert state(evs[-1]) == "completed"
        # a plain client: the reply as the chunks of one artifact, not repeated by the final event
        assert said(evs) == "Both: sunny\ndebug=true"
        assert not parts_of(evs[-1])


async def test_c5_chain_across_turns_and_c3_tool_sets(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """C3 C5: a chain of client calls, each answered by a new message; a follow-up without tools
    keeps the task's set, a follow-up with a set replaces it."""
    steps = [
        {"items": [tc("get_weather", {"location": "SF"}, "c1")]},
        {"items": [tc("read_config", {"file_path": "/etc/x"}, "c2")]},
        {"items": [{"text": "chain done: {last_tool_results}"}]},
        {"items": [tc("read_config", {"file_path": "/etc/y"}, "c3")]},
        {"items": [{"text": "kept"}]},
        {"items": [tc("get_weather", {"location": "NY"}, "c4")]},
        {"items": [{"text": "replaced: {last_tool_results}"}]},
    ]
    async with (
        running_server(script(steps), sqlite_url, workspace) as srv,
        httpx.AsyncClient(timeout=30) as c,
    ):
        t = await send_ok(c, srv.url, message("go", tools_part(TOOLS)))
        assert calls_of(t)[0]["id"] == "c1"
        t = await send_ok(
            c,
            srv.url,
            message(None, results_part({"tool_call_id": "c1", "result": "sunny"}), task_id=t["id"]),
        )
        assert state(t) == "input-required" and calls_of(t)[0]["name"] == "read_config"
        t = await send_ok(
            c, srv.url, message(None, results_part({"tool_call_id": "c2", "result": "x=1"}), task_id=t["id"])
        )
        assert state(t) == "completed" and "chain done: x=1" in history_text(t)
        assert meta(t)["tool_stats"] == {
            "get_weather": {"calls": 1, "failures": 0},
            "read_config": {"calls": 1, "failures": 0},
        }
        # A new task in the same conversation, no tools: the set stays.
        t2 = await send_ok(c, srv.url, message("again", context_id=t["contextId"]))
        assert state(t2) == "input-required" and calls_of(t2)[0]["id"] == "c3"
        t2 = await send_ok(
            c, srv.url, message(None, results_part({"tool_call_id": "c3", "result": "y"}), task_id=t2["id"])
        )
        assert state(t2) == "completed"
        # A set without get_weather replaces it: the model's call of get_weather fails as unknown.
        t3 = await send_ok(
            c, srv.url, message("only config", tools_part([CONFIG]), context_id=t["contextId"])
        )
        assert state(t3) == "completed" and calls_of(t3) == []
        assert "unknown tool 'get_weather'" in history_text(t3)
        assert meta(t3)["client_tools"]["accepted"] == ["read_config"]


async def test_c5_client_tool_error(script: Script, sqlite_url: str, workspace: Path) -> None:
    """C5 C7: a result with `error` fails the call; the model sees the error; stats count it."""
    steps = [
        {"items": [tc("get_weather", {"location": "Atlantis"}, "e1")]},
        {"items": [{"text": "Sorry: {last_tool_results}"}]},
    ]
    async with (
        running_server(script(steps), sqlite_url, workspace) as srv,
        httpx.AsyncClient(timeout=30) as c,
    ):
        evs = await stream_ok(c, srv.url, message("weather in Atlantis", tools_part([WEATHER])), ext=True)
        task_id = evs[0]["id"]
        err = results_part({"tool_call_id": "e1", "name": "get_weather", "error": "no such city"})
        evs = await stream_ok(c, srv.url, message(None, err, task_id=task_id), ext=True)
        failed = [u for u in tool_updates(evs) if u["tool_call_id"] == "e1"][-1]
        assert failed["status"] == "FAILED" and failed["error"]["message"] == "no such city"
        assert state(evs[-1]) == "completed"
        assert "no such city" in said(evs)
        assert dev_meta(evs[-1])["tool_stats"]["get_weather"] == {"calls": 1, "failures": 1}


async def test_c4_mixed_local_and_client_calls_rfc_dialect_sees_them(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """C4 and issue 4 item 5: a local call and a client call in one step; the local one runs first;
    only the client call goes out as tool_calls; an extension client sees the client call as a
    ToolCall (PENDING, then SUCCEEDED with the client's result)."""
    steps = [
        {
            "items": [
                tc("read_file", {"path": "ws/README.md"}, "l1"),
                tc("get_weather", {"location": "SF"}, "r1"),
            ]
        },
        {"items": [{"text": "{last_tool_results}"}]},
    ]
    async with (
        running_server(script(steps), sqlite_url, workspace) as srv,
        httpx.AsyncClient(timeout=30) as c,
    ):
        evs = await stream_ok(c, srv.url, message("readme and weather", tools_part(TOOLS)), ext=True)
        ups = tool_updates(evs)
        local = [u for u in ups if u["tool_call_id"] == "l1"]
        assert local[-1]["status"] == "SUCCEEDED"
        remote = [u for u in ups if u["tool_call_id"] == "r1"]
        assert remote[0]["status"] == "PENDING" and remote[0]["tool_name"] == "get_weather"
        assert remote[0]["input_parameters"] == {"location": "SF"} and "confirmation_request" not in remote[0]
        assert calls_of(evs[-1]) == [{"id": "r1", "name": "get_weather", "args": {"location": "SF"}}]
        evs = await stream_ok(
            c,
            srv.url,
            message(None, results_part({"tool_call_id": "r1", "result": "sunny"}), task_id=evs[0]["id"]),
            ext=True,
        )
        done = [u for u in tool_updates(evs) if u["tool_call_id"] == "r1"][-1]
        assert done["status"] == "SUCCEEDED" and done["output"] == {"text": "sunny"}
        text = said(evs)
        assert "# Demo project" in text and "sunny" in text
        assert dev_meta(evs[-1])["tool_stats"] == {
            "read_file": {"calls": 1, "failures": 0},
            "get_weather": {"calls": 1, "failures": 0},
        }


async def test_c2_c6_c7_invalid_definitions_collision_and_policy(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """C2 C6 C7: every refused definition comes back with its reason (a DataPart in the reply and
    the task's metadata); the valid ones are used; a built-in name is refused as a collision; the
    server's denylist refuses a name."""
    bad: list[Any] = [
        WEATHER,
        {
            "type": "tool",
            "function": {"name": "wrong_type", "description": "", "parameters": {"type": "object"}},
        },
        {"type": "function", "function": {"name": "no_desc", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "bad_params", "description": "d", "parameters": "x"}},
        {
            "type": "function",
            "function": {
                "name": "bad_schema",
                "description": "d",
                "parameters": {"type": "object", "properties": {"a": {"type": 5}}},
            },
        },
        {
            "type": "function",
            "function": {"name": "read_file", "description": "mine", "parameters": {"type": "object"}},
        },
        {
            "type": "function",
            "function": {"name": "forbidden", "description": "d", "parameters": {"type": "object"}},
        },
        "not an object",
    ]
    steps = [{"items": [tc("get_weather", {"location": "SF"}, "v1")]}, {"items": [{"text": "ok"}]}]
    async with (
        running_server(
            script(steps), sqlite_url, workspace, core_kw={"client_tool_deny": ("forbidden",)}
        ) as srv,
        httpx.AsyncClient(timeout=30) as c,
    ):
        evs = await stream_ok(c, srv.url, message("hi", tools_part(bad)))
        report = [
            p
            for e in evs
            for p in parts_of(e)
            if (p.get("metadata") or {}).get("type") == "tool-definitions-rejected"
        ]
        assert len(report) == 1
        reasons = {r["name"]: r["reason"] for r in report[0]["data"]["rejected_tools"]}
        assert reasons["wrong_type"] == "'type' must be \"function\""
        assert reasons["no_desc"] == "'function.description' must be a string"
        assert "JSON Schema" in reasons["bad_params"]
        assert reasons["bad_schema"].startswith("invalid JSON Schema")
        assert reasons["read_file"] == "conflicts with builtin tool"
        assert reasons["forbidden"] == "not allowed by server policy"
        assert reasons["#7"] == "a tool definition must be an object"
        assert report[0]["data"]["accepted_tools"] == ["get_weather"]
        assert state(evs[-1]) == "input-required" and calls_of(evs[-1])[0]["name"] == "get_weather"
        got = (await call(c, srv.url, rpc("tasks/get", {"id": evs[0]["id"]}), auth()))["result"]
        md = meta(got)["client_tools"]
        assert md["accepted"] == ["get_weather"] and {r["name"] for r in md["rejected"]} == set(reasons)


async def test_c5_step_limit(script: Script, sqlite_url: str, workspace: Path) -> None:
    """C5: the server's maximum number of model steps per turn ends a tool loop with a clear message."""
    steps = [{"items": [tc("get_weather", {"location": "SF"}, f"s{i}")]} for i in range(5)]
    async with (
        running_server(script(steps), sqlite_url, workspace, core_kw={"max_steps": 2}) as srv,
        httpx.AsyncClient(timeout=30) as c,
    ):
        t = await send_ok(c, srv.url, message("loop", tools_part([WEATHER])))
        t = await send_ok(
            c, srv.url, message(None, results_part({"tool_call_id": "s0", "result": "r"}), task_id=t["id"])
        )
        assert state(t) == "input-required" and calls_of(t)[0]["id"] == "s1"
        t = await send_ok(
            c, srv.url, message(None, results_part({"tool_call_id": "s1", "result": "r"}), task_id=t["id"])
        )
        assert state(t) == "completed"
        assert (
            t["status"]["message"]["parts"][0]["text"]
            == "Stopped after 2 model steps in one turn (the server's limit)."
        )
        assert meta(t)["error"] == "maximum number of steps reached"


async def test_c4_plain_text_results_of_the_design_without_ids(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """C4: the design's sample client answers in text, without taskId/contextId, re-sending its
    tools (metadata without count): `Tool "X" returned: ...` one call per message, `Tool results:
    [...]` for a whole step, `Tool X failed: ...` for an error."""
    steps = [
        {
            "items": [
                tc("get_weather", {"location": "SF"}, "p1"),
                tc("read_config", {"file_path": "/a"}, "p2"),
            ]
        },
        {"items": [tc("get_weather", {"location": "NY"}, "p3"), tc("get_weather", {"location": "LA"}, "p4")]},
        {"items": [tc("read_config", {"file_path": "/b"}, "p5")]},
        {"items": [{"text": "final: {last_tool_results}"}]},
    ]
    async with (
        running_server(script(steps), sqlite_url, workspace) as srv,
        httpx.AsyncClient(timeout=30) as c,
    ):
        t = await send_ok(c, srv.url, message("weather and config", tools_part(TOOLS)))
        task_id = t["id"]
        # One call per message, in any order, no ids at all.
        t = await send_ok(
            c,
            srv.url,
            message('Tool "read_config" returned: {"content": "debug"}', tools_part(TOOLS, count=False)),
        )
        assert (
            t["id"] == task_id and state(t) == "input-required" and [x["id"] for x in calls_of(t)] == ["p1"]
        )
        t = await send_ok(
            c, srv.url, message('Tool "get_weather" returned: "sunny"', tools_part(TOOLS, count=False))
        )
        assert t["id"] == task_id and [x["id"] for x in calls_of(t)] == ["p3", "p4"]
        # A whole step as `Tool results:` (same-named calls in call order); one missing is refused.
        partial = await send(c, srv.url, message('Tool results: [{"name": "get_weather", "result": "rain"}]'))
        assert partial["error"]["code"] == -32602 and "missing results" in partial["error"]["message"]
        entries = [{"name": "get_weather", "result": "rain"}, {"name": "get_weather", "error": "LA is down"}]
        t = await send_ok(
            c, srv.url, message(f"Tool results: {json.dumps(entries)}", tools_part(TOOLS, count=False))
        )
        assert t["id"] == task_id and calls_of(t) == [
            {"id": "p5", "name": "read_config", "args": {"file_path": "/b"}}
        ]
        # The error form of the design's error handling (no tools, no ids).
        t = await send_ok(c, srv.url, message("Tool read_config failed: ENOENT: no such file"))
        assert t["id"] == task_id and state(t) == "completed"
        assert "final: Error (client_error): ENOENT: no such file" in history_text(t)
        assert meta(t)["tool_stats"] == {
            "get_weather": {"calls": 3, "failures": 1},
            "read_config": {"calls": 2, "failures": 1},
        }


async def test_c4_followup_without_ids_same_owner_only(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """C4: a tool_results DataPart without taskId/contextId finds its task by the call ids, among
    the sender's own tasks only."""
    steps = [
        {"items": [tc("get_weather", {"location": "SF"}, "call_x9")]},
        {"items": [{"text": "got {last_tool_results}"}]},
    ]
    async with (
        running_server(
            script(steps), sqlite_url, workspace, tokens={TOKEN: "alice", "bob-token": "bob"}
        ) as srv,
        httpx.AsyncClient(timeout=30) as c,
    ):
        t = await send_ok(c, srv.url, message("weather", tools_part([WEATHER])))
        reply = message(
            None, results_part({"tool_call_id": "call_x9", "name": "get_weather", "result": "warm"})
        )
        res = await send(c, srv.url, reply, token="bob-token")
        assert (
            res["error"]["code"] == -32602
            and "no task of yours waits for tool calls call_x9" in res["error"]["message"]
        )
        res = await send(c, srv.url, message('Tool "get_weather" returned: "warm"'), token="bob-token")
        assert res["error"]["code"] == -32602
        done = await send_ok(c, srv.url, reply)
        assert done["id"] == t["id"] and done["contextId"] == t["contextId"] and state(done) == "completed"
        assert "got warm" in history_text(done)


async def test_c4_bad_results_are_refused_and_change_nothing(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """C4: unknown ids, a result without result/error, a call answered twice, results for a call
    no longer pending, a text result naming no waiting call: each a JSON-RPC error; the task keeps
    waiting for the same calls."""
    steps = [
        {
            "items": [
                tc("get_weather", {"location": "SF"}, "k1"),
                tc("read_config", {"file_path": "/a"}, "k2"),
            ]
        },
        {"items": [{"text": "done"}]},
    ]
    async with (
        running_server(script(steps), sqlite_url, workspace) as srv,
        httpx.AsyncClient(timeout=30) as c,
    ):
        t = await send_ok(c, srv.url, message("go", tools_part(TOOLS)))
        tid = t["id"]
        cases = [
            (
                results_part({"tool_call_id": "nope", "result": 1}),
                "no tool call nope is waiting for a result",
            ),
            (results_part({"tool_call_id": "k1"}), "tool result for k1 has neither 'result' nor 'error'"),
            (
                results_part({"tool_call_id": "k1", "result": 1}, {"tool_call_id": "k1", "result": 2}),
                "appears twice",
            ),
            (
                results_part({"tool_call_id": "k1", "name": "read_config", "result": 1}),
                "is a call of get_weather",
            ),
            ({"kind": "text", "text": 'Tool "other_tool" returned: 1'}, "no call of tool 'other_tool'"),
        ]
        for part, why in cases:
            res = await send(c, srv.url, message(None, part, task_id=tid))
            assert res["error"]["code"] == -32602 and why in res["error"]["message"], res
        got = (await call(c, srv.url, rpc("tasks/get", {"id": tid}), auth()))["result"]
        assert state(got) == "input-required" and [x["id"] for x in calls_of(got)] == ["k1", "k2"]
        # k1 answered: a second answer for it is refused as no longer pending.
        await send_ok(
            c, srv.url, message(None, results_part({"tool_call_id": "k1", "result": "a"}), task_id=tid)
        )
        res = await send(
            c, srv.url, message(None, results_part({"tool_call_id": "k1", "result": "b"}), task_id=tid)
        )
        assert "k1 is no longer pending" in res["error"]["message"]
        t = await send_ok(
            c, srv.url, message(None, results_part({"tool_call_id": "k2", "result": "b"}), task_id=tid)
        )
        assert state(t) == "completed"
        # The task is finished: results for it are refused.
        res = await send(
            c, srv.url, message(None, results_part({"tool_call_id": "k2", "result": "b"}), task_id=tid)
        )
        assert "is not waiting for tool results (it is completed)" in res["error"]["message"]


async def test_c1_c4_a2a_v1(script: Script, sqlite_url: str, workspace: Path) -> None:
    """C1 C4 over A2A 1.0: SendMessage with `{"data": {"tools": ...}}`, the calls in the task's
    status, the results as a 1.0 data part without ids; SendStreamingMessage too."""
    steps = [
        {"items": [tc("get_weather", {"location": "SF"}, "n1")]},
        {"items": [{"text": "v1: {last_tool_results}"}]},
        {"items": [tc("read_config", {"file_path": "/c"}, "n2")]},
        {"items": [{"text": "streamed"}]},
    ]
    async with (
        running_server(script(steps), sqlite_url, workspace) as srv,
        httpx.AsyncClient(timeout=30) as c,
    ):
        t = await send_ok(c, srv.url, message("hi", tools_part(TOOLS, v1=True), v1=True), v1=True)
        assert t["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert calls_of(t) == [{"id": "n1", "name": "get_weather", "args": {"location": "SF"}}]
        done = await send_ok(
            c,
            srv.url,
            message(None, results_part({"tool_call_id": "n1", "result": "fine"}, v1=True), v1=True),
            v1=True,
        )
        assert done["id"] == t["id"] and done["status"]["state"] == "TASK_STATE_COMPLETED"
        assert "v1: fine" in history_text(done)
        body = rpc("SendStreamingMessage", {"message": message("more", context_id=t["contextId"], v1=True)})
        evs = results(await stream(c, srv.url, body, auth(ext=False, v1=True)))
        last = evs[-1]["statusUpdate"]
        assert last["status"]["state"] == "TASK_STATE_INPUT_REQUIRED" and calls_of(last)[0]["id"] == "n2"
        reply = message(
            None,
            results_part({"tool_call_id": "n2", "result": "c"}, v1=True),
            task_id=last["taskId"],
            v1=True,
        )
        evs = results(
            await stream(
                c, srv.url, rpc("SendStreamingMessage", {"message": reply}), auth(ext=False, v1=True)
            )
        )
        assert evs[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_c4_g6_restart_between_call_and_result(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """C4 G6: `devagent serve` stops while the task waits for the client's result; after a restart
    the result, sent without taskId as the design's client does, finds the task and completes it."""
    from tests.a2a.procs import serve_argv
    from tests.a2a.test_restart import serve_process

    steps = [
        {"items": [tc("get_weather", {"location": "SF"}, "call_restart_1")]},
        {"items": [{"text": "after restart: {last_tool_results}"}]},
    ]
    args = serve_argv(sqlite_url, workspace.parent, script(steps))
    async with httpx.AsyncClient(timeout=30) as c:
        with serve_process(args) as url:
            t = await send_ok(c, url, message("weather", tools_part([WEATHER])), token="tok")
            assert state(t) == "input-required" and calls_of(t)[0]["id"] == "call_restart_1"
        with serve_process(args) as url:
            reply = message(
                None,
                results_part({"tool_call_id": "call_restart_1", "result": "mild"}),
                tools_part([WEATHER]),
            )
            done = await send_ok(c, url, reply, token="tok")
            assert done["id"] == t["id"] and state(done) == "completed"
            assert "after restart: mild" in history_text(done)
            assert meta(done)["tool_stats"]["get_weather"] == {"calls": 1, "failures": 0}


JS_STEPS = [
    {
        "items": [
            {"thinking": "Two cities: ask the client's weather tool for both."},
            tc("get_weather", {"location": "San Francisco, CA", "unit": "celsius"}, "js_1"),
            tc("get_weather", {"location": "Atlantis"}, "js_2"),
        ]
    },
    {"items": [{"text": "Answer: {last_tool_results}"}]},
]


@pytest.mark.npm
async def test_c1_c7_js_sdk_design_workflow(script: Script, sqlite_url: str, workspace: Path) -> None:
    """C1-C6 with @a2a-js/sdk's A2AClient: the design's send / execute locally / send results loop,
    once as the design writes it (message as params, no ids, `Tool results:` text) and once with
    a `tool_results` DataPart; the design's own `read_file` tool is refused as a collision."""
    need_js_sdk()
    async with running_server(script(JS_STEPS), sqlite_url, workspace) as srv:
        res = await run_js_client("client_tools.mjs", srv.url, TOKEN)
    for name in ("design", "structured"):
        rounds = res[name]["rounds"]
        assert [r["state"] for r in rounds] == ["input-required", "completed"]
        assert rounds[0]["taskId"] == rounds[1]["taskId"]
        assert [c["id"] for c in rounds[0]["calls"]] == ["js_1", "js_2"]
        answer = res[name]["answer"]
        assert answer.startswith("Answer: ")
        first, second = answer[len("Answer: ") :].split("\n", 1)
        # the result went through a protobuf Struct on the way: compare as JSON, key order aside
        assert json.loads(first) == {"unit": "celsius", "location": "San Francisco, CA", "temperature": 18}
        assert "unknown location: Atlantis" in second
    assert (
        res["executed"]
        == [
            {"name": "get_weather", "args": {"location": "San Francisco, CA", "unit": "celsius"}},
            {"name": "get_weather", "args": {"location": "Atlantis"}},
        ]
        * 2
    )
    assert {"name": "read_file", "reason": "conflicts with builtin tool"} in res["rejections"]
    assert res["unknown"]["code"] == -32602 and "nobody" in res["unknown"]["message"]


async def test_c4_permission_and_client_call_in_one_step(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """C4 B10: a step with an edit needing permission and a client call waits for both; one message
    carrying the ToolCallConfirmation and the tool_results answers both."""
    steps = [
        {
            "items": [
                tc("write_file", {"path": "ws/w.txt", "content": "W\n"}, "perm1"),
                tc("get_weather", {"location": "SF"}, "cli1"),
            ]
        },
        {"items": [{"text": "both: {last_tool_results}"}]},
    ]
    async with (
        running_server(script(steps), sqlite_url, workspace) as srv,
        httpx.AsyncClient(timeout=30) as c,
    ):
        evs = await stream_ok(c, srv.url, message("write and weather", tools_part([WEATHER])), ext=True)
        pending = {u["tool_call_id"]: u for u in tool_updates(evs)}
        assert "confirmation_request" in pending["perm1"] and "confirmation_request" not in pending["cli1"]
        assert [x["id"] for x in calls_of(evs[-1])] == ["cli1"]
        answer = message(
            None,
            {"kind": "data", "data": {"tool_call_id": "perm1", "selected_option_id": "proceed_once"}},
            results_part({"tool_call_id": "cli1", "result": "sunny"}),
            task_id=evs[0]["id"],
        )
        evs = await stream_ok(c, srv.url, answer, ext=True)
        assert state(evs[-1]) == "completed"
        assert (workspace / "w.txt").read_text() == "W\n"
        assert "sunny" in said(evs)
