"""Subagents: what a `task` call runs. A child session (its own context, the parent's workspace
roots, caller and approval mode, the tools its type narrows the parent's to) is stored like any
session, linked to its parent session and the `task` call (`SessionState.subagent_of`), and driven
through the one turn driver with a door of its own (`_ChildDoor`):

- its tool calls are shown in the parent's turn as nested calls (id `TASK/CALL`,
  `ToolCall.parent_call_id` = the task call), its text as the task call's live output;
- when it waits for an answer (a permission, a question, a client tool), its turn parks, and the
  `task` call ends its run waiting (`ToolWaits`): each waiting call of the child becomes a waiting
  call of the parent (the same id as the nested call, its description prefixed with the task's),
  which any door asks like its own. Their answers, stored with the parent, are passed to the
  child when the `task` call runs again, and the child goes on;
- its final answer is the `task` call's result, with its usage;
- it spends from its parent's task: its requests are charged to the parent's turn as they are
  made, where the parent's cost cap holds (`spending.py`).

The child's id follows from the parent's id, the task call's id and the call's place in the
transcript, so the call finds its child again after a pause, in any process. A cancel of the
parent's turn cancels the child's (running or waiting); a crash settles both as any session is
settled (the `task` call reported interrupted).

A remote A2A agent the operator configured is a type too (`remote_agents`): its `task` call is a
conversation with the remote agent, no session of ours; its `input-required` questions are relayed
the same way (waiting calls of the parent with `via` set), and their answers sent back to it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any, Protocol

from devagent.agent.events import (
    ClientResult,
    Decision,
    Event,
    Input,
    Notice,
    Resume,
    StepBegin,
    TextDelta,
    ToolCall,
    ToolCallUpdate,
    ToolErrorType,
    ToolKind,
    TurnEnd,
    UserPrompt,
)
from devagent.agent.history.serial import confirmation_to_json
from devagent.agent.loop import spending
from devagent.agent.loop.driver import Door, Paused, TurnDriver
from devagent.agent.models import aliases as model_aliases
from devagent.agent.settings import user_config_dir
from devagent.agent.state import PendingCall, SessionState, SubagentOf
from devagent.agent.subagents import remote as remote_agents
from devagent.agent.subagents.types import GENERAL, Catalog, load_catalog, narrow
from devagent.agent.tools.base import Tool, ToolContext, ToolResult, ToolWaits
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.task import task_tool
from devagent.agent.tools.workspace import Workspace

if TYPE_CHECKING:
    from pydantic_ai import messages as pm

    from devagent.agent.loop.context import ChildSession, CoreServices
    from devagent.agent.settings import CoreConfig
    from devagent.agent.tools.backends import ToolBackends

log = logging.getLogger(__name__)

_CHILD_IDS = uuid.UUID("6f1d3a52-9a43-4c1e-9d0b-1c2f7e0a5b31")
LIVE_CHARS = 2000  # of a subagent's latest text, shown as its task call's live output


class Parent(Protocol):
    """What the subagents need of the session that starts them: its id, state, workspace, model,
    tools and conversation, the settings, the core that owns it and the door's backends its
    children inherit (`Session` is the one implementation)."""

    id: str
    state: SessionState
    workspace: Workspace
    core: CoreServices
    backends: ToolBackends

    @property
    def config(self) -> CoreConfig: ...

    @property
    def model_name(self) -> str: ...

    def tools(self) -> dict[str, Tool]: ...

    async def messages(self) -> list[pm.ModelMessage]: ...


class Subagents:
    """A session's subagents: its `task` tool, and what runs each `task` call."""

    def __init__(self, session: Parent) -> None:
        self.session = session
        self._catalog: Catalog | None = None
        self._tool: Tool | None = None
        self._slots = asyncio.Semaphore(session.config.subagents_parallel)

    @property
    def depth(self) -> int:
        """0 for a session a door opened, 1 for its subagents, and so on."""
        link = self.session.state.subagent_of
        return 0 if link is None else link.depth

    def may_delegate(self) -> bool:
        return self.depth < self.session.config.subagent_depth

    def catalog(self) -> Catalog:
        """The types, read once per loaded session (so the tool's description, which lists them,
        stays the same for every request the session makes)."""
        if self._catalog is None:
            remote = {
                n: remote_agents.description(s) for n, s in remote_agents.specs(self.session.config).items()
            }
            self._catalog = load_catalog(
                user_config_dir(),
                self.session.workspace,
                workspace_models=self.session.config.subagent_workspace_models,
                remote=remote,
            )
        return self._catalog

    def tool(self) -> Tool:
        if self._tool is None:
            self._tool = task_tool(self.catalog().listing())
        return self._tool

    # --- a task call -----------------------------------------------------------------------------

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Run (or go on with) the subagent of the `task` call `ctx.call_id`: its final answer, or
        `ToolWaits` with its questions, or a `ToolFailure`."""
        remote = self._remote(args)
        if remote is not None:  # a remote A2A agent: no session of ours runs it
            config = self.session.config
            async with self._slots:
                return await remote_agents.run(remote, config, self.session.state.pending, args, ctx)
        child_id = await self._child_id(ctx.call_id)
        child = await self.session.core.get_session(child_id)
        inp: Input
        if child is None:
            child = await self._start(child_id, args, ctx)
            inp = UserPrompt(str(args["prompt"]))
        elif child.state.status == "awaiting_input":
            inp = self._answers(ctx.call_id, child)
        elif child.state.status == "idle":  # its turn ended before this call's result was stored
            return await self._result(child, None)
        else:
            raise ToolFailure(f"the subagent's session {child.id} is running elsewhere", ToolErrorType.BUSY)
        async with self._slots:
            outcome = await self._drive(child, inp, ctx)
        if isinstance(outcome, Paused):
            raise ToolWaits([self._question(ctx.call_id, child, c) for c in outcome.calls])
        # nothing reaches a subagent's background processes once its report is in
        await self.session.core.processes.stop_session(child.id, "its subagent's task ended", forget=True)
        return await self._result(child, outcome)

    def _remote(self, args: dict[str, Any]) -> remote_agents.RemoteAgentSpec | None:
        agent = self.catalog().types.get(str(args.get("agent") or GENERAL))
        if agent is None or not agent.remote:
            return None
        return remote_agents.specs(self.session.config).get(agent.name)

    async def _child_id(self, call_id: str) -> str:
        """The same for the call wherever and whenever it runs: from the parent's id, the call's
        id, and where the response that made it is in the transcript (a model may reuse ids)."""
        at = len(await self.session.messages())
        return str(uuid.uuid5(_CHILD_IDS, f"{self.session.id}:{at}:{call_id}"))

    async def _start(self, child_id: str, args: dict[str, Any], ctx: ToolContext) -> ChildSession:
        call_id = ctx.call_id
        catalog = self.catalog()
        name = str(args.get("agent") or GENERAL)
        agent = catalog.types.get(name)
        if agent is None:
            known = ", ".join(sorted(catalog.types))
            raise ToolFailure(
                f"no subagent type {name!r}; the types are: {known}", ToolErrorType.INVALID_ARGUMENTS
            )
        parent = self.session.state
        offered = {n: t.kind for n, t in self.session.tools().items()}
        offered.update({t.name: ToolKind.CLIENT for t in parent.client_tools})
        keep_task = self.depth + 1 < self.session.config.subagent_depth
        tools, refused = narrow(agent, offered, keep_task=keep_task)
        if refused:
            log.warning(
                "subagent type %r (%s) asks for tools its parent session %s does not have: %s",
                name,
                agent.source,
                self.session.id,
                ", ".join(refused),
            )
        model = self._model(name, agent.model, ctx)
        state = SessionState(
            workspace_roots=list(parent.workspace_roots),
            model=model,
            approval_mode=parent.approval_mode,
            title=str(args["description"])[:80],
            grants_tools=list(parent.grants_tools),
            grants_shell=list(parent.grants_shell),
            grants_mcp_servers=list(parent.grants_mcp_servers),
            refusals_tools=list(parent.refusals_tools),
            refusals_shell=list(parent.refusals_shell),
            mcp_servers=dict(parent.mcp_servers),
            client_tools=[t for t in parent.client_tools if t.name in tools],
            identity=parent.identity,
            started_on=parent.started_on or time.strftime("%Y-%m-%d"),
            # it spends from its parent's task (charged to it as it goes): at most what is left
            max_cost_usd=spending.remaining(self.session.config, parent, self.session.core.loaded_state),
            subagent_of=SubagentOf(
                workspace_of=parent.subagent_of.sandbox_session if parent.subagent_of else self.session.id,
                session=self.session.id,
                call=call_id,
                agent=name,
                description=str(args["description"]),
                depth=self.depth + 1,
                tools=tools,
                refused=refused,
                prompt=agent.instructions(),
            ),
        )
        return await self.session.core.create_child(child_id, state)

    def _model(self, name: str, asked: str, ctx: ToolContext) -> str:
        """The model of a new subagent whose type asks for `asked`: Claude Code's names resolved
        on the parent's provider (`model_aliases`), the parent's model where there is no
        counterpart, with a notice in the parent's turn."""
        parent = self.session.model_name
        resolved = model_aliases.resolve(asked, parent, self.session.config.model_aliases)
        if resolved.notice:
            log.info("subagent type %r: %s", name, resolved.notice)
            if ctx.emit is not None:
                ctx.emit(Notice(f"subagent type {name!r}: {resolved.notice}"))
        own = self.session.state.model
        # the parent's model as the parent names it ("": the server's default, followed as it is)
        return own if resolved.spec == (own or self.session.core.default_model) else resolved.spec

    def _answers(self, call_id: str, child: ChildSession) -> Resume:
        """The answers given to this call's relayed questions that the child still waits for."""
        waiting = {c.id for c in child.waiting_calls()}
        decisions: list[Decision] = []
        results: list[ClientResult] = []
        for p in self.session.state.pending:
            if p.via != call_id or p.answer is None:
                continue
            answer, p.answer = p.answer, None  # passed on once
            inner = p.id[len(call_id) + 1 :]
            if inner not in waiting:
                continue
            if "option" in answer:
                decisions.append(
                    Decision(inner, answer["option"], answer.get("new_content"), answer.get("feedback"))
                )
            else:
                results.append(ClientResult(inner, answer.get("output"), answer.get("error")))
        if not decisions and not results:
            raise ToolFailure(
                "the subagent waits for answers this call does not have", ToolErrorType.INTERNAL
            )
        return Resume(decisions, results)

    async def _drive(self, child: ChildSession, inp: Input, ctx: ToolContext) -> TurnEnd | Paused:
        link = child.state.subagent_of
        description = link.description if link is not None else ""
        door = _ChildDoor(ctx.call_id, description, ctx)
        child.use_backends(self.session.backends)
        try:
            return await TurnDriver(child, door).run(inp)
        except asyncio.CancelledError:
            # the parent's turn was cancelled: so is the child's (its turn is a task of its own,
            # which a reader that stops reading does not stop)
            await asyncio.shield(child.cancel())
            raise

    def _question(self, call_id: str, child: ChildSession, c: ToolCall) -> PendingCall:
        """A call the child waits on, as a waiting call of the parent."""
        link = child.state.subagent_of
        prefix = f"{link.description}: " if link is not None and link.description else ""
        return PendingCall(
            f"{call_id}/{c.id}",
            c.name,
            c.args,
            c.kind.value,
            description=f"{prefix}{c.description}",
            needs="client" if c.awaiting_client else "permission",
            confirmation=confirmation_to_json(c.confirmation) if c.confirmation is not None else None,
            via=call_id,
            parent_call=f"{call_id}/{c.parent_call_id}" if c.parent_call_id else call_id,
        )

    async def _result(self, child: ChildSession, end: TurnEnd | None) -> ToolResult:
        state = child.state
        link = state.subagent_of
        reason = end.reason if end is not None else (state.outcome or "finished")
        answer = _last_answer(await child.messages())
        data = {
            "session": child.id,
            "agent": link.agent if link is not None else "",
            "outcome": reason,
            "usage": state.turn_usage.to_json(),
        }
        notes = []
        if link is not None and link.refused:
            notes.append(
                f"[the type {link.agent!r} asked for tools this session does not have, left out: "
                f"{', '.join(link.refused)}]"
            )
        if reason == "finished":
            text = "\n\n".join([answer or "(the subagent gave no answer)", *notes])
            return ToolResult(text, data=data)
        message = (end.error if end is not None else state.outcome_message) or reason
        if answer:
            message += f"\nIts last answer:\n{answer}"
        raise ToolFailure(f"the subagent stopped ({reason}): {message}", ToolErrorType(f"subagent_{reason}"))

    # --- ending ----------------------------------------------------------------------------------

    async def abandon(self, pending: list[PendingCall]) -> None:
        """The parent's step ends without these calls' results (its turn was cancelled, or a new
        prompt came instead of answers): the children of its `task` calls that wait end too."""
        for p in pending:
            if p.needs != "relay" or p.result is not None:
                continue
            remote = self._remote(p.args)
            if remote is not None:
                await remote_agents.abandon(remote, self.session.config, self.session.state.pending, p.id)
                continue
            try:
                child = await self.session.core.get_session(await self._child_id(p.id))
                if child is not None and child.state.status == "awaiting_input":
                    await child.cancel()
            except Exception:  # the parent's cancel goes on; the child stays as it was stored
                log.exception("could not cancel the subagent of call %s", p.id)


