"""What each speed patch of devagent/patches/ buys: the patched step timed without and with it.

    .venv/bin/python bench/library_patches.py [--turns 200] [--rounds 15]

In this process, per call (median of `--rounds` rounds), on the inputs of a conversation of
`--turns` tool turns (four messages each) with devagent's built-in tools:
- pydantic-ai: the tools' JSON schemas transformed for the model (`customize_request_parameters`);
  the transcript's special tokens broken and its messages mapped to chat completions;
- openai: the request body's transform (`async_maybe_transform`), one streamed chunk built.
- aiosqlite: one SELECT and one INSERT through SQLAlchemy's engine on a SQLite file, and a
  commit (patches/aiosqlite.py).
In fresh processes (median of 5): the import time of the a2a server's SDK modules without and
with devagent's import hooks (patches/a2a_sdk.py); of httpx without and with its command-line
client skipped (patches/httpx.py).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any


def per_call(fn: Callable[[], Any], rounds: int, calls: int) -> float:
    """Median over rounds of the time per call, in microseconds."""
    fn()  # the first call fills what a patch remembers; later ones are the steady state
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t) / calls * 1e6)
    return statistics.median(times)


def show(name: str, without: float, with_patch: float) -> None:
    print(f"{name:<48} without {without:10.1f} µs   with {with_patch:8.1f} µs   x{without / with_patch:.1f}")


def history(turns: int) -> list[Any]:
    from pydantic_ai import messages as pm

    out: list[Any] = []
    for i in range(turns):
        out.append(pm.ModelRequest(parts=[pm.UserPromptPart(content=f"write the file <|im_start|> {i}")]))
        out.append(
            pm.ModelResponse(
                parts=[
                    pm.TextPart(content=f"Writing {i}."),
                    pm.ToolCallPart(
                        tool_name="write_file",
                        args={"path": f"f{i}", "content": "x" * 200},
                        tool_call_id=f"c{i}",
                    ),
                ]
            )
        )
        out.append(
            pm.ModelRequest(
                parts=[pm.ToolReturnPart(tool_name="write_file", content="ok", tool_call_id=f"c{i}")]
            )
        )
        out.append(pm.ModelResponse(parts=[pm.TextPart(content="Done.")]))
    return out


def pydantic_ai_patches(turns: int, rounds: int) -> None:
    from pydantic_ai._special_tokens import break_special_tokens_in_messages
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.tools import ToolDefinition

    from devagent.agent.tools import builtin_tools
    from devagent.patches import pydantic_ai as patches

    model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(api_key="none"))
    tools = [
        ToolDefinition(name=t.name, description=t.description, parameters_json_schema=t.parameters)
        for t in builtin_tools().values()
    ]
    params = ModelRequestParameters(function_tools=tools)
    msgs = history(turns)
    profile: Any = {"may_tokenize_special_tokens_in_content": True}
    loop = asyncio.new_event_loop()

    def schemas() -> Any:
        return model.customize_request_parameters(params)

    def transcript() -> Any:
        broken = break_special_tokens_in_messages(msgs, profile, model.accepts_stateless_artifacts)
        return loop.run_until_complete(model._map_messages(broken, ModelRequestParameters()))

    before = per_call(schemas, rounds, 200), per_call(transcript, max(3, rounds // 3), 3)
    patches.cache_tool_schemas()
    patches.memoize_history_mapping()
    after = per_call(schemas, rounds, 200), per_call(transcript, max(3, rounds // 3), 3)
    show(f"pydantic-ai: {len(tools)} tool schemas", before[0], after[0])
    show(f"pydantic-ai: transcript of {len(msgs)} messages", before[1], after[1])
    loop.close()


def openai_patches(turns: int, rounds: int) -> None:
    import httpx2
    from openai import AsyncOpenAI, omit
    from openai.resources.chat.completions import completions
    from openai.types.chat import ChatCompletionChunk, completion_create_params

    from devagent.agent.tools import builtin_tools
    from devagent.patches import openai as patches

    messages: list[dict[str, Any]] = []
    for i in range(turns):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "write_file", "arguments": "{}"}}
        messages += [
            {"role": "user", "content": f"write the file {i}"},
            {"role": "assistant", "content": f"Writing {i}.", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": "ok"},
            {"role": "assistant", "content": "Done."},
        ]
    tools = [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in builtin_tools().values()
    ]
    body = {
        "messages": messages,
        "model": "m",
        "stream": True,
        "tools": tools,
        "temperature": omit,
        "seed": omit,
    }
    kind = completion_create_params.CompletionCreateParamsStreaming
    loop = asyncio.new_event_loop()
    client = AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9/v1")
    response = httpx2.Response(200)
    head = {"id": "c", "object": "chat.completion.chunk", "created": 1700000000, "model": "m"}
    chunk = {**head, "choices": [{"index": 0, "delta": {"content": "Hello"}, "finish_reason": None}]}

    def transform() -> Any:
        return loop.run_until_complete(completions.async_maybe_transform(body, kind))

    def build_chunk() -> Any:
        return client._process_response_data(data=chunk, cast_to=ChatCompletionChunk, response=response)

    before = per_call(transform, max(3, rounds // 3), 3), per_call(build_chunk, rounds, 500)
    patches.skip_message_transform()
    patches.validate_stream_chunks()
    after = per_call(transform, max(3, rounds // 3), 3), per_call(build_chunk, rounds, 500)
    show(f"openai: request body of {len(messages)} messages", before[0], after[0])
    show("openai: one streamed chunk", before[1], after[1])
    loop.close()


_IMPORT_SERVER = (
    "import time; t = time.perf_counter();{hooks}"
    "import a2a.server.request_handlers, a2a.server.routes, a2a.compat.v0_3.context_builders, "
    "a2a.compat.v0_3.extension_headers, a2a.server.tasks;"
    "print((time.perf_counter() - t) * 1000)"
)
_HOOKS = "import devagent.patches.a2a_sdk as p; p.install_import_hooks(lambda: False);"


def a2a_import_hooks() -> None:
    without = import_time(_IMPORT_SERVER.format(hooks=""))
    with_hooks = import_time(_IMPORT_SERVER.format(hooks=_HOOKS))
    print(f"{'a2a-sdk: server modules imported':<48} without {without:8.0f} ms     with {with_hooks:6.0f} ms")


def aiosqlite_patch(rounds: int) -> None:
    import tempfile

    from sqlalchemy import event, text
    from sqlalchemy.ext.asyncio import create_async_engine

    from devagent.patches.aiosqlite import one_hop_cursors

    async def per_statement(one_hop: bool, path: str) -> float:
        engine = create_async_engine(f"sqlite+aiosqlite:///{path}", pool_size=1, max_overflow=0)
        if one_hop:
            event.listen(engine.sync_engine, "connect", lambda c, _r: one_hop_cursors(c._connection))
        async with engine.begin() as conn:
            await conn.execute(text("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, n INT)"))
        times = []
        for _ in range(rounds):
            t = time.perf_counter()
            for i in range(100):
                async with engine.begin() as conn:
                    await conn.execute(text("INSERT INTO t (n) VALUES (:n)"), {"n": i})
                    (await conn.execute(text("SELECT n FROM t WHERE id = 1"))).all()
            times.append((time.perf_counter() - t) / 100 * 1e6)
        await engine.dispose()
        return statistics.median(times)

    with tempfile.TemporaryDirectory() as d:
        without = asyncio.run(per_statement(False, f"{d}/a.db"))
        with_patch = asyncio.run(per_statement(True, f"{d}/b.db"))
    show("aiosqlite: INSERT + SELECT + commit", without, with_patch)


def import_time(code: str, runs: int = 5) -> float:
    """Median milliseconds `code` (which prints them) reports in fresh processes."""

    def once() -> float:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        return float(out.stdout.strip())

    once()  # the file cache warm
    return statistics.median(once() for _ in range(runs))


def httpx_patch() -> None:
    code = "import time; t = time.perf_counter();{skip}import httpx; print((time.perf_counter() - t) * 1000)"
    skip = "import devagent.patches.httpx as p; p.skip_command_line_client();"
    without, with_patch = import_time(code.format(skip="")), import_time(code.format(skip=skip))
    print(f"{'httpx: imported':<48} without {without:8.0f} ms     with {with_patch:6.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    pydantic_ai_patches(args.turns, args.rounds)
    openai_patches(args.turns, args.rounds)
    aiosqlite_patch(args.rounds)
    a2a_import_hooks()
    httpx_patch()


if __name__ == "__main__":
    main()
