"""A2A server cold start: process spawn to the agent card answered, and to the first JSON-RPC
request answered by the full app (core, store and SDK loaded), median of N runs.

    .venv/bin/python bench/serve_cold_start.py [--runs 10]

Then a first turn on the demo model right away: when its first event arrives and when it ends.
The guide's aim is 0.6 s to serve. Each run uses a fresh data directory (a new SQLite file).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

TOKEN = "bench"


def _get(url: str, body: bytes | None = None) -> int:
    req = urllib.request.Request(url, data=body, headers={"Authorization": f"Bearer {TOKEN}"})
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def one_run(devagent: str) -> tuple[float, float, float, float]:
    with tempfile.TemporaryDirectory() as d:
        ws = Path(d) / "ws"
        ws.mkdir()
        env = {**os.environ, "DEVAGENT_DATA_DIR": str(Path(d) / "data")}
        t0 = time.perf_counter()
        p = subprocess.Popen(
            [devagent, "serve", "--port", "0", "--token", TOKEN, "--workspace-root", str(ws)],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            env=env,
            text=True,
        )
        try:
            assert p.stderr is not None
            url = ""
            while not url:
                line = p.stderr.readline()
                if not line:
                    raise RuntimeError("the server exited")
                m = re.search(r"listening on (http://\S+?)/?$", line.strip())
                if m:
                    url = m.group(1)
            while _get(url + "/.well-known/agent-card.json") != 200:
                time.sleep(0.002)
            card = time.perf_counter() - t0
            body = json.dumps(
                {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "no-such-task"}}
            ).encode()
            while _get(url + "/", body) != 200:  # 503 while the app loads; 200 with a JSON-RPC error after
                time.sleep(0.002)
            full = time.perf_counter() - t0
            turn = _first_turn(url)
            first_event = time.perf_counter() - t0 - turn
            done = time.perf_counter() - t0
        finally:
            p.terminate()
            p.wait()
    return card, full, first_event, done


def _first_turn(url: str) -> float:
    """Streams a demo-model turn; returns the seconds from its first event to its end."""
    msg = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hello"}]}
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 2, "method": "SendStreamingMessage", "params": {"message": msg}}
    )
    req = urllib.request.Request(
        url + "/",
        data=body.encode(),
        headers={
            "Authorization": f"Bearer {TOKEN}",
            "A2A-Version": "1.0",
            "Content-Type": "application/json",
        },
    )
    first = 0.0
    with urllib.request.urlopen(req, timeout=30) as r:
        for line in r:
            if line.startswith(b"data:") and not first:
                first = time.perf_counter()
    return time.perf_counter() - first


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    devagent = str(Path(sys.executable).parent / "devagent")
    one_run(devagent)  # warm the file cache
    runs = [one_run(devagent) for _ in range(args.runs)]
    cards = [r[0] * 1000 for r in runs]
    fulls = [r[1] * 1000 for r in runs]
    firsts = [r[2] * 1000 for r in runs]
    dones = [r[3] * 1000 for r in runs]
    print(
        f"devagent serve cold start, {args.runs} runs: agent card answered median "
        f"{statistics.median(cards):.0f} ms (min {min(cards):.0f}); first JSON-RPC answered median "
        f"{statistics.median(fulls):.0f} ms (min {min(fulls):.0f}); aim 600 ms"
    )
    print(
        "first turn (demo model) right after start: first event at median "
        f"{statistics.median(firsts):.0f} ms, "
        f"turn done at median {statistics.median(dones):.0f} ms after spawn"
    )


if __name__ == "__main__":
    main()
