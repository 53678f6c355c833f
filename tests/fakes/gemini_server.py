"""A fake Gemini API (`streamGenerateContent?alt=sse`), so tests run pydantic-ai's real Google path.

    fake = FakeGemini(script)
    async with fake as base_url:     # "http://127.0.0.1:PORT"; the SDK posts to
        ...                          # {base_url}/v1beta/models/MODEL:streamGenerateContent?alt=sse
    fake.requests                    # decoded request bodies

`script(body)` returns the chunks to stream: each a list of Gemini `parts` (e.g. `{"text": ...,
"thought": True}`, `{"text": ...}`, `{"functionCall": {...}, "thoughtSignature": ...}`), and the
usage metadata sent with the last chunk.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.fakes.local_server import LocalServer

Script = Callable[[dict[str, Any]], tuple[list[list[dict[str, Any]]], dict[str, int]]]


class FakeGemini:
    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self._local = LocalServer()
        self.base_url = ""

    async def _generate(self, request: Request) -> Response:
        self.paths.append(request.url.path)
        if not request.url.path.endswith(":streamGenerateContent"):
            return Response("this fake only streams", status_code=400)
        body = await request.json()
        self.requests.append(body)
        chunks, usage = self.script(body)
        frames = []
        for i, parts in enumerate(chunks):
            cand: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
            data: dict[str, Any] = {"candidates": [cand], "modelVersion": "gemini-fake"}
            if i == len(chunks) - 1:
                cand["finishReason"] = "STOP"
                data["usageMetadata"] = usage
            frames.append(f"data: {json.dumps(data)}\r\n\r\n")

        async def stream() -> AsyncIterator[str]:
            for f in frames:
                yield f
                await asyncio.sleep(0)

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def __aenter__(self) -> str:
        app = Starlette(routes=[Route("/v1beta/models/{rest:path}", self._generate, methods=["POST"])])
        port = await self._local.start(app)
        self.base_url = f"http://127.0.0.1:{port}"
        return self.base_url

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._local.stop()
