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

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

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
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    env = dict(os.environ)
    env["DEVAGENT_DB"] = f"sqlite+aiosqlite:///{tmp / f'{uuid.uuid4().hex}.db'}"
    env["DEVAGENT_DATA_DIR"] = str(tmp / "data")
    argv = [sys.executable, "-m", "devagent", kind, "--work-dir", str(work)]
    init = MCP_INIT if kind == "mcp" else ACP_INIT
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write((json.dumps(init) + "\n").encode())
    proc.stdin.flush()
    line = proc.stdout.readline()
    elapsed = time.perf_counter() - t0
    proc.stdin.close()
    proc.wait(60)
    reply = json.loads(line)
    if reply.get("id") != 0 or "result" not in reply:
        raise SystemExit(f"{kind}: unexpected answer: {line!r}")
    return elapsed


def sdk_import() -> float:
    code = "import time; t = time.perf_counter(); import mcp.server.mcpserver; print(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    times: dict[str, list[float]] = {"mcp": [], "acp": []}
    with tempfile.TemporaryDirectory() as d:
        one_run("mcp", Path(d))  # warm the OS file cache; not counted
        one_run("acp", Path(d))
        for _ in range(args.runs):
            for kind in ("mcp", "acp"):
                times[kind].append(one_run(kind, Path(d)))
    imports = statistics.median(sdk_import() for _ in range(3))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"cold start (spawn -> initialize answered), {args.runs} runs each, interleaved:")
    for kind in ("mcp", "acp"):
        lo, hi = min(times[kind]) * 1000, max(times[kind]) * 1000
        print(f"  {kind:4}  median {med[kind] * 1000:4.0f} ms  min {lo:4.0f} ms  max {hi:4.0f} ms")
    print(f"  mcp / acp: {med['mcp'] / med['acp']:.2f}   (aim: mcp <= 300 ms)")
    print(f"  importing the MCP SDK's server alone: {imports * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
