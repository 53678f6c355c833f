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
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    env = dict(os.environ)
    env["DEVAGENT_DB"] = f"sqlite+aiosqlite:///{tmp / f'{uuid.uuid4().hex}.db'}"
    env["DEVAGENT_DATA_DIR"] = str(tmp / "data")
    base = [sys.executable, "-m", "devagent"]
    if kind == "acp":
        argv, init, rid = [*base, "acp", "--work-dir", str(work)], ACP_INIT, 0
    else:
        argv, init, rid = (
            [*base, "--wire", "--session", str(uuid.uuid4()), "--work-dir", str(work)],
            WIRE_INIT,
            "init-1",
        )
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
    if reply.get("id") != rid or "result" not in reply:
        raise SystemExit(f"{kind}: unexpected answer: {line!r}")
    return elapsed


def sdk_import() -> float:
    code = "import time; t = time.perf_counter(); import acp; print(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    times: dict[str, list[float]] = {"acp": [], "wire": []}
    with tempfile.TemporaryDirectory() as d:
        one_run("acp", Path(d))  # warm the OS file cache; not counted
        one_run("wire", Path(d))
        for _ in range(args.runs):
            for kind in ("acp", "wire"):
                times[kind].append(one_run(kind, Path(d)))
    imports = statistics.median(sdk_import() for _ in range(3))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"cold start (spawn -> initialize answered), {args.runs} runs each, interleaved:")
    for kind in ("acp", "wire"):
        lo, hi = min(times[kind]) * 1000, max(times[kind]) * 1000
        print(f"  {kind:4}  median {med[kind] * 1000:4.0f} ms  min {lo:4.0f} ms  max {hi:4.0f} ms")
    print(f"  acp / wire: {med['acp'] / med['wire']:.2f}   (aim: acp <= 200 ms)")
    print(f"  importing the ACP SDK alone (not on the initialize path): {imports * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
