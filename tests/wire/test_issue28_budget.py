"""Issue 28 item 5 in wire mode: the local user's daily tokens stop a running turn before the
model request that would begin past them; the prompt's answer carries the reason."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.wire.conftest import WireProc, events, is_response


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
