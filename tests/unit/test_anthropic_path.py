"""G1: a session over pydantic-ai's real Anthropic code path, against a fake Messages API.

Thinking (with its signature), text and a tool call stream in the first response; the second
request must send the thinking block back with its signature and the tool result.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from devagent.agent.events import TextDelta, ThoughtDelta, ToolCallStatus, ToolCallUpdate, TurnEnd, UserPrompt
from tests.fakes.anthropic_server import Block, FakeAnthropic


def script(body: dict[str, Any]) -> tuple[list[Block], tuple[int, int]]:
    last = body["messages"][-1]
    results = [
        b
        for b in (last["content"] if isinstance(last["content"], list) else [])
        if b.get("type") == "tool_result"
    ]
    if not results:
        return [
            ("thinking", "I need the README.", "sig-abc"),
            ("text", "Reading it."),
            ("tool_use", "toolu_1", "read_file", {"path": "README.md"}),
        ], (30, 20)
    content = results[0]["content"]
    text = content if isinstance(content, str) else "".join(c.get("text", "") for c in content)
    return [("text", "It says: " + text.strip().splitlines()[-1])], (60, 7)


async def test_g1_anthropic_session_round_trip(core_factory: Any, workspace: Path) -> None:
    fake = FakeAnthropic(script)
    async with fake as base_url:
        core = await core_factory("anthropic:claude-fake", model_base_url=base_url, model_api_key="k")
        s = await core.create_session([workspace], approval_mode="ask")
        events = [e async for e in s.advance(UserPrompt("What does the README say?"))]
    assert "".join(e.text for e in events if isinstance(e, ThoughtDelta)) == "I need the README."
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text.startswith("Reading it.") and text.endswith("It says: Hello.")
    assert [e.call.status for e in events if isinstance(e, ToolCallUpdate)] == [
        ToolCallStatus.PENDING,
        ToolCallStatus.EXECUTING,
        ToolCallStatus.SUCCEEDED,
    ]
    end = events[-1]
    assert isinstance(end, TurnEnd) and end.reason == "finished"
    assert (end.usage.input_tokens, end.usage.output_tokens) == (90, 27)

    first, second = fake.requests
    assert first["stream"] is True and "devagent" in str(first.get("system"))
    assert {t["name"] for t in first["tools"]} >= {"read_file", "edit", "run_shell_command"}
    assistant = second["messages"][1]
    assert assistant["role"] == "assistant"
    thinking = next(b for b in assistant["content"] if b["type"] == "thinking")
    assert thinking == {"type": "thinking", "thinking": "I need the README.", "signature": "sig-abc"}
    tool_use = next(b for b in assistant["content"] if b["type"] == "tool_use")
    assert tool_use["id"] == "toolu_1" and tool_use["input"] == {"path": "README.md"}
    result = next(b for b in second["messages"][2]["content"] if b["type"] == "tool_result")
    assert result["tool_use_id"] == "toolu_1"
