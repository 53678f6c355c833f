"""A session: the model/tool loop over a durable transcript (G1, G3, G6).

The loop is our own, over pydantic-ai's model layer (`pydantic_ai.direct.model_request_stream`):
pydantic-ai gives us every provider, streaming, thinking and usage; we keep the parts that make
this agent what it is: permission per call with user-modified content, live tool output, client
tools, and a pause that is plain data in the store rather than a suspended coroutine. See
docs/architecture.md for the reasoning.

How a turn runs: `advance(input)` takes the session's lock (so a second `advance` waits its turn)
and starts the turn as a task that pushes events into a queue the caller reads. The task, not the
caller, owns the turn: a caller that stops reading (a client that disconnected) does not stop it,
and everything it does is stored as it goes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic_ai import messages as pm
from pydantic_ai.messages import ModelMessagesTypeAdapter

from devagent import telemetry
from devagent.agent import approval
from devagent.agent.compact import fit_result
from devagent.agent.core import utc_day
from devagent.agent.events import (
    ClientResult,
    ConfirmationRequest,
    Decision,
    Event,
    Input,
    InputError,
    NeedsInput,
    Notice,
    Resume,
    RunCommand,
    StatusUpdate,
    StepBegin,
    TextDelta,
    ThoughtDelta,
    ToolCall,
    ToolCallStatus,
    ToolCallUpdate,
    ToolError,
    ToolKind,
    TurnEnd,
    TurnEndReason,
    Usage,
    UserPrompt,
)
from devagent.agent.model_errors import describe as describe_model_error
from devagent.agent.serial import confirmation_from_json, confirmation_to_json, output_from_result
from devagent.agent.state import CallResult, ClientTool, PendingCall, SessionState
from devagent.agent.tools import builtin_tools
from devagent.agent.tools.backends import ToolBackends
from devagent.agent.tools.base import Tool, ToolContext, ToolFailure, Workspace
from devagent.agent.tools.client import validate_arguments, validate_client_tools
from devagent.agent.transcript import answer_key, interruption_note
from devagent.common.faults import crash_point
from devagent.common.rpcerrors import internal_error
from devagent.common.scrub import scrub
from devagent.store.leases import Lease, StaleSession

if TYPE_CHECKING:
    from devagent.agent.checkpoints import Checkpoint
    from devagent.agent.core import AgentCore

log = logging.getLogger("devagent.session")

Emit = Callable[[Event], None]

SYSTEM_PROMPT = """You are devagent, a coding agent working in the user's workspace.
Workspace roots: {roots}
Approval mode: {mode}. This conversation started on {date}.

