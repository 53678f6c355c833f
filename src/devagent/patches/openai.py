"""OpenAI SDK patches: the work it does in Python on every chat-completions request and every
streamed chunk that gives back what it was given.

Written for openai 3.57.0 (`WRITTEN_FOR`; pydantic-ai-slim[openai] 2.68.0, pinned in
pyproject.toml, brings it). Both are applied once, when an OpenAI-family model is first built
(devagent.agent.models.providers), and leave alone an SDK without the name they wrap
(tests/unit/test_patches.py fails then). The SDK offers no hook for either: the request body's
transform and the chunk's construction are internal steps of its client.

What they buy (bench/library_patches.py, the shared 2-core test machine under a load of ~5):
- `skip_message_transform` (`openai.resources.chat.completions.completions.async_maybe_transform`):
  the body of a request carrying 800 messages (200 tool turns) and devagent's ten tools, 300 ms
  without the patch, 66 µs with it;
- `validate_stream_chunks` (`openai._base_client.BaseClient._process_response_data`): a streamed
  text chunk, 121 µs without, 2.8 µs with.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from typing import Any, ClassVar

from devagent.common.errors import DevagentError

WRITTEN_FOR = "3.57.0"

# How many shapes of the request's other parameters `skip_message_transform` remembers.
SHAPES_REMEMBERED = 512


@functools.cache  # applied once: a later call does nothing
def skip_message_transform() -> None:
    """Stop the OpenAI SDK from walking the whole transcript on every request.

    `chat.completions.create` passes its body through the SDK's `async_maybe_transform`, which
    walks every value against its TypedDict annotation to apply `PropertyInfo` aliases and formats.
    The chat message and tool types have none (openai/types/chat/*_param.py), so for plain dicts
    the walk returns what it was given, but it costs ~10 µs per key through `typing`
    introspection: at turn 200 of a conversation it was three quarters of the server's CPU, and
    the reason time per turn grew with the history; the tool definitions (JSON schemas) cost
    another 4% of every request. The wrapper transforms the body without `messages` and `tools`
    and puts them back as they are; when an entry is not a plain dict (never from pydantic-ai) the
    SDK's own walk runs. The other parameters (model, stream, stream_options, tool_choice and
    some thirty not given; ~200 µs a request) are walked by the SDK the first time their shape
    (the keys given, nesting, value types of plain JSON data; the keys not given) is seen; when
    the walk gave back the given ones unchanged, later requests of that shape skip it and leave
    out the ones not given, as the walk does, so an SDK that does rename or format
    one of them keeps doing so.
    Applied once."""
    try:  # an SDK without the function is left alone
        from openai.resources.chat.completions import completions

        original: Any = completions.async_maybe_transform  # type: ignore[attr-defined]
    except (ImportError, AttributeError):
        return
    from openai import _utils as sdk_utils

    # without it, nothing counts as given and the other parameters keep the SDK's walk every time
    is_given: Callable[[object], bool] = getattr(sdk_utils, "is_given", lambda _: False)

    def plain(value: object) -> bool:
        return isinstance(value, list) and all(type(v) is dict for v in value)

    def shape(value: object) -> Hashable:
        """The structure of plain JSON data (keys, nesting, value types), or None if not plain."""
        kind = type(value)
        if kind is dict:
            items = []
            for k, v in value.items():  # type: ignore[attr-defined]
                s = shape(v)
                if s is None or type(k) is not str:
                    return None
                items.append((k, s))
            return ("d", tuple(items))
        if kind is list:
            parts = tuple(shape(v) for v in value)  # type: ignore[attr-defined]
            return None if None in parts else ("l", parts)
        return kind.__name__ if kind in (str, int, float, bool) or value is None else None

    # the shape of the other parameters -> whether the SDK's walk gave them back unchanged
    unchanged: dict[tuple[Hashable, tuple[str, ...], object], bool] = {}

    async def transform(data: object, expected_type: object) -> Any:
        if isinstance(data, dict) and plain(data.get("messages")):
            kept = {k: data[k] for k in ("messages", "tools") if k in data and plain(data[k])}
            others = {k: v for k, v in data.items() if k not in kept}
            # the parameters not given (the SDK's `omit` sentinels), which its walk leaves out
            given = {k: v for k, v in others.items() if is_given(v)}
            form = shape(given)
            key = (form, tuple(k for k in others if k not in given), expected_type)
            if form is not None and unchanged.get(key):
                return {**kept, **given}
            rest = await original(others, expected_type)
            if form is not None and len(unchanged) < SHAPES_REMEMBERED:
                unchanged[key] = type(rest) is dict and rest == given and list(rest) == list(given)
            if isinstance(rest, dict):
                return {**kept, **rest}
        return await original(data, expected_type)

    transform.__wrapped__ = original  # type: ignore[attr-defined]
    completions.async_maybe_transform = transform  # type: ignore[attr-defined]


@functools.cache  # applied once: a later call does nothing
def validate_stream_chunks() -> None:
    """Build each streamed chat chunk with pydantic-core, not the OpenAI SDK's loose constructor.

    The SDK turns every SSE chunk of a streamed completion into a `ChatCompletionChunk` with
    `construct_type`, a recursive walk in Python over the model's annotations: ~100 µs a chunk
    (a tool turn's two requests stream ~11), where `model_validate(strict=True)` builds the same
    model in ~5 µs. Strict, so a chunk that
    validates holds exactly the values the constructor would have kept (no coercion); a chunk
    that does not (an unknown `finish_reason`, `choices: null` from a loose OpenAI-compatible
    server, any type the SDK does not declare) goes to the SDK's own constructor as before. The
    models are equal, attribute by attribute and dump by dump (extra keys such as
    `reasoning_content` land in `model_extra` either way); the one difference is that a validated
    model also lists its extra keys in `model_fields_set`, which nothing reads. Only for
    `ChatCompletionChunk` and without `_strict_response_validation` (whose own path is kept);
    applied once."""
    try:  # an SDK without the method is left alone
        import pydantic
        from openai._base_client import BaseClient
        from openai.types.chat import ChatCompletionChunk

        original: Any = BaseClient._process_response_data
    except (ImportError, AttributeError):
        return
    validate = ChatCompletionChunk.model_validate
    invalid = pydantic.ValidationError
    construct_field: Any = None  # the SDK's constructor of one field, for a usage that is loose
    try:
        from openai import _models

        construct_field = _models._construct_field
        usage_field: Any = ChatCompletionChunk.model_fields["usage"]
    except (AttributeError, KeyError):
        construct_field = None

    def loose_usage(data: dict[str, Any]) -> Any:
        """A chunk whose only loose part is its usage (a server that leaves out `total_tokens`,
        as many OpenAI-compatible ones do, on the last chunk of every request): the rest
        validated, the usage built by the SDK's constructor of that field, as the SDK's
        constructor of the whole chunk builds it. None when the rest does not validate either."""
        try:
            chunk = validate({**data, "usage": None}, strict=True)
        except invalid:
            return None
        chunk.usage = construct_field(data["usage"], usage_field, "usage")
        return chunk

    def process(self: Any, *, data: object, cast_to: Any, response: Any) -> Any:
        if cast_to is ChatCompletionChunk and type(data) is dict and not self._strict_response_validation:
            try:
                return validate(data, strict=True)
            except invalid:
                if type(data.get("usage")) is dict and construct_field is not None:
                    chunk = loose_usage(data)
                    if chunk is not None:
                        return chunk
        return original(self, data=data, cast_to=cast_to, response=response)

    process.__wrapped__ = original  # type: ignore[attr-defined]
    BaseClient._process_response_data = process  # type: ignore[method-assign]


# Strings at least this long are remembered encoded (the instructions, tool descriptions, long
# messages); shorter ones cost less to encode than to look up.
LONG_STRING = 512
ENCODED_REMEMBERED = 1024  # entries of each memo before it starts again


@functools.cache  # applied once: a later call does nothing
def remember_encoded_prefix() -> None:
    """Encode the unchanged part of a request body once per session, not on every request.

    Each chat-completions request is sent as JSON with the instructions (tens of KB), the tool
    definitions and the whole transcript: the SDK's `openapi_dumps` encodes all of it every time
    (~0.3-0.6 ms a request, a fifth of the SDK's work on a request). The same objects come back
    request after request: the instructions are one string a session keeps, each tool's schema
    one dict (patches/pydantic_ai.py keeps the transformed ones), the transcript's messages the
    dicts pydantic-ai mapped once. The wrapper builds the same bytes as the SDK, key by key in
    the same order with the same separators, but takes the JSON of a long string or of a tool's
    schema from a memo: a string by identity (strings do not change), a schema by identity and
    only while it is still equal to the data its JSON was made from. Anything that is not plain
    JSON data of that shape (a non-string key, an object the SDK's encoder converts) is encoded
    by the SDK as before. So the bytes, and a session's prompt prefix, are what the SDK sends;
    tests/unit/test_patches.py compares them. Applied once."""
    try:  # an SDK without the function is left alone
        from openai import _base_client

        original: Any = _base_client.openapi_dumps  # type: ignore[attr-defined]
        encoder_cls: Any = original.__globals__["_CustomEncoder"]
    except (ImportError, AttributeError, KeyError):
        return
    encoder = encoder_cls(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    body = _PrefixEncoder(encoder.encode)  # what json.dumps(value, cls=..., ...) returns

    def dumps(data: object) -> bytes:
        if type(data) is dict and "messages" in data:
            try:
                return body.members(data, body.in_body).encode()
            except _NotPlain:
                pass
        result: bytes = original(data)
        return result

    dumps.__wrapped__ = original  # type: ignore[attr-defined]
    _base_client.openapi_dumps = dumps  # type: ignore[attr-defined,assignment]


class _PrefixEncoder:
    """A request body's JSON as the SDK's encoder makes it (`plain`), key by key, with long
    strings and tool schemas taken from memos (see `remember_encoded_prefix`)."""

    CONSTANTS: ClassVar[dict[object, str]] = {None: "null", True: "true", False: "false"}

    def __init__(self, plain: Callable[[object], str]) -> None:
        from json.encoder import encode_basestring  # type: ignore[attr-defined]

        self.plain = plain
        self.quoted: Callable[[str], str] = encode_basestring
        self.strings: dict[int, tuple[str, str]] = {}
        self.schemas: dict[int, tuple[object, object, str]] = {}

    def string(self, s: str) -> str:
        if len(s) < LONG_STRING:
            return self.quoted(s)
        hit = self.strings.get(id(s))
        if hit is not None and hit[0] is s:
            return hit[1]
        if len(self.strings) >= ENCODED_REMEMBERED:
            self.strings.clear()
        out = self.quoted(s)
        self.strings[id(s)] = (s, out)
        return out

    def schema(self, d: object) -> str:
        import json

        hit = self.schemas.get(id(d))
        if hit is not None and hit[0] is d and hit[1] == d:
            return hit[2]
        out = self.plain(d)
        if len(self.schemas) >= ENCODED_REMEMBERED:
            self.schemas.clear()
        self.schemas[id(d)] = (d, json.loads(out), out)
        return out

    def value(self, v: object) -> str:
        kind = type(v)
        if kind is str:
            return self.string(v)  # type: ignore[arg-type]
        if kind is bool or v is None:
            return self.CONSTANTS[v]
        return self.plain(v)

    def members(self, d: object, special: Callable[[str, object], str | None]) -> str:
        """A dict's JSON, each value through `special` first (None: the plain encoding)."""
        if type(d) is not dict:
            return self.plain(d)
        parts = []
        for k, v in d.items():
            if type(k) is not str:
                raise _NotPlain
            parts.append(self.quoted(k) + ":" + (special(k, v) or self.value(v)))
        return "{" + ",".join(parts) + "}"

    def each(self, items: object, special: Callable[[str, object], str | None]) -> str:
        if type(items) is not list:
            return self.plain(items)
        return "[" + ",".join([self.members(x, special) for x in items]) + "]"

    def in_message(self, k: str, v: object) -> str | None:
        return self.string(v) if k == "content" and type(v) is str else None  # type: ignore[arg-type]

    def in_function(self, k: str, v: object) -> str | None:
        return self.schema(v) if k == "parameters" else None

    def in_tool(self, k: str, v: object) -> str | None:
        return self.members(v, self.in_function) if k == "function" else None

    def in_body(self, k: str, v: object) -> str | None:
        if k == "messages":
            return self.each(v, self.in_message)
        return self.each(v, self.in_tool) if k == "tools" else None


class _NotPlain(DevagentError):
    """A body the memoized encoding does not take (the SDK's encoder takes it instead)."""
