"""Waiting for a piece of work or a signal to stop, whichever comes first."""

from __future__ import annotations

import asyncio
from typing import Any


async def done_or_set(work: asyncio.Future[Any], event: asyncio.Event) -> None:
    """Returns once `work` is done or `event` is set; `work` is left as it is (running, if the
    event came first)."""
    waiting = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({work, waiting}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiting.cancel()
