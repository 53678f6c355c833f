"""pydantic-ai patches: what it recomputes before every model request for inputs that have not
changed (the tools' JSON schemas, the transcript's messages), and a yield per streamed chunk.

Written for pydantic-ai-slim 2.68.0 (`WRITTEN_FOR`, the pin in pyproject.toml). Each patch is
applied once, when a model is first built (devagent.agent.models.providers), and leaves alone a pydantic-ai
without the private function it wraps (tests/unit/test_patches.py fails then).

`cache_tool_schemas`: before each request pydantic-ai passes every tool definition through the
provider profile's `JsonSchemaTransformer` (`pydantic_ai.models._customize_tool_def`, called by
`Model.customize_request_parameters`), a recursive walk in Python over the same schemas every
time. bench/library_patches.py (the shared 2-core test machine under a load of ~5): with
devagent's ten tools, 710 µs a request without the patch, 76 µs with it. A definition object
handed again (the core keeps one per tool for every session) gets its customized definition back
as it is, with no copy of it made per request.

`memoize_history_mapping`: a chat-completions request carries the whole conversation, and before
each one pydantic-ai walks all of it twice in Python: it breaks chat-template special tokens in
the text of every part (`pydantic_ai._special_tokens._break_message`, when the model's profile
says the model may tokenize them) and maps every message to the chat-completions format
(`OpenAIChatModel._map_user_message` / `_map_model_response`). The history only grows, so that
work grew with every turn. bench/library_patches.py: for a transcript of 800 messages (200
tool turns), 12.5 ms a request without the patch, 2.8 ms with it.

The results are remembered on each message object. devagent's transcript is append-only and its
messages are never changed in place (/clear and /compact replace the list with new objects, and a
request whose attached files were shown is replaced by a new object), and pydantic-ai builds new
objects rather than changing them, so a message object stands for fixed content; what a result also
depends on (the model) is part of its key. The mapped messages are handed out as shallow copies,
since pydantic-ai sets keys on them afterwards (a reasoning field backfilled on a recent assistant
message) and must not find those in the next request. The rest of a request's preparation
(instructions, tool definitions, the JSON body) is built each time as before.

`uncontended_stream_pulls`: pydantic-ai reads every provider's stream through a
`PeekableAsyncStream`, which takes an `anyio.Lock` around each pull from the source (so that a
pull cancelled mid-way has let go before `aclose()` closes the source). anyio's lock, unless made
with `fast_acquire=True`, yields to the event loop after taking a free lock (a fairness
checkpoint), so each chunk of a model's answer cost an extra turn of the event loop: 7 a request
of the bench's, ~14 a tool turn. The patch gives each stream a lock made with `fast_acquire=True`:
the same lock (one pull at a time, a cancelled pull lets go), taken without that yield when it is
free; a contended one waits as before. bench/library_patches.py gives the figures.

No public hook does either: `Model.customize_request_parameters` may be overridden, but only by
re-implementing it around the same private function, in a subclass of every model class devagent
builds; the message mapping has no hook at all.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import AsyncIterator, Callable
from typing import Any

WRITTEN_FOR = "2.68.0"

SCHEMA_CACHE_SIZE = 512


@functools.cache  # applied once: a later call does nothing
def cache_tool_schemas() -> None:
    """Transform each tool's JSON schema for the model once, not on every request.

    The wrapper of `_customize_tool_def` remembers each result by the transformer, the strictness
    and the schema dict itself (the same object for a tool across requests); an entry is used only
    while the schema is that object and still equal to a copy taken when it was stored, so a
    schema changed in place is transformed again. pydantic-ai does not change the transformed
    schema afterwards (it is put in the request as it is). Applied once."""
    try:  # a pydantic-ai without the function is left alone
        from pydantic_ai import models as pai_models

        original: Any = pai_models._customize_tool_def
    except (ImportError, AttributeError):
        return
    # (transformer, id(schema), strict) -> (the schema, a copy of it, the transformed definition)
    cache: dict[tuple[Any, int, Any], tuple[Any, Any, Any]] = {}
    # (transformer, id(definition)) -> (the definition, a copy of it, its customized definition):
    # devagent hands the same definition objects request after request (prompt/instructions.py),
    # so the customized one is handed back as it is, not copied field by field each time
    # (`dataclasses.replace` of every tool was ~5% of a request's CPU).
    customized: dict[tuple[Any, int], tuple[Any, Any, Any]] = {}

    def transformed(transformer: Any, tool_def: Any) -> Any:
        schema = tool_def.parameters_json_schema
        key = (transformer, id(schema), tool_def.strict)
        hit = cache.get(key)
        if hit is not None and hit[0] is schema and hit[1] == schema:
            done = hit[2]
            return dataclasses.replace(
                tool_def, parameters_json_schema=done.parameters_json_schema, strict=done.strict
            )
        done = original(transformer, tool_def)
        if len(cache) >= SCHEMA_CACHE_SIZE:
            cache.clear()
        cache[key] = (schema, copy.deepcopy(schema), done)
        return done

    def customize(transformer: Any, tool_def: Any) -> Any:
        key = (transformer, id(tool_def))
        hit = customized.get(key)
        if hit is not None and hit[0] is tool_def and hit[1] == tool_def:
            return hit[2]
        done = transformed(transformer, tool_def)
        if len(customized) >= SCHEMA_CACHE_SIZE:
            customized.clear()
        customized[key] = (tool_def, copy.deepcopy(tool_def), done)
        return done

    customize.__wrapped__ = original  # type: ignore[attr-defined]
    pai_models._customize_tool_def = customize


@functools.cache  # applied once: a later call does nothing
def uncontended_stream_pulls() -> None:
    """Each `PeekableAsyncStream` pulls under a lock taken without a yield when free (this
    module's docstring). Applied once."""
    try:
        import anyio
        from pydantic_ai._utils import PeekableAsyncStream
    except ImportError:
        return
    original: Any = PeekableAsyncStream.__init__

    def __init__(self: Any, source: Any) -> None:
        original(self, source)
        if isinstance(getattr(self, "_source_lock", None), anyio.Lock):
            self._source_lock = anyio.Lock(fast_acquire=True)

    __init__.__wrapped__ = original  # type: ignore[attr-defined]
    PeekableAsyncStream.__init__ = __init__  # type: ignore[method-assign]


# The attribute each message object carries its results in: {what it depends on: the result}.
# Not a dataclass field, so equality, `dataclasses.replace` and pydantic-ai's serialization of
# the message ignore it; it lives and goes with the message (a lookup here is the cost per
# message per request that is left, so it is one attribute read, not a table).
_ATTR = "_devagent_prepared"


def _remembered(message: Any) -> dict[Any, Any]:
    found: dict[Any, Any] | None = message.__dict__.get(_ATTR)
    if found is None:
        found = message.__dict__[_ATTR] = {}
    return found


def _identity(fn: Any) -> tuple[int, Any]:
    """A bound method is a new object at each access: it is keyed by its object and function."""
    return (id(getattr(fn, "__self__", None)), getattr(fn, "__func__", fn))


@functools.cache  # applied once: a later call does nothing
def memoize_history_mapping() -> None:
    """The memo of the transcript's preparation (this module's docstring), applied once."""
    try:
        from pydantic_ai import _special_tokens
        from pydantic_ai.models.openai import OpenAIChatModel
    except ImportError:
        return

    break_message = getattr(_special_tokens, "_break_message", None)
    if break_message is not None:

        def remembered_break(message: Any, accepts_stateless_artifacts: Callable[..., bool]) -> Any:
            key = ("break", *_identity(accepts_stateless_artifacts))
            memo = _remembered(message)
            # the object it depends on is kept with the result, so its id is not reused meanwhile
            hit = memo.get(key)
            if hit is not None:
                return hit[1]
            result = break_message(message, accepts_stateless_artifacts)
            memo[key] = (getattr(accepts_stateless_artifacts, "__self__", None), result)
            return result

        remembered_break.__wrapped__ = break_message  # type: ignore[attr-defined]
        _special_tokens._break_message = remembered_break  # type: ignore[attr-defined]

    map_user = getattr(OpenAIChatModel, "_map_user_message", None)
    map_response = getattr(OpenAIChatModel, "_map_model_response", None)
    if map_user is None or map_response is None:
        return

    async def remembered_user(self: Any, message: Any) -> AsyncIterator[Any]:
        memo = _remembered(message)
        hit = memo.get(id(self))
        if hit is None:
            hit = memo[id(self)] = (self, [item async for item in map_user(self, message)])
        for item in hit[1]:
            yield dict(item)

    def remembered_response(self: Any, message: Any) -> Any:
        memo = _remembered(message)
        hit = memo.get(id(self))
        if hit is None:
            hit = memo[id(self)] = (self, map_response(self, message))
        return None if hit[1] is None else dict(hit[1])

    remembered_user.__wrapped__ = map_user  # type: ignore[attr-defined]
    remembered_response.__wrapped__ = map_response  # type: ignore[attr-defined]
    OpenAIChatModel._map_user_message = remembered_user  # type: ignore[method-assign]
    OpenAIChatModel._map_model_response = remembered_response  # type: ignore[method-assign]
