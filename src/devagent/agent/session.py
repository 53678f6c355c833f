"""A session: the model/tool loop over a durable transcript (our own loop over pydantic-ai's model
layer; docs/architecture.md says why). `advance(input)` runs a turn (`turn.py`), which
`run_turn` starts from its input (a prompt, a slash command, answers); its steps are `steps.py`'s:
one step streams a model response, classifies its calls (`calls.py`), stores them, runs the
runnable ones, then either pauses for answers (stored) or gives the model the results and takes
the next step.

Beside the loop: `record.py` (the stored form, the lease, recovery after a crash), `admission.py`
(who may change the session now), `timeline.py` (what readers show), `prompt.py` (the request's
instructions and tools), `driver.py` (how a door drives turns).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from pydantic_ai import messages as pm

from devagent.agent.commands import Prompt, Registry, parse_command_line, run_command, with_custom
from devagent.agent.events import (
    Event,
    Input,
    InputError,
    Notice,
    Resume,
    RunCommand,
    ToolCall,
    ToolErrorType,
    TurnEnd,
    Usage,
    UserPrompt,
)
from devagent.agent.loop import spending, toolset, traces
from devagent.agent.loop.admission import Admission
from devagent.agent.loop.calls import StepCalls
from devagent.agent.loop.inputs import CancelWaiting
from devagent.agent.loop.record import STALE, SessionRecord
from devagent.agent.loop.steps import Cancelled, TurnSteps
from devagent.agent.loop.turn import Turn, TurnRunner
from devagent.agent.models import aliases as model_aliases
from devagent.agent.prompt import instructions as prompt
from devagent.agent.settings import user_config_dir
from devagent.agent.state import APPROVAL_MODES, ClientTool, PendingCall, SessionState, TurnScope
from devagent.agent.subagents.runner import Subagents
from devagent.agent.tools import builtin_tools, web
from devagent.agent.tools.backends import ToolBackends
from devagent.agent.tools.base import Tool, ToolContext
from devagent.agent.tools.client import validate_client_tools
from devagent.agent.tools.skill_catalog import session_skills
from devagent.agent.views import timeline
from devagent.common.faults import crash_point
from devagent.common.rpcerrors import internal_error
from devagent.store.leases import StaleSession

if TYPE_CHECKING:
    from devagent.agent.hooks import Hooks
    from devagent.agent.loop.context import CoreServices
    from devagent.agent.mcp.manager import McpManager
    from devagent.agent.models.prices import Priced
    from devagent.agent.settings import CoreConfig
    from devagent.store.db import Store

log = logging.getLogger("devagent.session")

Emit = Callable[[Event], None]


class Session:
    def __init__(self, core: CoreServices, session_id: str, state: SessionState, revision: int = 0) -> None:
        self.core = core
        self.config: CoreConfig = core.config  # the core's, which it never replaces
        self.store: Store = core.store
        self.id = session_id
        self.record = SessionRecord(
            core.store, session_id, state, revision, core.config.lease_seconds, self.context_tokens
        )
        # read once per loaded session (the prompt lists them); the user's are read-only roots
        self.skills = session_skills(user_config_dir(), state.workspace_roots)
        roots = state.workspace_roots
        self.workspace = toolset.workspace_of(core, session_id, roots, self.skills.user_folders())
        # where its commands, hooks and checkers run: the core's sandbox for this session; a
        # subagent's workspace in a sandbox (not on this host) is its top-level session's, so it
        # works in that sandbox, which it never releases (`sandbox_owner`)
        self.sandbox = core.sandboxes.for_session(session_id, self.workspace.roots)
        self.sandbox_owner = session_id
        link = state.subagent_of
        if link is not None and not self.sandbox.files_here:
            self.sandbox_owner = link.sandbox_session
            self.sandbox = core.sandboxes.for_session(self.sandbox_owner, self.workspace.roots)
        self.backends = ToolBackends()  # the door's file and command backends (process resources)
        self.calls = StepCalls(self)
        self.admission = Admission(
            self.record,
            lambda: core.check_budget(self.state.identity, self.id, slot=self.state.subagent_of is None),
            lambda path: self.commands().find(path) is not None,
        )
        self._commands: Registry | None = None
        self._tools: dict[str, Tool] = builtin_tools(core.config, self.skills, self.sandbox)
        self.subagents = Subagents(self)
        self.steps = TurnSteps(self)  # what a turn does, step by step
        self.runner = TurnRunner(self)
        self.instructions = prompt.Instructions(
            self.workspace,
            core.config.memory_file,
            core.config.sandbox_network,
            self.skills.listing(),
            lambda: toolset.family(self),
            self.sandbox,
        )

    # --- what the session is -----------------------------------------------------------------

    @property
    def state(self) -> SessionState:
        return self.record.state

    @state.setter
    def state(self, value: SessionState) -> None:
        self.record.state = value

    @property
    def revision(self) -> int:
        return self.record.revision

    @property
    def mcp(self) -> McpManager:
        return self.core.mcp

    @property
    def hooks(self) -> Hooks:
        return self.core.hooks

    @property
    def model_name(self) -> str:
        return self._model_spec() or self.core.default_model

    def _model_spec(self) -> str:
        """The running turn's model: a custom command's for its turn, else the session's."""
        scope = self.state.turn_scope
        return scope.model if scope is not None and scope.model else self.state.model

    def model(self) -> Any:
        return self.core.model_for(self._model_spec())

    def context_tokens(self) -> int:
        return self.core.context_tokens(self._model_spec())

    def model_price(self) -> Priced | None:
        return self.core.prices.lookup(self.model_name)

    @property
    def busy(self) -> bool:
        return self.runner.busy

    def tools(self) -> dict[str, Tool]:
        """The tools the core runs for this session (`toolset.offered`)."""
        return toolset.offered(self, self._tools)

    def tool_definitions(self) -> list[dict[str, Any]]:
        return toolset.definitions(self.tools(), self.state.client_tools)

    def tool_context(self, call: PendingCall, **kw: Any) -> ToolContext:
        return toolset.context_for(self, call, **kw)

    def use_backends(self, backends: ToolBackends) -> None:
        """Let the built-in tools read and write files and run commands through the client that
        drives this session (`tools/backends.py`) from the next call on; never stored."""
        self.backends = backends

    def waiting_calls(self) -> list[ToolCall]:
        """The calls that wait for an answer (a `task` call waiting on its subagent's questions is
        not one: those questions are)."""
        return [
            timeline.call_view(p)
            for p in self.state.pending
            if p.needs and p.needs != "relay" and p.result is None
        ]

    # --- the transcript and what readers show ------------------------------------------------

    async def messages(self) -> list[pm.ModelMessage]:
        return await self.record.messages()

    def start_empty(self) -> None:
        self.record.start_empty()

    async def replace_messages(self, messages: list[pm.ModelMessage]) -> None:
        await self.record.replace_messages(messages)

    def write_with_next_save(self, write: Callable[[Any], Awaitable[object]]) -> None:
        self.record.write_with_next_save(write)

    async def timeline(self) -> list[timeline.Item]:
        return timeline.timeline(await self.messages(), self.state.pending, self._tools)

    async def settled_calls(self, ids: set[str]) -> list[ToolCall]:
        return timeline.settled_calls(await self.messages(), self.state.pending, ids, self._tools)

    async def answered(self, call_ids: list[str]) -> list[str]:
        """Which of these calls no longer wait: for telling "answered already" from "unknown"."""
        return await self.admission.answered(call_ids)

    # --- turns ---------------------------------------------------------------------------------

    def advance(self, inp: Input, *, label: str | None = None) -> Turn:
        """Run a turn (or the rest of one): iterate the returned `Turn` for its events, until
        `NeedsInput` or `TurnEnd`; its `cancel()` stops it at any point. `label` is the door's
        name for the turn (an A2A taskId), stored as `state.turn_label` when the turn starts
        running, so that a reader can tell which of its tasks the stored state is about."""
        return self.runner.turn(inp, label)

    def run_command(self, path: list[str], args: str = "") -> Turn:
        return self.runner.turn(RunCommand(path, args), None)

    async def cancel(self, *, end_waiting: bool = True) -> None:
        """Stop the running turn, or (with `end_waiting`) end the turn that waits for input."""
        await self.runner.cancel(end_waiting=end_waiting)

    def cancel_requested(self) -> None:
        """Another process asked (through the store) to cancel this session's running turn."""
        self.runner.stop()

    # --- changes outside a turn -----------------------------------------------------------------

    async def _change(self, change: Callable[[], None]) -> None:
        await self.admission.change(change, self.runner.cancelled)

    async def set_approval_mode(self, mode: str) -> None:
        """Change the session's approval mode. The caller is the operator's side (a flag of a local
        front door): clients' requests go through `AgentCore.effective_approval_mode` instead."""
        if mode not in APPROVAL_MODES:
            raise InputError(f"approval mode {mode!r} is not one of {', '.join(APPROVAL_MODES)}")
        await self._change(lambda: setattr(self.state, "approval_mode", mode))

    async def save_state(self) -> None:
        """Store the session's state now: for a door that changed its own part of it
        (`state.extra`) outside a turn. (If another process changed the session meanwhile, its
        version wins but for this door's `extra`.)"""
        extra = self.state.extra
        await self._change(lambda: setattr(self.state, "extra", extra))

    async def record_repository(self, record: dict[str, Any]) -> None:
        """Store what became of the session's repository (its result branch and commit pushed)."""
        await self._change(lambda: setattr(self.state, "repository", dict(record)))

    async def set_client_tools(self, tools: list[ClientTool]) -> list[tuple[str, str]]:
        accepted, rejected = validate_client_tools(
            [t.to_json() for t in tools],
            builtin_names=self.tools().keys(),
            allow=self.core.config.client_tool_allow,
            deny=self.core.config.client_tool_deny,
        )
        await self._change(lambda: setattr(self.state, "client_tools", accepted))
        return rejected

    # --- one writer across processes ------------------------------------------------------------

    def leased_now(self) -> None:
        """The store gave this process the session's lease just now (a session created leased):
        the turn about to start need not claim it again."""
        self.record.leased_now()

    async def release_unused_lease(self) -> None:
        """Give up a lease taken for a turn that did not start (a no-op if a turn holds it)."""
        await self.admission.release_unused()

    async def refresh(self) -> None:
        await self.record.refresh()

    async def accept_answers(self, inp: Resume) -> None:
        """For a door, before it accepts a message that answers waiting calls (`Admission`)."""
        await self.admission.accept_answers(inp, self.runner.cancelled)

    async def hold_for_turn(self) -> bool:
        """For a door, before it stores a message whose turn it is about to run (`Admission.hold`)."""
        return await self.admission.hold(self.runner.cancelled)

    async def recover_if_abandoned(self) -> bool:
        """For readers: settle a turn whose process died (`Admission.settle_abandoned`)."""
        return await self.admission.settle_abandoned()

    # --- the turn machinery -----------------------------------------------------------------

    def traced(
        self, inp: Input | CancelWaiting, label: str | None, work: Coroutine[Any, Any, None]
    ) -> Coroutine[Any, Any, None]:
        return traces.turn(self, inp, label, work)

    async def run_turn(self, inp: Input | CancelWaiting, label: str | None, emit: Emit) -> None:
        """Everything a turn does, as `TurnRunner` runs it: a cancel, another process taking the
        session over, or a bug ends the turn with what happened stored, never the conversation."""
        self.steps.label = label
        try:
            await self._turn_body(inp, emit)
        except (asyncio.CancelledError, Cancelled):
            await self.steps.after_cancel(emit)
        except StaleSession:
            log.warning("session %s changed in another process; turn stopped", self.id)
            self.record.lost()
            emit(Notice(STALE, "error"))
            emit(TurnEnd("error", self.turn_usage(), STALE))
        except Exception as e:  # a bug must not kill the conversation
            # The details go to the server log only; the client gets a reference to find them.
            text = internal_error(repr(e), what=f"the turn of session {self.id}", exc_info=e)
            self.calls.close_open("the turn failed", ToolErrorType.INTERNAL)
            await self.steps.end("error", text, emit, quietly=True)
        finally:
            self.core.processes.touch(self.id)  # a session's idle time counts from a turn's end

    async def _turn_body(self, inp: Input | CancelWaiting, emit: Emit) -> None:
        if isinstance(inp, CancelWaiting) or self.runner.cancelled.is_set():
            raise Cancelled()
        if isinstance(inp, UserPrompt) and inp.max_cost_usd is not None:
            self.state.max_cost_usd = max(0.0, inp.max_cost_usd)  # stored with the turn's first save
        if isinstance(inp, UserPrompt) and inp.text.lstrip().startswith("/"):
            inp = parse_command_line(inp.text, self.commands()) or inp
        scope: TurnScope | None = None
        if isinstance(inp, RunCommand):
            command = await self._run_command(inp, emit)
            if command is None:
                return
            scope = self._scope(":".join(inp.path), command, emit)
            inp = UserPrompt(command.text)
        await self.core.mcp.prepare(self, emit)  # start MCP servers on first use; report failures
        if isinstance(inp, UserPrompt):
            if not await self.steps.begin(inp, emit, scope):
                return
        else:
            self.steps.set_running()
            self.admission.applied(inp)
            to_run, new_content = await self.calls.apply(inp, emit)
            await self.record.save()  # the answers are stored before any call runs (at most once)
            crash_point("session.answers_stored")
            await self.calls.run(to_run, emit, new_content)
            if await self.steps.pause_or_close_step(emit):
                return
        await self.steps.loop(emit)

    async def _run_command(self, inp: RunCommand, emit: Emit) -> Prompt | None:
        """A slash command: its prompt to run through the model, or None when it ended the turn."""
        command = await run_command(self, inp, emit, self.commands())
        if command is None:
            await self.steps.end_keeping_pause("finished", "", emit)
        return Prompt(command) if isinstance(command, str) else command

    def _scope(self, name: str, command: Prompt, emit: Emit) -> TurnScope | None:
        """What a command's prompt narrows for its turn: the tools it names, and the model it
        asks for where this server lets callers choose models (else a log line says it is not)."""
        model = ""
        if command.model and not self.config.allow_client_model:
            log.info(
                "the command /%s asks for the model %r: callers may not choose models here",
                name,
                command.model,
            )
        elif command.model:
            current = self.state.model or self.core.default_model
            resolved = model_aliases.resolve(command.model, current, self.config.model_aliases)
            if resolved.notice:
                log.info("the command /%s: %s", name, resolved.notice)
                emit(Notice(f"/{name}: {resolved.notice}"))
            model = resolved.spec if resolved.spec != current else ""
        if command.tools is None and not model:
            return None
        return TurnScope(name, None if command.tools is None else list(command.tools), model)

    def restarted(self, source: str) -> None:
        """The conversation starts afresh (/clear) or from a summary (compaction): SessionStart
        hooks fire again, with `source`, before the next prompt."""
        self.steps.start_source = source

    def turn_usage(self) -> Usage:
        return dataclasses.replace(self.state.turn_usage)

    # --- the model --------------------------------------------------------------------------

    async def request_parameters(self) -> Any:
        # The provider's own web search where the operator chose it and the model has one.
        native = web.native_tools(self.config.web_search, self.model())
        await self.instructions.take_environment(self.state)
        return self.instructions.parameters(self.state, self.tools(), self._tools, native)

    def spent(self, usage: Usage) -> None:
        spending.record_request(self, usage)

    def charged(self, usage: Usage) -> None:
        spending.record_subagent_request(self, usage)

    def commands(self) -> Registry:
        """The built-in commands and the custom ones, read once per loaded session (so every
        door lists the same commands for the whole session)."""
        if self._commands is None:
            self._commands = with_custom(user_config_dir(), self.workspace)
        return self._commands

    def use_commands(self, commands: Registry) -> None:
        """The commands a door read for this session's workspace before the session was loaded
        and listed already: the session runs the list its client was shown."""
        self._commands = commands

    def read_memory(self) -> str:
        return self.instructions.read_memory()

    def refresh_memory(self) -> str:
        return self.instructions.refresh_memory()

    async def forget_saved_outputs(self) -> None:
        if self.core.saved_outputs is not None:
            await asyncio.to_thread(self.core.saved_outputs.remove, self.id)
