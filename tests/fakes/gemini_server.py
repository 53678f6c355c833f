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

import json
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fakes.local_server import ScriptedServer

Script = Callable[[dict[str, Any]], tuple[list[list[dict[str, Any]]], dict[str, int]]]


class FakeGemini(ScriptedServer[Script]):
    def __init__(self, script: Script) -> None:
        super().__init__(script)
        self.paths: list[str] = []

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

        return self.sse(frames)

    def routes(self) -> list[Route]:
        return [Route("/v1beta/models/{rest:path}", self._generate, methods=["POST"])]
