"""Cold start of `devagent acp` beside wire mode's: process spawn to `initialize` answered.

    .venv/bin/python bench/acp_cold_start.py [--runs 20]

Each run starts the server with a fresh SQLite database, writes `initialize` at once (what Zed
sends: protocol version 1, fs and terminal capabilities) and measures until the answer line is
read. The runs alternate between `devagent acp` and `devagent wire` (the same `initialize` timing
as bench/wire_cold_start.py), so both see the same machine load; the ratio is what to compare.
Also printed: how long importing the ACP SDK alone takes, which is why `initialize` is answered
before the SDK is loaded (src/devagent/acp/server.py). Aim: 0.2 s.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.cold_start import compare_two, spawn_to_answer, work_dir  # noqa: E402

ACP_INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": 1,
        "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True},
        "clientInfo": {"name": "bench", "version": "0"},
    },
}
WIRE_INIT = {
    "jsonrpc": "2.0",
    "id": "init-1",
    "method": "initialize",
    "params": {"protocol_version": "1.7", "client": {"name": "bench", "version": "0"}},
}


def one_run(kind: str, tmp: Path) -> float:
    work = work_dir(tmp)
    base = [sys.executable, "-m", "devagent"]
    if kind == "acp":
        return spawn_to_answer(kind, [*base, "acp", "--work-dir", str(work)], ACP_INIT, tmp)
    argv = [*base, "--wire", "--session", str(uuid.uuid4()), "--work-dir", str(work)]
    return spawn_to_answer(kind, argv, WIRE_INIT, tmp)


def main() -> int:
    sdk = ("acp", "importing the ACP SDK alone (not on the initialize path)")
    return compare_two(__doc__, ("acp", "wire"), one_run, sdk, "acp <= 200 ms")


if __name__ == "__main__":
    raise SystemExit(main())
