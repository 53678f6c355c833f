"""A session's record: its state and transcript as stored, and the lease that lets one process
change them.

Any number of processes may share the database. A process changes a session only while it holds
the session's lease (`claim`); every save is a compare-and-set on the revision it read, so a
process whose view is stale writes nothing (`StaleSession`). A process that takes the lease and
finds the stored revision newer adopts the stored state and reads the transcript again; one that
finds a turn `running` (its process died) settles it (`recover`): calls that had started are
reported interrupted and never run again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from devagent.agent.events import ToolCallStatus, ToolErrorType, Usage
from devagent.agent.history import transcript
from devagent.agent.models.prices import NANO
from devagent.agent.settings import utc_day
from devagent.agent.state import CallResult, SessionState
from devagent.store.leases import Lease

if TYPE_CHECKING:
    from pydantic_ai import messages as pm

    from devagent.store.db import Store

log = logging.getLogger("devagent.session")

INTERRUPTED = (
    "The turn was interrupted: the server process running it stopped before it finished. "
    "Calls it had started were not run again. Send a message to continue."
)
STALE = (
    "Another server process changed this conversation while this turn ran; the turn stopped "
    "here (nothing was run or written twice). Send a message to continue."
)
INTERRUPTED_CALL = (
    "interrupted: the server process running this call stopped before it finished;"
    " it was not run again (check its effects before running it again)"
)


class SessionRecord:
    """One session as this process knows it from the store: `state` at `revision`, the transcript
    (read when first needed), and whether this process holds the lease and a turn slot."""

    def __init__(
        self,
        store: Store,
        session_id: str,
        state: SessionState,
        revision: int,
        lease_seconds: float,
        context_tokens: Callable[[], int],
    ) -> None:
        self.store = store
        self.id = session_id
        self.state = state
        self.revision = revision  # the stored revision `state` is at (saves compare and set it)
        self.leased = False  # this process holds the session's lease in the store
        self._leased_at = 0.0  # when it took it (monotonic)
        self.slot = False  # this process holds one of the caller's turn slots for this session
        self._lease_seconds = lease_seconds
        self._context_tokens = context_tokens
        self._messages: list[pm.ModelMessage] | None = None
        self._saved_count = 0  # how many transcript messages are in the store
        # Writes of other tables (checkpoints, usage) that go into the next save's transaction.
        self._also: list[Callable[[Any], Awaitable[object]]] = []
        self._heartbeat: asyncio.Task[None] | None = None  # renews the lease a turn holds

    # --- the transcript -------------------------------------------------------------------

    async def messages(self) -> list[pm.ModelMessage]:
        if self._messages is None:
            self._messages = transcript.load(await self.store.load_messages(self.id))
            self._saved_count = len(self._messages)
        return self._messages

    def start_empty(self) -> None:
        """For a session just created: its transcript is empty, no need to read it."""
        if self._messages is None:
            self._messages = []
            self._saved_count = 0

    def write_with_next_save(self, write: Callable[[Any], Awaitable[object]]) -> None:
        self._also.append(write)

    def changed_message(self, index: int) -> None:
        """The transcript's message `index` was changed in place: stored again with the next save
        (a message not stored yet goes with it anyway)."""
        if self._messages is not None and index < self._saved_count:
            data = transcript.dump(self._messages[index])
            self._also.append(self.store.message_write(self.id, index, data))

    async def replace_messages(self, messages: list[pm.ModelMessage]) -> None:
        """The whole transcript replaced, and stored with the state in one write."""
        self._messages = list(messages)
        await self._write(replace=[transcript.dump(m) for m in self._messages])
        self._saved_count = len(self._messages)

    def spend(self, usage: Usage) -> None:
        """A model request's usage (priced already): the session's and the turn's, and the
        caller's day in the store (written with the next save, in the step's transaction)."""
        self.state.usage.add(usage)
        self.state.turn_usage.add(usage)
        amounts = {
            "input_tokens": usage.input_tokens,
            "cached_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
            "output_tokens": usage.output_tokens,
            "requests": usage.requests,
            "cost_nanousd": round(usage.cost_usd * NANO),
            "unpriced_requests": usage.unpriced_requests,
        }
        self._also.append(self.store.usage_write(self.state.identity, utc_day(), amounts))

    def charge_subagent(self, usage: Usage) -> None:
        """A request of one of this session's subagents: counted in this session's usage, its
        turn's (so the task's cap holds across its subagents) and its subagents' share; stored with
        this session's next save. The caller's day has it already (the subagent's own save)."""
        self.state.usage.add(usage)
        self.state.turn_usage.add(usage)
        self.state.subagent_usage.add(usage)

    # --- saving -----------------------------------------------------------------------------

    async def save(self, *, release: bool = False) -> None:
        """Store the state and the new transcript messages: a compare-and-set on the revision
        this object is at, by the lease's holder (`StaleSession` if another process changed the
        session). `release` gives up the lease in the same write (the heartbeat stops first)."""
        if release:
            self.stop_keeping_lease()
        msgs = self._messages or []
        start = self._saved_count
        append = (
            [(i, transcript.dump(m)) for i, m in enumerate(msgs[start:], start)]
            if len(msgs) > start
            else None
        )
        await self._write(release=release, append=append)
        self._saved_count = len(msgs)
        if release:
            self.leased = False

    async def _write(
        self,
        *,
        release: bool = False,
        append: list[tuple[int, str]] | None = None,
        replace: list[str] | None = None,
    ) -> None:
        """One compare-and-set write of the state, the transcript's change and the writes waiting
        for the next save; the revision the store gives it is this object's from now on."""
        also, self._also = self._also, []
        self.revision = await self.store.save(
            self.id,
            self.state.to_json(),
            expected=self.revision,
            owner=self.store.owner,
            release=release,
            append=append,
            replace=replace,
            also=also,
        )

    async def save_quietly(self, *, release: bool = False) -> None:
        try:
            await asyncio.shield(self.save(release=release))
        except Exception:
            log.exception("could not save session %s", self.id)

    async def save_and_release(self) -> None:
        try:
            await self.save(release=True)
        finally:
            await self.release_lease()  # a no-op after a successful releasing save

    # --- the lease --------------------------------------------------------------------------

    def leased_now(self) -> None:
        """The store gave this process the lease just now (a session created leased)."""
        self.leased = True
        self._leased_at = time.monotonic()

    def lease_is_fresh(self) -> bool:
        """Taken a moment ago for the turn about to start (an accepted answer's, a new session's)."""
        return self.leased and time.monotonic() - self._leased_at < self._lease_seconds / 2

    async def claim(
        self, cancelled: asyncio.Event, while_waiting: Callable[[], Awaitable[None]] | None = None
    ) -> bool:
        """Take the lease before changing the session, waiting (with back-off) while another live
        process holds it; `while_waiting` runs before each wait (an answer is checked against the
        stored state meanwhile). Adopts the stored state when another process changed it, and
        recovers a turn whose process died. False: cancelled while waiting."""
        delay = 0.02
        while True:
            got = await self.store.claim(self.id, self.store.owner, self._lease_seconds, self.revision)
            if isinstance(got, Lease):
                break
            if while_waiting is not None:
                await while_waiting()
            try:
                await asyncio.wait_for(cancelled.wait(), delay)
                return False
            except TimeoutError:
                delay = min(delay * 2, 0.5)
        self.leased_now()
        if got.state is not None:
            self.adopt(got.revision, got.state)
        if self.state.status == "running":  # its process died mid-turn (or lost the lease)
            await self.recover()
        return True

    async def claim_if_free(self) -> bool:
        """Take the lease only if nobody holds it (a reader settling an abandoned turn)."""
        got = await self.store.claim(self.id, self.store.owner, self._lease_seconds, self.revision)
        if not isinstance(got, Lease):
            return False
        self.leased_now()
        if got.state is not None:
            self.adopt(got.revision, got.state)
        return True

    def adopt(self, revision: int, state: dict[str, Any]) -> None:
        """Another process changed the session: take the stored state; the transcript is read
        again when next needed."""
        self.state = SessionState.from_json(state)
        self.revision = revision
        self._messages = None
        self._saved_count = 0

    def lost(self) -> None:
        """Another process changed the session under this one's turn: nothing of ours was
        written; the stored state is read again next time."""
        self.stop_keeping_lease()
        self.leased = False
        self.revision = -1

    async def refresh(self) -> None:
        """Read the stored state if another process changed it (without taking the lease). A
        no-op while this process holds the lease: it is the writer then."""
        if self.leased:
            return
        row = await self.store.load_session(self.id, self.revision)
        if row is not None and row[1] is not None:
            self.adopt(row[0], row[1])

    async def release_lease(self) -> None:
        self.stop_keeping_lease()
        if self.leased:
            self.leased = False
            try:
                await asyncio.shield(self.store.release(self.id, self.store.owner))
            except Exception:
                log.exception("could not release the lease of session %s", self.id)

    async def release_slot(self) -> None:
        if self.slot:
            self.slot = False
            try:
                await asyncio.shield(self.store.slots.release(self.id))
            except Exception:
                log.exception("could not release the turn slot of session %s", self.id)

    def keep_lease(self, stop_turn: Callable[[], None]) -> None:
        """A turn holding the lease runs: a heartbeat renews the lease (and the turn slot) every
        third of its length, and stops the turn when another process asks for a cancel or has
        taken the lease over. The heartbeat lives exactly as long as this process holds the lease
        for the turn: giving the lease up (a releasing save, `release_lease`, `lost`) ends it
        before the lease is written, so what the turn does after storing its pause (a slow
        Notification hook) is never read as a takeover and never cancelled by its own lease."""
        self.stop_keeping_lease()
        self._heartbeat = asyncio.create_task(self._renew(stop_turn))

    def stop_keeping_lease(self) -> None:
        """End the heartbeat (at once: a renewal it awaits is dropped, its answer never read)."""
        heartbeat, self._heartbeat = self._heartbeat, None
        if heartbeat is not None:
            heartbeat.cancel()

    async def _renew(self, stop_turn: Callable[[], None]) -> None:
        ttl = self._lease_seconds
        while True:
            await asyncio.sleep(ttl / 3)
            try:
                cancel = await self.store.renew(self.id, self.store.owner, ttl)
                if self.slot:
                    await self.store.slots.renew(self.id, ttl)
            except Exception:
                log.warning("could not renew the lease of session %s", self.id, exc_info=True)
                continue
            if cancel is None:
                log.warning("session %s: another process took the lease over; stopping the turn", self.id)
                self._heartbeat = None
                self.leased = False
                stop_turn()
                return
            if cancel:
                stop_turn()

    # --- recovery ---------------------------------------------------------------------------

    async def recover(self) -> None:
        """A turn whose process died (the stored state says running; this process holds the
        lease now) cannot go on. Calls that had started get an "interrupted" result and are never
        run again; calls that wait for input keep waiting; if none waits, the turn ends
        `interrupted` and the step is closed so the next prompt finds a consistent transcript."""
        state = self.state
        for p in state.pending:
            if p.result is None and not p.needs:
                p.status = ToolCallStatus.FAILED.value
                p.result = CallResult.error(INTERRUPTED_CALL, ToolErrorType.INTERRUPTED)
                state.record_call(p.name, True)
        if any(p.needs and p.result is None for p in state.pending):
            state.status = "awaiting_input"
        else:
            messages = await self.messages()
            transcript.append_tool_returns(messages, state.pending, self._context_tokens())
            state.pending = []
            note = "[the turn was interrupted: the server process running it stopped]"
            transcript.close_request(messages, note, interrupted=True)
            state.status = "idle"
            state.turn_scope = None
            state.outcome = "interrupted"
            state.outcome_message = INTERRUPTED
        await self.save()
