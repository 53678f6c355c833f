"""A turn's steps, as a session runs them: the prompt taken in (its hooks first), each step (the
limits, a model request, its calls classified, stored and run), a pause for answers or the step's
results given to the model, and the turn's end, stored with how it ended; after a cancel, what
was left open closed. `Session.run_turn` decides which of these a turn's input starts with (a
prompt, a slash command, answers) and keeps a failure from ending more than the turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from pydantic_ai import messages as pm

from devagent.agent.events import (
    Event,
    NeedsInput,
    Notice,
    StatusUpdate,
    StepBegin,
    ToolCall,
    ToolCallUpdate,
    ToolErrorType,
    TurnEnd,
    TurnEndReason,
    Usage,
    UserPrompt,
)
from devagent.agent.history import transcript
from devagent.agent.hooks import points as hook_points
from devagent.agent.loop import compact, traces, turn_limits
from devagent.agent.loop.model_step import stream_response
from devagent.agent.models.errors import describe as describe_model_error
from devagent.agent.views import timeline
from devagent.common.errors import DevagentError
from devagent.common.faults import crash_point
from devagent.common.scrub import scrub

if TYPE_CHECKING:
    from devagent.agent.loop.calls import StepCalls
    from devagent.agent.loop.record import SessionRecord
    from devagent.agent.state import PendingCall, TurnScope

log = logging.getLogger("devagent.session")

Emit = Callable[[Event], None]


class Cancelled(DevagentError):
    """Raised inside a turn to unwind it after a cancel."""


class Abandoning(Protocol):
    """A session's subagents, as a turn's end sees them (`subagents.runner.Subagents`)."""

    async def abandon(self, pending: list[PendingCall]) -> None: ...


class StepSession(compact.CompactingSession, turn_limits.Limited, Protocol):
    """What a turn's steps need of a session besides what compaction and the turn's limits read:
    its stored record, its step's calls, its subagents, the calls that wait, and the turn's usage
    (`Session` is the one implementation)."""

    record: SessionRecord
    calls: StepCalls

    @property
    def subagents(self) -> Abandoning: ...

    def waiting_calls(self) -> list[ToolCall]: ...

    def turn_usage(self) -> Usage: ...


class TurnSteps:
    """The steps of a session's turns (see the module doc), with what lasts between them: the
    running turn's label, the source the SessionStart hooks fire with before the next prompt, and
    whether a Stop hook kept the turn going already."""

    def __init__(self, session: StepSession) -> None:
        self.session = session
        self.label: str | None = None  # the running turn's label (see `Session.advance`)
        # SessionStart hooks fire before the next prompt with this source ("" once they did):
        # startup or resume (decided then), clear, compact.
        self.start_source: str | None = None
        self._stop_hook_active = False  # a Stop hook kept this turn going already

    async def end_keeping_pause(self, reason: TurnEndReason, message: str, emit: Emit) -> None:
        """End a turn that changed nothing of the conversation (a command, a blocked prompt): a
        pause the session was in stays as it was."""
        if self.session.calls.waiting():
            await self.session.record.save(release=True)
            emit(TurnEnd(reason, self.session.turn_usage(), message or None))
        else:
            await self.end(reason, message, emit)

    async def begin(self, inp: UserPrompt, emit: Emit, scope: TurnScope | None = None) -> bool:
        """A new prompt: the hooks see it first (False: one blocked it, and nothing changed but
        the turn's end), then a pause it interrupts is closed and the prompt goes into the
        transcript with the context the hooks gave; a command's `scope` holds for the turn."""
        messages = await self.session.messages()
        source = self.start_source if self.start_source is not None else ("resume" if messages else "startup")
        hooked = await hook_points.before_prompt(self.session, inp.text, source, emit)
        self.start_source = ""
        if hooked.blocked is not None:
            await self._prompt_blocked(hooked.blocked, emit)
            return False
        if self.session.calls.waiting():
            await self.session.subagents.abandon(self.session.state.pending)
            self.session.calls.close_open(
                "the user sent a new message instead of answering", ToolErrorType.CANCELLED
            )
            for p in self.session.state.pending:
                emit(ToolCallUpdate(timeline.call_view(p)))
            self.close_step(messages)
        self.session.state.turn_usage = Usage()
        self.session.state.turn_steps = 0
        self.session.state.turn_scope = scope
        if not self.session.state.title:
            self.session.state.title = inp.text.strip().splitlines()[0][:80]
        transcript.append_prompt(messages, inp.text, hooked.context)
        self._stop_hook_active = False
        self.set_running()
        await self.session.record.save()
        return True

    async def _prompt_blocked(self, reason: str, emit: Emit) -> None:
        """A UserPromptSubmit hook blocked the prompt: it is not kept; the user reads why."""
        message = f"A UserPromptSubmit hook blocked the prompt: {reason}"
        emit(Notice(message, "error"))
        await self.end_keeping_pause("error", message, emit)

    def close_step(self, messages: list[pm.ModelMessage]) -> None:
        """The step's results become the tool-return request the model reads next."""
        transcript.append_tool_returns(messages, self.session.state.pending, self.session.context_tokens())
        self.session.state.pending = []

    async def pause_or_close_step(self, emit: Emit) -> bool:
        """After a step's calls ran: if some still wait for input, store everything and stop
        (True); else give the model the step's results (False: the loop goes on)."""
        if self.session.calls.waiting():
            self.session.state.status = "awaiting_input"
            await self.session.record.save(release=True)
            waiting = self.session.waiting_calls()
            await hook_points.waiting(self.session, waiting, emit)
            emit(NeedsInput(waiting))
            return True
        self.close_step(await self.session.messages())
        await self.session.record.save()
        return False

    def set_running(self) -> None:
        self.session.state.status = "running"
        self.session.state.outcome = self.session.state.outcome_message = ""
        if self.label is not None:
            self.session.state.turn_label = self.label

    async def end(
        self,
        reason: TurnEndReason,
        message: str,
        emit: Emit,
        *,
        quietly: bool = False,
        finish: str | None = None,
    ) -> None:
        """End the turn: store how it ended (and give up the lease in the same write), then say so."""
        self.session.state.status = "idle"
        self.session.state.turn_scope = None
        self.session.state.outcome = reason
        self.session.state.outcome_message = message
        if quietly:
            await self.session.record.save_quietly(release=True)
        else:
            await self.session.record.save(release=True)
        emit(TurnEnd(reason, self.session.turn_usage(), message or None, finish))

    async def loop(self, emit: Emit) -> None:
        while True:
            stop = await turn_limits.stop_reason(self.session)
            if stop is not None:
                reason, message = stop
                emit(Notice(message, "warning" if reason == "max_steps_reached" else "error"))
                await self.end(reason, message, emit)
                return
            self.session.state.turn_steps += 1
            emit(
                StepBegin(self.session.state.turn_steps, transcript.answer_key(await self.session.messages()))
            )
            response = await self._model_step(emit)
            if response is None:
                return
            messages = await self.session.messages()
            messages.append(response)
            for index in transcript.drop_shown_files(messages):  # seen: not sent or kept again
                self.session.record.changed_message(index)
            calls = [p for p in response.parts if isinstance(p, pm.ToolCallPart)]
            if not calls and await self._stop_refused(response, emit):
                continue
            if not calls:
                if response.finish_reason == "length":
                    emit(Notice("The answer was cut off at the model's output token limit.", "warning"))
                await self.end("finished", "", emit, finish=response.finish_reason)
                return
            self.session.state.pending = [await self.session.calls.classify(c, emit) for c in calls]
            to_run = [p for p in self.session.state.pending if not p.needs and p.result is None]
            await self.session.calls.checkpoint(to_run)
            # Stored before any of them runs (with the checkpoints of the edits among them): a
            # call found unfinished after a crash is reported as interrupted, never run twice.
            await self.session.record.save()
            crash_point("session.calls_stored")
            for p in self.session.state.pending:
                emit(ToolCallUpdate(timeline.call_view(p)))
            await self.session.calls.run(to_run, emit)
            if await self.pause_or_close_step(emit):
                return
            if self.session.calls.stop_requested is not None:
                why, self.session.calls.stop_requested = self.session.calls.stop_requested, None
                await self.end("finished", why, emit)
                return

    async def _stop_refused(self, response: pm.ModelResponse, emit: Emit) -> bool:
        """The model answered without calls: a Stop hook may keep the turn going (True), its
        reason given to the model as the next message."""
        answer = "".join(p.content for p in response.parts if isinstance(p, pm.TextPart))
        said = await hook_points.before_stop(self.session, self._stop_hook_active, answer, emit)
        if said is None:
            return False
        self._stop_hook_active = True
        transcript.append_prompt(await self.session.messages(), said)
        await self.session.record.save()
        return True

    async def _model_step(self, emit: Emit) -> pm.ModelResponse | None:
        """The next model response, or None when the request failed (the turn ended, said why)."""
        try:
            params = await self.session.request_parameters()
            if await compact.fit_context(self.session, emit, params):
                params = await self.session.request_parameters()  # as a request after it sees them
            response = await traces.model_request(self.session, self._request(emit, params))
        except (asyncio.CancelledError, Cancelled):
            raise
        except Exception as e:
            text = scrub(describe_model_error(e, self._model_url()))
            # every caller is told (the notice, the turn's end); a warning would be printed a
            # second time by the terminal commands, where the log is stderr
            log.info("%s", text)
            transcript.close_request(await self.session.messages(), f"[the model request failed: {text}]")
            emit(Notice(text, "error"))
            await self.end("error", text, emit)
            return None
        return response

    async def _request(self, emit: Emit, params: Any) -> pm.ModelResponse:
        response = await stream_response(self.session.model(), await self.session.messages(), params, emit)
        step_usage = Usage.of_response(response.usage)
        self.session.spent(step_usage)
        emit(StatusUpdate(step_usage, step_usage.input_tokens, self.session.context_tokens()))
        return response

    async def after_cancel(self, emit: Emit) -> None:
        await self.session.subagents.abandon(self.session.state.pending)
        # A cancel stops everything the agent runs for the session, its background processes too.
        await self.session.core.processes.stop_session(self.session.id, "a turn was cancelled")
        self.session.calls.close_open("the user cancelled the turn", ToolErrorType.CANCELLED)
        for p in self.session.state.pending:
            emit(ToolCallUpdate(timeline.call_view(p)))
        messages = await self.session.messages()
        if messages and isinstance(messages[-1], pm.ModelResponse) and self.session.state.pending:
            self.close_step(messages)
        self.session.state.pending = []
        transcript.close_request(messages, "[cancelled by the user]")
        await self.end("cancelled", "", emit, quietly=True)

    def _model_url(self) -> str | None:
        """The base URL of this session's model, if it was created and talks to a server."""
        model = self.session.core.known_model(self.session.model_name)
        url = getattr(model, "base_url", None)
        return str(url) if url else None
