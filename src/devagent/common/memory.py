"""Memory a burst of work left behind goes back to the system.

A burst (hundreds of conversations in a few minutes, a fuzzer) fills the process's caches of
the store: idle sessions (`AgentCore`) and stored tasks (`BufferedTaskStore`). Their bounds are
counts and bytes, so after the burst they stay full for as long as the process lives. And what a
cache lets go goes back to the allocator, not to the system: glibc's malloc keeps the freed pages
of its heap for reuse, and only `malloc_trim` returns them (measured: a server at 141 MiB idle
held 233 MiB after 300 conversations of 150 KB prompts; with both caches emptied still 235 MiB,
and 144 MiB once trimmed).

So the caches also let go of what was not used for `cache_idle_seconds`, and an `IdleSweeper`
asks them to every so often; when they dropped something, the garbage is collected and the heap
trimmed. Standard library only."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import functools
import gc
import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

Dropper = Callable[[float], int]
"""Drops a cache's entries last used before a `time.monotonic()` instant; how many it dropped."""


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, or None where the C library has none (musl, macOS)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


def give_back_memory() -> None:
    """Collect what cycles hold, then return the heap's free pages to the system (blocking: run
    it in a thread; ctypes lets go of the GIL while `malloc_trim` runs)."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


class IdleSweeper:
    """Every `idle_seconds / 2` (at least every 0.5 s), asks each cache registered with `add` to
    drop what was not used for `idle_seconds`, and gives the memory back when one did. Runs from
    the first `start` (inside a running loop) to `close`; `idle_seconds` 0 never sweeps."""

    def __init__(self, idle_seconds: float) -> None:
        self.idle_seconds = idle_seconds
        self.droppers: list[Dropper] = []
        self.sweeps = 0  # sweeps that dropped something (and trimmed)
        self._task: asyncio.Task[None] | None = None

    def add(self, dropper: Dropper) -> None:
        self.droppers.append(dropper)

    def start(self) -> None:
        if self._task is None and self.idle_seconds > 0:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="idle-sweeper")

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(max(0.5, self.idle_seconds / 2))
            try:
                await self.sweep()
            except Exception:  # a cache's failure must not end the sweeping
                log.exception("sweeping the idle caches failed")

    async def sweep(self) -> int:
        """Drops what each cache has not used for `idle_seconds`; how many entries it dropped."""
        cutoff = time.monotonic() - self.idle_seconds
        dropped = sum(drop(cutoff) for drop in self.droppers)
        if dropped:
            await asyncio.to_thread(give_back_memory)
            self.sweeps += 1
        return dropped
