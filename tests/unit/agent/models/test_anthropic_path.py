"""G1: a session over pydantic-ai's real Anthropic code path, against a fake Messages API.

Thinking (with its signature), text and a tool call stream in the first response; the second
request must send the thinking block back with its signature and the tool result.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.core_helpers import ask_about_the_readme, assert_read_the_readme
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
    # the last line of the README, after its number and a tab
    return [("text", "It says: " + text.strip().splitlines()[-1].split("\t", 1)[-1])], (60, 7)


async def test_g1_anthropic_session_round_trip(core_factory: Any, workspace: Path) -> None:
    fake = FakeAnthropic(script)
    async with fake as base_url:
        events = await ask_about_the_readme(core_factory, "anthropic:claude-fake", base_url, workspace)
    end = assert_read_the_readme(events, "I need the README.", "It says: Hello.")
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
