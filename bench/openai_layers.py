"""CPU per streamed chat-completions request, layer by layer, in this process (issue 39 item 7).

The fake OpenAI-compatible server (bench/provider_floor.py `--serve-openai`) runs as its own
process; this process sends the same request (a 20 KB system prompt, 28 tools, a user message;
the answer streams a text and a tool call in 7 events) through each layer in turn and reads the
whole stream, and prints this process's CPU per request:

- httpcore: the request's bytes, encoded once beforehand, through the connection pool, the events
  cut and parsed as JSON (no SDK);
- httpx: the same through httpx's client;
- SDK, direct: `chat.completions.create` with devagent's patches (patches/openai_stream.py);
- SDK, own path: the same with the SDK's own request machinery (the patch's `__wrapped__`);
- pydantic-ai: `OpenAIChatModel.request_stream` as devagent builds the model, events read.

    .venv/bin/python bench/openai_layers.py [--requests 300] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))


def tools() -> list[dict[str, Any]]:
    properties = {f"p{j}": {"type": "string", "description": "x" * 40} for j in range(5)}
    schema = {"type": "object", "properties": properties, "required": ["p0"]}
    return [
        {
            "type": "function",
            "function": {"name": f"tool_{i}", "description": "d" * 300, "parameters": schema},
        }
        for i in range(28)
    ]


async def layers(url: str) -> dict[str, Callable[[], Awaitable[None]]]:
    import httpcore2
    import httpx2
    from openai import AsyncOpenAI
    from openai._base_client import AsyncAPIClient
    from pydantic_ai.messages import ModelRequest, SystemPromptPart, UserPromptPart
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.tools import ToolDefinition

    from devagent.agent.models.providers import create_model

    model = create_model("openai:fake", environ={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": url})
    system, defs = "S" * 20_000, tools()
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "tool x"}]
    body = json.dumps({"model": "fake", "messages": messages, "tools": defs, "stream": True}).encode()
    http = httpx2.AsyncClient()
    pool = http._transport._pool  # type: ignore[attr-defined]
    target = httpx2.URL(url + "/chat/completions")
    core_url = httpcore2.URL(
        scheme=target.raw_scheme, host=target.raw_host, port=target.port, target=target.raw_path
    )
    headers = [(b"content-type", b"application/json"), (b"host", target.netloc)]
    headers.append((b"content-length", str(len(body)).encode()))

    def parse(buffer: bytes) -> bytes:
        *events, rest = buffer.split(b"\n\n")
        for event in events:
            if event.startswith(b"data: {"):
                json.loads(event[6:])
        return rest

    async def with_httpcore() -> None:
        response = await pool.handle_async_request(
            httpcore2.Request(b"POST", core_url, headers=headers, content=body)
        )
        rest = b""
        try:
            async for part in response.stream:
                rest = parse(rest + part)
        finally:
            await response.aclose()

    async def with_httpx() -> None:
        async with http.stream(
            "POST", target, content=body, headers={"content-type": "application/json"}
        ) as r:
            rest = b""
            async for part in r.aiter_bytes():
                rest = parse(rest + part)

    sdk = AsyncOpenAI(api_key="k", base_url=url)

    async def with_sdk() -> None:
        stream = await sdk.chat.completions.create(model="fake", messages=messages, tools=defs, stream=True)  # type: ignore[arg-type]
        async for _ in stream:
            pass

    patched = AsyncAPIClient.request

    async def with_sdk_own_path() -> None:
        AsyncAPIClient.request = patched.__wrapped__  # type: ignore[attr-defined,method-assign]
        try:
            await with_sdk()
        finally:
            AsyncAPIClient.request = patched  # type: ignore[method-assign]

    definitions = [
        ToolDefinition(
            name=t["function"]["name"],
            description=t["function"]["description"],
            parameters_json_schema=t["function"]["parameters"],
        )
        for t in defs
    ]
    parameters = ModelRequestParameters(function_tools=definitions, allow_text_output=True)
    history = [ModelRequest(parts=[SystemPromptPart(system), UserPromptPart("tool x")])]

    async def with_pydantic_ai() -> None:
        async with model.request_stream(history, None, parameters) as s:
            async for _ in s:
                pass

    return {
        "httpcore": with_httpcore,
        "httpx": with_httpx,
        "SDK, direct": with_sdk,
        "SDK, own path": with_sdk_own_path,
        "pydantic-ai": with_pydantic_ai,
    }


async def measure(url: str, args: argparse.Namespace) -> None:
    ways = await layers(url)
    cpu: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.rounds):
        for name, way in ways.items():
            for _ in range(20):
                await way()
            t0 = time.process_time()
            for _ in range(args.requests):
                await way()
            cpu[name].append((time.process_time() - t0) / args.requests * 1000)
    print(f"CPU per streamed request, this process; {args.rounds} rounds of {args.requests}")
    for name, values in cpu.items():
        print(f"  {name:16}{statistics.median(values):7.3f} ms  ({min(values):.3f}-{max(values):.3f})")


def main(args: argparse.Namespace) -> None:
    command = [sys.executable, str(ROOT / "bench" / "provider_floor.py"), "--serve-openai"]
    fake = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert fake.stdout is not None
        found = re.search(r"on (\S+)", fake.stdout.readline())
        assert found, "the fake server did not start"
        asyncio.run(measure(found.group(1), args))
    finally:
        fake.terminate()
        fake.wait()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    main(ap.parse_args())
