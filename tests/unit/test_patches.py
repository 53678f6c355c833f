"""Issue 29 items 3-4: each library patch of devagent/patches/ fails here when its library changes
under it: the module was written for the installed version, the names it replaces exist with the
signature it wraps, applying it takes effect (the library's name is devagent's wrapper, around
the library's own function), and applying it twice changes nothing more. The private names
devagent uses without patching them are checked alike."""

from __future__ import annotations

import importlib.metadata
import inspect
import subprocess
import sys
from types import ModuleType
from typing import Any

import pytest

from devagent.patches import a2a_sdk as a2a_patch
from devagent.patches import aiosqlite as aiosqlite_patch
from devagent.patches import httpx as httpx_patch
from devagent.patches import openai as openai_patch
from devagent.patches import openai_stream as openai_stream_patch
from devagent.patches import pydantic_ai as pydantic_ai_patch
from tests.loop_turns import counted_turns


def params(fn: Any) -> list[str]:
    return list(inspect.signature(fn, follow_wrapped=False).parameters)


def library_function(fn: Any) -> Any:
    """The library's own function: the one a patch wraps, or `fn` itself before the patch."""
    return getattr(fn, "__wrapped__", fn)


def run(code: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.split()


@pytest.mark.parametrize(
    ("module", "distribution"),
    [
        (a2a_patch, "a2a-sdk"),
        (pydantic_ai_patch, "pydantic-ai-slim"),
        (openai_patch, "openai"),
        (openai_stream_patch, "openai"),
        (aiosqlite_patch, "aiosqlite"),
        (httpx_patch, "httpx"),
    ],
)
def test_each_patch_module_was_written_for_the_installed_version(
    module: ModuleType, distribution: str
) -> None:
    installed = importlib.metadata.version(distribution)
    assert installed == module.WRITTEN_FOR, (
        f"{distribution} is {installed}: check each patch of {module.__name__} against it "
        "(the names it wraps, what it buys), then set WRITTEN_FOR"
    )


def test_importing_the_patches_imports_no_library() -> None:
    code = (
        "import sys, devagent.patches.a2a_sdk, devagent.patches.pydantic_ai, devagent.patches.openai,"
        " devagent.patches.aiosqlite, devagent.patches.httpx;"
        "print(*(m in sys.modules for m in ('a2a', 'pydantic_ai', 'openai', 'aiosqlite', 'httpx', 'grpc')))"
    )
    assert run(code) == ["False"] * 6


# --- pydantic-ai ----------------------------------------------------------------------------------


def test_pydantic_ai_tool_schema_cache_wraps_customize_tool_def() -> None:
    from pydantic_ai import models
    from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer
    from pydantic_ai.tools import ToolDefinition

    original = library_function(models._customize_tool_def)
    assert original.__module__ == "pydantic_ai.models"
    assert params(original) == ["transformer", "tool_def"]
    # the caller looks the module-level name up on each request
    assert "_customize_tool_def(" in inspect.getsource(models.Model.customize_request_parameters)
    pydantic_ai_patch.cache_tool_schemas()
    patched = models._customize_tool_def
    pydantic_ai_patch.cache_tool_schemas()
    assert models._customize_tool_def is patched and patched.__module__ == "devagent.patches.pydantic_ai"
    assert patched.__wrapped__ is original
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    tool = ToolDefinition(name="t", parameters_json_schema=schema)
    assert patched(OpenAIJsonSchemaTransformer, tool) == original(OpenAIJsonSchemaTransformer, tool)
    assert patched(OpenAIJsonSchemaTransformer, tool) == original(OpenAIJsonSchemaTransformer, tool)
    # the same definition again: the same customized one; changed in place: customized anew
    first = patched(OpenAIJsonSchemaTransformer, tool)
    assert patched(OpenAIJsonSchemaTransformer, tool) is first
    schema["properties"]["s"] = {"type": "string"}
    again = patched(OpenAIJsonSchemaTransformer, tool)
    assert again is not first and again == original(OpenAIJsonSchemaTransformer, tool)
    assert "s" in again.parameters_json_schema["properties"]
    tool.description = "now described"
    assert patched(OpenAIJsonSchemaTransformer, tool).description == "now described"


def test_pydantic_ai_history_memo_wraps_the_message_preparation() -> None:
    from pydantic_ai import _special_tokens
    from pydantic_ai import messages as pm
    from pydantic_ai.models.openai import OpenAIChatModel

    originals = (
        library_function(_special_tokens._break_message),
        library_function(OpenAIChatModel._map_user_message),
        library_function(OpenAIChatModel._map_model_response),
    )
    assert params(originals[0]) == ["message", "accepts_stateless_artifacts"]
    assert params(originals[1]) == ["self", "message"] and inspect.isasyncgenfunction(originals[1])
    assert params(originals[2]) == ["self", "message"] and not inspect.iscoroutinefunction(originals[2])
    # the results ride on the message objects, outside their fields
    assert "__dict__" in dir(pm.ModelRequest(parts=[]))
    pydantic_ai_patch.memoize_history_mapping()
    patched = (
        _special_tokens._break_message,
        OpenAIChatModel._map_user_message,
        OpenAIChatModel._map_model_response,
    )
    pydantic_ai_patch.memoize_history_mapping()
    assert (
        _special_tokens._break_message,
        OpenAIChatModel._map_user_message,
        OpenAIChatModel._map_model_response,
    ) == patched
    for fn, original in zip(patched, originals, strict=True):
        assert fn.__module__ == "devagent.patches.pydantic_ai" and fn.__wrapped__ is original


def test_pydantic_ai_stream_pulls_take_a_free_lock_without_a_loop_turn() -> None:
    """Issue 39 item 7: each streamed item read through `PeekableAsyncStream` no longer costs a
    turn of the event loop; the lock still lets one pull run at a time, and a pull cancelled
    mid-way lets go before the stream is closed."""
    import asyncio

    import anyio
    from pydantic_ai._utils import PeekableAsyncStream

    original = library_function(PeekableAsyncStream.__init__)
    assert params(original) == ["self", "source"]
    assert "self._source_lock = anyio.Lock()" in inspect.getsource(original)
    pydantic_ai_patch.uncontended_stream_pulls()
    patched = PeekableAsyncStream.__init__
    pydantic_ai_patch.uncontended_stream_pulls()
    assert PeekableAsyncStream.__init__ is patched and patched.__wrapped__ is original
    assert patched.__module__ == "devagent.patches.pydantic_ai"

    async def items(n: int, gate: asyncio.Event | None = None) -> Any:
        for i in range(n):
            if gate is not None:
                await gate.wait()
            yield i

    async def main() -> None:
        with counted_turns(asyncio.get_running_loop()) as turns:
            stream = PeekableAsyncStream(items(20))
            assert isinstance(stream._source_lock, anyio.Lock)
            assert [x async for x in stream] == list(range(20))
        assert turns[0] == 0  # read without giving the loop a turn (it was 20 or more)

        # two pulls at once: the second waits for the first, each gets its own item
        gate = asyncio.Event()
        stream = PeekableAsyncStream(items(2, gate))
        first = asyncio.ensure_future(stream.__anext__())
        second = asyncio.ensure_future(stream.__anext__())
        await asyncio.sleep(0)
        assert stream._source_lock.locked() and not first.done() and not second.done()
        gate.set()
        assert sorted(await asyncio.gather(first, second)) == [0, 1]

        # a pull cancelled while it waits lets go of the lock; the stream then closes cleanly
        stream = PeekableAsyncStream(items(1, asyncio.Event()))
        pull = asyncio.ensure_future(stream.__anext__())
        await asyncio.sleep(0)
        assert stream._source_lock.locked()
        pull.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pull
        assert not stream._source_lock.locked()
        await stream.aclose()

    asyncio.run(main())


# --- openai ---------------------------------------------------------------------------------------


def test_openai_body_transform_skip_wraps_async_maybe_transform() -> None:
    from openai import _utils
    from openai.resources.chat.completions import completions

    original = library_function(completions.async_maybe_transform)
    assert original.__module__ == "openai._utils._transform"
    assert params(original) == ["data", "expected_type"] and inspect.iscoroutinefunction(original)
    assert params(_utils.is_given) == ["obj"]
    openai_patch.skip_message_transform()
    patched = completions.async_maybe_transform
    openai_patch.skip_message_transform()
    assert completions.async_maybe_transform is patched
    assert patched.__module__ == "devagent.patches.openai" and patched.__wrapped__ is original


def test_openai_chunk_validation_wraps_process_response_data() -> None:
    from openai._base_client import BaseClient
    from openai.types.chat import ChatCompletionChunk

    original = library_function(BaseClient._process_response_data)
    sig = inspect.signature(original)
    assert list(sig.parameters) == ["self", "data", "cast_to", "response"]
    assert all(p.kind is p.KEYWORD_ONLY for name, p in sig.parameters.items() if name != "self")
    assert callable(ChatCompletionChunk.model_validate)
    openai_patch.validate_stream_chunks()
    patched = BaseClient._process_response_data
    openai_patch.validate_stream_chunks()
    assert BaseClient._process_response_data is patched
    assert patched.__module__ == "devagent.patches.openai" and patched.__wrapped__ is original


def test_issue39_item7_direct_stream_wraps_the_async_client_request() -> None:
    import httpcore2
    import httpx2
    from openai._base_client import AsyncAPIClient, BaseClient

    original = library_function(AsyncAPIClient.request)
    assert params(original) == ["self", "cast_to", "options", "stream", "stream_cls"]
    # the SDK's own steps the direct path reuses, with the signatures it calls them by
    assert params(BaseClient._build_request) == ["self", "options", "retries_taken"]
    assert params(BaseClient._make_status_error_from_response) == ["self", "response"]
    assert params(BaseClient._should_retry) == ["self", "response"]
    assert params(BaseClient._calculate_retry_timeout) == [
        "self",
        "remaining_retries",
        "options",
        "response_headers",
    ]
    assert params(httpcore2.AsyncConnectionPool.handle_async_request) == ["self", "request"]
    assert isinstance(httpx2.AsyncClient()._event_hooks, dict)
    openai_stream_patch.stream_chat_directly()
    patched = AsyncAPIClient.request
    openai_stream_patch.stream_chat_directly()
    assert AsyncAPIClient.request is patched
    assert patched.__module__ == "devagent.patches.openai_stream" and patched.__wrapped__ is original


def test_issue39_item7_encoded_prefix_wraps_openapi_dumps_and_gives_the_same_bytes() -> None:
    import datetime

    from openai import _base_client
    from openai.types.chat import ChatCompletionChunk

    original = library_function(_base_client.openapi_dumps)
    assert original.__module__ == "openai._utils._json" and params(original) == ["obj"]
    openai_patch.remember_encoded_prefix()
    patched = _base_client.openapi_dumps
    openai_patch.remember_encoded_prefix()
    assert _base_client.openapi_dumps is patched
    assert patched.__module__ == "devagent.patches.openai" and patched.__wrapped__ is original

    instructions = 'You are a coding agent. \u00e9"quoted"\n\t<|im_start|> ' * 200
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "a path " * 100}, "n": {"minimum": 0.5}},
        "required": ["path"],
        "additionalProperties": False,
    }
    tools = [
        {"type": "function", "function": {"name": f"t{i}", "description": "d" * 600, "parameters": schema}}
        for i in range(3)
    ]
    chunk = ChatCompletionChunk.model_validate(
        {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": []}
    )

    def body(extra: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "messages": [{"role": "system", "content": instructions}, *extra],
            "model": "m",
            "stream": True,
            "stream_options": {"include_usage": True},
            "temperature": 0.25,
            "tools": tools,
            "tool_choice": "auto",
            "metadata": {
                "when": datetime.datetime(2026, 11, 28, 18, 0),
                "chunk": chunk,
                "t": (1, None, True),
            },
        }

    turns: list[dict[str, Any]] = [{"role": "user", "content": "write the file " + "x" * 700}]
    for i in range(3):
        assert patched(body(turns)) == original(body(turns))
        call = {"id": f"c{i}", "type": "function", "function": {"name": "t0", "arguments": "{}"}}
        turns += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "content": "ok"},
        ]
    schema["properties"]["path"]["type"] = "integer"  # changed in place: encoded again
    assert patched(body(turns)) == original(body(turns))
    assert b'"type":"integer"' in patched(body(turns))
    assert patched({"messages": [], 1: "x"}) == original({"messages": [], 1: "x"})  # not plain: the SDK's
    assert patched([1, 2]) == original([1, 2])


