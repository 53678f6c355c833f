"""The plain A2A dialect (issue 11 items 1 and 2): a client that never activated the
development-tool extension answers permission requests in words, sees no extension content, and
finds the reply in an artifact and in the final status message."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from devagent.a2a.extension import EXTENSION_URI
from tests.a2a.helpers import auth, call, results, rpc, running_server, stream, v03_message

Script = Callable[[list[Any]], str]
PLAIN = auth(ext=False)


def write(path: str, content: str, call_id: str) -> dict[str, Any]:
    return {"tool_call": {"name": "write_file", "args": {"path": path, "content": content}, "id": call_id}}


def status_text(ev: dict[str, Any]) -> str:
    msg = ev.get("status", {}).get("message") or {}
    return "".join(p.get("text", "") for p in msg.get("parts") or [])


def no_extension_content(evs: list[dict[str, Any]]) -> None:
    """Nothing of the extension reaches a plain client: no metadata under its URI, no ToolCall or
    thought DataParts."""
    text = json.dumps(evs)
    assert EXTENSION_URI not in text
    for e in evs:
        msg = (e.get("status") or {}).get("message") or {}
        for p in msg.get("parts") or []:
            if p.get("kind") == "data":
                assert "tool_calls" in p["data"], p  # only client tools' own DataParts (C4)


async def send(
    c: httpx.AsyncClient, url: str, text: str, task: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    m = v03_message(
        text, task_id=task["id"] if task else None, context_id=task["contextId"] if task else None
    )
    return results(await stream(c, url, rpc("message/stream", {"message": m}), PLAIN))


async def test_plain_write_answered_yes(script: Script, sqlite_url: str, workspace: Path) -> None:
    """Issue 11 item 1: the request in words, answered "Yes, go ahead" on the same task: the file is
    written; thoughts and ToolCalls never reach the client; the reply is an artifact and the final
    status text (item 2)."""
    steps = [
        {"items": [{"thinking": "**Plan** write it"}, write("demo.txt", "hello\n", "w1")]},
        {"items": [{"text": "I wrote demo.txt."}]},
    ]
    async with (
        running_server(script(steps), sqlite_url, workspace) as srv,
        httpx.AsyncClient(timeout=30) as c,
    ):
        evs = await send(c, srv.url, "write a greeting")
        assert evs[-1]["status"]["state"] == "input-required" and evs[-1]["final"] is True
        asked = status_text(evs[-1])
        assert "I want to create demo.txt (new file, 1 line)" in asked and "Reply yes" in asked, asked
        no_extension_content(evs)
        task = evs[0]

        done = await send(c, srv.url, "Yes, go ahead", task)
        assert done[-1]["status"]["state"] == "completed", done[-1]
        assert (workspace.parent / "demo.txt").read_text() == "hello\n"
        assert any("Editing demo.txt" in status_text(e) for e in done)
        arts = [e for e in done if e.get("kind") == "artifact-update"]
        assert [p["text"] for e in arts for p in e["artifact"]["parts"]] == ["I wrote demo.txt."]
        assert status_text(done[-1]) == "I wrote demo.txt."
        no_extension_content(done)

        got = (await call(c, srv.url, rpc("tasks/get", {"id": task["id"]}), PLAIN))["result"]
        assert got["status"]["state"] == "completed"
        assert [p["text"] for a in got["artifacts"] for p in a["parts"]] == ["I wrote demo.txt."]
        assert EXTENSION_URI not in json.dumps(got)


async def test_plain_refusal_with_feedback_reaches_the_model(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """Issue 11 item 1: "no, …" cancels the call and the rest is feedback the model reads."""
    steps = [
        {"items": [write("a.txt", "A\n", "w1")]},
        {"items": [{"text": "Understood: {last_tool_results}"}]},
    ]
    async with (
        running_server(script(steps), sqlite_url, workspace) as srv,
        httpx.AsyncClient(timeout=30) as c,
    ):
        task = (await send(c, srv.url, "write a"))[0]
        done = await send(c, srv.url, "No - use b.txt instead", task)
        assert done[-1]["status"]["state"] == "completed"
        assert not (workspace.parent / "a.txt").exists()
        assert "use b.txt instead" in status_text(done[-1])


async def test_plain_always_then_no_more_questions(script: Script, sqlite_url: str, workspace: Path) -> None:
    """Issue 11 item 1: "always" allows the call and calls like it for the rest of the conversation."""
    steps = [
        {"items": [write("one.txt", "1\n", "w1")]},
        {"items": [{"text": "one done"}]},
        {"items": [write("two.txt", "2\n", "w2")]},
        {"items": [{"text": "two done"}]},
    ]
    async with (
        running_server(script(steps), sqlite_url, workspace) as srv,
        httpx.AsyncClient(timeout=30) as c,
    ):
        task = (await send(c, srv.url, "write one"))[0]
        done = await send(c, srv.url, "ALWAYS", task)
        assert done[-1]["status"]["state"] == "completed"
        second = await send(c, srv.url, "write two", {"id": "", "contextId": task["contextId"]})
        assert second[-1]["status"]["state"] == "completed", status_text(second[-1])
        assert (workspace.parent / "two.txt").read_text() == "2\n"


async def test_plain_unclear_answer_is_asked_again(script: Script, sqlite_url: str, workspace: Path) -> None:
    """Issue 11 item 1: text that is no answer gets a clear re-ask and the call keeps waiting (it is
    never cancelled by a misunderstanding); the RFC's confirmation DataPart works too."""
    steps = [{"items": [write("c.txt", "C\n", "w1")]}, {"items": [{"text": "ok"}]}]
    async with (
        running_server(script(steps), sqlite_url, workspace) as srv,
        httpx.AsyncClient(timeout=30) as c,
    ):
        task = (await send(c, srv.url, "write c"))[0]
        again = await send(c, srv.url, "hmm, what would that do?", task)
        assert again[-1]["status"]["state"] == "input-required"
        assert "not an answer" in status_text(again[-1]) and "I want to create c.txt" in status_text(
            again[-1]
        )
        assert not (workspace.parent / "c.txt").exists()
        conf = {"tool_call_id": "w1", "selected_option_id": "proceed_once"}
        m = v03_message(data=[conf], task_id=task["id"], context_id=task["contextId"])
        done = results(await stream(c, srv.url, rpc("message/stream", {"message": m}), PLAIN))
        assert done[-1]["status"]["state"] == "completed"
        assert (workspace.parent / "c.txt").read_text() == "C\n"


