"""Subagents through a real `devagent serve`: a subagent's write is asked through the parent's A2A
task (with the extension: the ToolCall under the task call, `parent_tool_call_id` in the ToolCall
and in the event's metadata; without it: in words naming the subagent), and a SIGKILL during a
subagent's turn leaves both settled and reported after a restart."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx

from devagent.a2a.extension import EXTENSION_URI
from devagent.agent.core import AgentCore
from devagent.agent.events import ToolCall, ToolCallStatus
from devagent.agent.settings import CoreConfig
from tests.a2a.helpers import auth, dev_meta, results, stream_message, v03_message
from tests.a2a.procs import (
    TOKEN,
    confirmation,
    get_task,
    send_stream,
    serve_args,
    serving,
    start_serve,
    status_text,
    status_tool_calls,
)
from tests.a2a.test_crash import tool_updates
from tests.core_helpers import NOTES_REPLY, notes_by_a_subagent, task_call, write_call, write_script
from tests.fakes.otlp_receiver import OtlpReceiver

PLAIN = auth(TOKEN, ext=False)


async def _killed_at(
    c: httpx.AsyncClient, args: list[str], log: Path, crash_at: str, settings: dict[str, Any]
) -> dict[str, Any]:
    """Send "make notes" to a server told to SIGKILL itself at `crash_at`; the task it had begun."""
    a = start_serve(args, log, crash_at=crash_at)
    try:
        cut = await send_stream(c, a.url, v03_message("make notes", settings=settings))
        assert a.wait_killed() == -9, a.stderr()
    finally:
        a.stop()
    task: dict[str, Any] = cut.results[0]
    return task


def _reply(results: list[dict[str, Any]]) -> str:
    return "".join(
        p.get("text", "")
        for e in results
        if e.get("kind") == "artifact-update"
        for p in e["artifact"]["parts"]
    )


async def test_issue31_item3_a2a_extension_subagent_write_confirmed_on_the_parents_task(
    tmp_path: Path, workspace: Path
) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'a.db'}"
    args = serve_args(db, workspace, notes_by_a_subagent(tmp_path / "s.json"), "ask")
    settings = {"workspace_path": str(workspace)}
    async with httpx.AsyncClient(timeout=60) as c:
        with serving(args, tmp_path / "serve.log") as srv:
            first = await send_stream(c, srv.url, v03_message("make notes", settings=settings))
            assert first.last_state == "input-required", first.frames
            task = first.results[0]
            nested = tool_updates(first.results, "t1/w1")
            assert nested and all(c["parent_tool_call_id"] == "t1" for c in nested)
            metadata = [dev_meta(e) for e in first.results if dev_meta(e).get("kind") == "TOOL_CALL_UPDATE"]
            assert [m.get("parent_tool_call_id") for m in metadata] == [None, None, "t1"]
            got = await get_task(c, srv.url, task["id"])
            [asked] = status_tool_calls(got)
            assert asked["tool_call_id"] == "t1/w1" and asked["parent_tool_call_id"] == "t1"
            assert asked["description"] == "write the notes: Write notes.txt"
            assert asked["confirmation_request"]["file_edit_details"]["new_content"] == "hello\n"
            assert not (workspace / "notes.txt").exists()

            second = await send_stream(c, srv.url, confirmation(got, "t1/w1"))
            assert second.last_state == "completed", second.frames
            assert (workspace / "notes.txt").read_text() == "hello\n"
            statuses = [c["status"] for c in tool_updates(second.results, "t1/w1")]
            assert statuses == ["EXECUTING", "SUCCEEDED"]
            done = tool_updates(second.results, "t1")[-1]
            assert done["status"] == "SUCCEEDED" and done["output"] == {"text": "I wrote notes.txt."}
            assert _reply(second.results) == "parent: I wrote notes.txt."


async def test_issue31_item3_a2a_plain_client_answers_a_subagents_request_in_words(
    tmp_path: Path, workspace: Path
) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'a.db'}"
    args = serve_args(db, workspace, notes_by_a_subagent(tmp_path / "s.json"), "ask")
    async with httpx.AsyncClient(timeout=60) as c:
        with serving(args, tmp_path / "serve.log") as srv:
            first = results(await stream_message(c, srv.url, v03_message("make notes"), PLAIN))
            assert first[-1]["status"]["state"] == "input-required", first
            said = status_text(first[-1])
            assert "create notes.txt (new file, 1 line) (for the subagent “write the notes”)" in said, said
            assert EXTENSION_URI not in json.dumps(first)
            answer = v03_message("yes", task_id=first[0]["id"], context_id=first[0]["contextId"])
            second = results(await stream_message(c, srv.url, answer, PLAIN))
            assert second[-1]["status"]["state"] == "completed", second
            # a plain client's conversation works in the server's root
            assert (workspace.parent / "notes.txt").read_text() == "hello\n"
            assert _reply(second) == "parent: I wrote notes.txt."


async def test_issue31_item1_kill_during_a_subagents_turn_then_restart(
    tmp_path: Path, workspace: Path
) -> None:
    """The server dies (SIGKILL) as the subagent's write starts (the second tool call to start:
    the first is the parent's task call). After a restart the parent's task reads failed
    (interrupted), the conversation goes on, and the store says: the task call failed
    "interrupted", the subagent's session (linked to it) settled interrupted, its write never
    ran and was never run again."""
    db = f"sqlite+aiosqlite:///{tmp_path / 'a.db'}"
    spec = write_script(
        tmp_path / "s.json",
        [
            {"items": [task_call("write the notes", "CHILD: write notes.txt", "t1")]},
            {"items": [{"text": "parent again: {last_user}"}]},
        ],
        {"CHILD": [[write_call("notes.txt", "hello\n", "w1")], [{"text": "never"}]]},
    )
    args = serve_args(db, workspace, spec, "yolo")
    settings = {"workspace_path": str(workspace), "approval_mode": "yolo"}
    async with httpx.AsyncClient(timeout=60) as c:
        task = await _killed_at(c, args, tmp_path / "a.log", "session.tool_running@2", settings)
        assert not (workspace / "notes.txt").exists()
        with serving(args, tmp_path / "b.log") as b:
            got = await get_task(c, b.url, task["id"])
            assert got["status"]["state"] == "failed", got["status"]
            assert "interrupted" in status_text(got)
            again = await send_stream(
                c, b.url, v03_message("go on", task_id=None, context_id=task["contextId"])
            )
            assert again.last_state == "completed", again.frames
            assert _reply(again.results) == "parent again: go on"
        assert not (workspace / "notes.txt").exists()
    core = await AgentCore.open(CoreConfig(db_url=db, default_model=spec))
    try:
        stored = await core.store.list_sessions(None)
        [parent_id] = [sid for sid, state, _ in stored if not state.get("subagent_of")]
        [child_id] = [sid for sid, state, _ in stored if state.get("subagent_of")]
        parent = await core.inspect(parent_id)
        assert parent is not None
        [task_call_item] = [i for i in await parent.timeline() if isinstance(i, ToolCall)]
        assert task_call_item.id == "t1" and task_call_item.status == ToolCallStatus.FAILED
        assert task_call_item.error is not None and task_call_item.error.type == "interrupted"
        child = await core.inspect(child_id)
        assert child is not None and child.state.subagent_of is not None
        assert (child.state.subagent_of.session, child.state.subagent_of.call) == (parent_id, "t1")
        assert (child.state.status, child.state.outcome) == ("idle", "interrupted")
        [interrupted] = [p for p in child.state.pending] or [None]
        assert interrupted is None  # the step was closed: its write reported interrupted, not run
    finally:
        await core.close()


async def test_issue31_item6_a_subagents_turns_are_child_spans_of_its_task_calls(
    tmp_path: Path, workspace: Path
) -> None:
    """Paused for the subagent's write and resumed: each part of the subagent's turn is a span
    under the `execute_tool task` span of the part of the parent's turn that ran it, in its trace."""
    db = f"sqlite+aiosqlite:///{tmp_path / 'a.db'}"
    args = serve_args(db, workspace, notes_by_a_subagent(tmp_path / "s.json"), "ask")
    settings = {"workspace_path": str(workspace)}
    with OtlpReceiver() as receiver:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "DEVAGENT_TRACE"))}
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.url
        async with httpx.AsyncClient(timeout=60) as c:
            with serving(args, tmp_path / "serve.log", env=env) as srv:
                first = await send_stream(c, srv.url, v03_message("make notes", settings=settings))
                task = first.results[0]
                second = await send_stream(c, srv.url, confirmation(task, "t1/w1"))
                assert second.last_state == "completed", second.frames
                srv.stop()  # every span is sent before it exits
        spans = receiver.spans
    turns = [s for s in spans if s.name == "invoke_agent devagent"]
    tasks = [s for s in spans if s.name == "execute_tool task"]
    parents = [s for s in turns if "devagent.subagent.type" not in s.attributes]
    children = [s for s in turns if "devagent.subagent.type" in s.attributes]
    assert len(parents) == len(children) == len(tasks) == 2
    for parent_turn, task_span, child_turn in zip(
        sorted(parents, key=lambda s: s.attributes["devagent.turn.input"] != "prompt"),
        sorted(tasks, key=lambda s: s.attributes["devagent.tool.status"] != "executing"),
        sorted(children, key=lambda s: s.attributes["devagent.turn.input"] != "prompt"),
        strict=True,
    ):
        assert task_span.parent_id == parent_turn.span_id
        assert child_turn.parent_id == task_span.span_id
        assert child_turn.trace_id == parent_turn.trace_id
        a = child_turn.attributes
        assert a["devagent.subagent.type"] == "general-purpose"
        assert a["devagent.parent.tool_call.id"] == "t1"
        assert a["devagent.parent.session.id"] == parent_turn.attributes["devagent.session.id"]
    assert sorted(s.attributes["devagent.turn.outcome"] for s in children) == ["finished", "input_required"]
    (write,) = [s for s in spans if s.name == "execute_tool write_file"]
    (resumed_child,) = [s for s in children if s.attributes["devagent.turn.input"] == "resume"]
    assert write.parent_id == resumed_child.span_id