# --- a2a-sdk --------------------------------------------------------------------------------------


def test_a2a_v03_conversions_are_mended() -> None:
    from a2a.compat.v0_3 import conversions
    from a2a.types import Part, TaskState, TaskStatus, TaskStatusUpdateEvent
    from google.protobuf import struct_pb2  # type: ignore[import-untyped]

    originals = (
        library_function(conversions.to_compat_task_status_update_event),
        library_function(conversions.to_compat_part),
    )
    assert params(originals[0]) == ["core_event"] and params(originals[1]) == ["core_part"]
    # the module's own callers look the names up per call (the part conversion from its messages)
    assert "to_compat_part(p)" in inspect.getsource(conversions.to_compat_message)
    from devagent.a2a.client_tools import plain_numbers

    a2a_patch.mend_v03_conversions(plain_numbers)
    patched = (conversions.to_compat_task_status_update_event, conversions.to_compat_part)
    a2a_patch.mend_v03_conversions(plain_numbers)
    assert (conversions.to_compat_task_status_update_event, conversions.to_compat_part) == patched
    for fn, original in zip(patched, originals, strict=True):
        assert fn.__module__ == "devagent.patches.a2a_sdk" and fn.__wrapped__ is original
    event = TaskStatusUpdateEvent(
        task_id="t", context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_INPUT_REQUIRED)
    )
    assert originals[0](event).final is False and patched[0](event).final is True
    data = struct_pb2.Value()
    data.struct_value.update({"n": 3})
    part = Part(data=data)
    assert originals[1](part).root.data == {"n": 3.0}
    assert type(patched[1](part).root.data["n"]) is int


