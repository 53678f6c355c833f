"""What a slash command reports through: the events it emits to the turn, and its text."""

from __future__ import annotations

from collections.abc import Callable

from devagent.agent.events import Event, TextDelta

Emit = Callable[[Event], None]


def say(emit: Emit, text: str) -> None:
    """A command's report, as text of the turn."""
    emit(TextDelta(text if text.endswith("\n") else text + "\n"))