class _ChildDoor(Door):
    """A subagent's turn as its parent's turn shows it: its calls nested under the task call, its
    text as the task call's live output, its notices prefixed; a question parks the turn (the
    parent relays it)."""

    def __init__(self, call_id: str, description: str, ctx: ToolContext) -> None:
        self.call_id = call_id
        self.prefix = f"{description}: " if description else ""
        self.ctx = ctx
        self.text = ""

    def _emit(self, event: Event) -> None:
        if self.ctx.emit is not None:
            self.ctx.emit(event)

    async def show(self, event: Event) -> None:
        if isinstance(event, ToolCallUpdate):
            c = event.call
            nested = dataclasses.replace(
                c,
                id=f"{self.call_id}/{c.id}",
                parent_call_id=f"{self.call_id}/{c.parent_call_id}" if c.parent_call_id else self.call_id,
                description=f"{self.prefix}{c.description}",
            )
            self._emit(ToolCallUpdate(nested))
        elif isinstance(event, StepBegin):
            self.text = ""
        elif isinstance(event, TextDelta) and event.text:
            self.text += event.text
            await self.ctx.live(self.text[-LIVE_CHARS:])
        elif isinstance(event, Notice):
            self._emit(Notice(f"{self.prefix}{event.text}", event.level))

    async def ask(self, call: ToolCall, driver: TurnDriver) -> None:
        driver.park()


def _last_answer(messages: list[pm.ModelMessage]) -> str:
    """The text of the model's last response (the subagent's report)."""
    from pydantic_ai import messages as pm  # late: the transcript's types, loaded with the model

    for m in reversed(messages):
        if isinstance(m, pm.ModelResponse):
            return "".join(p.content for p in m.parts if isinstance(p, pm.TextPart)).strip()
    return ""