def test_a2a_import_hooks_take_effect_once() -> None:
    """In a fresh process: the gRPC handler deferred, the telemetry decorators devagent's, the
    client package's code deferred, the finder installed once and gone when both were found."""
    code = (
        "import sys, devagent.a2a, devagent.patches.a2a_sdk as p;"
        "p.install_import_hooks(lambda: False);"
        "print(sum(type(f) is p.SDKImportHooks for f in sys.meta_path), p.grpc_handler_deferred());"
        "import a2a.server.request_handlers, a2a.utils.telemetry as t, a2a.client as c;"
        "print(t.trace_function.__module__, t.trace_class.__module__, '__getattr__' in vars(c));"
        "print(sum(type(f) is p.SDKImportHooks for f in sys.meta_path), 'a2a.client.client' in sys.modules)"
    )
    assert run(code) == ["1", "True", *["devagent.patches.a2a_sdk"] * 2, "True", "0", "False"]


def test_a2a_sdk_names_the_import_hooks_rely_on() -> None:
    """Without the hooks: the SDK's request handlers import with their gRPC handler missing, the
    telemetry decorators are the module-level names the SDK's classes are decorated with, and
    `a2a.client` is a package."""
    code = (
        "import sys, inspect; sys.modules['a2a.server.request_handlers.grpc_handler'] = None;"
        "import a2a.server.request_handlers as h, a2a.utils.telemetry as t, a2a.client as c;"
        "print(inspect.signature(t.trace_function).parameters.__len__() > 0, callable(t.trace_class),"
        " hasattr(c, '__path__'), hasattr(h, 'DefaultRequestHandler'))"
    )
    assert run(code) == ["True"] * 4
    import a2a.server.events.event_queue_v2 as queue

    assert "trace_class" in inspect.getsource(queue) or "trace_function" in inspect.getsource(queue)


