"""Issue 28 item 5 on the MCP door: a turn refused by the server's budget comes back to the host
as a tool error carrying devagent's reason, not the SDK's generic "Error executing tool"."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp import Client, StdioServerParameters

from tests.conftest import Script


async def test_issue28_item5_mcp_budget_refusal_carries_the_reason(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    usage = {"usage": {"input_tokens": 120, "output_tokens": 30}}
    model = script([[{"text": "one"}, usage], [{"text": "two"}, usage]])
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVAGENT_")}
    env["DEVAGENT_BUDGET_TOKENS_PER_DAY"] = "100"
    args = ["-m", "devagent", "mcp", "--work-dir", str(workspace), "--model", model, "--db", sqlite_url]
    async with Client(StdioServerParameters(command=sys.executable, args=args, env=env)) as client:
        first = await client.call_tool("devagent_start", {"prompt": "first"})
        assert not first.is_error and first.structured_content["status"] == "completed", first
        session = first.structured_content["session_id"]
        for tool, arguments in (
            ("devagent_start", {"prompt": "second"}),
            ("devagent_continue", {"session_id": session, "prompt": "again"}),
        ):
            refused = await client.call_tool(tool, arguments)
            text = refused.content[0].text
            assert refused.is_error and "refused by the server's budget" in text, (tool, refused)
            assert "150 of its 100 tokens" in text, text
