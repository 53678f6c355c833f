"""Budgets (issue 24 item 3) in wire mode: the local user's daily tokens, refused with a clear
JSON-RPC error once spent; the StatusUpdate carries the context window (issue 24 item 1)."""

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