def test_grpc_error_codes_use_the_sdk_public_override() -> None:
    from devagent.a2a import grpc_server  # it lets the SDK's gRPC handler load

    GrpcHandler = grpc_server.GrpcHandler
    assert GrpcHandler.__module__ == "a2a.server.request_handlers.grpc_handler"
    assert params(GrpcHandler.abort_context) == ["self", "error", "context"]
    assert grpc_server._Servicer.abort_context is not GrpcHandler.abort_context


# --- aiosqlite ------------------------------------------------------------------------------------


async def test_aiosqlite_one_hop_cursors_on_a_connection() -> None:
    import sqlite3

    import aiosqlite
    from aiosqlite.context import Result

    assert inspect.iscoroutinefunction(aiosqlite.Connection._execute)
    assert params(aiosqlite.Connection._execute) == ["self", "fn", "args", "kwargs"]
    async with aiosqlite.connect(":memory:") as conn:
        assert isinstance(conn._conn, sqlite3.Connection)
        rollback = conn.rollback
        aiosqlite_patch.one_hop_cursors(conn)
        patched = conn.cursor, conn.rollback
        aiosqlite_patch.one_hop_cursors(conn)
        assert (conn.cursor, conn.rollback) == patched and conn.rollback.__wrapped__ == rollback
        made = conn.cursor()
        assert isinstance(made, Result)
        async with made as cursor:
            assert isinstance(cursor, aiosqlite_patch.OneHopCursor)
            await cursor.execute("SELECT 1")
            assert await cursor.fetchall() == [(1,)]
        await conn.rollback()  # no transaction open: no trip, no error


