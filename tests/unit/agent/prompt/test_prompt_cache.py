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

from devagent.agent.events import StatusUpdate, ToolKind, TurnEnd, UserPrompt
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


def breakpoints(body: dict[str, Any]) -> list[str]:
    """Where a request's cache_control marks are, as `tools[i]`, `system[i]`, `messages[i][j]`."""
    out = [f"tools[{i}]" for i, t in enumerate(body.get("tools") or []) if "cache_control" in t]
    system = body.get("system")
    if isinstance(system, list):
        out += [f"system[{i}]" for i, b in enumerate(system) if "cache_control" in b]
    for i, m in enumerate(body["messages"]):
        if isinstance(m["content"], list):
            out += [f"messages[{i}][{j}]" for j, b in enumerate(m["content"]) if "cache_control" in b]
    return out


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
    assert (
        f"date: {s.state.started_on} (the day this session started)" in fake.requests[-1]["system"][0]["text"]
    )


async def test_issue24_anthropic_requests_carry_breakpoints_and_read_the_cache(
    core_factory: Any, workspace: Path
) -> None:
    """G1 (the Anthropic provider). Three turns of two requests each through pydantic-ai's
    Anthropic model: every request marks
    the last tool, the system prompt and the last block of the conversation (three of the API's
    four breakpoints); from the second request on the whole previous prompt is read from the cache
    and only the new messages are written, which the session's usage reports."""
    fake = FakeAnthropic(reads_the_readme)
    async with fake as base_url:
        core = await core_factory("anthropic:claude-fake", model_base_url=base_url, model_api_key="k")
        s = await core.create_session([workspace], approval_mode="yolo")
        events = []
        for prompt in ("What does the README say?", "Again, please.", "Once more."):
            events += [e async for e in s.advance(UserPrompt(prompt))]
    assert len(fake.requests) == 6
    for body in fake.requests:
        last = len(body["messages"]) - 1
        n_tools = len(body["tools"])
        assert breakpoints(body) == [
            f"tools[{n_tools - 1}]",
            "system[0]",
            f"messages[{last}][{len(body['messages'][last]['content']) - 1}]",
        ]
    usages = fake.usages
    assert usages[0]["cache_read_input_tokens"] == 0 and usages[0]["cache_creation_input_tokens"] > 1024
    for before, now, body in zip(usages[:-1], usages[1:], fake.requests[1:], strict=True):
        whole_before = sum(
            before[k] for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        )
        assert now["cache_read_input_tokens"] == whole_before  # everything the last request sent
        assert now["input_tokens"] == 0  # the rest is up to the last breakpoint: written
        assert now["cache_creation_input_tokens"] == sum(p.tokens for p in prompt_pieces(body)) - whole_before
    steps = [e.usage for e in events if isinstance(e, StatusUpdate)]
    assert [u.cache_read_tokens for u in steps] == [u["cache_read_input_tokens"] for u in usages]
    assert [u.cache_write_tokens for u in steps] == [u["cache_creation_input_tokens"] for u in usages]
    assert all(
        u.input_tokens == f["input_tokens"] + f["cache_read_input_tokens"] + f["cache_creation_input_tokens"]
        for u, f in zip(steps, usages, strict=True)
    )
    ends = [e for e in events if isinstance(e, TurnEnd)]
    assert ends[-1].usage.cache_read_tokens == sum(u["cache_read_input_tokens"] for u in usages[4:])
    assert s.state.usage.cache_read_tokens == sum(u["cache_read_input_tokens"] for u in usages)
    assert s.state.usage.cache_read_tokens > 0.8 * s.state.usage.input_tokens


async def test_issue24_prompt_cache_off_marks_nothing(core_factory: Any, workspace: Path) -> None:
    fake = FakeAnthropic(reads_the_readme)
    async with fake as base_url:
        core = await core_factory(
            "anthropic:claude-fake", model_base_url=base_url, model_api_key="k", prompt_cache=False
        )
        s = await core.create_session([workspace], approval_mode="yolo")
        [e async for e in s.advance(UserPrompt("What does the README say?"))]
    assert [breakpoints(b) for b in fake.requests] == [[], []]
    assert "cache_control" not in json.dumps(fake.requests)
    assert s.state.usage.cache_read_tokens == s.state.usage.cache_write_tokens == 0


def test_the_setting_reads_from_the_environment() -> None:
    from devagent.config import load_config

    assert load_config(environ={}).prompt_cache is True
    assert load_config(environ={"DEVAGENT_PROMPT_CACHE": "off"}).prompt_cache is False


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


async def test_issue39_item7_a_sessions_kept_prompt_and_tools_follow_what_they_are_made_of(
    core_factory: Any, workspace: Path
) -> None:
    """The session keeps its prompt and tool definitions between requests; whatever they are made
    of changing (the approval mode, the client's tools, a tool's own description) rebuilds them,
    and the prefix size counted for compaction follows."""
    from devagent.agent.prompt import instructions as prompt

    core = await core_factory("demo")
    session = await core.create_session([workspace])
    first = await session.request_parameters()
    again = await session.request_parameters()
    assert again.instruction_parts[0].content == first.instruction_parts[0].content
    assert [t.name for t in again.function_tools] == [t.name for t in first.function_tools]
    size = prompt.prefix_chars(first)
    assert prompt.prefix_chars(again) == size

    before_mode = first.instruction_parts[0].content
    session.state.approval_mode = "plan" if session.state.approval_mode != "plan" else "yolo"
    changed = await session.request_parameters()
    assert changed.instruction_parts[0].content != before_mode

    session.state.client_tools = [ClientTool("zz_client", "a tool of the client", {"type": "object"})]
    with_client = await session.request_parameters()
    assert with_client.function_tools[-1].name == "zz_client"
    assert prompt.prefix_chars(with_client) > prompt.prefix_chars(changed)

    tool = next(t for t in session.tools().values() if t.name == with_client.function_tools[0].name)
    tool.description = tool.description + " Now said otherwise."
    redescribed = await session.request_parameters()
    assert redescribed.function_tools[0].description.endswith(" Now said otherwise.")
    assert prompt.prefix_chars(redescribed) == prompt.prefix_chars(with_client) + len(" Now said otherwise.")