async def test_plain_blocking_send_reply_in_artifact(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """Issue 11 item 2: a blocking message/send returns the task with the whole reply as one
    artifact and as the final status message, and its history holds no extension content."""
    steps = [{"items": [{"text": "Paris is the capital "}, {"text": "of France."}]}]
    async with (
        running_server(script(steps), sqlite_url, workspace) as srv,
        httpx.AsyncClient(timeout=30) as c,
    ):
        m = v03_message("capital of France?")
        task = (await call(c, srv.url, rpc("message/send", {"message": m}), PLAIN))["result"]
        assert task["status"]["state"] == "completed"
        assert [p["text"] for a in task["artifacts"] for p in a["parts"]] == [
            "Paris is the capital of France."
        ]
        assert status_text(task) == "Paris is the capital of France."
        assert EXTENSION_URI not in json.dumps(task)
        # whole messages in the history: the streamed pieces of the reply joined into one
        said = [m for m in task["history"] if m["role"] == "agent" and any("text" in p for p in m["parts"])]
        assert ["".join(p["text"] for p in m["parts"]) for m in said] == ["Paris is the capital of France."]


async def test_plain_client_policy(script: Script, sqlite_url: str, workspace: Path) -> None:
    """Issue 11 item 1: the server's policy for plain clients: asked in words by default even on a
    yolo server; "deny" refuses edits (the model reads why) without asking."""
    steps = [{"items": [write("p.txt", "P\n", "w1")]}, {"items": [{"text": "result: {last_tool_results}"}]}]
    yolo = {"approval_mode": "yolo"}
    async with running_server(script(steps), sqlite_url, workspace, core_kw=yolo) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            evs = await send(c, srv.url, "write p")
            assert evs[-1]["status"]["state"] == "input-required" and "Reply yes" in status_text(evs[-1])
    async with running_server(
        script(steps), f"{sqlite_url}2", workspace, core_kw=yolo, a2a_kw={"plain_approval": "deny"}
    ) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            evs = await send(c, srv.url, "write p")
            assert evs[-1]["status"]["state"] == "completed"
            assert not (workspace.parent / "p.txt").exists()
            assert "result: Error" in status_text(evs[-1])
