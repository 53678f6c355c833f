"""Issue 31 item 5 on the A2A door: a task's cost cap (AgentSettings `max_cost_usd`, within the
operator's `max_cost_usd_per_task`) stops a turn of a real `devagent serve` before the model
request that would begin past it, with the reason; a caller's `budget_usd_per_day` refuses its
next turn with the reason; the cost is in the task's metadata, in `/metrics` (per caller for the
metrics token only), in `devagent sessions` and in the spans.

The scripted model is priced by the operator: a request of 1,000 input and 100 output tokens
costs $0.02 ($10 and $100 per million)."""

from __future__ import annotations

import asyncio
import json
import math
import os
from pathlib import Path
from typing import Any

import httpx

from devagent.a2a.extension import EXTENSION_URI
from tests.a2a.helpers import auth, call, rpc, running_server, v03_message
from tests.a2a.procs import TOKEN, send_stream, serve_args, serving, status_text
from tests.a2a.test_budgets import devagent_sessions
from tests.a2a.test_traces import by_name, read_script, traced_server
from tests.conftest import Script
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.otlp_receiver import OtlpReceiver

PRICES = {"scripted": {"input": 10, "output": 100}}
USAGE = {"usage": {"input_tokens": 1000, "output_tokens": 100}}
LIST = {"tool_call": {"name": "list_directory", "args": {"path": "."}}}