Work carefully and concretely: read files before you change them, prefer small exact edits
(`edit`) over rewriting whole files, run commands to check your work, and say plainly what you did.
Paths are relative to the first workspace root; you cannot leave the workspace roots.
When a tool fails, read its message and adapt. Keep answers short unless asked for detail."""


INTERRUPTED = (
    "The turn was interrupted: the server process running it stopped before it finished. "
    "Calls it had started were not run again. Send a message to continue."
)
STALE = (
    "Another server process changed this conversation while this turn ran; the turn stopped "
    "here (nothing was run or written twice). Send a message to continue."
)


class _Cancelled(Exception):
    """Raised inside a turn to unwind it after a cancel."""


class Session:
    def __init__(self, core: AgentCore, session_id: str, state: SessionState, revision: int = 0) -> None:
        self.core = core
        self.id = session_id
        self.state = state
        self.revision = revision  # the stored revision `state` is at (saves compare and set it)
        self._leased = False  # this process holds the session's lease in the store
        self._leased_at = 0.0  # when it took it (monotonic)
        self._slot = False  # this process holds one of the caller's turn slots for this session
        # Writes of other tables (checkpoints) that go into the next save's transaction.
        self._also: list[Callable[[Any], Awaitable[object]]] = []
        self._checkpoints: dict[str, Checkpoint | None] = {}  # the step's, by call id
        self._label: str | None = None  # the running turn's label (see `advance`)
        self._current: Turn | None = None  # the turn that holds `_lock`
        self._answering: dict[str, float] = {}  # call ids of accepted answers not applied yet
        self.workspace = Workspace([Path(r) for r in state.workspace_roots], core.config.protected_paths())
        self._tools: dict[str, Tool] = builtin_tools()
        self.backends = ToolBackends()  # the door's file and command backends (process resources)
        self._messages: list[pm.ModelMessage] | None = None
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._turn_started = False
        self._cancel = asyncio.Event()
        self._memory: str | None = None
        self._saved_count = 0  # how many transcript messages are in the store

    # --- public surface ---------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self._lock.locked()

    def advance(self, inp: Input, *, label: str | None = None) -> Turn:
        """Run a turn (or the rest of one): iterate the returned `Turn` for its events, until
        `NeedsInput` or `TurnEnd`; its `cancel()` stops it at any point. `label` is the adapter's
        name for the turn (an A2A taskId), stored as `state.turn_label` when the turn starts
        running, so that a reader can tell which of its tasks the stored state is about."""
        return Turn(self, inp, label)

    def run_command(self, path: list[str], args: str = "") -> Turn:
        return Turn(self, RunCommand(path, args), None)

    def _stop_turn(self) -> None:
        """Ask the running turn to stop (it ends `cancelled`, cleaning up as it goes)."""
        task = self._task
        if task is not None and not task.done() and not self._cancel.is_set():
            # a second request only waits: it must not cut the cleanup
            self._cancel.set()
            if self._turn_started:
                task.cancel()
            # else: a task cancelled before its first step would never run its cleanup; the
            # turn sees the event when it starts and ends cancelled.

    async def cancel(self, *, end_waiting: bool = True) -> None:
        """Stop the running turn, or (with `end_waiting`) end the turn that waits for input."""
        task = self._task
        if task is not None and not task.done():
            self._stop_turn()
            # Waits for the turn's cleanup without taking its outcome; a cancel of the caller
            # itself still reaches the caller (and does not cut the turn's cleanup short).
            await asyncio.wait({task})
            return
        if self._lock.locked() and task is None:
            # An advance holds the lock but its turn has not started yet (it is loading the
            # transcript): the turn starts cancelled.
            self._cancel.set()
            return
        if end_waiting and self.state.status == "awaiting_input":
            async for _ in Turn(self, _CancelWaiting(), None):
                pass

    async def set_approval_mode(self, mode: str) -> None:
        """Change the session's approval mode. The caller is the operator's side (a flag of a local
        front door): clients' requests go through `AgentCore.effective_approval_mode` instead."""
        from devagent.agent.state import APPROVAL_MODES

        if mode not in APPROVAL_MODES:
            raise InputError(f"approval mode {mode!r} is not one of {', '.join(APPROVAL_MODES)}")
        async with self._lock:
            await self._claim(None)
            try:
                self.state.approval_mode = mode
            finally:
                await self._save_and_release()

    async def save_state(self) -> None:
        """Store the session's state now: for an adapter that changed its own part of it
        (`state.extra`) outside a turn. (The change is made on this object before the call; if
        another process changed the session meanwhile, its version wins and the change is lost:
        adapters change only their own `extra`, before a turn.)"""
        async with self._lock:
            extra = self.state.extra
            await self._claim(None)
            self.state.extra = extra
            await self._save_and_release()

    def waiting_calls(self) -> list[ToolCall]:
        return [self._tool_call(p) for p in self.state.pending if p.needs and p.result is None]

    async def set_client_tools(self, tools: list[ClientTool]) -> list[tuple[str, str]]:
        accepted, rejected = validate_client_tools(
            [t.to_json() for t in tools],
            builtin_names=self.tools().keys(),
            allow=self.core.config.client_tool_allow,
            deny=self.core.config.client_tool_deny,
        )
        async with self._lock:
            await self._claim(None)
            self.state.client_tools = accepted
            await self._save_and_release()
        return rejected

    def use_backends(self, backends: ToolBackends) -> None:
        """Let the built-in tools read and write files and run commands through the client that
        drives this session (`tools/backends.py`) from the next call on; never stored."""
        self.backends = backends

    def tools(self) -> dict[str, Tool]:
        """The tools the core runs: the built-ins and the tools of the session's ready MCP servers."""
        return {**self.core.mcp.tools_for(self), **self._tools}

    def tool_definitions(self) -> list[dict[str, Any]]:
        defs = [{**t.definition(), "kind": t.kind.value} for t in self.tools().values()]
        defs += [{**t.to_json(), "kind": ToolKind.CLIENT.value} for t in self.state.client_tools]
        return defs

    def start_empty(self) -> None:
        """For a session just created: its transcript is empty, no need to read it."""
        if self._messages is None:
            self._messages = []
            self._saved_count = 0

    async def messages(self) -> list[pm.ModelMessage]:
        if self._messages is None:
            rows = await self.core.store.load_messages(self.id)
            self._messages = (
                list(ModelMessagesTypeAdapter.validate_json("[" + ",".join(rows) + "]")) if rows else []
            )
            self._saved_count = len(self._messages)
        return self._messages

    # --- one writer across processes (the lease) ---------------------------------------------

    def leased_now(self) -> None:
        """The store gave this process the session's lease just now (a session created leased):
        the turn about to start need not claim it again."""
        self._leased = True
        self._leased_at = time.monotonic()

    async def release_unused_lease(self) -> None:
        """Give up a lease taken for a turn that did not start (`leased_now`); a no-op when no
        lease is held or a turn holds it."""
        if self._leased and not self._lock.locked():
            await self._release_lease()
            await self._release_slot()

    async def _claim(self, inp: Input | _CancelWaiting | None) -> bool:
        """Take the session's lease in the store before changing it (called under `_lock`). While
        another live process holds it (its turn runs there), wait as a second `advance` waits for
        the first; an answer is checked against the stored state meanwhile, so an answer given
        through the other process already is refused at once. Adopts the stored state when another
        process changed it, and recovers a turn whose process died. False: cancelled while waiting."""
        if self._leased and time.monotonic() - self._leased_at < self.core.config.lease_seconds / 2:
            return True  # taken for this turn a moment ago (`accept_answers`)
        store = self.core.store
        ttl = self.core.config.lease_seconds
        delay = 0.02
        while True:
            got = await store.claim(self.id, store.owner, ttl, self.revision)
            if isinstance(got, Lease):
                break
            if isinstance(inp, Resume):
                await self.refresh()
                self._validate(inp)
            try:
                await asyncio.wait_for(self._cancel.wait(), delay)
                return False
            except TimeoutError:
                delay = min(delay * 2, 0.5)
        self._leased = True
        self._leased_at = time.monotonic()
        if got.state is not None:
            self._adopt(got.revision, got.state)
        if self.state.status == "running":  # its process died mid-turn (or lost the lease)
            await self._recover()
        return True

    def _adopt(self, revision: int, state: dict[str, Any]) -> None:
        """Another process changed the session: take the stored state; the transcript is read
        again when next needed."""
        self.state = SessionState.from_json(state)
        self.revision = revision
        self._messages = None
        self._saved_count = 0

    async def refresh(self) -> None:
        """Read the stored state if another process changed it (without taking the lease). A
        no-op while a turn of this process runs: this process is the writer then."""
        if self._leased:
            return
        row = await self.core.store.load_session(self.id, self.revision)
        if row is not None and row[1] is not None:
            self._adopt(row[0], row[1])

    async def _release_lease(self) -> None:
        if self._leased:
            self._leased = False
            try:
                await asyncio.shield(self.core.store.release(self.id, self.core.store.owner))
            except Exception:
                log.exception("could not release the lease of session %s", self.id)

    async def _release_slot(self) -> None:
        if self._slot:
            self._slot = False
            try:
                await asyncio.shield(self.core.store.slots.release(self.id))
            except Exception:
                log.exception("could not release the turn slot of session %s", self.id)

    async def _save_and_release(self) -> None:
        try:
            await self._save(release=True)
        finally:
            await self._release_lease()  # a no-op after a successful releasing save

    async def _keep_lease(self) -> None:
        """While a turn runs: renew the lease every third of its length, and stop the turn when
        another process asks for a cancel or has taken the lease over."""
        ttl = self.core.config.lease_seconds
        while True:
            await asyncio.sleep(ttl / 3)
            try:
                cancel = await self.core.store.renew(self.id, self.core.store.owner, ttl)
                if self._slot:
                    await self.core.store.slots.renew(self.id, ttl)
            except Exception:
                log.warning("could not renew the lease of session %s", self.id, exc_info=True)
                continue
            if cancel is None:
                log.warning("session %s: another process took the lease over; stopping the turn", self.id)
                self._leased = False
                self._stop_turn()
                return
            if cancel:
                self._stop_turn()

    async def accept_answers(self, inp: Resume) -> None:
        """For an adapter, before it accepts a message that answers waiting calls (so a refusal is
        an error in the protocol's terms, not a failed turn): checks the answer against the
        stored state, taking the session's lease for the turn that will apply it. While another
        process holds the lease the answer is re-checked against the stored state until it is
        taken or refused, so of two answers to one call sent through two processes one is
        accepted and the other refused ("answered already"); in this process, an answer to a call
        another accepted answer is about to apply is refused too. Raises `InputError`."""
        ids = {d.call_id for d in inp.decisions} | {r.call_id for r in inp.results}
        now = time.monotonic()
        self._answering = {k: t for k, t in self._answering.items() if now - t < 120}
        taken = ids & self._answering.keys()
        if taken:
            raise InputError(f"tool call {', '.join(sorted(taken))} was answered already", "answered")
        async with self._lock:
            if not await self._claim(inp):
                raise InputError("the answer was cancelled", "cancelled")
            self._validate(inp)
            try:  # the turn that applies it runs within the caller's budget, holding a slot
                self._slot = await self.core.check_budget(self)
            except InputError:
                await self._release_lease()
                raise
            for i in ids:
                self._answering[i] = now
            # The lease stays with this process for the turn that applies the answer.

    async def answered(self, call_ids: list[str]) -> list[str]:
        """Which of these calls no longer wait (answered, running, run, or closed), in the current
        step or anywhere in the transcript: for telling "answered already" from "unknown"."""
        done = {p.id for p in self.state.pending if not (p.needs and p.result is None)}
        done |= set(self._answering)
        wanted = set(call_ids) - done
        if wanted:
            for m in await self.messages():
                if isinstance(m, pm.ModelRequest):
                    for part in m.parts:
                        if isinstance(part, pm.ToolReturnPart) and part.tool_call_id in wanted:
                            done.add(part.tool_call_id)
        return [c for c in call_ids if c in done]

    def answering(self) -> set[str]:
        """Call ids whose accepted answers a turn of this process is about to apply."""
        return set(self._answering)

    def cancel_requested(self) -> None:
        """Another process asked (through the store) to cancel this session's running turn."""
        self._stop_turn()

    async def recover_if_abandoned(self) -> bool:
        """For readers: if the stored session says a turn runs but no live process holds its
        lease, settle it now (running calls interrupted, never re-run). True if it did."""
        if self._lock.locked():
            return False  # a turn of this process is starting or running: it settles it
        async with self._lock:
            got = await self.core.store.claim(
                self.id, self.core.store.owner, self.core.config.lease_seconds, self.revision
            )
            if not isinstance(got, Lease):
                return False
            self._leased = True
            try:
                if got.state is not None:
                    self._adopt(got.revision, got.state)
                if self.state.status != "running":
                    return False
                await self._recover()
                return True
            finally:
                await self._release_lease()

    async def _recover(self) -> None:
        """A turn whose process died (the stored state says running; we hold the lease now)
        cannot go on. Calls that had started get an "interrupted" result and are never run again;
        calls that wait for input keep waiting; if nothing waits, the turn ends `interrupted` and
        the step is closed so the next prompt finds a consistent transcript."""
        for p in self.state.pending:
            if p.result is None and not p.needs:
                p.status = ToolCallStatus.FAILED.value
                p.result = CallResult.error(
                    "interrupted: the server process running this call stopped before it finished;"
                    " it was not run again (check its effects before running it again)",
                    "interrupted",
                )
                self.state.record_call(p.name, True)
        if self._waiting():
            self.state.status = "awaiting_input"
        else:
            await self.messages()
            self._flush_pending()
            self._close_request(
                "[the turn was interrupted: the server process running it stopped]", interrupted=True
            )
            self.state.status = "idle"
            self.state.outcome = "interrupted"
            self.state.outcome_message = INTERRUPTED
        await self._save()

    # --- the turn machinery -----------------------------------------------------------------

    async def _advance(
        self, inp: Input | _CancelWaiting, label: str | None = None, turn: Turn | None = None
    ) -> AsyncGenerator[Event, None]:
        await self._lock.acquire()
        self._current = turn
        self._cancel = asyncio.Event()
        if turn is not None and turn.cancelled:  # cancelled before it began: it ends at once
            self._cancel.set()
        try:
            claimed = await self._claim(inp)
            if claimed:
                await self.messages()
                self._validate(inp)
                if not isinstance(inp, _CancelWaiting):  # a turn runs: within the caller's budget?
                    self._slot = await self.core.check_budget(self)
        except BaseException as e:
            if isinstance(inp, Resume) and isinstance(e, InputError) and e.code == "budget_exceeded":
                # refused by the budget, the answer may be given again
                for call_id in [d.call_id for d in inp.decisions] + [r.call_id for r in inp.results]:
                    self._answering.pop(call_id, None)
            await self._release_lease()
            await self._release_slot()
            self._unlock()
            raise
        if not claimed:  # cancelled while another process ran a turn of this session
            self._unlock()
            yield TurnEnd("cancelled", self._turn_usage())
            return
        queue: asyncio.Queue[Event] = asyncio.Queue()
        self._label = label
        self._task = asyncio.create_task(telemetry.turn(self, inp, self._turn(inp, queue.put_nowait)))
        # A caller that stops reading (closes this generator) does not stop the turn (A6): the
        # task goes on and stores what it does.
        while True:
            event = await queue.get()
            yield event
            if isinstance(event, NeedsInput | TurnEnd):
                return

    def _validate(self, inp: Input | _CancelWaiting) -> None:
        if isinstance(inp, Resume):
            if self.state.status != "awaiting_input":
                raise InputError(
                    "nothing is waiting for an answer in this session (it was answered already, or "
                    "the turn ended)",
                    "not_waiting",
                )
            waiting = {p.id: p for p in self.state.pending if p.needs and p.result is None}
            answered = {p.id for p in self.state.pending if p.id not in waiting}
            for d in inp.decisions:
                p = waiting.get(d.call_id)
                if p is None and d.call_id in answered:
                    raise InputError(f"tool call {d.call_id!r} was answered already", "answered")
                if p is None:
                    raise InputError(f"no tool call {d.call_id!r} is waiting for permission", "unknown_call")
                if p.needs != "permission":
                    raise InputError(f"tool call {d.call_id!r} waits for a client result, not a decision")
                options = [o["id"] for o in (p.confirmation or {}).get("options", [])]
                if d.option not in options:
                    raise InputError(
                        f"option {d.option!r} is not one of {options} for call {d.call_id!r}", "bad_option"
                    )
            for r in inp.results:
                p = waiting.get(r.call_id)
                if p is None:
                    raise InputError(f"no tool call {r.call_id!r} is waiting for a result", "unknown_call")
                if p.needs != "client":
                    raise InputError(f"tool call {r.call_id!r} waits for permission, not a client result")
            if not inp.decisions and not inp.results:
                raise InputError("the answer carries no decision and no result", "empty")
        elif isinstance(inp, UserPrompt):
            if not inp.text.strip():
                raise InputError("the prompt is empty", "empty")
        elif isinstance(inp, RunCommand):
            from devagent.agent.commands import registry

            if registry().find(inp.path) is None:
                raise InputError(f"unknown command /{' '.join(inp.path)}; try /help", "unknown_command")

    async def _turn(self, inp: Input | _CancelWaiting, emit: Emit) -> None:
        self._turn_started = True
        heartbeat = asyncio.create_task(self._keep_lease())
        try:
            try:
                await self._turn_body(inp, emit)
            except (asyncio.CancelledError, _Cancelled):
                await self._after_cancel(emit)
            except StaleSession:
                # Another process changed the session (it took the lease of a turn it thought
                # dead): nothing of ours was written; the stored state is read again next time.
                log.warning("session %s changed in another process; turn stopped", self.id)
                self._leased = False
                self.revision = -1
                emit(Notice(STALE, "error"))
                emit(TurnEnd("error", self._turn_usage(), STALE))
            except Exception as e:  # a bug must not kill the conversation
                # The details (SQL, paths, values, the exception's class) go to the server log
                # only; the client gets a reference to find them.
                text = internal_error(repr(e), what=f"the turn of session {self.id}", exc_info=e)
                self._close_pending("the turn failed", "internal")
                await self._end("error", text, emit, quietly=True)
        finally:
            heartbeat.cancel()
            self._task = None
            self._turn_started = False
            await self._release_lease()
            await self._release_slot()
            self._unlock()

    def _unlock(self) -> None:
        self._current = None
        self._lock.release()

    async def _turn_body(self, inp: Input | _CancelWaiting, emit: Emit) -> None:
        if isinstance(inp, _CancelWaiting) or self._cancel.is_set():
            raise _Cancelled()
        if isinstance(inp, UserPrompt) and inp.text.lstrip().startswith("/"):
            from devagent.agent.commands import parse_command_line

            parsed = parse_command_line(inp.text)
            if parsed is not None:
                inp = parsed
        if isinstance(inp, RunCommand):
            from devagent.agent.commands import run_command

            prompt = await run_command(self, inp, emit)
            if prompt is None:
                if self._waiting():  # a command does not end a pause
                    await self._save(release=True)
                    emit(TurnEnd("finished", self._turn_usage()))
                else:
                    await self._end("finished", "", emit)
                return
            inp = UserPrompt(prompt)
        await self.core.mcp.prepare(self, emit)  # start MCP servers on first use; report failures
        if isinstance(inp, UserPrompt):
            if self._waiting():
                self._close_pending("the user sent a new message instead of answering", "cancelled")
                for p in self.state.pending:
                    emit(ToolCallUpdate(self._tool_call(p)))
                self._flush_pending()
            self.state.turn_usage = Usage()
            self.state.turn_steps = 0
            if not self.state.title:
                self.state.title = inp.text.strip().splitlines()[0][:80]
            self._append_user(inp.text)
            self._set_running()
            await self._save()
        else:
            self._set_running()
            await self._apply_answers(inp, emit)
            if await self._pause_or_close_step(emit):
                return
        await self._loop(emit)

    async def _pause_or_close_step(self, emit: Emit) -> bool:
        """After a step's calls ran: if some still wait for input, store everything and stop
        (True); else give the model the step's results (False: the loop goes on)."""
        if self._waiting():
            self.state.status = "awaiting_input"
            await self._save(release=True)
            emit(NeedsInput(self.waiting_calls()))
            return True
        self._flush_pending()
        await self._save()
        return False

    def _set_running(self) -> None:
        self.state.status = "running"
        self.state.outcome = self.state.outcome_message = ""
        if self._label is not None:
            self.state.turn_label = self._label

    async def _end(
        self,
        reason: TurnEndReason,
        message: str,
        emit: Emit,
        *,
        quietly: bool = False,
        finish_reason: str | None = None,
    ) -> None:
        """End the turn: store how it ended (and give up the lease in the same write), then say so."""
        self.state.status = "idle"
        self.state.outcome = reason
        self.state.outcome_message = message
        if quietly:
            await self._save_quietly(release=True)
        else:
            await self._save(release=True)
        emit(TurnEnd(reason, self._turn_usage(), message or None, finish_reason))

    async def _loop(self, emit: Emit) -> None:
        max_steps = self.core.config.max_steps
        while True:
            if self.state.turn_steps >= max_steps:
                msg = f"Stopped after {max_steps} model steps in one turn (the server's limit)."
                emit(Notice(msg, "warning"))
                await self._end("max_steps_reached", msg, emit)
                return
            spent = await self.core.tokens_spent(self.state.identity)
            if spent:  # no model request past the caller's daily tokens (at most one overspends)
                msg = f"Stopped by the server's budget: {spent}."
                log.warning("budget: stopped the turn of session %s: %s", self.id, spent)
                self._close_request(f"[the turn was stopped by the server's budget: {spent}]")
                emit(Notice(msg, "error"))
                await self._end("error", msg, emit)
                return
            self.state.turn_steps += 1
            emit(StepBegin(self.state.turn_steps, answer_key(await self.messages())))
            try:
                await self._fit_context(emit)
                response = await telemetry.model_request(self, self._model_step(emit))
            except (asyncio.CancelledError, _Cancelled):
                raise
            except Exception as e:
                text = scrub(describe_model_error(e, self._model_url()))
                # every caller is told (the notice, the turn's end); a warning would be printed a
                # second time by the terminal commands, where the log is stderr
                log.info("%s", text)
                self._close_request(f"[the model request failed: {text}]")
                emit(Notice(text, "error"))
                await self._end("error", text, emit)
                return
            (await self.messages()).append(response)
            calls = [p for p in response.parts if isinstance(p, pm.ToolCallPart)]
            if not calls:
                if response.finish_reason == "length":
                    emit(Notice("The answer was cut off at the model's output token limit.", "warning"))
                await self._end("finished", "", emit, finish_reason=response.finish_reason)
                return
            self.state.pending = [await self._classify(c) for c in calls]
            to_run = [p for p in self.state.pending if not p.needs and p.result is None]
            await self._checkpoint(to_run)
            # Stored before any of them runs (with the checkpoints of the edits among them): a
            # call found unfinished after a crash is reported as interrupted, never run a second
            # time.
            await self._save()
            crash_point("session.calls_stored")
            for p in self.state.pending:
                emit(ToolCallUpdate(self._tool_call(p)))
            await self._run_calls(to_run, emit)
            if await self._pause_or_close_step(emit):
                return

    # --- the model --------------------------------------------------------------------------

    async def request_parameters(self) -> Any:
        """What every model request of this session carries besides the messages: the system
        prompt and the tool definitions (pydantic-ai's ModelRequestParameters)."""
        from pydantic_ai.models import ModelRequestParameters
        from pydantic_ai.tools import ToolDefinition

        # The same definitions in the same order on every request of the session, so that the
        # provider's prompt cache keeps them: the built-ins in their fixed order, then the MCP
        # servers' tools and the client's tools each by name (whichever server became ready first,
        # whatever order a server or client listed them in).
        tools = self.tools()
        ordered = [t for name, t in tools.items() if name in self._tools]
        ordered += [tools[name] for name in sorted(tools) if name not in self._tools]
        tool_defs = [
            ToolDefinition(name=t.name, description=t.description, parameters_json_schema=t.parameters)
            for t in ordered
        ] + [
            ToolDefinition(name=t.name, description=t.description, parameters_json_schema=t.parameters)
            for t in sorted(self.state.client_tools, key=lambda t: t.name)
        ]
        return ModelRequestParameters(
            function_tools=tool_defs,
            allow_text_output=True,
            instruction_parts=[pm.InstructionPart(content=await self._system_prompt())],
        )

    def _model_url(self) -> str | None:
        """The base URL of this session's model, if it was created and talks to a server."""
        model = self.core.models.get(self.state.model or self.core.default_model)
        url = getattr(model, "base_url", None)
        return str(url) if url else None

    async def _model_step(self, emit: Emit) -> pm.ModelResponse:
        from pydantic_ai.direct import model_request_stream

        model = self.core.model_for(self.state.model)
        params = await self.request_parameters()
        messages = await self.messages()
        async with model_request_stream(model, messages, model_request_parameters=params) as stream:
            async for ev in stream:
                if isinstance(ev, pm.PartStartEvent):
                    part = ev.part
                    if isinstance(part, pm.TextPart) and part.content:
                        emit(TextDelta(part.content))
                    elif isinstance(part, pm.ThinkingPart) and part.content:
                        emit(ThoughtDelta(part.content))
                elif isinstance(ev, pm.PartDeltaEvent):
                    delta = ev.delta
                    if isinstance(delta, pm.TextPartDelta) and delta.content_delta:
                        emit(TextDelta(delta.content_delta))
                    elif isinstance(delta, pm.ThinkingPartDelta) and delta.content_delta:
                        emit(ThoughtDelta(delta.content_delta))
            response = stream.get()
        step_usage = Usage.of_response(response.usage)
        self.spent(step_usage)
        emit(StatusUpdate(step_usage, step_usage.input_tokens, self.core.context_tokens(self.state.model)))
        return response

    def spent(self, usage: Usage) -> None:
        """A model request's usage: the session's and the turn's, the caller's day in the store
        (written with the step's next save), and the server's metrics."""
        self.state.usage.add(usage)
        self.state.turn_usage.add(usage)
        amounts = {
            "input_tokens": usage.input_tokens,
            "cached_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
            "output_tokens": usage.output_tokens,
            "requests": usage.requests,
        }
        self._also.append(self.core.store.usage_write(self.state.identity, utc_day(), amounts))
        self.core.spent(self.state.identity, usage)

    async def _fit_context(self, emit: Emit) -> None:
        """Compact first when the coming request would fill too much of the model's window."""
        from devagent.agent.compact import compact_if_needed

        params = await self.request_parameters()
        prefix = sum(len(p.content) for p in params.instruction_parts) + sum(
            len(t.name) + len(t.description or "") + len(json.dumps(t.parameters_json_schema))
            for t in params.function_tools
        )
        await compact_if_needed(self, emit, prefix)

    async def _system_prompt(self) -> str:
        """The instructions of every request: the same for the whole session (the provider caches
        them), unless the user changes the approval mode or the memory file through /memory. The
        date is the session's first day, not today's; the memory file is read once per loaded
        session (what the save_memory tool adds reaches the prompt after /memory refresh or when
        the session is next loaded)."""
        if self._memory is None:
            self._memory = self.read_memory()
        if not self.state.started_on:  # a session stored before the day was kept
            self.state.started_on = time.strftime("%Y-%m-%d")
        text = SYSTEM_PROMPT.format(
            roots=", ".join(self.state.workspace_roots),
            mode=self.state.approval_mode,
            date=self.state.started_on,
        )
        if self._memory.strip():
            text += f"\n\nProject memory ({self.core.config.memory_file}):\n{self._memory.strip()}"
        return text

    def read_memory(self) -> str:
        from devagent.agent.tools.memory import read_memory

        return read_memory(self.workspace, self.core.config.memory_file)

    def refresh_memory(self) -> str:
        self._memory = self.read_memory()
        return self._memory

    # --- tool calls -------------------------------------------------------------------------

    async def _classify(self, part: pm.ToolCallPart) -> PendingCall:
        name = part.tool_name
        call_id = part.tool_call_id or f"call_{int(time.time() * 1000)}"
        try:
            args = part.args_as_dict()
        except Exception:
            return self._failed(
                call_id, name, {}, "the tool arguments are not valid JSON", "invalid_arguments"
            )
        if not isinstance(args, dict):
            return self._failed(
                call_id, name, {}, "the tool arguments must be a JSON object", "invalid_arguments"
            )
        tools = self.tools()
        tool = tools.get(name)
        client = next((t for t in self.state.client_tools if t.name == name), None)
        if tool is None and client is None:
            known = ", ".join(sorted([*tools, *(t.name for t in self.state.client_tools)]))
            msg = f"unknown tool {name!r}; available tools: {known}"
            return self._failed(call_id, name, args, msg, "unknown_tool")
        schema = tool.parameters if tool is not None else client.parameters  # type: ignore[union-attr]
        problem = validate_arguments(schema, args)
        if problem:
            return self._failed(call_id, name, args, f"invalid arguments: {problem}", "invalid_arguments")
        if tool is None:
            return PendingCall(
                call_id,
                name,
                args,
                ToolKind.CLIENT.value,
                description=f"{name} (run by the client)",
                needs="client",
            )
        pc = PendingCall(call_id, name, args, tool.kind.value, description=tool.describe(args))
        verdict = approval.decide(tool.kind, name, args, self.state)
        pc.granted = verdict.granted
        if verdict.verdict == "deny":
            pc.status = ToolCallStatus.FAILED.value
            pc.result = CallResult.error(verdict.reason, "denied_by_policy")
            self.state.record_call(name, True)
            telemetry.not_run(pc, "refused")
        elif verdict.verdict == "ask":
            try:
                details = await tool.confirmation(args, self._ctx(pc))
            except ToolFailure as f:
                pc.status = ToolCallStatus.FAILED.value
                pc.result = CallResult.error(f.message, f.type)
                self.state.record_call(name, True)
                telemetry.not_run(pc, "refused")
                return pc
            pc.needs = "permission"
            pc.confirmation = confirmation_to_json(
                ConfirmationRequest(approval.options_for(tool.kind, name, args), details)
            )
        return pc

    async def _apply_answers(self, inp: Resume, emit: Emit) -> None:
        for call_id in [*(d.call_id for d in inp.decisions), *(r.call_id for r in inp.results)]:
            self._answering.pop(call_id, None)
        pending = {p.id: p for p in self.state.pending}
        to_run: list[tuple[PendingCall, str | None]] = []
        for d in inp.decisions:
            p = pending[d.call_id]
            if d.option in ("cancel", "cancel_always"):
                p.status = ToolCallStatus.CANCELLED.value
                reason = "the user declined to run this call"
                if d.option == "cancel_always":
                    approval.refuse(ToolKind(p.kind), p.name, p.args, self.state)
                    reason += " and refused such calls for the rest of this session"
                if d.feedback and d.feedback.strip():
                    reason += f"; the user said: {d.feedback.strip()}"
                p.result = CallResult.error(reason, "cancelled")
                self.state.record_call(p.name, True)
                telemetry.not_run(p, "declined")
                emit(ToolCallUpdate(self._tool_call(p)))
                continue
            if d.option in ("proceed_always", "proceed_always_server", "proceed_always_tool"):
                approval.grant(ToolKind(p.kind), p.name, p.args, self.state, d.option)
            p.needs = ""
            to_run.append((p, d.new_content))
        for r in inp.results:
            p = pending[r.call_id]
            self._set_client_result(p, r)
            telemetry.not_run(p, "client")
            emit(ToolCallUpdate(self._tool_call(p)))
        new_content = {p.id: c for p, c in to_run}
        await self._checkpoint([p for p, _ in to_run], new_content)
        await self._save()  # the answers are stored before any call runs (at most once)
        crash_point("session.answers_stored")
        await self._run_calls([p for p, _ in to_run], emit, new_content)

    def _set_client_result(self, p: PendingCall, r: ClientResult) -> None:
        if r.error is not None:
            p.status = ToolCallStatus.FAILED.value
            p.result = CallResult.error(str(r.error), "client_error")
        else:
            out = r.output
            text = out if isinstance(out, str) else _json_text(out)
            p.status = ToolCallStatus.SUCCEEDED.value
            p.result = CallResult(text, data=None if isinstance(out, str) else out)
        self.state.record_call(p.name, p.status != ToolCallStatus.SUCCEEDED.value)

    def _tool_of(self, p: PendingCall) -> Tool:
        tool = self.tools().get(p.name)
        if tool is None:  # an MCP server that went away while the call waited
            tool = self.core.mcp.missing_tool(p.name)
        return tool

    async def _checkpoint(
        self, calls: list[PendingCall], new_content: dict[str, str | None] | None = None
    ) -> None:
        """G5: the checkpoints of the edits among calls about to run (the files' bytes now), so
        `/restore` can undo them; stored with the save that precedes the run (`_also`)."""
        from devagent.agent import checkpoints

        new_content = new_content or {}
        self._checkpoints = {}
        for p in calls:
            ctx = self._ctx(p, new_content=new_content.get(p.id))
            self._checkpoints[p.id] = await checkpoints.before_edit(self, p, self._tool_of(p), ctx)

    def write_with_next_save(self, write: Callable[[Any], Awaitable[object]]) -> None:
        """`write(connection)` runs in the transaction of the session's next save (one commit)."""
        self._also.append(write)

    async def _run_calls(
        self, calls: list[PendingCall], emit: Emit, new_content: dict[str, str | None] | None = None
    ) -> None:
        if not calls:
            return
        new_content = new_content or {}
        # Calls a prefix grant lets run unasked start after the step's other calls are done, so
        # that no file those write changes, while git reads it, the configuration whose programs
        # the grant turns off (gitguard lists the repository's drivers as git starts).
        for batch in ([p for p in calls if not p.granted], [p for p in calls if p.granted]):
            await asyncio.gather(
                *(telemetry.tool_call(self, p, self._run_one(p, emit, new_content.get(p.id))) for p in batch)
            )
        # Not saved here: the caller's `_pause_or_close_step` stores the results next, with no
        # await in between (one write per step, not two).

    async def _run_one(self, p: PendingCall, emit: Emit, new_content: str | None) -> None:
        tool = self._tool_of(p)
        p.status = ToolCallStatus.EXECUTING.value
        call = self._tool_call(p)
        emit(ToolCallUpdate(_snapshot(call)))

        async def live(text: str) -> None:
            call.live_output = text
            emit(ToolCallUpdate(_snapshot(call)))

        ctx = self._ctx(p, live=live, new_content=new_content)
        from devagent.agent import checkpoints

        checkpoint = self._checkpoints.pop(p.id, None)  # taken and stored before the step's calls ran
        try:
            crash_point("session.tool_running")
            result = await tool.run(p.args, ctx)
            crash_point("session.tool_ran")
        except ToolFailure as f:
            p.status = ToolCallStatus.FAILED.value
            p.result = CallResult.error(f.message, f.type)
        except asyncio.CancelledError:
            p.status = ToolCallStatus.CANCELLED.value
            p.result = CallResult.error("the user cancelled the turn while this call ran", "cancelled")
            self.state.record_call(p.name, True)
            raise
        except Exception as e:  # a tool's bug: the model and the client get a reference
            p.status = ToolCallStatus.FAILED.value
            text = internal_error(repr(e), what=f"the tool {p.name}", exc_info=e)
            p.result = CallResult.error(text, "internal")
        else:
            p.status = ToolCallStatus.SUCCEEDED.value
            p.result = CallResult(
                result.text,
                diff=dataclasses.asdict(result.diff) if result.diff is not None else None,
                data=result.data,
            )
        await checkpoints.after_edit(self, checkpoint)
        self.state.record_call(p.name, p.status != ToolCallStatus.SUCCEEDED.value)
        emit(ToolCallUpdate(self._tool_call(p, live_output=call.live_output)))

    def _ctx(self, p: PendingCall, **kw: Any) -> ToolContext:
        return ToolContext(
            workspace=self.workspace,
            state=self.state,
            call_id=p.id,
            cancelled=self._cancel,
            shell_timeout=self.core.config.shell_timeout,
            env_pass=self.core.config.env_pass,
            command_memory_mb=self.core.config.command_memory_mb,
            command_processes=self.core.config.command_processes,
            memory_file=self.core.config.memory_file,
            backends=self.backends,
            granted=p.granted,
            **kw,
        )

    def _failed(
        self, call_id: str, name: str, args: dict[str, Any], message: str, error_type: str
    ) -> PendingCall:
        """A call refused before it could run (bad arguments, unknown tool)."""
        tool = self.tools().get(name)
        kind = (
            tool.kind
            if tool is not None
            else ToolKind.CLIENT
            if name in self._client_names()
            else ToolKind.INTERNAL
        )
        self.state.record_call(name, True)
        call = PendingCall(
            call_id,
            name,
            args,
            kind.value,
            description=name,
            status=ToolCallStatus.FAILED.value,
            result=CallResult.error(message, error_type),
        )
        telemetry.not_run(call, "refused")
        return call

    def _client_names(self) -> set[str]:
        return {t.name for t in self.state.client_tools}

    def _waiting(self) -> bool:
        return any(p.needs and p.result is None for p in self.state.pending)

    def _close_pending(self, reason: str, kind: str) -> None:
        for p in self.state.pending:
            if p.result is None:
                p.status = ToolCallStatus.CANCELLED.value
                p.result = CallResult.error(reason, kind)
                telemetry.not_run(p, "cancelled")

    def _flush_pending(self) -> None:
        """Turn the finished step's results into the tool-return request the model reads next."""
        if not self.state.pending:
            return
        parts: list[pm.ModelRequestPart] = []
        for p in self.state.pending:
            r = p.result or CallResult.error("no result", "internal")
            content = fit_result(r.text, self.core.context_tokens(self.state.model))
            if r.is_error:
                content = f"{_ERROR_PREFIX}{r.error_type or 'tool_error'}): {content}"
            # An edit's diff rides along for readers (`timeline`); metadata is never sent to a model.
            shown = {"diff": _shown_diff(r.diff)} if r.diff and not r.is_error else None
            parts.append(
                pm.ToolReturnPart(tool_name=p.name, content=content, tool_call_id=p.id, metadata=shown)
            )
        assert self._messages is not None
        self._messages.append(pm.ModelRequest(parts=parts))
        self.state.pending = []

    async def _after_cancel(self, emit: Emit) -> None:
        self._close_pending("the user cancelled the turn", "cancelled")
        for p in self.state.pending:
            emit(ToolCallUpdate(self._tool_call(p)))
        msgs = await self.messages()
        if msgs and isinstance(msgs[-1], pm.ModelResponse) and self.state.pending:
            self._flush_pending()
        self.state.pending = []
        self._close_request("[cancelled by the user]")
        await self._end("cancelled", "", emit, quietly=True)

    # --- transcript and persistence ---------------------------------------------------------

    def _append_user(self, text: str) -> None:
        assert self._messages is not None
        self._messages.append(pm.ModelRequest(parts=[pm.UserPromptPart(content=text)]))

    def _close_request(self, note: str, *, interrupted: bool = False) -> None:
        """After a model error or a cancel mid-request the transcript ends with our request; a
        short response saying what happened keeps requests and responses alternating (some
        providers require it) and tells the model next time. `interrupted`: a crash cut the turn
        off, and the note is marked as not the model's answer (`transcript.py`)."""
        if self._messages and isinstance(self._messages[-1], pm.ModelRequest):
            if interrupted:
                self._messages.append(interruption_note(note))
            else:
                self._messages.append(pm.ModelResponse(parts=[pm.TextPart(content=note)]))

    async def replace_messages(self, messages: list[pm.ModelMessage]) -> None:
        """Used by /clear and /compact."""
        self._messages = list(messages)
        rows = [_dump(m) for m in self._messages]
        also, self._also = self._also, []
        self.revision = await self.core.store.save(
            self.id,
            self.state.to_json(),
            expected=self.revision,
            owner=self.core.store.owner,
            replace=rows,
            also=also,
        )
        self._saved_count = len(self._messages)

    async def _save(self, *, release: bool = False) -> None:
        """Store the state and the new transcript messages: a compare-and-set on the revision
        this object is at, by the lease's holder (`StaleSession` if another process changed the
        session). `release` gives up the lease in the same write."""
        msgs = self._messages or []
        start = self._saved_count
        append = [(i, _dump(m)) for i, m in enumerate(msgs[start:], start)] if len(msgs) > start else None
        also, self._also = self._also, []
        self.revision = await self.core.store.save(
            self.id,
            self.state.to_json(),
            expected=self.revision,
            owner=self.core.store.owner,
            release=release,
            append=append,
            also=also,
        )
        self._saved_count = len(msgs)
        if release:
            self._leased = False

    async def _save_quietly(self, *, release: bool = False) -> None:
        try:
            await asyncio.shield(self._save(release=release))
        except Exception:
            log.exception("could not save session %s", self.id)

    def _turn_usage(self) -> Usage:
        return dataclasses.replace(self.state.turn_usage)

    async def settled_calls(self, ids: set[str]) -> list[ToolCall]:
        """What became of these calls, for a reader that rebuilds a client's view after a crash
        (issue 21 item 3): each call among `ids` that has a result, from the waiting step or
        else from the transcript's tool returns (the model's call gives its name and arguments).
        Calls without a result yet are left out."""
        out = {p.id: self._tool_call(p) for p in self.state.pending if p.id in ids and p.result is not None}
        missing = ids - set(out)
        if missing:
            asked: dict[str, pm.ToolCallPart] = {}
            for m in await self.messages():
                for part in m.parts:
                    if isinstance(part, pm.ToolCallPart) and part.tool_call_id in missing:
                        asked[part.tool_call_id] = part
                    elif isinstance(part, pm.ToolReturnPart) and part.tool_call_id in asked:
                        out[part.tool_call_id] = self._returned_call(asked[part.tool_call_id], part)
        return [out[i] for i in ids if i in out]

    async def timeline(self) -> list[UserPrompt | TextDelta | ThoughtDelta | ToolCall]:
        """The conversation as a reader shows it (the web console, MCP's session view): the
        user's prompts, the model's whole texts and thoughts, and each tool call once with what
        became of it; the waiting step's calls as they wait (with their confirmation request)."""
        out: list[UserPrompt | TextDelta | ThoughtDelta | ToolCall] = []
        asked: dict[str, tuple[int, pm.ToolCallPart]] = {}
        for m in await self.messages():
            for part in m.parts:
                if isinstance(part, pm.UserPromptPart):
                    content = part.content
                    out.append(UserPrompt(content if isinstance(content, str) else _json_text(content)))
                elif isinstance(part, pm.TextPart) and part.content:
                    out.append(TextDelta(part.content))
                elif isinstance(part, pm.ThinkingPart) and part.content:
                    out.append(ThoughtDelta(part.content))
                elif isinstance(part, pm.ToolCallPart):
                    asked[part.tool_call_id] = (len(out), part)
                    out.append(self._returned_call(part, None))
                elif isinstance(part, pm.ToolReturnPart) and part.tool_call_id in asked:
                    at, call = asked[part.tool_call_id]
                    out[at] = self._returned_call(call, part)
        waiting = {p.id: p for p in self.state.pending}
        for i, item in enumerate(out):
            if isinstance(item, ToolCall) and item.id in waiting:
                out[i] = self._tool_call(waiting[item.id])
        return out

    def _returned_call(self, call: pm.ToolCallPart, returned: pm.ToolReturnPart | None) -> ToolCall:
        """A settled call as its transcript entries say (the text and an edit's diff that
        `_flush_pending` wrote); with no return yet, the call as the model asked for it."""
        text = returned.model_response_str() if returned is not None else ""
        output = error = None
        status = ToolCallStatus.SUCCEEDED if returned is not None else ToolCallStatus.EXECUTING
        kind, _, rest = text.removeprefix(_ERROR_PREFIX).partition("): ")
        if returned is None:
            pass
        elif text.startswith(_ERROR_PREFIX) and rest:
            error = ToolError(rest, kind)
            status = ToolCallStatus.CANCELLED if kind == "cancelled" else ToolCallStatus.FAILED
        else:
            diff = returned.metadata.get("diff") if isinstance(returned.metadata, dict) else None
            output = output_from_result(CallResult(text, diff=diff if isinstance(diff, dict) else None))
        try:
            args = call.args_as_dict()
        except Exception:
            args = {}
        tool = self._tools.get(call.tool_name)
        return ToolCall(
            id=call.tool_call_id,
            name=call.tool_name,
            args=args,
            kind=tool.kind if tool is not None else ToolKind.INTERNAL,
            description=tool.describe(args) if tool is not None else call.tool_name,
            status=status,
            output=output,
            error=error,
        )

    def _tool_call(self, p: PendingCall, live_output: str | None = None) -> ToolCall:
        r = p.result
        output = error = None
        if r is not None:
            if r.is_error:
                error = ToolError(r.text, r.error_type or "tool_error")
            else:
                output = output_from_result(r)
        return ToolCall(
            id=p.id,
            name=p.name,
            args=p.args,
            kind=ToolKind(p.kind),
            description=p.description,
            status=ToolCallStatus(p.status),
            live_output=live_output,
            output=output,
            error=error,
            confirmation=confirmation_from_json(p.confirmation) if p.confirmation else None,
            awaiting_client=p.needs == "client" and r is None,
        )


