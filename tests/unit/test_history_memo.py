"""Issue 14 (time per turn flat as a conversation grows): each transcript message is prepared
for a request once. The memo must give exactly what pydantic-ai gives without it, hand out
copies pydantic-ai may change, and forget a message when it goes."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pydantic_ai import messages as pm
from pydantic_ai.models import ModelRequestParameters

from devagent.patches import pydantic_ai as history_memo


def _model() -> Any:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    return OpenAIChatModel("gpt-4o", provider=OpenAIProvider(api_key="none"))


def _history(n: int) -> list[pm.ModelMessage]:
    out: list[pm.ModelMessage] = []
    for i in range(n):
        out.append(pm.ModelRequest(parts=[pm.UserPromptPart(content=f"write <|im_start|> file {i}")]))
        out.append(
            pm.ModelResponse(
                parts=[
                    pm.TextPart(content=f"Writing {i}."),
                    pm.ToolCallPart(tool_name="write_file", args={"path": f"f{i}"}, tool_call_id=f"c{i}"),
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


async def _mapped(model: Any, history: list[pm.ModelMessage]) -> list[Any]:
    return await model._map_messages(history, ModelRequestParameters())


async def test_memo_gives_what_pydantic_ai_gives_and_maps_each_message_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pydantic_ai.models.openai import OpenAIChatModel

    model = _model()
    history = _history(5)
    history_memo.memoize_history_mapping()
    memo_user = OpenAIChatModel._map_user_message
    memo_response = OpenAIChatModel._map_model_response
    with_memo = await _mapped(model, history)
    # the library's own mapping, for comparison: the functions the memo wraps
    calls = {"user": 0, "response": 0}
    inner_user = _closure(memo_user, "map_user")
    inner_response = _closure(memo_response, "map_response")
    monkeypatch.setattr(OpenAIChatModel, "_map_user_message", inner_user)
    monkeypatch.setattr(OpenAIChatModel, "_map_model_response", inner_response)
    without = await _mapped(model, history)
    assert with_memo == without
    monkeypatch.undo()

    def counting(name: str, fn: Any) -> Any:
        if name == "user":

            async def user(self: Any, message: Any) -> Any:
                calls["user"] += 1
                async for item in fn(self, message):
                    yield item

            return user

        def response(self: Any, message: Any) -> Any:
            calls["response"] += 1
            return fn(self, message)

        return response

    # the memo's inner functions replaced by counting ones: a second request maps only what is new
    _set_closure(memo_user, "map_user", counting("user", inner_user))
    _set_closure(memo_response, "map_response", counting("response", inner_response))
    try:
        first = await _mapped(model, history)
        assert calls == {"user": 0, "response": 0}  # all remembered from the first request
        history.append(pm.ModelRequest(parts=[pm.UserPromptPart(content="and one more")]))
        second = await _mapped(model, history)
        assert calls == {"user": 1, "response": 0}
        assert second[: len(first)] == first
    finally:
        _set_closure(memo_user, "map_user", inner_user)
        _set_closure(memo_response, "map_response", inner_response)


async def test_handed_out_copies_do_not_carry_changes_into_the_next_request() -> None:
    history_memo.memoize_history_mapping()
    model = _model()
    history = _history(2)
    first = await _mapped(model, history)
    for m in first:
        if m["role"] == "assistant":
            m["reasoning_content"] = ""  # what pydantic-ai's backfill does to a mapped message
    second = await _mapped(model, history)
    assert all("reasoning_content" not in m for m in second)


async def test_special_tokens_still_broken_and_the_memo_invisible_in_the_message() -> None:
    history_memo.memoize_history_mapping()
    from pydantic_ai._special_tokens import break_special_tokens_in_messages

    model = _model()
    history = _history(3)
    profile: Any = {"may_tokenize_special_tokens_in_content": True}
    broken = break_special_tokens_in_messages(history, profile, model.accepts_stateless_artifacts)
    again = break_special_tokens_in_messages(history, profile, model.accepts_stateless_artifacts)
    assert broken[0] is not history[0]  # the prompt had a token: a new message
    assert again[0] is broken[0]  # remembered
    text = broken[0].parts[0].content  # type: ignore[union-attr]
    assert "<|im_start|>" not in text and "im_start" in text
    # the results ride on the message object, outside its fields: equality, copies and the
    # stored form are as before
    await _mapped(model, history)
    assert history_memo._ATTR in vars(history[0])
    copies = [dataclasses.replace(m) for m in history]  # the same fields, no memo
    assert history_memo._ATTR not in vars(copies[0])
    assert history == copies
    assert pm.ModelMessagesTypeAdapter.dump_json(history) == pm.ModelMessagesTypeAdapter.dump_json(copies)


def _closure(fn: Any, name: str) -> Any:
    return fn.__closure__[fn.__code__.co_freevars.index(name)].cell_contents


def _set_closure(fn: Any, name: str, value: Any) -> None:
    fn.__closure__[fn.__code__.co_freevars.index(name)].cell_contents = value
