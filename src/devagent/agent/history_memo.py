"""Each transcript message prepared for a model request once, not on every request (issue 14).

A chat-completions request carries the whole conversation, and before each one pydantic-ai walks
all of it twice in Python: it breaks chat-template special tokens in the text of every part
(`pydantic_ai._special_tokens._break_message`, when the model's profile says the model may
tokenize them) and maps every message to the chat-completions format
(`OpenAIChatModel._map_user_message` / `_map_model_response`). The history only grows, so that
work grew with every turn: between turns 40-80 and 200-240 of one conversation it was most of the
growth in a tool turn's CPU (py-spy).

The results are remembered on each message object. devagent's transcript is append-only and its
messages are never changed in place (/clear and /compact replace the list with new objects), and
pydantic-ai builds new objects rather than changing them, so a message object stands for fixed
content; what a result also depends on (the model) is part of its key. The mapped messages are
handed out as shallow copies, since pydantic-ai sets keys on them afterwards (a reasoning field
backfilled on a recent assistant message) and must not find those in the next request. The rest
of a request's preparation (instructions, tool definitions, the JSON body) is built each time as
before.

Applied once, when an OpenAI-family model is first built; a pydantic-ai without these functions
is left alone.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

_APPLIED = False


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


def memoize_history_mapping() -> None:
    global _APPLIED
    if _APPLIED:
        return
    _APPLIED = True
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

    OpenAIChatModel._map_user_message = remembered_user  # type: ignore[method-assign]
    OpenAIChatModel._map_model_response = remembered_response  # type: ignore[method-assign]
