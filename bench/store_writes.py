"""What each write of a turn costs: the store's operations one after another on a fresh SQLite
file and (with --pg) a fresh PostgreSQL database, mean wall and CPU milliseconds per operation.
docs/architecture.md ("What a turn writes") lists which of them a chat and a tool turn make.

    .venv/bin/python bench/store_writes.py [--n 300] [--pg postgresql://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from devagent.store import checkpoints as rows
from devagent.store.db import Store

STATE: dict[str, Any] = {
    "workspace_roots": ["/w"],
    "approval_mode": "yolo",
    "pending": [{"id": "call_1", "name": "write_file", "args": {"path": "a.txt", "content": "x\n"}}],
    "usage": {"input_tokens": 90, "output_tokens": 14},
    "extra": {"a2a": {"context_id": "c", "owner": "bench"}},
}
MESSAGE = '{"parts":[{"content":"write a.txt","part_kind":"user-prompt"}],"kind":"request"}'


async def measure(url: str, n: int) -> list[tuple[str, float, float]]:
    store = await Store.open(url)
    ids = [str(uuid.uuid4()) for _ in range(n)]
    out: list[tuple[str, float, float]] = []

    async def timed(label: str, op: Any) -> None:
        t0, c0 = time.perf_counter(), time.process_time()
        for i, sid in enumerate(ids):
            await op(i, sid)
        out.append((label, (time.perf_counter() - t0) / n * 1000, (time.process_time() - c0) / n * 1000))

    try:
        await timed("create the session", lambda i, sid: store.create_session(sid, STATE))
        await timed("claim the lease", lambda i, sid: store.claim(sid, store.owner, 10, 0))
        await timed(
            "save state + append a message",
            lambda i, sid: store.save(sid, STATE, expected=0, owner=store.owner, append=[(0, MESSAGE)]),
        )
        await timed("save state only", lambda i, sid: store.save(sid, STATE, expected=1, owner=store.owner))
        await timed("checkpoint: add", lambda i, sid: rows.add(store, sid, time.time(), MESSAGE))
        await timed("checkpoint: outcome", lambda i, sid: rows.replace_data(store, sid, 1, MESSAGE))
        await timed(
            "save state, release the lease",
            lambda i, sid: store.save(sid, STATE, expected=2, owner=store.owner, release=True),
        )
        # What a turn does now (issue 14): the lease with the insert, checkpoints in the saves.
        leased = [str(uuid.uuid4()) for _ in range(n)]
        await timed(
            "create the session, leased", lambda i, sid: store.create_session(leased[i], STATE, lease_ttl=10)
        )
        await rows.ensure_table(store)

        def with_checkpoint(sid: str) -> Any:
            async def write(conn: Any) -> None:
                await rows.add_in(conn, sid, time.time(), MESSAGE)

            return store.save(sid, STATE, expected=3, owner=store.owner, append=[(1, MESSAGE)], also=[write])

        def with_outcome(sid: str) -> Any:
            async def write(conn: Any) -> None:
                await rows.replace_data_in(conn, sid, 2, MESSAGE)

            return store.save(sid, STATE, expected=4, owner=store.owner, append=[(2, MESSAGE)], also=[write])

        await timed("save + message + checkpoint add", lambda i, sid: with_checkpoint(sid))
        await timed("save + message + checkpoint outcome", lambda i, sid: with_outcome(sid))
    finally:
        await store.close()
    return out


async def main(args: argparse.Namespace) -> None:
    results: dict[str, list[tuple[str, float, float]]] = {}
    with tempfile.TemporaryDirectory() as d:
        results["SQLite (WAL, synchronous=NORMAL)"] = await measure(f"sqlite:///{d}/bench.db", args.n)
    if args.pg:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from provider_floor import create_pg, drop_pg

        name, url = await create_pg(args.pg)
        try:
            results["PostgreSQL"] = await measure(url, args.n)
        finally:
            await drop_pg(args.pg, name)
    for label, figures in results.items():
        print(f"{label}: mean per operation over {args.n}")
        for op, wall, cpu in figures:
            print(f"  {op:34}{wall:8.2f} ms wall{cpu:8.2f} ms CPU")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--pg", default="", help="postgresql://... (a fresh database on it)")
    asyncio.run(main(ap.parse_args()))
