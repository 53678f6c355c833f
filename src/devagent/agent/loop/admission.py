"""Who may change a session now, and with what: one turn at a time in this process (the lock),
one process at a time (the lease in the store, `record.py`), each answer applied once (an answer
accepted here is not accepted again before its turn applies it), and every turn within its
caller's budget (a concurrent-turn slot held while it runs, the day's tokens not spent)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from devagent.agent.events import Input, InputError, Resume
from devagent.agent.loop.inputs import CancelWaiting, answered_ids, validate
from devagent.agent.views.timeline import answered_calls

if TYPE_CHECKING:
    from devagent.agent.loop.record import SessionRecord

# How long an accepted answer keeps its calls from being answered again, waiting for its turn.
ANSWER_HOLD_SECONDS = 120


class Admission:
    def __init__(
        self,
        record: SessionRecord,
        take_slot: Callable[[], Awaitable[bool]],
        known_command: Callable[[list[str]], bool],
    ) -> None:
        self.record = record
        self._known_command = known_command  # the session's commands, custom ones included
        self._take_slot = take_slot  # the caller's budget: a slot for the turn (True: one taken)
        self.lock = asyncio.Lock()
        self._answering: dict[str, float] = {}  # call ids of accepted answers not applied yet

    async def claim(self, inp: Input | CancelWaiting | None, cancelled: asyncio.Event) -> bool:
        """Take the session's lease before changing it (under `lock`); while another live process
        holds it, an answer is checked against the stored state meanwhile, so an answer given
        through the other process already is refused at once. False: cancelled while waiting."""
        if self.record.lease_is_fresh():
            return True  # taken for this turn a moment ago (`accept_answers`)
        record = self.record

        async def recheck() -> None:
            assert isinstance(inp, Resume)
            await record.refresh()
            validate(inp, record.state, self._known_command)

        return await record.claim(cancelled, recheck if isinstance(inp, Resume) else None)

    async def admit(self, inp: Input | CancelWaiting, cancelled: asyncio.Event) -> bool:
        """Claim the session for a turn (under `lock`), check the input against it and the
        caller's budget. Refused: nothing held, the error raised. False: cancelled while waiting."""
        try:
            claimed = await self.claim(inp, cancelled)
            if claimed:
                await self.record.messages()
                validate(inp, self.record.state, self._known_command)
                if not isinstance(inp, CancelWaiting):
                    self.record.slot = await self._take_slot()
            return claimed
        except BaseException as e:
            if isinstance(inp, Resume) and isinstance(e, InputError) and e.code == "budget_exceeded":
                self.applied(inp)  # refused by the budget: the answer may be given again
            await self.release()
            raise

    async def release_unused(self) -> None:
        """Give up a lease taken for a turn that did not start; a no-op when no lease is held or a
        turn holds it."""
        if self.record.leased and not self.lock.locked():
            await self.release()

    async def settle_abandoned(self) -> bool:
        """For readers: if the stored session says a turn runs but no live process holds its
        lease, settle it now (running calls interrupted, never re-run). True if it did."""
        if self.lock.locked():
            return False  # a turn of this process is starting or running: it settles it
        async with self.lock:
            if not await self.record.claim_if_free():
                return False
            try:
                if self.record.state.status != "running":
                    return False
                await self.record.recover()
                return True
            finally:
                await self.record.release_lease()

    async def release(self) -> None:
        await self.record.release_lease()
        await self.record.release_slot()

    async def change(self, change: Callable[[], None], cancelled: asyncio.Event) -> None:
        """Make a change to the stored state under the lease, outside a turn."""
        async with self.lock:
            await self.claim(None, cancelled)
            try:
                change()
            finally:
                await self.record.save_and_release()

    async def accept_answers(self, inp: Resume, cancelled: asyncio.Event) -> None:
        """Check an answer against the stored state before a door accepts the message carrying it
        (so a refusal is an error in the protocol's terms, not a failed turn), taking the lease
        and a budget slot for the turn that will apply it. Of two answers to one call sent
        through two processes one is accepted and the other refused ("answered already"); in
        this process, an answer to a call another accepted answer is about to apply is refused
        too. Raises `InputError`."""
        ids = set(answered_ids(inp))
        now = time.monotonic()
        self._answering = {k: t for k, t in self._answering.items() if now - t < ANSWER_HOLD_SECONDS}
        taken = ids & self._answering.keys()
        if taken:
            raise InputError(f"tool call {', '.join(sorted(taken))} was answered already", "answered")
        async with self.lock:
            if not await self.claim(inp, cancelled):
                raise InputError("the answer was cancelled", "cancelled")
            validate(inp, self.record.state, self._known_command)
            try:
                self.record.slot = await self._take_slot()
            except InputError:
                await self.record.release_lease()
                raise
            for i in ids:
                self._answering[i] = now
            # The lease stays with this process for the turn that applies the answer.

    async def hold(self, cancelled: asyncio.Event) -> bool:
        """Take the lease for a turn about to start in this process, before the door stores the
        message it runs (so a reader knows whose message it is, and when that process is gone);
        the turn finds it fresh (`claim`). False: cancelled while another process held it."""
        async with self.lock:
            return await self.claim(None, cancelled)

    def applied(self, inp: Resume) -> None:
        """The turn applying this answer took it up (or it was refused): its calls are free."""
        for call_id in answered_ids(inp):
            self._answering.pop(call_id, None)

    async def answered(self, call_ids: list[str]) -> list[str]:
        """Which of these calls no longer wait (answered, running, run, or closed), in the current
        step or anywhere in the transcript: for telling "answered already" from "unknown"."""
        done = {p.id for p in self.record.state.pending if not (p.needs and p.result is None)}
        done |= set(self._answering)
        wanted = set(call_ids) - done
        if wanted:
            done |= answered_calls(await self.record.messages(), wanted)
        return [c for c in call_ids if c in done]
