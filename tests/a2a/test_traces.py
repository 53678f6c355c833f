"""Traces (issue 24 item 4): a real `devagent serve`, pointed at a collector by the standard
`OTEL_EXPORTER_OTLP_ENDPOINT` (an OTLP/HTTP receiver inside the test), over the real OpenAI
provider code (the fake OpenAI server). A turn sent with a W3C `traceparent` header is a span
`invoke_agent devagent` in the caller's trace, with a `chat` span per model request and an
`execute_tool` span per tool call under it; no prompt, answer, argument or file content unless
`DEVAGENT_TRACE_CONTENT` is on. A turn paused for a permission and resumed by another request is
two turn spans, each in its own request's trace, the second linked to the first.

Export is deterministic: the server is stopped (SIGTERM) before the spans are read, and a
stopping server sends every span it still holds (`AgentCore.close`); nothing waits on a timer.
"""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.a2a.helpers import v03_message
from tests.a2a.procs import TOKEN, Serve, confirmation, send_stream, serve_argv, serving
from tests.fakes.openai_server import FakeOpenAI, FakeToolCall, Reply
from tests.fakes.otlp_receiver import OtlpReceiver, Span

PROMPT = "Summarise the readme please (prompt-marker-7d1f)"
ANSWER = "It greets you (answer-marker-91c2)."
FILE_TEXT = "file-content-marker-44ab"
USAGE = {
    "prompt_tokens": 120,
    "completion_tokens": 7,
    "total_tokens": 127,
    "prompt_tokens_details": {"cached_tokens": 100},
}


def traceparent() -> tuple[str, str, str]:
    """A caller's trace id, span id and the header naming them (sampled)."""
    trace_id, span_id = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    return trace_id, span_id, f"00-{trace_id}-{span_id}-01"


def read_script(body: dict[str, Any]) -> Reply:
    if not any(m.get("role") == "tool" for m in body["messages"]):
        return Reply(tool_calls=[FakeToolCall("call_r", "read_file", {"path": "README.md"})], usage=USAGE)
    return Reply(text=[ANSWER], usage={"prompt_tokens": 150, "completion_tokens": 9, "total_tokens": 159})


def write_script(body: dict[str, Any]) -> Reply:
    if not any(m.get("role") == "tool" for m in body["messages"]):
        args = {"path": "notes.txt", "content": FILE_TEXT}
        return Reply(tool_calls=[FakeToolCall("call_w", "write_file", args)], usage=USAGE)
    return Reply(text=[ANSWER], usage={"prompt_tokens": 150, "completion_tokens": 9, "total_tokens": 159})


