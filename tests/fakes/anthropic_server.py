"""A fake Anthropic Messages API (streaming), so tests run pydantic-ai's real Anthropic code path.

    fake = FakeAnthropic(script)
    async with fake as base_url:     # "http://127.0.0.1:PORT"; the SDK posts to {base_url}/v1/messages
        ...
    fake.requests                    # decoded request bodies

`script(body)` returns a list of content blocks to stream, each `("thinking", text, signature)`,
`("text", text)` or `("tool_use", id, name, input_dict)`, and the usage `(input, output)`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fakes.local_server import FakeHTTPServer

Block = tuple[Any, ...]
Script = Callable[[dict[str, Any]], tuple[list[Block], tuple[int, int]]]


def _sse(kind: str, data: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n"


def _halves(text: str) -> list[str]:
    mid = max(1, len(text) // 2)
    return [text[:mid], text[mid:]] if len(text) > 1 else [text]


class FakeAnthropic(FakeHTTPServer):
    def __init__(self, script: Script) -> None:
        super().__init__()
        self.script = script
        self.requests: list[dict[str, Any]] = []

    def _frames(self, blocks: list[Block], usage: tuple[int, int]) -> list[str]:
        msg = {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": "claude-fake",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": usage[0], "output_tokens": 1},
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
                    "usage": {"output_tokens": usage[1]},
                },
            )
        )
        out.append(_sse("message_stop", {"type": "message_stop"}))
        return out

    async def _messages(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        blocks, usage = self.script(body)
        frames = self._frames(blocks, usage)

        return self.sse(frames)

    def routes(self) -> list[Route]:
        return [Route("/v1/messages", self._messages, methods=["POST"])]
