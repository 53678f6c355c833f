"""Traces through ACP (issue 24 item 4): an editor that prompts inside a trace sends the W3C trace
context in the request's `_meta` (`traceparent`, the same root keys as MCP's SEP-414); the turn,
with its model and tool spans, is in that trace, a child of the editor's span. The ACP Python SDK
as the editor, a real `devagent acp` process, an OTLP/HTTP receiver in the test, waited on until
the spans have arrived (each export wakes it: nothing sleeps), while devagent still runs: the
SDK's own exit bounds devagent's by a clock, which a test must not depend on."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from acp import text_block

from tests.acp.conftest import acp_argv
from tests.acp.test_python_sdk import TIMEOUT, EditorClient, agent, start
from tests.conftest import ScriptFile
from tests.core_helpers import write_call
from tests.fakes.otlp_receiver import OtlpReceiver


@asynccontextmanager
async def traced_session(
    client: EditorClient, argv: list[str], acp_env: dict[str, str], work_dir: Path, log: Path
) -> AsyncIterator[tuple[OtlpReceiver, Any, str]]:
    """`devagent acp` (`argv`) tracing to an OTLP receiver, started by `client` with a new session
    in `work_dir`: the receiver, the connection and the session's id."""
    with OtlpReceiver() as receiver:
        async with agent(client, argv, receiver.environment(acp_env), work_dir, log) as (conn, _proc):
            await start(conn)
            new = await asyncio.wait_for(conn.new_session(cwd=str(work_dir), mcp_servers=[]), TIMEOUT)
            yield receiver, conn, new.session_id


async def test_issue24_an_editors_trace_continues_into_devagent_acp(
    acp_env: dict[str, str], work_dir: Path, script: ScriptFile, tmp_path: Path
) -> None:
    (work_dir / "README.md").write_text("hello\n")
    steps = [
        [{"tool_call": {"name": "read_file", "args": {"path": "README.md"}, "id": "r1"}}],
        [{"text": "It says hello (answer-marker-3c9d)."}],
        [{"text": "Still hello."}],
    ]
    trace_id, editor_span = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    client = EditorClient()
    argv = acp_argv(script(steps), "--approval", "yolo")
    log = tmp_path / "err.log"
    async with traced_session(client, argv, acp_env, work_dir, log) as (receiver, conn, session_id):
        done = await asyncio.wait_for(
            conn.prompt(
                session_id=session_id,
                prompt=[text_block("what does the readme say? (prompt-marker-6a2e)")],
                traceparent=f"00-{trace_id}-{editor_span}-01",
            ),
            TIMEOUT,
        )
        assert done.stop_reason == "end_turn"
        # a second prompt without a trace context: a trace of its own
        await asyncio.wait_for(conn.prompt(session_id=session_id, prompt=[text_block("and again")]), TIMEOUT)
        spans = await asyncio.to_thread(
            receiver.wait_for,
            lambda spans: (
                sum(s.name == "invoke_agent devagent" for s in spans) >= 2
                and sum(s.name.startswith("chat ") for s in spans) >= 3
            ),
        )

    turns = [s for s in spans if s.name == "invoke_agent devagent"]
    assert len(turns) == 2, [s.name for s in spans]
    first, second = turns if turns[0].trace_id == trace_id else turns[::-1]
    assert first.trace_id == trace_id and first.parent_id == editor_span, first
    assert second.trace_id != trace_id, second  # under the ACP SDK's span of its request, if any
    tool = next(s for s in spans if s.name == "execute_tool read_file")
    assert tool.trace_id == trace_id and tool.parent_id == first.span_id
    chats = [s for s in spans if s.name.startswith("chat ") and s.trace_id == trace_id]
    assert len(chats) == 2 and all(s.parent_id == first.span_id for s in chats)
    assert not any("prompt-marker-6a2e" in s.text() or "answer-marker-3c9d" in s.text() for s in spans)


async def test_issue24_calls_that_do_not_run_here_are_events_of_the_turn(
    acp_env: dict[str, str], work_dir: Path, script: ScriptFile, tmp_path: Path
) -> None:
    """G3 in traces: a call refused before it runs (an unknown tool) and one the user declines have no
    `execute_tool` span (nothing executed); each is a `devagent.tool_call` event of its turn's span
    with its outcome, status and error type; a call that ran is a span, not an event."""
    (work_dir / "README.md").write_text("hello\n")
    steps = [
        [{"tool_call": {"name": "no_such_tool", "args": {}, "id": "u1"}}],
        [write_call("x.txt", "x\n", "w1")],
        [{"tool_call": {"name": "read_file", "args": {"path": "README.md"}, "id": "r1"}}],
        [{"text": "Done."}],
    ]
    client = EditorClient(answers=["cancel"])
    argv = acp_argv(script(steps), "--approval", "ask")
    log = tmp_path / "err.log"
    async with traced_session(client, argv, acp_env, work_dir, log) as (receiver, conn, session_id):
        done = await asyncio.wait_for(conn.prompt(session_id=session_id, prompt=[text_block("go")]), TIMEOUT)
        assert done.stop_reason == "end_turn"
        # the turn's two spans (before and after the permission) and the read's
        spans = await asyncio.to_thread(
            receiver.wait_for,
            lambda spans: (
                sum(s.name == "invoke_agent devagent" for s in spans) >= 2
                and any(s.name == "execute_tool read_file" for s in spans)
            ),
        )

    assert not (work_dir / "x.txt").exists()
    # the turn pauses for the permission: its span ends there, the answer runs the rest in another
    turns = [s for s in spans if s.name == "invoke_agent devagent"]
    tools = [s.name for s in spans if s.name.startswith("execute_tool")]
    assert tools == ["execute_tool read_file"], tools
    events = {
        a["gen_ai.tool.call.id"]: (t.attributes["devagent.turn.input"], a)
        for t in turns
        for name, a in t.events
        if name == "devagent.tool_call"
    }
    assert set(events) == {"u1", "w1"}, [t.events for t in turns]
    assert (events["u1"][0], events["w1"][0]) == ("prompt", "resume")
    events = {k: a for k, (_, a) in events.items()}
    assert events["u1"]["gen_ai.tool.name"] == "no_such_tool"
    assert (events["u1"]["devagent.tool.outcome"], events["u1"]["devagent.tool.status"]) == (
        "refused",
        "failed",
    )
    assert events["u1"]["error.type"]
    assert (events["w1"]["devagent.tool.outcome"], events["w1"]["devagent.tool.status"]) == (
        "declined",
        "cancelled",
    )
    assert events["w1"]["error.type"] == "cancelled"
