"""Budgets in wire mode: the local user's daily tokens, refused with a clear JSON-RPC error once
spent (issue 24 item 3), and stopping a running turn before the model request that would begin
past them, the prompt's answer carrying the reason (issue 28 item 5); the StatusUpdate carries the
context window (issue 24 item 1)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.wire.conftest import WireProc, events, is_response

USAGE = {"usage": {"input_tokens": 120, "output_tokens": 30}}


def test_issue24_wire_prompt_over_the_daily_budget_is_refused(
    start_wire: Callable[..., WireProc], wire_env: dict[str, Any]
) -> None:
    wire_env["DEVAGENT_BUDGET_TOKENS_PER_DAY"] = "100"
    wire_env["DEVAGENT_CONTEXT_TOKENS"] = "32000"
    w = start_wire([{"items": [{"text": "one"}, USAGE]}, {"items": [{"text": "two"}, USAGE]}])
    w.initialize()
    w.prompt("first", "p1")
    msgs, resp = w.until(lambda m: is_response(m, "p1"))
    assert resp["result"]["status"] == "finished"
    (status,) = events(msgs, "StatusUpdate")
    assert status["max_context_tokens"] == 32000 and status["context_usage"] == 120 / 32000
    w.prompt("second", "p2")
    _, refused = w.until(lambda m: is_response(m, "p2"))
    assert "error" in refused, refused
    message = refused["error"]["message"]
    assert "refused by the server's budget" in message and "150 of its 100 tokens" in message, message
    w.close()


def test_issue28_item5_wire_a_turn_stops_before_the_request_past_the_daily_tokens(
    start_wire: Callable[..., WireProc], wire_env: dict[str, Any]
) -> None:
    wire_env["DEVAGENT_BUDGET_TOKENS_PER_DAY"] = "3000"
    step = {
        "items": [
            {"tool_call": {"name": "list_directory", "args": {"path": "."}}},
            {"usage": {"input_tokens": 1000, "output_tokens": 100}},
        ]
    }
    w = start_wire([step] * 10 + [{"items": [{"text": "done"}]}])
    w.initialize()
    w.prompt("list it again and again", "p1")
    msgs, resp = w.until(lambda m: is_response(m, "p1"), timeout=60)
    assert "error" in resp, resp
    message = resp["error"]["message"]
    assert "server's budget" in message and "3,300 of its 3,000 tokens" in message, message
    assert len(events(msgs, "StepBegin")) == 3  # the fourth request was never made
    w.close()