@contextmanager
def traced_server(
    workspace: Path, base_url: str, receiver: OtlpReceiver, *more: str, **env: str
) -> Iterator[Serve]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "DEVAGENT_TRACE"))}
    environ.update({"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, **env})
    db = f"sqlite+aiosqlite:///{workspace.parent / 'traces.db'}"
    args = serve_argv(
        db,
        workspace.parent,
        "openai-compatible:fake-model",
        *("--base-url", base_url, "--api-key", "k", "--approval", "ask", *more),
        token=f"alice={TOKEN}",
    )
    with serving(args, workspace.parent / "serve.log", env=environ) as s:
        yield s


def by_name(spans: list[Span], name: str) -> list[Span]:
    return [s for s in spans if s.name == name]


async def test_turn_model_and_tool_spans_in_the_callers_trace(workspace: Path) -> None:
    """The a2a SDK's spans are on (the default with devagent's tracing): they join the caller's
    trace as well."""
    trace_id, caller, header = traceparent()
    fake = FakeOpenAI(read_script)
    with OtlpReceiver() as receiver:
        async with fake as base_url:
            with traced_server(workspace, base_url, receiver) as srv:
                async with httpx.AsyncClient(timeout=60) as c:
                    message = v03_message(PROMPT, settings={"workspace_path": str(workspace)})
                    reply = await send_stream(c, srv.url, message, headers={"traceparent": header})
                assert reply.last_state == "completed", (reply.frames, srv.stderr())
                srv.stop()  # every span sent before it exits
                log = srv.stderr()
        spans = receiver.spans

    assert "Traceback" not in log, log
    assert f"traces: OpenTelemetry over OTLP/HTTP to {receiver.url}/v1/traces\n" in log, log
    (turn,) = by_name(spans, "invoke_agent devagent")
    chats = by_name(spans, "chat fake-model")
    (tool,) = by_name(spans, "execute_tool read_file")
    assert len(chats) == 2
    for s in (turn, *chats, tool):
        assert s.trace_id == trace_id, s
        assert s.scope == "devagent" and s.service == "devagent"
    assert all(s.parent_id == turn.span_id for s in (*chats, tool))
    # The caller's span is the turn's parent; the a2a SDK's spans of the request are in its trace
    # too (beside the turn: the SDK makes spans of its queue operations, not of the agent's run).
    assert turn.parent_id == caller
    sdk = [s for s in spans if s.scope == "a2a-python-sdk"]
    # every one in the request's trace, but the handler's own at shutdown (a trace of its own)
    assert [s.name.rsplit(".", 1)[-1] for s in sdk if s.trace_id != trace_id] == ["aclose"]
    (handled,) = [s for s in sdk if s.name.endswith("RequestHandlerV2.on_message_send_stream")]
    assert handled.parent_id == caller

    t = turn.attributes
    assert t["gen_ai.operation.name"] == "invoke_agent"
    assert t["gen_ai.agent.name"] == "devagent"
    assert t["devagent.caller"] == "alice"
    assert t["devagent.turn.input"] == "prompt"
    assert t["devagent.turn.outcome"] == "finished"
    assert t["gen_ai.conversation.id"] and t["devagent.context.id"] and t["devagent.task.id"]
    assert (t["gen_ai.usage.input_tokens"], t["gen_ai.usage.output_tokens"]) == (270, 16)
    first, second = sorted(chats, key=lambda s: s.attributes["devagent.turn.step"])
    a = first.attributes
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.provider.name"] == "openai-compatible" == a["gen_ai.system"]
    assert a["server.address"] == "127.0.0.1" and a["server.port"] == int(base_url.rsplit(":", 1)[1][:-3])
    assert a["gen_ai.request.model"] == "fake-model" and a["gen_ai.response.model"] == "fake-model"
    assert a["gen_ai.response.id"] == "chatcmpl-fake"
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (120, 7)
    assert a["gen_ai.usage.cache_read.input_tokens"] == 100
    assert a["gen_ai.response.finish_reasons"] == ["tool_call"]
    assert second.attributes["gen_ai.response.finish_reasons"] == ["stop"]
    assert first.kind == 3  # client
    a = tool.attributes
    assert a["gen_ai.operation.name"] == "execute_tool"
    assert (a["gen_ai.tool.name"], a["gen_ai.tool.call.id"]) == ("read_file", "call_r")
    assert a["devagent.tool.status"] == "succeeded" and tool.status_code != 2
    # No content by default: not the prompt, the answer, the arguments or the file read, in any span.
    for s in spans:
        for secret in (PROMPT, "prompt-marker", "answer-marker", "README.md", "Hello."):
            assert secret not in s.text(), (secret, s)


async def test_content_and_a_paused_turn_resumed_by_another_request(workspace: Path) -> None:
    """With `DEVAGENT_TRACE_CONTENT` the spans carry the prompt, the answer and the tool's
    arguments; with the SDK's own tracing off, the turn's parent is the caller's span itself. A
    permission pause ends the first turn span; the answer, sent in another trace, runs the rest as
    a turn span of that trace, linked to the first."""
    trace_1, caller_1, header_1 = traceparent()
    trace_2, caller_2, header_2 = traceparent()
    fake = FakeOpenAI(write_script)
    with OtlpReceiver() as receiver:
        async with fake as base_url:
            with traced_server(
                workspace,
                base_url,
                receiver,
                DEVAGENT_TRACE_CONTENT="true",
                OTEL_INSTRUMENTATION_A2A_SDK_ENABLED="false",
            ) as srv:
                async with httpx.AsyncClient(timeout=60) as c:
                    message = v03_message(PROMPT, settings={"workspace_path": str(workspace)})
                    paused = await send_stream(c, srv.url, message, headers={"traceparent": header_1})
                    assert paused.last_state == "input-required", (paused.frames, srv.stderr())
                    task = paused.results[0]
                    answer = confirmation(task, "call_w")
                    done = await send_stream(c, srv.url, answer, headers={"traceparent": header_2})
                    assert done.last_state == "completed", (done.frames, srv.stderr())
                srv.stop()
                log = srv.stderr()
        spans = receiver.spans

    assert "Traceback" not in log, log
    assert (workspace / "notes.txt").read_text() == FILE_TEXT
    assert not [s for s in spans if s.scope == "a2a-python-sdk"]
    first, second = sorted(by_name(spans, "invoke_agent devagent"), key=lambda s: s.trace_id != trace_1)
    assert (first.trace_id, first.parent_id) == (trace_1, caller_1)
    assert (second.trace_id, second.parent_id) == (trace_2, caller_2)
    assert first.attributes["devagent.turn.outcome"] == "input_required"
    assert first.attributes["devagent.turn.waiting_calls"] == 1
    assert second.attributes["devagent.turn.input"] == "resume"
    assert second.attributes["devagent.turn.outcome"] == "finished"
    assert second.links == [(trace_1, first.span_id)]
    assert first.attributes["devagent.context.id"] == second.attributes["devagent.context.id"]

    (chat_1,) = [s for s in by_name(spans, "chat fake-model") if s.trace_id == trace_1]
    (chat_2,) = [s for s in by_name(spans, "chat fake-model") if s.trace_id == trace_2]
    (tool,) = by_name(spans, "execute_tool write_file")
    assert chat_1.parent_id == first.span_id
    assert tool.parent_id == second.span_id and chat_2.parent_id == second.span_id
    assert tool.attributes["devagent.tool.status"] == "succeeded"
    # The content, with trace_content on.
    assert PROMPT in first.attributes["gen_ai.input.messages"]
    assert PROMPT in chat_1.attributes["gen_ai.input.messages"]
    assert FILE_TEXT in chat_1.attributes["gen_ai.output.messages"]
    assert FILE_TEXT in tool.attributes["gen_ai.tool.call.arguments"]
    assert "call_w" in chat_2.attributes["gen_ai.input.messages"]  # the tool's result goes back
    assert ANSWER in chat_2.attributes["gen_ai.output.messages"]


async def test_a_grpc_call_with_traceparent_metadata(workspace: Path) -> None:
    """The gRPC binding: `traceparent` metadata puts the call's turn in the caller's trace. (A
    client without the extension works in the server's root, where README.md is not: the tool
    fails, and its span says so by the error's type only.)"""
    import grpc  # type: ignore[import-untyped]
    from a2a.types import Message, Part, Role, SendMessageRequest, TaskState, a2a_pb2_grpc

    trace_id, caller, header = traceparent()
    fake = FakeOpenAI(read_script)
    with OtlpReceiver() as receiver:
        async with fake as base_url:
            with traced_server(workspace, base_url, receiver, "--grpc-port", "0") as srv:
                for _ in range(600):  # printed just after "listening"
                    found = re.search(r"gRPC on (\S+)", srv.stderr())
                    if found:
                        break
                    await asyncio.sleep(0.05)
                assert found, srv.stderr()
                message = Message(
                    message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=PROMPT)]
                )
                async with grpc.aio.insecure_channel(found.group(1)) as channel:
                    reply = await a2a_pb2_grpc.A2AServiceStub(channel).SendMessage(
                        SendMessageRequest(message=message),
                        metadata=[("authorization", f"Bearer {TOKEN}"), ("traceparent", header)],
                    )
                assert reply.task.status.state == TaskState.TASK_STATE_COMPLETED, reply
                srv.stop()
        spans = receiver.spans

    (turn,) = by_name(spans, "invoke_agent devagent")
    (tool,) = by_name(spans, "execute_tool read_file")
    # in the caller's trace, under the caller's span (here through the SDK's span of the call)
    index = {s.span_id: s for s in spans}
    above, parent = [], turn.parent_id
    while parent in index:
        above.append(index[parent])
        parent = index[parent].parent_id
    assert turn.trace_id == trace_id and parent == caller
    assert all(s.scope == "a2a-python-sdk" for s in above)
    assert tool.parent_id == turn.span_id and len(by_name(spans, "chat fake-model")) == 2
    assert tool.attributes["devagent.tool.status"] == "failed"
    assert (tool.status_code, tool.status_message, tool.attributes["error.type"]) == (
        2,
        "not_found",
        "not_found",
    )
    for s in spans:
        assert "README.md" not in s.text() and "prompt-marker" not in s.text(), s
