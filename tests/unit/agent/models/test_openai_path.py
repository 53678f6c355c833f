"""G1: a session over the real OpenAI provider code path, against a fake OpenAI-compatible server.

The first request streams thinking as `reasoning_content`, some text and a tool call; the session
runs the tool; the second request carries the tool result and the model answers in text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from devagent.agent.events import StatusUpdate, TextDelta, TurnEnd, UserPrompt
from tests.core_helpers import ask_about_the_readme, assert_read_the_readme
from tests.fakes.openai_server import FakeOpenAI, FakeToolCall, Reply


def script(body: dict[str, Any]) -> Reply:
    tool_msgs = [m for m in body["messages"] if m.get("role") == "tool"]
    if not tool_msgs:
        return Reply(
            reasoning=["The user wants ", "the README."],
            text=["Reading it."],
            tool_calls=[FakeToolCall("call_r", "read_file", {"path": "README.md"})],
            usage={
                "prompt_tokens": 40,
                "completion_tokens": 12,
                "total_tokens": 52,
                "completion_tokens_details": {"reasoning_tokens": 5},
            },
        )
    return Reply(
        text=["The README says: ", tool_msgs[0]["content"].splitlines()[-1].split("\t", 1)[-1]],
        usage={
            "prompt_tokens": 70,
            "completion_tokens": 8,
            "total_tokens": 78,
            # OpenAI caches a repeated prompt prefix by itself and says how much it read
            "prompt_tokens_details": {"cached_tokens": 32},
        },
    )


async def test_g1_openai_compatible_session_round_trip(core_factory: Any, workspace: Path) -> None:
    fake = FakeOpenAI(script)
    async with fake as base_url:
        events = await ask_about_the_readme(core_factory, "openai-compatible:fake-model", base_url, workspace)
    end = assert_read_the_readme(events, "The user wants the README.", "The README says: Hello.")
    assert (end.usage.input_tokens, end.usage.output_tokens, end.usage.reasoning_tokens) == (110, 20, 5)
    steps = [e for e in events if isinstance(e, StatusUpdate)]
    assert [e.usage.cache_read_tokens for e in steps] == [0, 32]  # issue 24 item 2
    assert end.usage.cache_read_tokens == 32

    first, second = fake.requests
    assert first["stream"] is True
    assert {t["function"]["name"] for t in first["tools"]} >= {"read_file", "write_file", "run_shell_command"}
    assert first["messages"][0]["role"] == "system" and "devagent" in first["messages"][0]["content"]
    assistant = next(m for m in second["messages"] if m["role"] == "assistant")
    assert assistant["reasoning_content"] == "The user wants the README."
    assert assistant["tool_calls"][0]["id"] == "call_r"
    tool = next(m for m in second["messages"] if m["role"] == "tool")
    assert tool["tool_call_id"] == "call_r" and "Hello." in tool["content"]


async def test_g1_provider_http_error_is_reported_and_session_survives(
    core_factory: Any, workspace: Path
) -> None:
    calls = {"n": 0}

    def flaky(body: dict[str, Any]) -> Reply:
        calls["n"] += 1
        if calls["n"] == 1:
            return Reply(status=400, error_message="the fake refuses")  # 400: the SDK does not retry
        return Reply(text=["back again"])

    async with FakeOpenAI(flaky) as base_url:
        core = await core_factory("openai-compatible:fake-model", model_base_url=base_url, model_api_key="k")
        s = await core.create_session([workspace])
        first = [e async for e in s.advance(UserPrompt("hi"))]
        second = [e async for e in s.advance(UserPrompt("again"))]
    assert isinstance(first[-1], TurnEnd) and first[-1].reason == "error"
    assert "the fake refuses" in (first[-1].error or "")
    assert isinstance(second[-1], TurnEnd) and second[-1].reason == "finished"
    assert "".join(e.text for e in second if isinstance(e, TextDelta)) == "back again"
