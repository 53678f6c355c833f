"""Time per turn as one A2A task grows: an extension client continuing the same taskId for N turns,
against a new task per turn in one context (same conversation, so the same growing transcript).

The app runs in this process (tests/a2a/helpers.py `running_server`) with a scripted model whose
every step is a short text answer, on a fresh SQLite database. Prints the mean milliseconds per
turn over windows of turns (1-10, 45-55, 95-105, 190-200 for 200 turns) for both ways, and the
database size at the end. No assertions: the figures are for reading.

    .venv/bin/python bench/task_growth.py [--turns 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
from provider_floor import windows
from tests.a2a.helpers import auth, results, rpc, running_server, stream, v03_message


async def one_way(turns: int, same_task: bool, root: Path) -> tuple[list[float], int]:
    root.mkdir()
    script = root / "script.json"
    script.write_text(json.dumps([{"items": [{"text": f"Answer number {i}."}]} for i in range(turns + 5)]))
    workspace = root / "ws"
    workspace.mkdir()
    db = root / "devagent.db"
    times: list[float] = []
    async with running_server(f"scripted:{script}", f"sqlite:///{db}", workspace) as srv:
        async with httpx.AsyncClient(timeout=60) as c:
            task_id: str | None = None
            context_id: str | None = None
            for i in range(turns):
                msg = v03_message(f"turn {i}", task_id=task_id if same_task else None, context_id=context_id)
                t0 = time.perf_counter()
                evs: list[dict[str, Any]] = results(
                    await stream(c, srv.url, rpc("message/stream", {"message": msg}), auth())
                )
                times.append((time.perf_counter() - t0) * 1000)
                last = evs[-1]
                state = (last.get("status") or {}).get("state")
                if state != "completed":
                    raise SystemExit(f"turn {i}: ended {state}: {last}")
                if task_id is None:
                    task_id = last.get("taskId") or last.get("id")
                    context_id = last.get("contextId")
    size = sum(p.stat().st_size for p in root.glob("devagent.db*"))
    return times, size


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=200)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for name, same in (("same taskId", True), ("new task, one context", False)):
            times, size = await one_way(args.turns, same, Path(tmp) / name.replace(" ", "_").replace(",", ""))
            rows.append((name, times, size))
    wins = windows(args.turns)
    head = " | ".join(f"turns {a}-{b}" for a, b in wins)
    print(f"mean ms per turn ({args.turns} turns, SQLite, scripted text answers)")
    print(f"{'':24} | {head} | DB size")
    for name, times, size in rows:
        cells = " | ".join(f"{statistics.mean(times[a - 1 : b]):10.1f}" for a, b in wins)
        print(f"{name:24} | {cells} | {size / 1e6:.2f} MB")


if __name__ == "__main__":
    asyncio.run(main())
