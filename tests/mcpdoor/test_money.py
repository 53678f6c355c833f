"""Issue 31 item 5 on the MCP door: `devagent_start`'s `max_cost_usd` caps each task of the
session; the turn stops before the model request that would begin past it, and the host reads
the reason and the turn's cost in the result."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

from mcp import Client, StdioServerParameters

from tests.conftest import Script

STEP = [
    {"tool_call": {"name": "list_directory", "args": {"path": "."}}},
    {"usage": {"input_tokens": 1000, "output_tokens": 100}},
]


async def test_issue31_item5_mcp_a_task_cap_stops_the_turn_with_the_reason_and_its_cost(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    model = script([STEP] * 10 + [[{"text": "done"}]])
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVAGENT_")}
    env["DEVAGENT_PRICES"] = json.dumps({"scripted": {"input": 10, "output": 100}})  # $0.02 a request
    args = ["-m", "devagent", "mcp", "--work-dir", str(workspace), "--model", model, "--db", sqlite_url]
    async with Client(StdioServerParameters(command=sys.executable, args=args, env=env)) as client:
        got = await client.call_tool("devagent_start", {"prompt": "list it again", "max_cost_usd": 0.03})
        bad = await client.call_tool("devagent_start", {"prompt": "x", "max_cost_usd": -2})
    result = got.structured_content
    assert result is not None and result["status"] == "failed", got
    assert (
        "Stopped by the task's cost cap: this task has cost $0.0400, its cap is $0.0300" in result["answer"]
    )
    usage = result["usage"]
    assert (
        usage["requests"] == 2 and math.isclose(usage["cost_usd"], 0.04) and usage["unpriced_requests"] == 0
    )
    assert bad.is_error, bad
