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
            # a part's start carries its first text, a delta the text it adds
            piece: object
            if isinstance(ev, pm.PartStartEvent):
                piece, text = ev.part, getattr(ev.part, "content", None)
            elif isinstance(ev, pm.PartDeltaEvent):
                piece, text = ev.delta, getattr(ev.delta, "content_delta", None)
            else:
                continue
            if text and isinstance(piece, pm.TextPart | pm.TextPartDelta):
                emit(TextDelta(text))
            elif text and isinstance(piece, pm.ThinkingPart | pm.ThinkingPartDelta):
                emit(ThoughtDelta(text))
        return stream.get()
