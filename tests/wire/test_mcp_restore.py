"""B15 and G5 in wire mode: the operator's MCP servers (here from `DEVAGENT_MCP_SERVERS`) serve a
wire session, their calls ask for approval, and /mcp and /restore work, over a real subprocess."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from tests.mcp_servers import SERVER
from tests.wire.conftest import WireProc, events, is_response, text_of


def test_b15_g5_mcp_tool_and_restore_over_wire(
    start_wire: Callable[..., WireProc], wire_env: dict[str, str], work_dir: Path, tmp_path: Path
) -> None:
    server = tmp_path / "mcp_server.py"
    server.write_text(SERVER)
    wire_env["DEVAGENT_MCP_SERVERS"] = json.dumps(
        {"calc": {"command": sys.executable, "args": [str(server)]}}
    )
    steps = [
        {"items": [{"tool_call": {"id": "m1", "name": "calc__add", "args": {"a": 2, "b": 3}}}]},
        {"items": [{"tool_call": {"id": "m2", "name": "calc__add", "args": {"a": 5, "b": 5}}}]},
        {
            "items": [
                {"tool_call": {"id": "w1", "name": "write_file", "args": {"path": "a.txt", "content": "A"}}}
            ]
        },
        {"items": [{"text": "done"}]},
    ]
    w = start_wire(steps)
    init = w.initialize()
    names = {c["name"] for c in init["result"]["slash_commands"]}
    assert {"mcp", "restore"} <= names

    w.prompt("go")
    _, req = w.until_request("ApprovalRequest")
    p = req["params"]["payload"]
    assert p["tool_call_id"] == "m1" and p["action"] == "mcp:add"
    assert "server `calc`" in p["description"]
    w.approve(req, "approve_for_session")  # -> "always allow this tool"
    msgs, req = w.until_request("ApprovalRequest")  # m2 ran without asking; w1 asks
    results = {e["tool_call_id"]: e for e in events(msgs, "ToolResult")}
    assert results["m1"]["return_value"]["output"] == "5"
    assert results["m2"]["return_value"]["output"] == "10"
    assert req["params"]["payload"]["tool_call_id"] == "w1"
    w.approve(req, "approve")
    msgs, resp = w.until(lambda m: is_response(m, "p1"))
    assert resp["result"] == {"status": "finished"}
    assert (work_dir / "a.txt").read_text() == "A"

    w.prompt("/mcp", "p2")
    msgs, _ = w.until(lambda m: is_response(m, "p2"))
    assert "calc (stdio, from server config): ready" in text_of(msgs)
    assert "calc__add [always allowed]" in text_of(msgs)

    w.prompt("/restore 1", "p3")
    msgs, _ = w.until(lambda m: is_response(m, "p3"))
    assert "Restored checkpoint 1 (Write a.txt): a.txt." in text_of(msgs)
    assert not (work_dir / "a.txt").exists()
    w.close()
