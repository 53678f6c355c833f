"""A fake Anthropic Messages API (streaming), so tests run pydantic-ai's real Anthropic code path.

    fake = FakeAnthropic(script)
    async with fake as base_url:     # "http://127.0.0.1:PORT"; the SDK posts to {base_url}/v1/messages
        ...
    fake.requests                    # decoded request bodies
    fake.usages                      # the usage reported for each request, in order

`script(body)` returns a list of content blocks to stream, each `("thinking", text, signature)`,
`("text", text)` or `("tool_use", id, name, input_dict)`, and the usage `(input, output)`; an
input of None lets the server count the request's tokens itself (about four characters a token).

Prompt caching as the real API does it (docs: "Prompt caching"), so that tests and benchmarks see
what a request's breakpoints buy. The prompt is the sequence tools, system blocks, then each
message's content blocks; a block with `cache_control` is a breakpoint (a top-level
`cache_control` puts one on the last block of the last message). For each breakpoint the server
looks for the longest prefix it has cached, ending at the breakpoint or at one of the
`LOOKBACK - 1` blocks before it; those tokens are read from the cache. The prefix up to the last
breakpoint is then written (`cache_creation_input_tokens`: its tokens past the read), and every
breakpoint's prefix is kept for its TTL (5 minutes, or 1 hour with `"ttl": "1h"`), refreshed
when read. Prefixes shorter than `min_cache_tokens` are neither written nor read; more than four
breakpoints are refused with a 400, as the API does. A prefix is keyed by the model and the
canonical JSON of its blocks without their `cache_control`. `input_tokens` is what is left.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes.local_server import ScriptedServer

Block = tuple[Any, ...]
Script = Callable[[dict[str, Any]], tuple[list[Block], tuple[int | None, int]]]

MAX_BREAKPOINTS = 4
LOOKBACK = 20  # blocks a breakpoint looks back for an earlier cache entry
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


def _sse(kind: str, data: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n"


def _halves(text: str) -> list[str]:
    mid = max(1, len(text) // 2)
    return [text[:mid], text[mid:]] if len(text) > 1 else [text]


def tokens_of(value: Any) -> int:
    """The fake's token count of a JSON value: its canonical JSON's length over four, rounded up."""
    return -(-len(json.dumps(value, sort_keys=True, separators=(",", ":"))) // 4)


@dataclass(slots=True)
class _Piece:
    """One block of the prompt in cache order, as the cache sees it."""

    key: dict[str, Any]  # what identifies it (its JSON without cache_control, where it is)
    tokens: int
    ttl: str | None  # its breakpoint's TTL, None if it is none


def _without_cc(block: Any) -> Any:
    if isinstance(block, dict):
        return {k: v for k, v in block.items() if k != "cache_control"}
    return block


def _ttl(block: Any) -> str | None:
    cc = block.get("cache_control") if isinstance(block, dict) else None
    return str(cc.get("ttl") or "5m") if isinstance(cc, dict) else None


def prompt_pieces(body: dict[str, Any]) -> list[_Piece]:
    """The request's prompt as blocks in the order the cache reads them: tools, system, messages."""
    pieces: list[_Piece] = []

    def add(where: dict[str, Any], block: Any) -> None:
        key = {**where, "block": _without_cc(block)}
        pieces.append(_Piece(key, tokens_of(key), _ttl(block)))

    for tool in body.get("tools") or []:
        add({"in": "tools"}, tool)
    system = body.get("system")
    if isinstance(system, str) and system:
        add({"in": "system"}, {"type": "text", "text": system})
    elif isinstance(system, list):
        for block in system:
            add({"in": "system"}, block)
    for i, message in enumerate(body.get("messages") or []):
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        for block in blocks:
            add({"in": "messages", "n": i, "role": message.get("role")}, block)
    auto = body.get("cache_control")
    if isinstance(auto, dict) and pieces and pieces[-1].key["in"] == "messages" and pieces[-1].ttl is None:
        pieces[-1].ttl = str(auto.get("ttl") or "5m")
    return pieces


