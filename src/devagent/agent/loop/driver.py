"""The one turn driver every door uses: advance a session, show its events, put each waiting call's
question to the client, take the answers in any order, resume, and end with one outcome.

A door translates and nothing more. It implements `Door`: `show` writes an event in its
protocol's terms, `ask` puts one waiting call's question to its client (a permission request, a
client tool call). An answer comes back through `TurnDriver.answer`, at once (an editor's
permission dialog) or later (a wire client's response line); a door that cannot wait for answers
in this request (A2A's input-required, an MCP host without elicitation) calls `park`, and the
turn stays stored, waiting, for whichever request or process answers it next. `cancel` stops
the turn at any point, a question waiting included.

    driver = TurnDriver(session, door)
    outcome = await driver.run(UserPrompt("fix the tests"))   # TurnEnd, or Paused(calls)
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from devagent.agent.events import (
    ClientResult,
    Decision,
    Event,
    Input,
    NeedsInput,
    Resume,
    ToolCall,
    TurnEnd,
    UserPrompt,
)
from devagent.common.waiting import done_or_set

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


class TurnHandle(Protocol):
    def __aiter__(self) -> AsyncIterator[Event]: ...

    async def cancel(self) -> None: ...

    async def aclose(self) -> None:
        """Stop reading its events (the turn itself goes on, and stores what it does)."""
        ...


class Drivable(Protocol):
    """What the driver drives: a core session (or a door's stand-in for one, such as a remote
    session a terminal talks to)."""

    def advance(self, inp: Input, *, label: str | None = None) -> TurnHandle: ...

    async def cancel(self) -> None:
        """End the turn that waits for input (its waiting calls are cancelled, never run)."""
        ...

    async def settled_calls(self, ids: set[str]) -> list[ToolCall]:
        """What became of these calls (for telling a client how withdrawn calls ended)."""
        ...


class Door:
    """A door's side of a turn. `show` and `ask` are the door's own; the hooks are optional."""

    async def show(self, event: Event) -> None:
        """An event of the turn, `NeedsInput` and `TurnEnd` included, in the protocol's terms."""
        raise NotImplementedError

    async def ask(self, call: ToolCall, driver: TurnDriver) -> None:
        """Put one waiting call's question to the client. Its answer goes to `driver.answer`
        (now or later); a door that cannot wait calls `driver.park()`; one whose client gave up
        calls `driver.cancel()`."""
        raise NotImplementedError

    async def waiting(self, calls: list[ToolCall]) -> None:
        """Every question was put; the driver now waits for the answers."""

    async def withdrawn(self, calls: list[ToolCall]) -> None:
        """Calls that waited were settled by a cancel (never run): how each ended."""


@dataclass(slots=True)
class Paused:
    """The turn stopped with calls waiting for answers this door could not wait for: it is
    stored, and any later request (through any process) may answer them."""

    calls: list[ToolCall]


Outcome = TurnEnd | Paused


class TurnDriver:
    def __init__(
        self, session: Drivable, door: Door, *, label: str | None = None, record_early_cancel: bool = False
    ) -> None:
        self.session = session
        self.door = door
        self.label = label  # the door's name for the turn (an A2A taskId), stored with it
        # A cancel before the turn began: with this, the turn still begins (cancelled at once), so
        # the session records it (an A2A task reads canceled from it); without, nothing is run.
        self.record_early_cancel = record_early_cancel
        self.awaiting_answers = False  # every question is out; answers are being waited for
        self._answers: asyncio.Queue[Decision | ClientResult] = asyncio.Queue()
        self._cancelled = asyncio.Event()
        self._parked = False
        self._asked: set[str] = set()  # calls whose question was put (never put twice)
        self._turn: TurnHandle | None = None

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    @property
    def running(self) -> bool:
        """A turn of the session runs now (not waiting for answers, not ended)."""
        return self._turn is not None

    def answer(self, answer: Decision | ClientResult) -> None:
        """An answer to one waiting call, in any order; the turn goes on once answers came."""
        self._answers.put_nowait(answer)

    def park(self) -> None:
        """This door cannot wait for the answers: the turn ends `Paused`, stored waiting."""
        self._parked = True

    async def cancel(self) -> None:
        """Stop the turn wherever it is: running (its commands too) or waiting for answers."""
        self._cancelled.set()
        if self._turn is not None:
            await self._turn.cancel()

    async def run(self, first: Input | None, waiting: list[ToolCall] | None = None) -> Outcome:
        """Drive the turn from `first` (or, with `waiting`, from a stored pause whose calls are
        asked again) until it ends or parks."""
        inp: Input | None = first
        while True:
            if inp is not None:
                if self.cancelled and not self.record_early_cancel:
                    if not isinstance(inp, UserPrompt):
                        await self._withdraw(waiting or [])
                    return TurnEnd("cancelled")
                got = await self._advance(inp)
                if isinstance(got, TurnEnd):
                    return got
                waiting = got
            assert waiting is not None
            inp = await self._answers_to(waiting)
            if inp is None:
                if self._parked and not self.cancelled:
                    return Paused(waiting)
                await self._withdraw(waiting)
                return TurnEnd("cancelled")

    async def _advance(self, inp: Input) -> TurnEnd | list[ToolCall]:
        waiting: list[ToolCall] | None = None
        self._turn = turn = self.session.advance(inp, label=self.label)
        if self.cancelled:  # it begins cancelled, and ends at once
            await turn.cancel()
        try:
            async for ev in turn:
                await self.door.show(ev)
                if isinstance(ev, TurnEnd):
                    return ev
                if isinstance(ev, NeedsInput):
                    waiting = ev.calls
        finally:
            self._turn = None
            await turn.aclose()
        if waiting is None:  # the stream ended without NeedsInput or TurnEnd
            return TurnEnd("error", error="the turn ended unexpectedly")
        return waiting

    async def _answers_to(self, waiting: list[ToolCall]) -> Resume | None:
        """Put the questions not put yet, then take the answers that came (at least one, unless
        the door parked or the turn was cancelled: None)."""
        for call in waiting:
            if self.cancelled or self._parked:
                break
            if call.id not in self._asked:
                self._asked.add(call.id)
                await self.door.ask(call, self)
        if self.cancelled or (self._parked and self._answers.empty()):
            return None
        await self.door.waiting(waiting)
        answers: list[Decision | ClientResult] = []
        if self._answers.empty():
            self.awaiting_answers = True
            try:
                first = await self._first_answer()
            finally:
                self.awaiting_answers = False
            if first is None:
                return None
            answers.append(first)
        while not self._answers.empty():
            answers.append(self._answers.get_nowait())
        return Resume(
            decisions=[a for a in answers if isinstance(a, Decision)],
            results=[a for a in answers if isinstance(a, ClientResult)],
        )

    async def _first_answer(self) -> Decision | ClientResult | None:
        """Wait for an answer or a cancel: the answer, or None when the turn was cancelled."""
        get = asyncio.ensure_future(self._answers.get())
        try:
            await done_or_set(get, self._cancelled)
        finally:
            if not get.done():
                get.cancel()
        if self.cancelled or not get.done() or get.cancelled():
            return None
        return get.result()

    async def _withdraw(self, waiting: list[ToolCall]) -> None:
        """End the turn that waits (cancelled, its calls never run) and tell the door how each
        waiting call ended."""
        await self.session.cancel()
        if waiting:
            settled = await self.session.settled_calls({c.id for c in waiting})
            await self.door.withdrawn(settled)
