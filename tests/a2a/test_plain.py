"""The plain A2A dialect (issue 11 items 1 and 2, issue 21 items 1 and 2): a client that never
activated the development-tool extension answers permission requests in words (on the task, or
on the context alone), sees no extension content, and gets the reply once: as the chunks of one
artifact, never repeated in status messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from devagent.a2a.extension import EXTENSION_URI
from tests.a2a.helpers import auth, call, results, rpc, running_server, stream, v03_message
from tests.conftest import Script
from tests.core_helpers import write_call

PLAIN = auth(ext=False)


def status_text(ev: dict[str, Any]) -> str:
    msg = ev.get("status", {}).get("message") or {}
    return "".join(p.get("text", "") for p in msg.get("parts") or [])


def answer_of(evs: list[dict[str, Any]]) -> str:
    """The reply as a client assembles it from the artifact-update chunks of a stream."""
    return "".join(
        p.get("text", "") for e in evs if e.get("kind") == "artifact-update" for p in e["artifact"]["parts"]
    )


def task_of_frame(frame: dict[str, Any]) -> str:
    """The task a 1.0 stream response is about (a Task, a status or an artifact update)."""
    result = frame["result"]
    if "task" in result:
        return str(result["task"]["id"])
    event = result.get("statusUpdate") or result.get("artifactUpdate") or {}
    return str(event.get("taskId"))


def artifact_text(task: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for a in task.get("artifacts") or [] for p in a["parts"])


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


ANSWER = "I wrote demo.txt.\nIt says hello."


async def test_plain_write_answered_yes(script: Script, sqlite_url: str, workspace: Path) -> None:
    """Issue 11 item 1: the request in words, answered "Yes, go ahead" on the same task: the file is
    written; thoughts and ToolCalls never reach the client; the reply is an artifact and the final
    status text (item 2)."""
    steps = [
        {"items": [{"thinking": "**Plan** write it"}, write_call("demo.txt", "hello\n", "w1")]},
        {"items": [{"text": ANSWER}]},
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
        # issue 21 item 2: the answer as chunks of one artifact, first new, then appended, the last
        # one marked; no status message repeats any of it. A chunk is whole lines (the model
        # streamed it in word-bounded pieces): a client that draws each chunk shows lines.
        arts = [e for e in done if e.get("kind") == "artifact-update"]
        assert len({e["artifact"]["artifactId"] for e in arts}) == 1
        assert [p["text"] for e in arts for p in e["artifact"]["parts"]] == [
            "I wrote demo.txt.\n",
            "It says hello.",
        ]
        assert [e.get("append", False) for e in arts] == [False, True]
        assert [e.get("lastChunk", False) for e in arts] == [False, True]
        assert answer_of(done) == ANSWER
        assert not any("wrote" in status_text(e) for e in done)
        no_extension_content(done)

        got = (await call(c, srv.url, rpc("tasks/get", {"id": task["id"]}), PLAIN))["result"]
        assert got["status"]["state"] == "completed"
        assert [p["text"] for a in got["artifacts"] for p in a["parts"]] == [ANSWER]
        assert EXTENSION_URI not in json.dumps(got)
        assert json.dumps(got).count("I wrote demo.txt.") == 1  # once, joined, in the artifact


async def test_plain_refusal_with_feedback_reaches_the_model(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """Issue 11 item 1: "no, …" cancels the call and the rest is feedback the model reads."""
    steps = [
        {"items": [write_call("a.txt", "A\n", "w1")]},
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
        assert "use b.txt instead" in answer_of(done)


async def test_plain_always_then_no_more_questions(script: Script, sqlite_url: str, workspace: Path) -> None:
    """Issue 11 item 1: "always" allows the call and calls like it for the rest of the conversation."""
    steps = [
        {"items": [write_call("one.txt", "1\n", "w1")]},
        {"items": [{"text": "one done"}]},
        {"items": [write_call("two.txt", "2\n", "w2")]},
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


async def test_issue21_other_text_refuses_with_the_users_words(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """Issue 21 (STREAM-SUB-002's "Complete", a question): text that is not yes/always/no refuses
    the waiting call with the user's words for the model, so the conversation goes on instead of
    asking the same question for ever; nothing runs. The RFC's confirmation DataPart works too."""
    steps = [
        {"items": [write_call("c.txt", "C\n", "w1")]},
        {"items": [{"text": "You said: {last_tool_results}"}]},
        {"items": [write_call("d.txt", "D\n", "w2")]},
        {"items": [{"text": "ok"}]},
    ]
    async with (
        running_server(script(steps), sqlite_url, workspace) as srv,
        httpx.AsyncClient(timeout=30) as c,
    ):
        task = (await send(c, srv.url, "write c"))[0]
        done = await send(c, srv.url, "hmm, what would that do?", task)
        assert done[-1]["status"]["state"] == "completed", done[-1]
        assert "what would that do?" in answer_of(done)
        assert not (workspace.parent / "c.txt").exists()
        again = await send(c, srv.url, "write d then", {"id": "", "contextId": task["contextId"]})
        assert again[-1]["status"]["state"] == "input-required"
        conf = {"tool_call_id": "w2", "selected_option_id": "proceed_once"}
        m = v03_message(data=[conf], task_id=again[0]["id"], context_id=task["contextId"])
        done = results(await stream(c, srv.url, rpc("message/stream", {"message": m}), PLAIN))
        assert done[-1]["status"]["state"] == "completed"
        assert (workspace.parent / "d.txt").read_text() == "D\n"


async def test_issue21_a_client_that_keeps_only_the_context_continues_the_waiting_task(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """Issue 21 item 1 (A3, B14), the raw repro: "write" -> input-required; "yes" with the same
    contextId and no taskId continues that task (message/send and message/stream, v0.3 and 1.0),
    the file is written, no second question, no task canceled; with no waiting task a message on
    the context starts a new task as before."""
    steps = [
        {"items": [write_call("a.txt", "A\n", "w1")]},
        {"items": [{"text": "written a"}]},
        {"items": [write_call("b.txt", "B\n", "w2")]},
        {"items": [{"text": "written b"}]},
        {"items": [{"text": "hello again"}]},
    ]
    async with (
        running_server(script(steps), sqlite_url, workspace) as srv,
        httpx.AsyncClient(timeout=30) as c,
    ):
        first = (await call(c, srv.url, rpc("message/send", {"message": v03_message("write a")}), PLAIN))[
            "result"
        ]
        assert first["status"]["state"] == "input-required"
        yes = v03_message("yes", context_id=first["contextId"])
        done = (await call(c, srv.url, rpc("message/send", {"message": yes}), PLAIN))["result"]
        assert done["id"] == first["id"] and done["status"]["state"] == "completed", done
        assert (workspace.parent / "a.txt").read_text() == "A\n" and artifact_text(done).endswith("written a")
        # 1.0, streaming, on the same context: a new question, answered by context again
        v1 = auth(ext=False, v1=True)
        msg = {
            "role": "ROLE_USER",
            "parts": [{"text": "write b"}],
            "messageId": "m-b",
            "contextId": first["contextId"],
        }
        asked = await stream(c, srv.url, rpc("SendStreamingMessage", {"message": msg}), v1)
        second = asked[0]["result"]["task"]
        assert second["id"] != first["id"]
        msg = {
            "role": "ROLE_USER",
            "parts": [{"text": "Yes"}],
            "messageId": "m-y",
            "contextId": first["contextId"],
        }
        frames = await stream(c, srv.url, rpc("SendStreamingMessage", {"message": msg}), v1)
        ids = {task_of_frame(f) for f in frames}
        assert ids == {second["id"]}, frames
        assert (workspace.parent / "b.txt").read_text() == "B\n"
        listed = (await call(c, srv.url, rpc("ListTasks", {"contextId": first["contextId"]}), v1))["result"][
            "tasks"
        ]
        assert sorted(t["status"]["state"] for t in listed) == [
            "TASK_STATE_COMPLETED",
            "TASK_STATE_COMPLETED",
        ]
        # nothing waits now: a message on the context is a new task
        hello = v03_message("hi", context_id=first["contextId"])
        third = (await call(c, srv.url, rpc("message/send", {"message": hello}), PLAIN))["result"]
        assert third["id"] not in (first["id"], second["id"]) and third["status"]["state"] == "completed"


async def test_plain_blocking_send_reply_in_artifact(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """Issue 11 item 2, issue 21 item 2: a blocking message/send returns the task with the whole
    reply once, as one artifact with one text (the streamed chunks joined); neither the final
    status message nor the history repeats it, and it holds no extension content."""
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
        assert status_text(task) == ""
        assert EXTENSION_URI not in json.dumps(task)
        assert json.dumps(task).count("Paris is the capital") == 1


async def test_plain_client_policy(script: Script, sqlite_url: str, workspace: Path) -> None:
    """Issue 11 item 1: the server's policy for plain clients: asked in words by default even on a
    yolo server; "deny" refuses edits (the model reads why) without asking."""
    steps = [
        {"items": [write_call("p.txt", "P\n", "w1")]},
        {"items": [{"text": "result: {last_tool_results}"}]},
    ]
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
            assert "result: Error" in answer_of(evs)


async def test_plain_reply_chunks_are_lines_or_bounded_runs() -> None:
    """A2 (`message/stream`) for a plain client: its reply chunks end at line ends, or near
    CHUNK_CHARS in a long line (at a
    space, or anywhere in a run without one); the text after the last line end waits, so the
    last chunk has text and `lastChunk`. The chunks add up to the streamed text exactly."""
    from a2a.server.events import EventQueue

    from devagent.a2a.plain import CHUNK_CHARS, PlainEmitter

    class Sink(EventQueue):
        def __init__(self) -> None:
            self.events: list[Any] = []

        async def enqueue_event(self, event: Any) -> None:
            self.events.append(event)

    pieces = [
        "First li",
        "ne\nsecond",
        " line\n",
        "third ",
        *["word " * 20] * 3,
        "x" * (CHUNK_CHARS + 50),
        "end.",
    ]
    sink = Sink()
    emitter = PlainEmitter(sink, "t", "c", "m")
    for piece in pieces:
        await emitter.text(piece)
    await emitter.reply("".join(pieces))
    chunks = [e.artifact.parts[0].text for e in sink.events]
    assert "".join(chunks) == "".join(pieces)
    assert chunks[:2] == ["First line\n", "second line\n"]
    assert all(len(c) <= CHUNK_CHARS + 100 for c in chunks), [len(c) for c in chunks]
    assert [e.last_chunk for e in sink.events] == [False] * (len(chunks) - 1) + [True]
    assert chunks[-1].endswith("end.")