class PromptCache:
    """The server's cache of prompt prefixes (see the module's docstring)."""

    def __init__(self, min_tokens: int = 1024, clock: Callable[[], float] = time.monotonic) -> None:
        self.min_tokens = min_tokens
        self.clock = clock
        self.entries: dict[str, float] = {}  # prefix hash -> when it expires

    def account(self, model: str, pieces: list[_Piece]) -> tuple[int, int, int]:
        """(uncached input, cache creation, cache read) tokens of a request; remembers its prefixes."""
        now = self.clock()
        hashes: list[str] = []
        sums: list[int] = []
        h = hashlib.sha256(model.encode())
        total = 0
        for p in pieces:
            h.update(json.dumps(p.key, sort_keys=True, separators=(",", ":")).encode())
            hashes.append(h.copy().hexdigest())
            total += p.tokens
            sums.append(total)
        points = [i for i, p in enumerate(pieces) if p.ttl is not None]

        def live(i: int) -> bool:
            return self.entries.get(hashes[i], 0.0) > now

        hit = -1
        for b in points:
            for i in range(b, max(-1, b - LOOKBACK), -1):
                if sums[i] >= self.min_tokens and live(i):
                    hit = max(hit, i)
                    break
        read = sums[hit] if hit >= 0 else 0
        if hit >= 0:
            ttl = next((pieces[b].ttl for b in points if b >= hit), "5m") or "5m"
            self.entries[hashes[hit]] = now + TTL_SECONDS.get(ttl, 300.0)
        written = [b for b in points if sums[b] >= self.min_tokens]
        for b in written:
            self.entries[hashes[b]] = max(
                self.entries.get(hashes[b], 0.0), now + TTL_SECONDS.get(pieces[b].ttl or "5m", 300.0)
            )
        creation = sums[written[-1]] - read if written and written[-1] > hit else 0
        return total - read - creation, creation, read


class FakeAnthropic(ScriptedServer[Script]):
    def __init__(self, script: Script, *, min_cache_tokens: int = 1024) -> None:
        super().__init__(script)
        self.cache = PromptCache(min_cache_tokens)
        self.usages: list[dict[str, int]] = []

    def _frames(self, blocks: list[Block], usage: dict[str, int], output_tokens: int) -> list[str]:
        msg = {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": "claude-fake",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {**usage, "output_tokens": 1},
        }
        out = [_sse("message_start", {"type": "message_start", "message": msg})]
        stop = "end_turn"
        for i, b in enumerate(blocks):
            if b[0] == "thinking":
                start = {"type": "thinking", "thinking": "", "signature": ""}
                deltas = [{"type": "thinking_delta", "thinking": t} for t in _halves(b[1])]
                deltas.append({"type": "signature_delta", "signature": b[2]})
            elif b[0] == "text":
                start = {"type": "text", "text": ""}
                deltas = [{"type": "text_delta", "text": t} for t in _halves(b[1])]
            else:
                stop = "tool_use"
                start = {"type": "tool_use", "id": b[1], "name": b[2], "input": {}}
                deltas = [{"type": "input_json_delta", "partial_json": t} for t in _halves(json.dumps(b[3]))]
            out.append(
                _sse(
                    "content_block_start", {"type": "content_block_start", "index": i, "content_block": start}
                )
            )
            for d in deltas:
                out.append(
                    _sse("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d})
                )
            out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": i}))
        out.append(
            _sse(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": output_tokens},
                },
            )
        )
        out.append(_sse("message_stop", {"type": "message_stop"}))
        return out

    def usage_of(self, body: dict[str, Any], stated_input: int | None) -> dict[str, int]:
        """The request's input usage as the API reports it: uncached input, cache writes, cache reads
        (which add up to `stated_input` when the script states one, else to the counted tokens)."""
        pieces = prompt_pieces(body)
        uncached, creation, read = self.cache.account(str(body.get("model", "")), pieces)
        if stated_input is not None:  # the script's total: the cache's share of it, at most all
            read = min(read, stated_input)
            creation = min(creation, stated_input - read)
            uncached = stated_input - read - creation
        return {
            "input_tokens": uncached,
            "cache_creation_input_tokens": creation,
            "cache_read_input_tokens": read,
        }

    async def _messages(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        points = sum(1 for p in prompt_pieces(body) if p.ttl is not None)
        if points > MAX_BREAKPOINTS:
            error = {
                "type": "invalid_request_error",
                "message": f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                f"Found {points}.",
            }
            return JSONResponse({"type": "error", "error": error}, status_code=400)
        blocks, (stated_input, output_tokens) = self.script(body)
        usage = self.usage_of(body, stated_input)
        self.usages.append({**usage, "output_tokens": output_tokens})
        return self.sse(self._frames(blocks, usage, output_tokens))

    def routes(self) -> list[Route]:
        return [Route("/v1/messages", self._messages, methods=["POST"])]
