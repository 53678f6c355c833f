"""A fake OpenAI Chat Completions server, so tests run the real provider code offline.

    fake = FakeOpenAI(script)
    async with fake as base_url:          # e.g. "http://127.0.0.1:43117/v1"
        model = create_model("openai-compatible:fake-model", base_url=base_url)
        ...
    fake.requests                          # the decoded request bodies, in order

`script(body)` decides each answer from the request body and returns a `Reply` (or a list of raw
`delta` dicts for full control). The server streams it the way OpenAI-compatible servers do:
a role chunk, `reasoning_content` deltas, content deltas, tool calls split across chunks by
`index`, a chunk with `finish_reason`, a usage chunk when `stream_options.include_usage` is set,
then `data: [DONE]`. A `Reply` with `status` set answers with an HTTP error instead.

It runs uvicorn on 127.0.0.1, port 0 (the kernel picks a free one), inside the test's event loop.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes.local_server import ScriptedServer

__all__ = ["FakeOpenAI", "FakeToolCall", "Reply", "Script"]


@dataclass
class FakeToolCall:
    """A tool call to stream. `args` is sent in `chunks` pieces (at least 2 when it is long enough)."""

    id: str
    name: str
    args: dict[str, Any] | str
    chunks: int = 2


@dataclass
class Reply:
    reasoning: list[str] = field(default_factory=list)  # reasoning_content deltas
    text: list[str] = field(default_factory=list)  # content deltas
    tool_calls: list[FakeToolCall] = field(default_factory=list)
    usage: dict[str, Any] | None = None  # OpenAI usage object, sent when the client asks for it
    finish_reason: str | None = None  # default: "tool_calls" if there are calls, else "stop"
    status: int | None = None  # answer with this HTTP error instead of a stream
    error_message: str = "fake error"
    # the HTTP error's message quotes the request it answers, headers (Authorization) included,
    # as careless servers and proxies do
    echo_request: bool = False


Script = Callable[[dict[str, Any]], "Reply | list[dict[str, Any]]"]


def _split(text: str, n: int) -> list[str]:
    if n <= 1 or len(text) < n:
        return [text]
    size = -(-len(text) // n)
    return [text[i : i + size] for i in range(0, len(text), size)]


class FakeOpenAI(ScriptedServer[Script]):
    url_suffix = "/v1"

    def __init__(self, script: Script, *, model: str = "fake-model") -> None:
        super().__init__(script)
        self.model = model
        self.request_headers: list[dict[str, str]] = []
        # one time for every chunk it sends: two answers to the same request are the same bytes
        # (a test comparing two streams must not depend on a second passing between them)
        self.created = int(time.time())

    # --- the wire format ---

    def _chunk(self, choices: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> str:
        body: dict[str, Any] = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
        if usage is not None:
            body["usage"] = usage
        return f"data: {json.dumps(body)}\n\n"

    def _delta(self, delta: dict[str, Any], finish_reason: str | None = None) -> str:
        return self._chunk([{"index": 0, "delta": delta, "finish_reason": finish_reason}])

    def _deltas(self, reply: Reply) -> list[dict[str, Any]]:
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        deltas += [{"reasoning_content": r} for r in reply.reasoning]
        deltas += [{"content": t} for t in reply.text]
        for index, call in enumerate(reply.tool_calls):
            args = call.args if isinstance(call.args, str) else json.dumps(call.args)
            pieces = _split(args, call.chunks)
            deltas.append(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": pieces[0]},
                        }
                    ]
                }
            )
            deltas += [{"tool_calls": [{"index": index, "function": {"arguments": p}}]} for p in pieces[1:]]
        return deltas

    async def _chat_completions(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        self.request_headers.append(dict(request.headers))
        answer = self.script(body)
        if isinstance(answer, Reply) and answer.status is not None:
            message = answer.error_message
            if answer.echo_request:
                message += " for the request " + json.dumps({"headers": dict(request.headers), "body": body})
            error = {"error": {"message": message, "type": "fake_error", "code": None}}
            return JSONResponse(error, status_code=answer.status)
        if not body.get("stream"):
            return JSONResponse({"error": {"message": "this fake server only streams"}}, status_code=400)
        if isinstance(answer, Reply):
            deltas = self._deltas(answer)
            finish = answer.finish_reason or ("tool_calls" if answer.tool_calls else "stop")
            usage = answer.usage
        else:
            deltas, finish, usage = answer, "stop", None
        chunks = [self._delta(d) for d in deltas]
        chunks.append(self._delta({}, finish))
        if usage is not None and (body.get("stream_options") or {}).get("include_usage"):
            chunks.append(self._chunk([], usage))
        chunks.append("data: [DONE]\n\n")

        return self.sse(chunks)

    # --- running ---

    def routes(self) -> list[Route]:
        return [Route("/v1/chat/completions", self._chat_completions, methods=["POST"])]
