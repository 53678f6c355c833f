"""Issue 31 item 5 in wire mode: the client's cap on a turn's cost (`max_cost_usd` in
`initialize`) stops the turn before the model request that would begin past it, the prompt's
answer carrying the reason; `/stats` shows the cost, the model's price, the cap and the local
user's spend today; a bad cap is refused at `initialize`.

The scripted model is priced by the operator: a request of 1,000 input and 100 output tokens
costs $0.02 ($10 and $100 per million)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.wire.conftest import WireProc, events, is_response, text_of

PRICES = {"scripted": {"input": 10, "output": 100}}
STEP = {
    "items": [
        {"tool_call": {"name": "list_directory", "args": {"path": "."}}},
        {"usage": {"input_tokens": 1000, "output_tokens": 100}},
    ]
}


def test_issue31_item5_wire_a_turn_stops_before_the_request_past_its_cap(
    start_wire: Callable[..., WireProc], wire_env: dict[str, Any]
) -> None:
    wire_env["DEVAGENT_PRICES"] = json.dumps(PRICES)
    w = start_wire([STEP] * 10 + [{"items": [{"text": "done"}]}])
    w.call("init", "initialize", {"protocol_version": "1.7", "max_cost_usd": 0.05})
    assert "result" in w.until_response("init")
    w.prompt("list it again and again", "p1")
    msgs, resp = w.until(lambda m: is_response(m, "p1"), timeout=60)
    assert "error" in resp, resp
    message = resp["error"]["message"]
    assert "Stopped by the task's cost cap: this task has cost $0.0600, its cap is $0.0500" in message, (
        message
    )
    assert len(events(msgs, "StepBegin")) == 3  # the fourth request was never made
    w.prompt("/stats", "p2")
    msgs, resp = w.until(lambda m: is_response(m, "p2"))
    stats = text_of(msgs)
    assert "Cost: $0.0600; the last task: $0.0600" in stats, stats
    assert (
        "$10 input, $10 cached input, $10 cache writes, $100 output per million tokens (the settings file)"
        in stats
    )
    assert "Cap per task: $0.0500" in stats
    assert "Today (UTC), the local user has spent $0.0600" in stats
    w.call("bad", "initialize", {"protocol_version": "1.7", "max_cost_usd": -1})
    refused = w.until_response("bad")
    assert "max_cost_usd must be a number of US dollars" in json.dumps(refused["error"]), refused
    w.close()
