"""Issue 24 item 2: prompt caching.

A session's prefix (system prompt and tool definitions) is the same on every request; Anthropic
requests carry cache breakpoints after the tools, after the system prompt and on the last message
(through pydantic-ai's settings), and the fake Messages API, which caches prefixes the way the real
one does, reports reads from the second request on; the cached tokens reach the session's usage.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.events import ToolKind, UserPrompt
from devagent.agent.state import ClientTool
from devagent.agent.tools.base import Tool
from tests.fakes.anthropic_server import Block, FakeAnthropic, PromptCache, prompt_pieces


def reads_the_readme(body: dict[str, Any]) -> tuple[list[Block], tuple[int | None, int]]:
    """A tool call in the first step of each turn, an answer in the second; the server counts."""
    last = body["messages"][-1]
    content = last["content"] if isinstance(last["content"], list) else []
    if any(b.get("type") == "tool_result" for b in content):
        return [("text", "It says hello.")], (None, 6)
    n = sum(1 for m in body["messages"] if m["role"] == "user")
    return [("tool_use", f"toolu_{n}", "read_file", {"path": "README.md"})], (None, 12)


def _tool(name: str) -> Tool:
    attrs: dict[str, Any] = {"name": name, "description": f"The {name} tool.", "kind": ToolKind.MCP}
    return type(f"Tool_{name}", (Tool,), attrs)()


async def test_issue24_every_request_of_a_session_has_the_same_instructions_and_tools(
    core_factory: Any, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Byte-identical `system` and `tools` across a session's requests, although the day changes
    at midnight between them, the MCP servers list their tools in another order each time and the
    client gave its tools out of order."""
    fake = FakeAnthropic(reads_the_readme)
    async with fake as base_url:
        core = await core_factory("anthropic:claude-fake", model_base_url=base_url, model_api_key="k")
        client_tools = [ClientTool(n, f"{n} on the client", {"type": "object"}) for n in ("zeta", "alpha")]
        s = await core.create_session([workspace], approval_mode="yolo", client_tools=client_tools)
        listings = iter(range(100))

        def tools_for(session: Any) -> dict[str, Tool]:
            names = ["srv__b", "srv__a", "other__c"]
            turn = next(listings) % 3
            return {n: _tool(n) for n in names[turn:] + names[:turn]}

        monkeypatch.setattr(core.mcp, "tools_for", tools_for)
        [e async for e in s.advance(UserPrompt("What does the README say?"))]
        real = time.strftime
        monkeypatch.setattr(time, "strftime", lambda fmt, *a: "2099-01-01" if not a else real(fmt, *a))
        [e async for e in s.advance(UserPrompt("And now?"))]
    assert len(fake.requests) == 4

    def prefix(body: dict[str, Any]) -> tuple[str, str]:
        return json.dumps(body["system"]), json.dumps(body["tools"])

    assert len({prefix(b) for b in fake.requests}) == 1
    names = [t["name"] for t in fake.requests[0]["tools"]]
    assert names[:2] == ["read_file", "read_many_files"]  # the built-ins first, in their order
    assert names[-5:] == ["other__c", "srv__a", "srv__b", "alpha", "zeta"]  # then by name
    assert "2099" not in fake.requests[-1]["system"][0]["text"]
    assert f"started on {s.state.started_on}" in fake.requests[-1]["system"][0]["text"]


# --- the fake's cache itself, as the API documents it -------------------------------------------


def _body(n_messages: int, marks: set[int], *, tools: int = 1, system_mark: bool = False) -> dict[str, Any]:
    big = "x" * 4000  # about 1000 tokens a block
    body: dict[str, Any] = {
        "model": "claude-fake",
        "tools": [{"name": f"t{i}", "description": big, "input_schema": {}} for i in range(tools)],
        "system": [{"type": "text", "text": big}],
        "messages": [
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": [{"type": "text", "text": f"{i} {big}"}],
            }
            for i in range(n_messages)
        ],
    }
    if system_mark:
        body["system"][0]["cache_control"] = {"type": "ephemeral"}
    for i in marks:
        body["messages"][i]["content"][0]["cache_control"] = {"type": "ephemeral"}
    return body


def _account(cache: PromptCache, body: dict[str, Any]) -> tuple[int, int, int]:
    return cache.account(body["model"], prompt_pieces(body))


def test_fake_cache_reads_a_repeated_prefix_and_writes_the_new_part() -> None:
    cache = PromptCache()
    uncached, written, read = _account(cache, _body(2, {1}))
    assert read == 0 and uncached == 0 and written > 3000
    uncached, written2, read2 = _account(cache, _body(4, {3}))
    assert read2 == written and written2 > 1900 and uncached == 0
    # a changed early block (the system prompt) misses: nothing before it was marked
    other = _body(4, {3})
    other["system"][0]["text"] += "!"
    assert _account(cache, other)[2] == 0


def test_fake_cache_minimum_lookback_ttl_and_breakpoint_limit() -> None:
    now = [0.0]
    cache = PromptCache(min_tokens=4500, clock=lambda: now[0])
    assert _account(cache, _body(2, {1}))[1] == 0  # ~4000 tokens: under the minimum, not cached
    assert _account(cache, _body(3, {2}))[1] > 4500
    # past the lookback (20 blocks) from the new breakpoint, the old entry is not found
    assert _account(cache, _body(30, {29}))[2] == 0
    assert _account(cache, _body(31, {30}))[2] > 0
    now[0] += 301  # five minutes later the entries are gone
    assert _account(cache, _body(31, {30}))[2] == 0


async def test_fake_refuses_more_than_four_breakpoints() -> None:
    import httpx

    fake = FakeAnthropic(reads_the_readme)
    async with fake as base_url:
        async with httpx.AsyncClient() as c:
            r = await c.post(base_url + "/v1/messages", json=_body(6, {0, 1, 2, 3, 4}))
    assert r.status_code == 400 and "maximum of 4" in r.json()["error"]["message"]
