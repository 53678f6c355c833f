"""How much of a conversation's input Anthropic's prompt cache serves (issue 24 item 2).

    .venv/bin/python bench/prompt_cache.py [--turns 20] [--every 5]

One conversation of N turns through pydantic-ai's real Anthropic path against the fake Messages
API of tests/fakes/anthropic_server.py, which caches prompt prefixes at the requests' breakpoints
as the real API does (reads, writes, the 20-block lookback, the 1024-token minimum) and counts
about four characters a token. Each turn asks for a 6 kB file (a tool call, its result, a short
answer): two requests. Run twice: with devagent's breakpoints (the default) and with
`prompt_cache` off. Printed per run: for the requests of every `--every`th turn, the input tokens
and the share read from the cache; over the whole conversation, the share of input tokens read,
the share written, and what the input costs in units of uncached input tokens at Anthropic's
prices for the 5-minute cache (a read 0.1x, a write 1.25x).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FILE = "".join(f"def handler_{i:03d}(event):  # a line of a mid-sized source file\n" for i in range(100))
READ, WRITE = 0.1, 1.25  # Anthropic's prices of cache reads and 5-minute writes, per input token


async def run(turns: int, cache: bool) -> list[dict[str, int]]:
    sys.path.insert(0, str(ROOT))
    from bench.long_session import converse
    from tests.fakes.anthropic_server import Block, FakeAnthropic

    def script(body: dict[str, Any]) -> tuple[list[Block], tuple[int | None, int]]:
        last = body["messages"][-1]["content"]
        if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
            return [("text", "Read it: a hundred handlers.")], (None, 12)
        return [("tool_use", f"toolu_{len(body['messages'])}", "read_file", {"path": "app.py"})], (None, 30)

    fake = FakeAnthropic(script)
    async with fake as base_url:
        await converse(
            base_url,
            "anthropic:claude-sonnet-4-5",
            ("app.py", FILE),
            turns,
            "what is in app.py?",
            prompt_cache=cache,
        )
    return fake.usages


def whole(u: dict[str, int]) -> int:
    return u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]


def report(name: str, usages: list[dict[str, int]], every: int) -> float:
    print(f"{name}:")
    for turn in range(0, len(usages) // 2, every):
        cells = [
            f"{whole(u):,} tok, {u['cache_read_input_tokens'] / whole(u):.1%} read"
            for u in usages[2 * turn : 2 * turn + 2]
        ]
        print(f"  turn {turn + 1:3}: " + "; ".join(cells))
    total = sum(whole(u) for u in usages)
    read = sum(u["cache_read_input_tokens"] for u in usages)
    written = sum(u["cache_creation_input_tokens"] for u in usages)
    cost = total - read - written + READ * read + WRITE * written
    print(
        f"  all {len(usages)} requests: {total:,} input tokens, {read / total:.1%} read from the cache, "
        f"{written / total:.1%} written; input cost {cost:,.0f} ({cost / total:.3f}x of uncached)"
    )
    return cost


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--every", type=int, default=5)
    a = ap.parse_args()
    cached = asyncio.run(run(a.turns, True))
    plain = asyncio.run(run(a.turns, False))
    print(f"{a.turns} turns, each reading a {len(FILE):,}-byte file (two requests a turn)")
    with_cache = report("with breakpoints (default)", cached, a.every)
    without = report("prompt_cache off", plain, a.every)
    print(f"input cost with the cache / without: {with_cache / without:.3f}x")


if __name__ == "__main__":
    main()