# --- httpx ----------------------------------------------------------------------------------------


def test_httpx_command_line_client_skipped() -> None:
    code = (
        "import sys, devagent.patches.httpx as p;"
        "p.skip_command_line_client(); p.skip_command_line_client(); import httpx;"
        " print(sys.modules['httpx._main'] is None, httpx.main.__module__, 'click' in sys.modules)"
    )
    assert run(code) == ["True", "httpx", "False"]
    import httpx

    source = inspect.getsource(httpx)
    assert "from ._main import main" in source and "except ImportError" in source


# --- private names devagent uses without patching them --------------------------------------------


def test_private_names_devagent_calls() -> None:
    from a2a.server.tasks import DatabaseTaskStore
    from typer._click import exceptions

    # a2a/store.py: the SDK's task store, saved and read through its own row conversion
    assert inspect.iscoroutinefunction(DatabaseTaskStore._ensure_initialized)
    assert params(DatabaseTaskStore._ensure_initialized) == ["self"]
    assert params(DatabaseTaskStore._to_orm) == ["self", "task", "owner"]
    assert params(DatabaseTaskStore._from_orm) == ["self", "task_model"]
    # patches/openai.py: a loose usage built by the SDK's constructor of that one field
    from openai import _models

    assert params(_models._construct_field) == ["value", "field", "key"]
    # store/direct.py: the pooled aiosqlite connection's thread and sqlite3 connection
    import aiosqlite

    assert inspect.iscoroutinefunction(aiosqlite.Connection._execute)
    # cli.py: Typer's copy of Click's exceptions, its usage errors caught
    assert issubclass(exceptions.NoArgsIsHelpError, exceptions.UsageError)
    assert issubclass(exceptions.UsageError, exceptions.ClickException)
