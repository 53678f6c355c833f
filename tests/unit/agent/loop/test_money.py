"""Issue 31 item 5 in the core: the price table (the providers' published prices, the operator's
over them, the offline models free, an unknown model's cost unknown and never guessed), a known
conversation's cost over the real provider code (fake OpenAI and Anthropic servers, reached
through the provider's name at a custom base URL), the settings that carry prices and money
budgets, a model with no price under a cap, and subagents spending from their parent's task."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.events import ToolCallStatus, ToolCallUpdate, TurnEnd, Usage, UserPrompt
from devagent.agent.models.prices import Price, PriceTable, cost_text, parse_prices
from devagent.agent.settings import CoreConfig
from devagent.config import ConfigError, load_config
from tests.core_helpers import (
    ask_about_the_readme,
    assert_read_the_readme,
    call,
    collect,
    task_call,
    write_script,
)
from tests.fakes.anthropic_server import Block, FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.unit.agent.models.test_openai_path import script as readme_script

# the operator's price of the scripted model in these tests: a request of 1,000 input and 100
# output tokens costs $0.01 + $0.01
SCRIPTED_PRICES = {"scripted": {"input": 10, "output": 100}}
USAGE_ITEM = {"usage": {"input_tokens": 1000, "output_tokens": 100}}
STEP = [call("list_directory", {"path": "."}), USAGE_ITEM]


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def test_issue31_item5_built_in_prices_are_the_providers_published_ones() -> None:
    table = PriceTable()
    gpt = table.lookup("openai:gpt-4.1")
    assert gpt is not None and gpt.source == "built in"
    assert gpt.price == Price(input=2.0, cached_input=0.5, cache_write=2.0, output=8.0)
    # 800 uncached input, 200 cached, 100 output: $0.0016 + $0.0001 + $0.0008
    usage = Usage(input_tokens=1000, cache_read_tokens=200, output_tokens=100, requests=1)
    table.charge("openai:gpt-4.1", usage)
    assert close(usage.cost_usd, 0.0025) and usage.unpriced_requests == 0
    claude = table.lookup("anthropic:claude-sonnet-4-5")
    assert claude is not None and claude.price == Price(3.0, 0.3, 3.75, 15.0)
    # the alias names the same provider; a dated model name matches its model
    gemini = table.lookup("gemini:gemini-2.5-flash")
    assert gemini is not None and gemini.price.input == 0.3
    assert table.lookup("openai:gpt-4.1-2025-04-14") is not None
    assert cost_text(usage) == "$0.0025"


def test_issue31_item5_the_operators_prices_win_and_the_unknown_stays_unknown() -> None:
    table = PriceTable(
        parse_prices(
            {
                "openai:gpt-4.1": {"input": 1, "cached_input": 0.1, "cache_write": 1.25, "output": 4},
                "vllm": {"input": 0.2, "output": 0.4},  # every model of the provider
            }
        )
    )
    gpt = table.lookup("openai:gpt-4.1")
    assert gpt is not None and gpt.source == "the settings file"
    assert gpt.price == Price(1.0, 0.1, 1.25, 4.0)
    usage = Usage(
        input_tokens=1000, cache_read_tokens=200, cache_write_tokens=300, output_tokens=100, requests=1
    )
    table.charge("openai:gpt-4.1", usage)
    assert close(usage.cost_usd, (500 * 1 + 200 * 0.1 + 300 * 1.25 + 100 * 4) / 1e6)
    vllm = table.lookup("vllm:Qwen/Qwen3-8B")  # cached input and cache writes at the input price
    assert vllm is not None and vllm.price == Price(0.2, 0.2, 0.2, 0.4)
    # the offline models are free; a local server or an unknown model has no price
    assert table.lookup("demo") is not None and table.lookup("scripted:/tmp/s.json") is not None
    for spec in ("ollama:qwen3", "openai-compatible:my-model", "openai:no-such-model-xyz"):
        assert table.lookup(spec) is None, spec
    unknown = Usage(input_tokens=10, output_tokens=5, requests=1)
    table.charge("ollama:qwen3", unknown)
    assert (unknown.cost_usd, unknown.unpriced_requests) == (0.0, 1)
    assert cost_text(unknown) == "unknown (no price for the model)"
    usage.add(unknown)
    assert cost_text(usage).startswith("at least $0.0013 (1 request of a model with no price")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"openai:gpt-4.1": {"input": 1}}, "output must be given"),
        ({"openai:gpt-4.1": {"input": 1, "output": 2, "cached": 1}}, "unknown key 'cached'"),
        ({"openai:gpt-4.1": {"input": -1, "output": 2}}, "a number of 0 or more"),
        ({"nowhere:model": {"input": 1, "output": 2}}, "Unknown model provider"),
        ({"nowhere": {"input": 1, "output": 2}}, "not a model"),
        ({"openai:gpt-4.1": 3}, "expected a table"),
    ],
)
def test_issue31_item5_bad_prices_are_refused(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_prices(raw)


def test_issue31_item5_prices_and_money_budgets_in_the_settings(tmp_path: Path) -> None:
    toml = tmp_path / "config.toml"
    toml.write_text(
        '[devagent]\nmodel = "demo"\nbudget_usd_per_day = 2.5\nmax_cost_usd_per_task = 0.75\n'
        'budgets = ["ci=0/2/10", "bot=1000/1"]\n'
        '[prices."openai:gpt-4.1"]\ninput = 1.5\noutput = 6\ncached_input = 0.3\n'
    )
    config = load_config(environ={"DEVAGENT_CONFIG": str(toml)})
    assert config.prices == {"openai:gpt-4.1": {"input": 1.5, "output": 6.0, "cached_input": 0.3}}
    assert (config.budget_usd_per_day, config.max_cost_usd_per_task) == (2.5, 0.75)
    assert config.budget_for("ci") == (0, 2, 10.0)
    assert config.budget_for("bot") == (1000, 1, 2.5)  # no dollars of its own: everyone's
    assert config.budget_for("anyone") == (0, 0, 2.5)
    env = {"DEVAGENT_CONFIG": str(toml), "DEVAGENT_PRICES": '{"gemini": {"input": 0.1, "output": 0.2}}'}
    assert load_config(environ=env).prices == {"google": {"input": 0.1, "output": 0.2}}
    for text, message in (
        ('[prices."openai:gpt-4.1"]\ninput = "cheap"\noutput = 1\n', r"prices.*a number of 0 or more"),
        ('[devagent]\nmodel = "demo"\n[pricing.x]\ninput = 1\n', r"unknown table \[pricing\]"),
        ('budgets = ["ci=0/2/lots"]\n', r"NAME=TOKENS/TURNS/USD"),
        ("budget_usd_per_day = -1\n", r"budget_usd_per_day .* 0 \(no limit\) or a positive number"),
    ):
        toml.write_text(text)
        with pytest.raises(ConfigError, match=message):
            load_config(environ={"DEVAGENT_CONFIG": str(toml)})


async def test_issue31_item5_a_known_openai_conversation_at_a_custom_base_url(
    core_factory: Any, workspace: Path
) -> None:
    """openai:gpt-4.1 reached at a proxy's base URL is priced as OpenAI's gpt-4.1: the fake
    reports 40 + 70 input tokens (32 of them cached) and 12 + 8 output tokens."""
    fake = FakeOpenAI(readme_script, model="gpt-4.1")
    async with fake as base_url:
        events = await ask_about_the_readme(core_factory, "openai:gpt-4.1", base_url, workspace)
    end = assert_read_the_readme(events, "The user wants the README.", "The README says: Hello.")
    expected = ((110 - 32) * 2.0 + 32 * 0.5 + 20 * 8.0) / 1e6
    assert close(end.usage.cost_usd, expected) and end.usage.unpriced_requests == 0, end.usage


async def test_issue31_item5_a_known_anthropic_conversation_with_cache_writes(
    core_factory: Any, workspace: Path
) -> None:
    """Anthropic bills a prompt's cached part at a tenth and its cache writes a quarter above the
    input price: the fake caches the first request's prefix (a write) and reads it in the
    second; the session's cost is the sum at claude-sonnet-4-5's published prices."""

    def script(body: dict[str, Any]) -> tuple[list[Block], tuple[int | None, int]]:
        last = body["messages"][-1]
        if not any(b.get("type") == "tool_result" for b in last["content"] if isinstance(b, dict)):
            return [("text", "Reading it."), ("tool_use", "toolu_1", "read_file", {"path": "README.md"})], (
                None,
                20,
            )
        return [("text", "It says: Hello.")], (None, 7)

    fake = FakeAnthropic(script, min_cache_tokens=100)
    async with fake as base_url:
        core = await core_factory("anthropic:claude-sonnet-4-5", model_base_url=base_url, model_api_key="k")
        s = await core.create_session([workspace], approval_mode="ask")
        events = await collect(s.advance(UserPrompt("What does the README say?")))
    end = events[-1]
    assert isinstance(end, TurnEnd) and end.reason == "finished", events
    writes = sum(u["cache_creation_input_tokens"] for u in fake.usages)
    reads = sum(u["cache_read_input_tokens"] for u in fake.usages)
    assert writes > 0 and reads > 0, fake.usages  # the conversation wrote to the cache and read it
    expected = sum(
        u["input_tokens"] * 3.0
        + u["cache_creation_input_tokens"] * 3.75
        + u["cache_read_input_tokens"] * 0.3
        + u["output_tokens"] * 15.0
        for u in fake.usages
    )
    assert close(s.state.usage.cost_usd, expected / 1e6), (s.state.usage, fake.usages)


async def test_issue31_item5_a_model_with_no_price_under_a_cap_is_not_run(
    core_factory: Any, workspace: Path
) -> None:
    """A local server's model has no price: without a money limit it runs and its cost is said to
    be unknown; under a task cap it is stopped before its first request, with the reason."""
    fake = FakeOpenAI(lambda body: Reply(text=["hi"], usage={"prompt_tokens": 10, "completion_tokens": 2}))
    async with fake as base_url:
        free = await core_factory("openai-compatible:fake-model", model_base_url=base_url)
        s = await free.create_session([workspace])
        end = (await collect(s.advance(UserPrompt("hello"))))[-1]
        assert isinstance(end, TurnEnd) and end.reason == "finished"
        assert (end.usage.requests, end.usage.unpriced_requests) == (1, 1)
        assert cost_text(s.state.usage) == "unknown (no price for the model)"
        capped = await core_factory(
            "openai-compatible:fake-model", model_base_url=base_url, max_cost_usd_per_task=1.0
        )
        s = await capped.create_session([workspace])
        end = (await collect(s.advance(UserPrompt("hello"))))[-1]
    assert isinstance(end, TurnEnd) and end.reason == "error"
    assert end.error is not None and "price of model 'openai-compatible:fake-model' is unknown" in end.error
    assert '[prices."openai-compatible:fake-model"]' in end.error
    assert len(fake.requests) == 1  # the capped session made none


async def test_issue31_item5_subagents_spend_from_their_parents_task(
    core_factory: Any, tmp_path: Path, workspace: Path
) -> None:
    """The parent's task may cost $0.07; its first request costs $0.02 and starts two subagents
    in parallel, each of whose requests costs $0.02. Alone, each would make three requests (its own
    cap is the parent's remaining $0.05); together they stop once the parent's task, which they are
    charged to as they spend, reaches its cap: three requests, or four when both had one under
    way. The parent's turn then stops before its next request; the caller's day counts each request
    once."""
    model = write_script(
        tmp_path / "parent.json",
        [[task_call("one", "CHILD: look", "t1"), task_call("two", "CHILD: look", "t2"), USAGE_ITEM]],
        {"CHILD": [STEP] * 10},
    )
    core = await core_factory(model, prices=SCRIPTED_PRICES)
    parent = await core.create_session([workspace], max_cost_usd=0.07, identity="alice")
    events = await collect(parent.advance(UserPrompt("split the work")))
    end = events[-1]
    assert isinstance(end, TurnEnd) and end.reason == "error", events
    children = parent.state.subagent_usage.requests
    assert 3 <= children <= 4, parent.state.subagent_usage
    spent = 0.02 * (1 + children)
    assert end.error == (
        f"Stopped by the task's cost cap: this task has cost ${spent:.4f}, its cap is $0.0700 (max_cost_usd)."
    )
    assert close(parent.state.turn_usage.cost_usd, spent) and close(parent.state.usage.cost_usd, spent)
    assert close(parent.state.subagent_usage.cost_usd, 0.02 * children)
    failed = [e.call for e in events if isinstance(e, ToolCallUpdate) and e.call.id in ("t1", "t2")]
    assert {c.status for c in failed[-2:]} == {ToolCallStatus.FAILED}
    (day,) = await core.store.usage()
    assert (day["identity"], day["requests"], day["cost_nanousd"]) == (
        "alice",
        1 + children,
        round(spent * 1e9),
    )


def test_issue31_item5_a_cap_within_the_operators_ceiling() -> None:
    from devagent.agent.loop.spending import task_cap
    from devagent.agent.state import SessionState

    state = SessionState(workspace_roots=["/"], max_cost_usd=2.0)
    assert task_cap(CoreConfig(max_cost_usd_per_task=0.5), state) == 0.5  # never above the ceiling
    assert task_cap(CoreConfig(), state) == 2.0
    state.max_cost_usd = 0.25
    assert task_cap(CoreConfig(max_cost_usd_per_task=0.5), state) == 0.25
    state.max_cost_usd = 0.0
    assert task_cap(CoreConfig(), state) == 0.0
