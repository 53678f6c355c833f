"""Helpers for tests that drive the core directly."""

from __future__ import annotations

from typing import Any

from devagent.agent.events import Notice, TextDelta, ToolCallStatus, ToolCallUpdate


async def collect(gen: Any) -> list[Any]:
    return [e async for e in gen]


def text_of(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def notices(events: list[Any]) -> list[str]:
    return [e.text for e in events if isinstance(e, Notice)]


def call(name: str, args: dict[str, Any], cid: str) -> dict[str, Any]:
    """A scripted-model tool call item."""
    return {"tool_call": {"name": name, "args": args, "id": cid}}


def updates(events: list[Any], call_id: str) -> list[ToolCallStatus]:
    """The statuses a call went through (live-output updates within a status collapsed)."""
    seen: list[ToolCallStatus] = []
    for e in events:
        if isinstance(e, ToolCallUpdate) and e.call.id == call_id and (not seen or seen[-1] != e.call.status):
            seen.append(e.call.status)
    return seen
