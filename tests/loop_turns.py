"""The turns of an asyncio event loop (each time it runs the callbacks that are ready), counted:
for a test or a bench that checks some work gives the loop no turn of its own."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def counted_turns(loop: asyncio.AbstractEventLoop) -> Iterator[list[int]]:
    """`[n]`: the turns `loop` (a pure-Python asyncio loop) has taken since the block began, kept
    up to date while it runs; the loop is as it was after the block."""
    turns = [0]
    run_once = loop._run_once  # type: ignore[attr-defined]

    def counted() -> None:
        turns[0] += 1
        run_once()

    loop._run_once = counted  # type: ignore[attr-defined]
    try:
        yield turns
    finally:
        del loop._run_once  # type: ignore[attr-defined]  # the class's method again