async def test_issue31_item1_kill_while_the_parent_waits_for_a_subagents_answer_then_continue(
    tmp_path: Path, workspace: Path
) -> None:
    """The server dies (SIGKILL) once the pause for the subagent's write is stored, before the task
    store has it. After a restart the task reads input-required with the subagent's call, and
    confirming it continues the subagent: the file is written once, the parent finishes."""
    db = f"sqlite+aiosqlite:///{tmp_path / 'a.db'}"
    args = serve_args(db, workspace, notes_by_a_subagent(tmp_path / "s.json"), "ask")
    settings = {"workspace_path": str(workspace)}
    async with httpx.AsyncClient(timeout=60) as c:
        task = await _killed_at(c, args, tmp_path / "a.log", "a2a.turn_stored", settings)
        with serving(args, tmp_path / "b.log") as b:
            got = await get_task(c, b.url, task["id"])
            assert got["status"]["state"] == "input-required", got["status"]
            [asked] = status_tool_calls(got)
            assert asked["tool_call_id"] == "t1/w1" and asked["parent_tool_call_id"] == "t1"
            done = await send_stream(c, b.url, confirmation(got, "t1/w1"))
            assert done.last_state == "completed", done.frames
            assert _reply(done.results) == NOTES_REPLY
    assert (workspace / "notes.txt").read_text() == "hello\n"
