"""What each speed patch of devagent/patches/ buys: the patched step timed without and with it.

    .venv/bin/python bench/library_patches.py [--turns 200] [--rounds 15]

In this process, per call (median of `--rounds` rounds), on the inputs of a conversation of
`--turns` tool turns (four messages each) with devagent's built-in tools:
- pydantic-ai: the tools' JSON schemas transformed for the model (`customize_request_parameters`);
  the transcript's special tokens broken and its messages mapped to chat completions; an item of
  a model's stream read through its `PeekableAsyncStream` (CPU, and the event loop's turns);
- openai: the request body's transform (`async_maybe_transform`), one streamed chunk built.
- aiosqlite: a SELECT through SQLAlchemy's engine on a SQLite file, the connection taken from
  the pool and returned (patches/aiosqlite.py).
- a2a-sdk: one call through its tracing decorator (nothing recording) and without it.
In fresh processes (the least of 7): the CPU time and peak RSS of importing the a2a server's SDK
modules without and with devagent's import hooks (patches/a2a_sdk.py); the CPU time of importing
httpx without and with its command-line client skipped (patches/httpx.py).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.loop_turns


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


def stream_pulls(rounds: int) -> None:
    """A stream of 20 items read through pydantic-ai's `PeekableAsyncStream` (as every model's
    answer is), per item: CPU time and the event loop's turns, without and with
    `uncontended_stream_pulls`."""
    from pydantic_ai._utils import PeekableAsyncStream
    from tests.loop_turns import counted_turns

    from devagent.patches import pydantic_ai as patches

    async def source() -> Any:
        for i in range(20):
            yield i

    async def read() -> None:
        async for _ in PeekableAsyncStream(source()):
            pass

    def measure() -> tuple[float, float]:
        loop = asyncio.new_event_loop()
        loop.run_until_complete(read())
        cpu = []
        with counted_turns(loop) as turns:
            for _ in range(rounds):
                t = time.process_time()
                for _ in range(50):
                    loop.run_until_complete(read())
                cpu.append((time.process_time() - t) / (50 * 20) * 1e6)
        loop.close()
        return statistics.median(cpu), turns[0] / (rounds * 50 * 20)

    before = measure()
    patches.uncontended_stream_pulls()
    after = measure()
    show("pydantic-ai: one streamed item (CPU)", before[0], after[0])
    label = "pydantic-ai: event loop turns per streamed item"
    print(f"{label:<48} without {before[1]:10.1f}      with {after[1]:8.1f}")


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


def aiosqlite_patch(rounds: int) -> None:
    import tempfile

    from sqlalchemy import event, text
    from sqlalchemy.ext.asyncio import create_async_engine

    from devagent.patches.aiosqlite import one_hop_cursors

    async def per_statement(one_hop: bool, path: str) -> float:
        engine = create_async_engine(f"sqlite+aiosqlite:///{path}", pool_size=1, max_overflow=0)

        @event.listens_for(engine.sync_engine, "connect")
        def connect(dbapi_conn: Any, _record: Any) -> None:
            if one_hop:
                one_hop_cursors(dbapi_conn._connection)
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")  # as the store's engine (store/db.py)
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        async with engine.begin() as conn:
            await conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, n INT)"))
            await conn.execute(text("INSERT INTO t (n) VALUES (1)"))
        times = []
        for _ in range(rounds):
            t = time.perf_counter()
            for _ in range(200):
                async with engine.connect() as conn:  # returned to the pool: rolled back
                    (await conn.execute(text("SELECT n FROM t WHERE id = 1"))).all()
            times.append((time.perf_counter() - t) / 200 * 1e6)
        await engine.dispose()
        return statistics.median(times)

    with tempfile.TemporaryDirectory() as d:
        without = asyncio.run(per_statement(False, f"{d}/a.db"))
        with_patch = asyncio.run(per_statement(True, f"{d}/b.db"))
    show("aiosqlite: a SELECT on a pooled connection", without, with_patch)


_IMPORT_SERVER = (
    "import resource;{hooks}"
    "import a2a.server.request_handlers, a2a.server.routes, a2a.compat.v0_3.context_builders, "
    "a2a.compat.v0_3.extension_headers, a2a.server.tasks;"
    "r = resource.getrusage(resource.RUSAGE_SELF);"
    "hwm = [ln for ln in open('/proc/self/status') if ln.startswith('VmHWM')][0].split()[1];"
    "print((r.ru_utime + r.ru_stime) * 1000, int(hwm) / 1024)"
)
_HOOKS = "import devagent.patches.a2a_sdk as p; p.install_import_hooks(lambda: False);"


def fresh_processes(code: str, runs: int = 7) -> tuple[float, float]:
    """The least CPU milliseconds (user + system) and peak RSS (MiB) of `code`, which prints them,
    over fresh processes: the least, as other work on a shared machine only ever adds to it."""

    def once() -> tuple[float, float]:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        cpu, rss = out.stdout.split()
        return float(cpu), float(rss)

    once()  # the file cache warm
    return min(once() for _ in range(runs))


def a2a_import_hooks() -> None:
    without, rss_without = fresh_processes(_IMPORT_SERVER.format(hooks=""))
    with_hooks, rss_with = fresh_processes(_IMPORT_SERVER.format(hooks=_HOOKS))
    print(
        f"{'a2a-sdk: server modules imported (CPU, RSS)':<48} "
        f"without {without:6.0f} ms {rss_without:5.1f} MiB   with {with_hooks:6.0f} ms {rss_with:5.1f} MiB"
    )


def a2a_tracing_wrapper(rounds: int) -> None:
    """A function under the SDK's `trace_function` (nothing records the span) and without it: the
    cost of each SDK call the import hook leaves undecorated."""
    import a2a.utils.telemetry as telemetry

    def bare(x: int) -> int:
        return x

    traced = telemetry.trace_function(bare)
    show(
        "a2a-sdk: one traced call",
        per_call(lambda: traced(1), rounds, 2000),
        per_call(lambda: bare(1), rounds, 2000),
    )


def httpx_patch() -> None:
    code = "import resource;{skip}import httpx; r = resource.getrusage(resource.RUSAGE_SELF);"
    code += "print((r.ru_utime + r.ru_stime) * 1000, r.ru_maxrss / 1024)"
    skip = "import devagent.patches.httpx as p; p.skip_command_line_client();"
    without, _ = fresh_processes(code.format(skip=""))
    with_patch, _ = fresh_processes(code.format(skip=skip))
    print(f"{'httpx: imported (CPU)':<48} without {without:6.0f} ms   with {with_patch:6.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    pydantic_ai_patches(args.turns, args.rounds)
    stream_pulls(args.rounds)
    openai_patches(args.turns, args.rounds)
    aiosqlite_patch(args.rounds)
    a2a_tracing_wrapper(args.rounds)
    a2a_import_hooks()
    httpx_patch()


if __name__ == "__main__":
    main()
