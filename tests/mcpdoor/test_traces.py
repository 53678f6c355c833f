"""Traces through the MCP door (issue 24 item 4): a host that calls a tool inside a trace sends the
W3C trace context in the request's `params._meta` (`traceparent`, MCP SEP-414); `devagent mcp`
puts the turn, with its model and tool spans, in that trace. The official `mcp` client over stdio
against a real `devagent mcp` process; its spans reach an OTLP/HTTP receiver in the test, which
is waited on until they have arrived (each export wakes it: nothing sleeps)."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

from mcp import Client, StdioServerParameters

from tests.conftest import Script
from tests.fakes.otlp_receiver import OtlpReceiver


async def test_issue24_a_hosts_trace_continues_into_devagent_mcp(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    (workspace / "README.md").write_text("hello\n")
    model = script(
        [
            [{"tool_call": {"name": "read_file", "args": {"path": "README.md"}, "id": "r1"}}],
            [{"text": "It says hello (answer-marker-5e1a)."}],
        ]
    )
    trace_id, caller = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    with OtlpReceiver() as receiver:
        env = receiver.environment({k: v for k, v in os.environ.items() if not k.startswith("DEVAGENT_")})
        server = StdioServerParameters(
            command=sys.executable,
            args=[
                *("-m", "devagent", "mcp", "--work-dir", str(workspace), "--model", model),
                *("--db", sqlite_url, "--approval", "yolo"),
            ],
            env=env,
        )
        async with Client(server) as client:
            res = await client.call_tool(
                "devagent_start",
                {"prompt": "what does the readme say? (prompt-marker-0b7c)"},
                meta={"traceparent": f"00-{trace_id}-{caller}-01"},  # type: ignore[typeddict-unknown-key]
            )
            assert not res.is_error, res
            # read while devagent still runs: its spans arrive without waiting for its exit
            # (which the client bounds by a clock of its own)
            spans = receiver.wait_for(
                lambda spans: (
                    sum(s.name.startswith(("invoke_agent", "chat ", "execute_tool")) for s in spans) >= 4
                )
            )

    by_name = {s.name: s for s in spans}
    turn = by_name["invoke_agent devagent"]
    tool = by_name["execute_tool read_file"]
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert len(chats) == 2, [s.name for s in spans]
    assert turn.trace_id == trace_id, (turn, [s.name for s in spans])
    assert all(s.trace_id == trace_id and s.parent_id == turn.span_id for s in (*chats, tool))
    # the turn is under the host's span: directly, or under the MCP SDK's span of the tools/call
    # request, which is the host's child
    parents = {s.span_id: s for s in spans}
    up = turn.parent_id
    while up in parents and up != caller:
        up = parents[up].parent_id
    assert up == caller, [(s.name, s.span_id, s.parent_id) for s in spans]
    assert not any("prompt-marker-0b7c" in s.text() or "answer-marker-5e1a" in s.text() for s in spans)
