"""Cold start of `devagent mcp` beside `devagent acp`'s: process spawn to `initialize` answered.

    .venv/bin/python bench/mcp_cold_start.py [--runs 20]

Each run starts the server with a fresh SQLite database, writes MCP's `initialize` at once (what
a host sends: protocol 2025-11-25, elicitation capability) and measures until the answer line is
read. The runs alternate between `devagent mcp` and `devagent acp`, so both see the same machine
load; the ratio is what to compare. Also printed: how long importing the MCP SDK's server alone
takes (`devagent mcp` answers through the SDK, so it is on the path). Aim: within the budget of
wire and acp (0.3 s).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.cold_start import compare_two, spawn_to_answer, work_dir  # noqa: E402

MCP_INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "bench", "version": "0"},
    },
}
ACP_INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": 1,
        "clientCapabilities": {},
        "clientInfo": {"name": "bench", "version": "0"},
    },
}


def one_run(kind: str, tmp: Path) -> float:
    argv = [sys.executable, "-m", "devagent", kind, "--work-dir", str(work_dir(tmp))]
    return spawn_to_answer(kind, argv, MCP_INIT if kind == "mcp" else ACP_INIT, tmp)


def main() -> int:
    sdk = ("mcp.server.mcpserver", "importing the MCP SDK's server alone")
    return compare_two(__doc__, ("mcp", "acp"), one_run, sdk, "mcp <= 300 ms")


if __name__ == "__main__":
    raise SystemExit(main())
