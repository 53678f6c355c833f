"""One model request, streamed: pydantic-ai's stream of parts becomes the core's text and thought
events as it arrives, and the whole response is returned."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic_ai import messages as pm

from devagent.agent.events import Event, TextDelta, ThoughtDelta


async def stream_response(
    model: Any, messages: list[pm.ModelMessage], params: Any, emit: Callable[[Event], None]
) -> pm.ModelResponse:
    from pydantic_ai.direct import model_request_stream

    async with model_request_stream(model, messages, model_request_parameters=params) as stream:
        async for ev in stream:
            if isinstance(ev, pm.PartStartEvent):
                part = ev.part
                if isinstance(part, pm.TextPart) and part.content:
                    emit(TextDelta(part.content))
                elif isinstance(part, pm.ThinkingPart) and part.content:
                    emit(ThoughtDelta(part.content))
            elif isinstance(ev, pm.PartDeltaEvent):
                delta = ev.delta
                if isinstance(delta, pm.TextPartDelta) and delta.content_delta:
                    emit(TextDelta(delta.content_delta))
                elif isinstance(delta, pm.ThinkingPartDelta) and delta.content_delta:
                    emit(ThoughtDelta(delta.content_delta))
        return stream.get()