_ERROR_PREFIX = "Error ("  # a failed call's result in the transcript: "Error (TYPE): message"


class _CancelWaiting:
    """Internal input: end a turn that waits for input."""


class Turn:
    """A turn of a session (`Session.advance`): iterate it for its events. `cancel()` is the one
    way to stop it, at any point: before its first event is read (it then ends `cancelled` as
    soon as it begins, without running), while it waits for the session, or while it runs."""

    __slots__ = ("_events", "_session", "cancelled")

    def __init__(self, session: Session, inp: Input | _CancelWaiting, label: str | None) -> None:
        self._session = session
        self.cancelled = False
        self._events = session._advance(inp, label, self)

    def __aiter__(self) -> Turn:
        return self

    async def __anext__(self) -> Event:
        return await self._events.__anext__()

    async def aclose(self) -> None:
        await self._events.aclose()

    async def cancel(self) -> None:
        self.cancelled = True
        if self._session._current is self:
            if self._session._task is None:
                self._session._cancel.set()  # holds the session, not started: begins cancelled
            else:
                await self._session.cancel(end_waiting=False)


def _snapshot(call: ToolCall) -> ToolCall:
    return dataclasses.replace(call)


def _dump(m: pm.ModelMessage) -> str:
    return ModelMessagesTypeAdapter.dump_json([m])[1:-1].decode()


def _json_text(value: Any) -> str:
    import json

    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def _shown_diff(diff: dict[str, Any]) -> dict[str, Any]:
    """An edit's FileDiff as the transcript keeps it for readers: its names and unified diff; the
    old and new contents are left out (the diff is what a reader shows, at a fraction the size)."""
    keep = ("file_name", "file_path", "formatted_diff")
    return {**{k: str(diff.get(k) or "") for k in keep}, "old_content": None, "new_content": ""}


# Keep Decision importable from here for adapters that only import the session module.
__all__ = ["Decision", "Session"]
