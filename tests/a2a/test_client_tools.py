"""Client-supplied tools over A2A (C1-C7): definitions in a DataPart, calls returned to the client
as `tool_calls`, results coming back as `tool_results` or in the design's plain-text forms."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.a2a.helpers import TOKEN, auth, call, dev_meta, parts_of, results, rpc, running_server, stream

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather information for a given location",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "The city and state"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["location"],
        },
    },
}
CONFIG = {
    "type": "function",
    "function": {
        "name": "read_config",
        "description": "Read a file on the client's machine",
        "parameters": {
            "type": "object",
            "properties": {"file_path": {"type": "string"}},
            "required": ["file_path"],
        },
    },
}
TOOLS = [WEATHER, CONFIG]


def tc(name: str, args: dict[str, Any], cid: str) -> dict[str, Any]:
    return {"tool_call": {"name": name, "args": args, "id": cid}}


def tools_part(tools: list[dict[str, Any]], *, count: bool = True, v1: bool = False) -> dict[str, Any]:
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


async def send(c: httpx.AsyncClient, url: str, msg: dict[str, Any], *, v1: bool = False, token: str = TOKEN) -> Any:
    """Blocking `message/send` (the design's sample client) / 1.0 `SendMessage`; the whole answer."""
    method = "SendMessage" if v1 else "message/send"
    return await call(c, url, rpc(method, {"message": msg}), auth(token, ext=False, v1=v1))


async def send_ok(c: httpx.AsyncClient, url: str, msg: dict[str, Any], **kw: Any) -> dict[str, Any]:
    res = await send(c, url, msg, **kw)
    assert "error" not in res, res
    task: dict[str, Any] = res["result"]
    return task["task"] if "task" in task else task


async def stream_ok(c: httpx.AsyncClient, url: str, msg: dict[str, Any], *, ext: bool = False) -> list[dict[str, Any]]:
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
    return "".join(out)


def tool_updates(evs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [parts_of(e)[0]["data"] for e in evs if dev_meta(e).get("kind") == "TOOL_CALL_UPDATE"]


async def test_c1_c4_single_call_message_send(
    script: Callable[[list[Any]], str], sqlite_url: str, workspace: Path
) -> None:
    """C1 C2 C4 C7: blocking message/send with tools; the call comes back as `tool_calls` with
    input-required; the result continues the turn; stats in the task's metadata."""
    steps = [
        {"items": [tc("get_weather", {"location": "San Francisco, CA"}, "w1")]},
        {"items": [{"text": "Weather: {last_tool_results}"}]},
    ]
    async with running_server(script(steps), sqlite_url, workspace) as srv, httpx.AsyncClient(timeout=30) as c:
        task = await send_ok(c, srv.url, message("What's the weather in SF?", tools_part(TOOLS)))
        assert state(task) == "input-required"
        assert calls_of(task) == [{"id": "w1", "name": "get_weather", "args": {"location": "San Francisco, CA"}}]
        assert meta(task)["client_tools"] == {"accepted": ["get_weather", "read_config"], "rejected": []}
        reply = results_part({"tool_call_id": "w1", "name": "get_weather", "result": {"temp": "18C"}})
        done = await send_ok(c, srv.url, message(None, reply, task_id=task["id"]))
        assert state(done) == "completed"
        assert 'Weather: {"temp": "18C"}' in history_text(done)
        assert meta(done)["tool_stats"]["get_weather"] == {"calls": 1, "failures": 0}
        assert done["contextId"] == task["contextId"]


async def test_c5_several_calls_in_one_step_answered_in_two_messages(
    script: Callable[[list[Any]], str], sqlite_url: str, workspace: Path
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
    async with running_server(script(steps), sqlite_url, workspace) as srv, httpx.AsyncClient(timeout=30) as c:
        evs = await stream_ok(c, srv.url, message("weather and config", tools_part(TOOLS)))
        task_id = evs[0]["id"]
        assert evs[-1]["final"] is True and state(evs[-1]) == "input-required"
        assert [x["id"] for x in calls_of(evs[-1])] == ["a", "b"]
        evs = await stream_ok(
            c, srv.url, message(None, results_part({"tool_call_id": "b", "result": "debug=true"}), task_id=task_id)
        )
        assert state(evs[-1]) == "input-required" and evs[-1]["final"] is True
        assert calls_of(evs[-1]) == [{"id": "a", "name": "get_weather", "args": {"location": "SF"}}]
        evs = await stream_ok(
            c, srv.url, message(None, results_part({"tool_call_id": "a", "result": "sunny"}), task_id=task_id)
        )
        assert state(evs[-1]) == "completed"
        text = "".join(p["text"] for e in evs for p in parts_of(e) if "text" in p)
        assert text == "Both: sunny\ndebug=true"
