"""A turn as a task: one at a time per session, its events through a queue the caller reads, its
lease kept alive while it runs, and one way to stop it at any point.

The task, not the caller, owns the turn: a caller that stops reading (a client that disconnected)
does not stop it, and everything it does is stored as it goes. What a turn does is the session's
(`Session.run_turn`); this module only runs it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from devagent.agent.events import Event, Input, NeedsInput, TurnEnd, Usage
from devagent.agent.loop.inputs import CancelWaiting

if TYPE_CHECKING:
    from devagent.agent.loop.admission import Admission
    from devagent.agent.loop.record import SessionRecord
    from devagent.agent.state import SessionState


class TurnHost(Protocol):
    """What the runner needs of its session."""

    admission: Admission
    record: SessionRecord
    state: SessionState

    def turn_usage(self) -> Usage: ...

    def traced(
        self, inp: Input | CancelWaiting, label: str | None, work: Coroutine[Any, Any, None]
    ) -> Coroutine[Any, Any, None]:
        """The turn's coroutine, inside its trace span when tracing is on."""
        ...

    async def run_turn(
        self, inp: Input | CancelWaiting, label: str | None, emit: Callable[[Event], None]
    ) -> None:
        """Everything the turn does (it never raises but for a cancel of its own task)."""
        ...


class TurnRunner:
    def __init__(self, host: TurnHost) -> None:
        self.host = host
        self.cancelled = asyncio.Event()  # the running turn's: set when it is to stop
        self.current: Turn | None = None  # the turn that holds the session's lock
        self._task: asyncio.Task[None] | None = None
        self._started = False

    @property
    def busy(self) -> bool:
        return self.host.admission.lock.locked()

    def turn(self, inp: Input | CancelWaiting, label: str | None) -> Turn:
        return Turn(self, inp, label)

    async def events(
        self, inp: Input | CancelWaiting, label: str | None, turn: Turn
    ) -> AsyncGenerator[Event, None]:
        lock = self.host.admission.lock
        await lock.acquire()
        self.current = turn
        self.cancelled = asyncio.Event()
        if turn.cancelled:  # cancelled before it began: it ends at once
            self.cancelled.set()
        try:
            claimed = await self.host.admission.admit(inp, self.cancelled)
        except BaseException:
            self._unlock()
            raise
        if not claimed:  # cancelled while another process ran a turn of this session
            self._unlock()
            yield TurnEnd("cancelled", self.host.turn_usage())
            return
        queue: asyncio.Queue[Event] = asyncio.Queue()
        self._task = asyncio.create_task(
            self.host.traced(inp, label, self._run(inp, label, queue.put_nowait))
        )
        while True:
            event = await queue.get()
            yield event
            if isinstance(event, NeedsInput | TurnEnd):
                return

    async def _run(
        self, inp: Input | CancelWaiting, label: str | None, emit: Callable[[Event], None]
    ) -> None:
        self._started = True
        self.host.record.keep_lease(self.stop)
        try:
            await self.host.run_turn(inp, label, emit)
        finally:
            self.host.record.stop_keeping_lease()
            self._task = None
            self._started = False
            await self.host.admission.release()
            self._unlock()

    def _unlock(self) -> None:
        self.current = None
        self.host.admission.lock.release()

    def stop(self) -> None:
        """Ask the running turn to stop (it ends `cancelled`, cleaning up as it goes)."""
        task = self._task
        if task is not None and not task.done() and not self.cancelled.is_set():
            # a second request only waits: it must not cut the cleanup
            self.cancelled.set()
            if self._started:
                task.cancel()
            # else: a task cancelled before its first step would never run its cleanup; the
            # turn sees the event when it starts and ends cancelled.

    async def cancel(self, *, end_waiting: bool = True) -> None:
        """Stop the running turn, or (with `end_waiting`) end the turn that waits for input."""
        task = self._task
        if task is not None and not task.done():
            self.stop()
            # Waits for the turn's cleanup without taking its outcome; a cancel of the caller
            # itself still reaches the caller (and does not cut the turn's cleanup short).
            await asyncio.wait({task})
            return
        if self.busy and task is None:
            # An advance holds the lock but its turn has not started yet (it is loading the
            # transcript): the turn starts cancelled.
            self.cancelled.set()
            return
        if end_waiting and self.host.state.status == "awaiting_input":
            async for _ in Turn(self, CancelWaiting(), None):
                pass

    async def cancel_turn(self, turn: Turn) -> None:
        if self.current is turn:
            if self._task is None:
                self.cancelled.set()  # holds the session, not started: begins cancelled
            else:
                await self.cancel(end_waiting=False)


class Turn:
    """A turn of a session (`Session.advance`): iterate it for its events, until `NeedsInput` or
    `TurnEnd`. `cancel()` is the one way to stop it, at any point: before its first event is read
    (it then ends `cancelled` as soon as it begins, without running), while it waits for the
    session, or while it runs."""

    __slots__ = ("_events", "_runner", "cancelled")

    def __init__(self, runner: TurnRunner, inp: Input | CancelWaiting, label: str | None) -> None:
        self._runner = runner
        self.cancelled = False
        self._events = runner.events(inp, label, self)

    def __aiter__(self) -> Turn:
        return self

    async def __anext__(self) -> Event:
        return await self._events.__anext__()

    async def aclose(self) -> None:
        await self._events.aclose()

    async def cancel(self) -> None:
        self.cancelled = True
        await self._runner.cancel_turn(self)
