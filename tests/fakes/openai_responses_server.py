"""A fake OpenAI Responses API (streaming), for clients that speak only it (Codex CLI).

    fake = FakeResponses(script)
    async with fake as base_url:      # "http://127.0.0.1:PORT/v1"; clients post to {base_url}/responses
        ...
    fake.requests                     # the decoded request bodies, in order

`script(body)` returns the output items of the answer, in order: `Message(text)` (assistant text)
or `FunctionCall(call_id, name, arguments, namespace)` (a call of one of the client's tools; a tool
offered inside a `namespace` tool group, as Codex offers an MCP server's tools, is called with the
group's name). The server streams them the way the API does: `response.created`; for each item
`response.output_item.added`, its deltas (`response.output_text.delta` in two pieces, or
`response.function_call_arguments.delta`) and `response.output_item.done` with the whole item; then
`response.completed` with the response's usage.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes.local_server import ScriptedServer

__all__ = ["FakeResponses", "FunctionCall", "Message", "Script", "function_outputs", "tool_groups"]


@dataclass
class Message:
    """Assistant text."""

    text: str


@dataclass
class FunctionCall:
    """A call of the client's tool `name` (in the tool group `namespace`, if it is in one)."""

    call_id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    namespace: str | None = None


Item = Message | FunctionCall
Script = Callable[[dict[str, Any]], list[Item]]


def function_outputs(body: dict[str, Any]) -> dict[str, Any]:
    """The outputs of the function calls in a request's input, by call id (the API's
    `function_call_output` items: their `output`, a string or a list of content parts)."""
    return {
        item["call_id"]: item.get("output")
        for item in body.get("input") or []
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }


def tool_groups(body: dict[str, Any]) -> dict[str, list[str]]:
    """The tools a request offers, by group: each `namespace` tool's name with the names of the
    functions in it, and the plain functions under ""."""
    groups: dict[str, list[str]] = {"": []}
    for tool in body.get("tools") or []:
        if tool.get("type") == "namespace":
            groups[tool["name"]] = [t.get("name", "") for t in tool.get("tools") or []]
        elif tool.get("type") == "function":
            groups[""].append(tool.get("name", ""))
    return groups


def _event(kind: str, data: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"


def _halves(text: str) -> list[str]:
    mid = max(1, len(text) // 2)
    return [text[:mid], text[mid:]] if len(text) > 1 else [text]


def _item_events(index: int, item: Item) -> tuple[list[str], dict[str, Any]]:
    """The events streaming one output item (added, its deltas, done), and the whole item."""
    if isinstance(item, Message):
        whole: dict[str, Any] = {
            "type": "message",
            "id": f"msg_{index}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": item.text, "annotations": []}],
        }
        started = {**whole, "status": "in_progress", "content": []}
        deltas = [
            _event(
                "response.output_text.delta",
                {"output_index": index, "item_id": whole["id"], "content_index": 0, "delta": piece},
            )
            for piece in _halves(item.text)
        ]
    else:
        arguments = json.dumps(item.arguments)
        whole = {
            "type": "function_call",
            "id": f"fc_{index}",
            "call_id": item.call_id,
            "name": item.name,
            "arguments": arguments,
            "status": "completed",
        }
        if item.namespace is not None:
            whole["namespace"] = item.namespace
        started = {**whole, "arguments": "", "status": "in_progress"}
        deltas = [
            _event(
                "response.function_call_arguments.delta",
                {"output_index": index, "item_id": whole["id"], "delta": piece},
            )
            for piece in _halves(arguments)
        ]
    added = _event("response.output_item.added", {"output_index": index, "item": started})
    done = _event("response.output_item.done", {"output_index": index, "item": whole})
    return [added, *deltas, done], whole


class FakeResponses(ScriptedServer[Script]):
    url_suffix = "/v1"

    def __init__(self, script: Script, *, model: str = "fake-model") -> None:
        super().__init__(script)
        self.model = model

    async def _responses(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        if not body.get("stream"):
            return JSONResponse({"error": {"message": "this fake server only streams"}}, status_code=400)
        items = self.script(body)
        response: dict[str, Any] = {"id": f"resp_{len(self.requests)}", "model": self.model, "output": []}
        frames = [_event("response.created", {"response": {**response, "status": "in_progress"}})]
        for index, item in enumerate(items):
            events, whole = _item_events(index, item)
            frames += events
            response["output"].append(whole)
        usage = {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        }
        completed = {**response, "status": "completed", "usage": usage}
        frames.append(_event("response.completed", {"response": completed}))
        return self.sse(frames)

    def routes(self) -> list[Route]:
        return [Route("/v1/responses", self._responses, methods=["POST"])]