async def test_issue31_item5_a2a_a_task_cap_stops_the_turn_before_the_request_past_it(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """The operator's ceiling is $0.05 a task. A caller asking $1.00 gets the ceiling: its turn
    makes three requests ($0.06, the third crossing it) and stops before the fourth. A caller
    asking $0.03 gets its own cap: two requests."""
    model = script([[LIST, USAGE]] * 20 + [[{"text": "done"}]])
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVAGENT_")}
    env.update(
        DEVAGENT_SANDBOX="off", DEVAGENT_PRICES=json.dumps(PRICES), DEVAGENT_MAX_COST_USD_PER_TASK="0.05"
    )
    with serving(
        serve_args(sqlite_url, workspace, model, "ask"), workspace.parent / "serve.log", env=env
    ) as srv:
        async with httpx.AsyncClient(timeout=120) as c:
            tasks = []
            for cap in (1.0, 0.03):
                settings = {"workspace_path": str(workspace), "max_cost_usd": cap}
                body = rpc(
                    "message/send", {"message": v03_message("list it again and again", settings=settings)}
                )
                got = await call(c, srv.url, body, auth(TOKEN))
                tasks.append(got["result"])
            bad = v03_message("hi", settings={"workspace_path": str(workspace), "max_cost_usd": "lots"})
            refused = await call(c, srv.url, rpc("message/send", {"message": bad}), auth(TOKEN))
    ceiling, own = tasks
    for task, spent, cap in ((ceiling, "$0.0600", "$0.0500"), (own, "$0.0400", "$0.0300")):
        assert task["status"]["state"] == "failed", task
        text = status_text(task)
        assert f"Stopped by the task's cost cap: this task has cost {spent}, its cap is {cap}" in text, text
    # the task's own cost, and the conversation's, in its metadata (the extension's dialect)
    md = ceiling["metadata"][EXTENSION_URI]
    assert md["task_usage"]["requests"] == 3 and math.isclose(md["task_usage"]["cost_usd"], 0.06)
    assert math.isclose(md["usage"]["cost_usd"], 0.06) and md["usage"]["unpriced_requests"] == 0
    assert (
        refused["error"]["code"] == -32602 and "max_cost_usd must be a number" in refused["error"]["message"]
    )
    from devagent.store.db import Store

    store = await Store.open(sqlite_url)
    try:
        (row,) = await store.usage()
    finally:
        await store.close()
    assert (row["requests"], row["cost_nanousd"]) == (5, 100_000_000), row  # 3 + 2 requests, $0.10


async def test_issue31_item5_a2a_a_daily_budget_in_dollars_refuses_with_the_reason(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """alice may spend $0.03 a day: her first turn costs $0.02, her second $0.02 more (it began
    under the budget), her third is refused with the reason; bob has $1.00 and goes on. The cost is
    in the task's metadata, /metrics and `devagent sessions`."""
    tokens = {"tok-alice": "alice", "tok-bob": "bob"}
    core_kw = {"prices": PRICES, "budget_usd_per_day": 0.03, "budgets": ("bob=0/0/1.00",)}
    a2a_kw = {"metrics_token": "tok-metrics"}
    model = script([[{"text": f"answer {i}"}, USAGE] for i in range(6)])
    async with running_server(
        model, sqlite_url, workspace, tokens=tokens, core_kw=core_kw, a2a_kw=a2a_kw
    ) as srv:
        async with httpx.AsyncClient(timeout=60) as c:

            async def send(token: str, text: str) -> dict[str, Any]:
                got = await call(
                    c, srv.url, rpc("message/send", {"message": v03_message(text)}), auth(token, ext=False)
                )
                task: dict[str, Any] = got["result"]
                return task

            first = await send("tok-alice", "one")
            assert first["status"]["state"] == "completed", first
            usage = first["metadata"]["devagent"]["usage"]  # a plain client's camelCase
            assert math.isclose(usage["costUsd"], 0.02) and usage["unpricedRequests"] == 0, usage
            assert math.isclose(first["metadata"]["devagent"]["taskUsage"]["costUsd"], 0.02)
            assert (await send("tok-alice", "two"))["status"]["state"] == "completed"
            refused = await send("tok-alice", "three")
            assert refused["status"]["state"] == "failed"
            text = status_text(refused)
            assert (
                "refused by the server's budget: caller 'alice' has spent $0.0400 of its $0.0300 for today"
                in text
            )
            assert (await send("tok-bob", "bob's"))["status"]["state"] == "completed"
            per_caller = (await c.get(srv.url + "metrics", headers=auth("tok-metrics", ext=False))).text
            totals = (await c.get(srv.url + "metrics", headers=auth("tok-bob", ext=False))).text
    assert 'devagent_cost_usd_total{identity="alice"} 0.04' in per_caller, per_caller
    assert 'devagent_cost_usd_total{identity="bob"} 0.02' in per_caller
    assert "devagent_cost_usd_total 0.06" in totals and 'identity="alice"' not in totals
    table = await asyncio.to_thread(devagent_sessions, sqlite_url)
    assert "cost" in table and "$0.0200" in table and "$0.0400" in table, table
    listed = json.loads(await asyncio.to_thread(devagent_sessions, sqlite_url, "--json"))
    spent = sorted(round(r["usage"]["cost_usd"], 6) for r in listed)
    assert spent == [0.0, 0.02, 0.02, 0.02], listed  # the refused conversation spent nothing


async def test_issue31_item5_spans_carry_the_cost(workspace: Path) -> None:
    """Each model request's span and the turn's span carry the cost at the operator's price of the
    model (`devagent.cost.usd`): 120 input tokens (100 cached) and 7 output, then 150 and 9."""
    prices = {"openai-compatible:fake-model": {"input": 1, "cached_input": 0.1, "output": 2}}
    fake = FakeOpenAI(read_script)
    with OtlpReceiver() as receiver:
        async with fake as base_url:
            with traced_server(workspace, base_url, receiver, DEVAGENT_PRICES=json.dumps(prices)) as srv:
                async with httpx.AsyncClient(timeout=60) as c:
                    message = v03_message("read it", settings={"workspace_path": str(workspace)})
                    reply = await send_stream(c, srv.url, message)
                assert reply.last_state == "completed", (reply.frames, srv.stderr())
                srv.stop()  # every span sent before it exits
        spans = receiver.spans
    (turn,) = by_name(spans, "invoke_agent devagent")
    first, second = sorted(
        by_name(spans, "chat fake-model"), key=lambda s: s.attributes["devagent.turn.step"]
    )
    assert math.isclose(first.attributes["devagent.cost.usd"], (20 * 1 + 100 * 0.1 + 7 * 2) / 1e6)
    assert math.isclose(second.attributes["devagent.cost.usd"], (150 * 1 + 9 * 2) / 1e6)
    assert math.isclose(turn.attributes["devagent.cost.usd"], 212 / 1e6)
    assert "devagent.cost.unknown" not in turn.attributes
