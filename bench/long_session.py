"""What a long conversation sends to the model, with and without automatic compaction (issue 24).

    .venv/bin/python bench/long_session.py [--turns 200] [--window 8192]

One conversation of N turns through the real OpenAI provider path against the fake server of
tests/fakes/openai_server.py: each turn asks for a file larger than the window's quarter (a tool
call, its result, a short answer). Run twice in the same process: "unbounded" (a context window
so large that nothing is compacted: what every request carried before issue 24) and "compacted"
(the given window, compaction at 80% of it). Printed per run: the bytes and estimated tokens (four
characters a token) of the requests of turns 1, N/4, N/2, 3N/4 and N, the largest request, the
bytes sent over the whole conversation, and the summary requests made; then the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BIG = "".join(f"line {i:05d} of a large file, padded to matter\n" for i in range(400))


async def run(turns: int, window: int) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    from tests.fakes.openai_server import FakeOpenAI, FakeToolCall, Reply

    from devagent.agent.loop.compact import COMPACT_PROMPT

    sizes: list[int] = []  # bytes of each turn's second request (the one carrying the result)
    total = [0]
    summaries = [0]

    def script(body: dict[str, Any]) -> Reply:
        size = len(json.dumps(body))
        total[0] += size
        last = body["messages"][-1]
        content = last.get("content") or ""
        text = content if isinstance(content, str) else json.dumps(content)
        usage = {"prompt_tokens": size // 4, "completion_tokens": 20, "total_tokens": size // 4 + 20}
        if COMPACT_PROMPT[:40] in text:
            summaries[0] += 1
            return Reply(text=["Summary: the user asks for big.txt every turn."], usage=usage)
        if last["role"] == "user":
            call = FakeToolCall(f"c{len(sizes)}", "read_file", {"path": "big.txt"})
            return Reply(tool_calls=[call], usage=usage)
        sizes.append(size)
        return Reply(text=["Read it."], usage=usage)

    async with FakeOpenAI(script) as base_url:
        await converse(
            base_url, "openai-compatible:fake", ("big.txt", BIG), turns, "read big.txt", context_tokens=window
        )
    return {"sizes": sizes, "total": total[0], "summaries": summaries[0]}


async def converse(
    base_url: str, model: str, file: tuple[str, str], turns: int, prompt: str, **config: Any
) -> None:
    """One conversation of `turns` prompts (`turn N: PROMPT`) on a core whose model is served at
    `base_url`, in a fresh workspace holding `file` (name, text), approval yolo; `config`: more
    CoreConfig fields. Shared with bench/prompt_cache.py."""
    sys.path.insert(0, str(ROOT))
    from devagent.agent.core import AgentCore
    from devagent.agent.events import UserPrompt
    from devagent.agent.settings import CoreConfig

    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        (ws / file[0]).write_text(file[1])
        core = await AgentCore.open(
            CoreConfig(
                db_url=f"sqlite+aiosqlite:///{tmp}/bench.db",
                default_model=model,
                model_base_url=base_url,
                model_api_key="k",
                approval_mode="yolo",
                **config,
            )
        )
        try:
            s = await core.create_session([ws], approval_mode="yolo")
            for turn in range(turns):
                async for _ in s.advance(UserPrompt(f"turn {turn}: {prompt}")):
                    pass
        finally:
            await core.close()


def report(name: str, r: dict[str, Any], turns: int) -> None:
    sizes = r["sizes"]
    marks = sorted({0, turns // 4, turns // 2, 3 * turns // 4, turns - 1})
    cells = ", ".join(f"turn {m + 1}: {sizes[m]:,} B (~{sizes[m] // 4:,} tok)" for m in marks)
    print(f"{name:10} {cells}")
    print(
        f"{'':10} largest {max(sizes):,} B; all requests {r['total'] / 1e6:.1f} MB; "
        f"summary requests {r['summaries']}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--window", type=int, default=8192)
    a = ap.parse_args()
    # "Unbounded": a window far larger than the conversation gets (results are still cut to its
    # quarter, which at this size cuts nothing), so nothing is ever compacted.
    unbounded = asyncio.run(run(a.turns, 10_000_000))
    compacted = asyncio.run(run(a.turns, a.window))
    print(f"{a.turns} turns, each reading a {len(BIG):,}-byte file; window {a.window:,} tokens")
    report("unbounded", unbounded, a.turns)
    report("compacted", compacted, a.turns)
    u, c = unbounded["sizes"], compacted["sizes"]
    print(
        f"last turn's request: {c[-1] / u[-1]:.3f}x; largest request: {max(c) / max(u):.3f}x; "
        f"bytes over the conversation: {compacted['total'] / unbounded['total']:.3f}x; "
        f"compacted, largest request of the second half / of the first: "
        f"{max(c[len(c) // 2 :]) / max(c[: len(c) // 2]):.2f}x (flat: ~1)"
    )


if __name__ == "__main__":
    main()
