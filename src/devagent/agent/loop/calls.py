"""The tool calls of one step: each classified by policy (run, ask, wait for the client, refuse),
answered, and run, with a checkpoint before every edit.

A step's calls live in `state.pending` until the step is closed; this module changes them and
says so through `emit`, and the loop stores them (`session.py`): calls are stored before any of
them runs, and an answer before its call runs, so a crash never runs a call twice.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from devagent.agent.events import (
    ClientResult,
    ConfirmationRequest,
    Event,
    Notice,
    QuestionDetails,
    Resume,
    ToolCallStatus,
    ToolCallUpdate,
    ToolErrorType,
    ToolKind,
)
from devagent.agent.history.serial import confirmation_to_json
from devagent.agent.history.transcript import json_text
from devagent.agent.hooks import points as hook_points
from devagent.agent.loop import checkpoints, traces
from devagent.agent.policy import approval
from devagent.agent.state import CallResult, PendingCall
from devagent.agent.tools import shell_patch
from devagent.agent.tools.base import Tool, ToolWaits
from devagent.agent.tools.client import validate_arguments
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.views.timeline import call_view
from devagent.common.faults import crash_point
from devagent.common.rpcerrors import internal_error

if TYPE_CHECKING:
    from pydantic_ai import messages as pm

    from devagent.agent.hooks import HookVerdict
    from devagent.agent.loop.checkpoints import Checkpoint
    from devagent.agent.mcp.manager import McpManager
    from devagent.agent.tools.base import ToolContext

Emit = Callable[[Event], None]

_GRANT_OPTIONS = ("proceed_always", "proceed_always_server", "proceed_always_tool")


class CallSession(checkpoints.CheckpointSession, hook_points.HookSession, Protocol):
    """What the tool-call step needs of a session besides what its checkpoints and hooks read:
    its tools, the context a call runs in, and the MCP connections (for a tool whose server is
    gone). `Session` is the one implementation."""

    @property
    def mcp(self) -> McpManager: ...

    def tools(self) -> dict[str, Tool]: ...

    def tool_context(self, call: PendingCall, **kw: Any) -> ToolContext:
        """The context a tool runs a call of this session in."""
        ...


class StepCalls:
    """The calls of the session's current step (`state.pending`)."""

    def __init__(self, session: CallSession) -> None:
        self.session = session
        self._checkpoints: dict[str, Checkpoint | None] = {}  # the step's, by call id
        # A hook asked to end the turn (`continue: false`): why, once the step's calls are done.
        self.stop_requested: str | None = None

    # --- what the model asked for ------------------------------------------------------------

    async def classify(self, part: pm.ToolCallPart, emit: Emit) -> PendingCall:
        """A call as the step holds it: refused at once (unknown tool, bad arguments, policy),
        waiting for permission or for the client, or ready to run."""
        name = part.tool_name
        call_id = part.tool_call_id or f"call_{int(time.time() * 1000)}"
        try:
            args = part.args_as_dict()
        except Exception:
            return self.failed(
                call_id, name, {}, "the tool arguments are not valid JSON", ToolErrorType.INVALID_ARGUMENTS
            )
        if not isinstance(args, dict):
            return self.failed(
                call_id, name, {}, "the tool arguments must be a JSON object", ToolErrorType.INVALID_ARGUMENTS
            )
        state = self.session.state
        tools = self.session.tools()
        called_as = name
        name, args = shell_patch.routed(name, args, tools)  # a patch written as a shell command
        tool = tools.get(name)
        clients = state.turn_client_tools()
        client = next((t for t in clients if t.name == name), None)
        if tool is None and client is None:
            known = ", ".join(sorted([*tools, *(t.name for t in clients)]))
            return self.failed(
                call_id,
                name,
                args,
                f"unknown tool {name!r}; available tools: {known}",
                ToolErrorType.UNKNOWN_TOOL,
            )
        schema = tool.parameters if tool is not None else client.parameters  # type: ignore[union-attr]
        problem = validate_arguments(schema, args)
        if problem:
            return self.failed(
                call_id, name, args, f"invalid arguments: {problem}", ToolErrorType.INVALID_ARGUMENTS
            )
        if tool is None:
            pc = PendingCall(
                call_id,
                name,
                args,
                ToolKind.CLIENT.value,
                description=f"{name} (run by the client)",
                needs="client",
            )
            if (await self._hooked(pc, schema, emit)).blocked:
                pc.needs = ""
            return pc
        pc = PendingCall(call_id, name, args, tool.kind_for(args).value, description=tool.describe(args))
        if called_as != name:
            pc.called_as = called_as
        hooked = await self._hooked(pc, schema, emit)
        if hooked.blocked:
            return pc
        if pc.args is not args:  # a hook changed the input: what is shown and decided on is the new one
            pc.kind, pc.description = tool.kind_for(pc.args).value, tool.describe(pc.args)
        return await self._by_policy(pc, tool, hooked.permission)

    async def _hooked(self, pc: PendingCall, schema: dict[str, Any], emit: Emit) -> HookVerdict:
        """The PreToolUse hooks' verdict on the call: a block refuses it (their reason is the
        result the model reads); input they changed replaces the call's when it is valid."""
        verdict = await hook_points.before_tool(self.session, pc)
        self._tell(verdict, emit)
        if verdict.blocked:
            self._refuse(
                pc, f"a PreToolUse hook blocked this call: {verdict.reason}", ToolErrorType.BLOCKED_BY_HOOK
            )
            return verdict
        if verdict.updated_input is not None:
            problem = validate_arguments(schema, verdict.updated_input)
            if problem:
                emit(Notice(f"A PreToolUse hook's updatedInput was not used: {problem}", "warning"))
            else:
                pc.args = verdict.updated_input
        return verdict

    def _tell(self, verdict: HookVerdict, emit: Emit) -> None:
        """Hooks' messages for the user; a hook's `continue: false` ends the turn after the step."""
        hook_points.tell(verdict, emit)
        if verdict.stop and self.stop_requested is None:
            self.stop_requested = verdict.stop_reason or "a hook ended the turn"

    async def _by_policy(
        self, pc: PendingCall, tool: Tool, hook_permission: str | None = None
    ) -> PendingCall:
        state = self.session.state
        kind = ToolKind(pc.kind)
        verdict = approval.decide(kind, pc.name, pc.args, state)
        pc.granted = verdict.granted
        # A hook's decision answers the permission question (the operator's hook chose), within
        # what the server's policy allows: it never lifts a refusal, nor answers a question.
        if hook_permission == "allow" and verdict.verdict == "ask" and kind is not ToolKind.QUESTION:
            verdict = approval.ApprovalDecision("run")
        elif hook_permission == "ask" and verdict.verdict == "run":
            verdict = approval.ApprovalDecision("ask")
        if verdict.verdict == "deny":
            self._refuse(pc, verdict.reason, ToolErrorType.DENIED_BY_POLICY)
        elif verdict.verdict == "ask":
            try:
                details = await tool.confirmation(pc.args, self.session.tool_context(pc))
            except ToolFailure as f:
                self._refuse(pc, f.message, f.type)
                return pc
            pc.needs = "permission"
            options = (
                approval.question_options(details)
                if isinstance(details, QuestionDetails)
                else approval.options_for(kind, pc.name, pc.args, self.session.sandbox)
            )
            pc.confirmation = confirmation_to_json(ConfirmationRequest(options, details))
        return pc

    def _refuse(self, pc: PendingCall, message: str, error_type: ToolErrorType) -> None:
        pc.status = ToolCallStatus.FAILED.value
        pc.result = CallResult.error(message, error_type)
        self.session.state.record_call(pc.name, True)
        traces.not_run(pc, "refused")

    def failed(
        self, call_id: str, name: str, args: dict[str, Any], message: str, error_type: ToolErrorType
    ) -> PendingCall:
        """A call refused before it could run (bad arguments, unknown tool)."""
        tool = self.session.tools().get(name)
        client_names = {t.name for t in self.session.state.client_tools}
        kind = (
            tool.kind if tool is not None else ToolKind.CLIENT if name in client_names else ToolKind.INTERNAL
        )
        call = PendingCall(call_id, name, args, kind.value, description=name)
        self._refuse(call, message, error_type)
        return call

    # --- answers ----------------------------------------------------------------------------

    async def apply(self, inp: Resume, emit: Emit) -> tuple[list[PendingCall], dict[str, str | None]]:
        """The user's decisions and the client's results: refusals settle their calls, results are
        taken as given, and the allowed calls are returned to run (with what the user changed,
        by call id), their checkpoints taken."""
        state = self.session.state
        pending = {p.id: p for p in state.pending}
        to_run: list[tuple[PendingCall, str | None]] = []
        for d in inp.decisions:
            p = pending[d.call_id]
            if p.via:
                self._relay_answer(
                    p, d.option, {"option": d.option, "new_content": d.new_content, "feedback": d.feedback}
                )
                continue
            if d.option in ("cancel", "cancel_always"):
                self._decline(p, d.option, d.feedback)
                emit(ToolCallUpdate(call_view(p)))
                continue
            if d.option in _GRANT_OPTIONS:
                approval.grant(ToolKind(p.kind), p.name, p.args, state, d.option)
            p.needs = ""
            to_run.append((p, self.tool_of(p).answer_content(p.args, d.option, d.new_content)))
        for r in inp.results:
            p = pending[r.call_id]
            if p.via:
                self._relay_answer(p, "", {"output": r.output, "error": r.error})
                continue
            self._take_result(p, r)
            traces.not_run(p, "client")
            emit(ToolCallUpdate(call_view(p)))
        to_run += [(p, None) for p in self._relays_answered()]
        new_content = {p.id: c for p, c in to_run}
        calls = [p for p, _ in to_run]
        await self.checkpoint(calls, new_content)
        return calls, new_content

    def _relay_answer(self, p: PendingCall, option: str, answer: dict[str, Any]) -> None:
        """An answer to a subagent's question: kept for its `task` call, which passes it on when it
        runs again. An "always" answer holds in this session too (for the subagents it starts
        later), as it does in the subagent's."""
        state = self.session.state
        if option in _GRANT_OPTIONS:
            approval.grant(ToolKind(p.kind), p.name, p.args, state, option)
        elif option == "cancel_always":
            approval.refuse(ToolKind(p.kind), p.name, p.args, state)
        p.answer = answer
        declined = option in ("cancel", "cancel_always")
        p.status = (ToolCallStatus.CANCELLED if declined else ToolCallStatus.SUCCEEDED).value
        p.result = CallResult("answered; passed on to the subagent")

    def _relays_answered(self) -> list[PendingCall]:
        """The `task` calls whose subagent's questions are all answered now: they run again."""
        pending = self.session.state.pending
        ready = []
        for p in pending:
            if p.needs == "relay" and p.result is None:
                if not any(q.via == p.id and q.result is None for q in pending):
                    p.needs = ""
                    ready.append(p)
        return ready

    def _decline(self, p: PendingCall, option: str, feedback: str | None) -> None:
        state = self.session.state
        p.status = ToolCallStatus.CANCELLED.value
        said = feedback.strip() if feedback else ""
        if p.kind == ToolKind.QUESTION.value:
            # a question dismissed (or one the user's client could not show): the turn goes on
            reason = f"the user did not answer the question: {said}" if said else ""
            reason = reason or "the user dismissed the question without answering"
        else:
            reason = "the user declined to run this call"
            if option == "cancel_always":
                approval.refuse(ToolKind(p.kind), p.name, p.args, state)
                reason += " and refused such calls for the rest of this session"
            if said:
                reason += f"; the user said: {said}"
        p.result = CallResult.error(reason, ToolErrorType.CANCELLED)
        state.record_call(p.name, True)
        traces.not_run(p, "declined")

    def _take_result(self, p: PendingCall, r: ClientResult) -> None:
        if r.error is not None:
            p.status = ToolCallStatus.FAILED.value
            p.result = CallResult.error(str(r.error), ToolErrorType.CLIENT_ERROR)
        else:
            out = r.output
            p.status = ToolCallStatus.SUCCEEDED.value
            p.result = CallResult(
                out if isinstance(out, str) else json_text(out), data=None if isinstance(out, str) else out
            )
        self.session.state.record_call(p.name, p.status != ToolCallStatus.SUCCEEDED.value)

    # --- running -----------------------------------------------------------------------------

    def tool_of(self, p: PendingCall) -> Tool:
        tool = self.session.tools().get(p.name)
        if tool is None:  # an MCP server that went away while the call waited
            tool = self.session.mcp.missing_tool(p.name)
        return tool

    async def checkpoint(
        self, calls: list[PendingCall], new_content: dict[str, str | None] | None = None
    ) -> None:
        """The checkpoints of the edits among calls about to run (the files' bytes now), so
        `/restore` can undo them; stored with the save that precedes the run."""
        new_content = new_content or {}
        self._checkpoints = {}
        for p in calls:
            ctx = self.session.tool_context(p, new_content=new_content.get(p.id))
            self._checkpoints[p.id] = await checkpoints.before_edit(self.session, p, self.tool_of(p), ctx)

    async def run(
        self, calls: list[PendingCall], emit: Emit, new_content: dict[str, str | None] | None = None
    ) -> None:
        """Run the calls concurrently. Calls a prefix grant lets run unasked start after the
        step's other calls are done, so that no file those write changes, while git reads it, the
        configuration whose programs the grant turns off (gitguard lists the repository's drivers
        as git starts). Not saved here: the loop stores the results next."""
        new_content = new_content or {}
        for batch in ([p for p in calls if not p.granted], [p for p in calls if p.granted]):
            await asyncio.gather(
                *(
                    traces.tool_call(self.session.id, p, self._run_one(p, emit, new_content.get(p.id)))
                    for p in batch
                )
            )

    async def _run_one(self, p: PendingCall, emit: Emit, new_content: str | None) -> None:
        tool = self.tool_of(p)
        p.status = ToolCallStatus.EXECUTING.value
        call = call_view(p)
        emit(ToolCallUpdate(dataclasses.replace(call)))

        async def live(text: str) -> None:
            call.live_output = text
            emit(ToolCallUpdate(dataclasses.replace(call)))

        ctx = self.session.tool_context(p, live=live, new_content=new_content, emit=emit)
        checkpoint = self._checkpoints.pop(p.id, None)  # taken and stored before the step's calls ran
        try:
            crash_point("session.tool_running")
            result = await tool.run(p.args, ctx)
            crash_point("session.tool_ran")
        except ToolWaits as w:
            self._relay(p, w.questions)
            return
        except ToolFailure as f:
            p.status = ToolCallStatus.FAILED.value
            p.result = CallResult.error(f.message, f.type)
        except asyncio.CancelledError:
            p.status = ToolCallStatus.CANCELLED.value
            p.result = CallResult.error(
                "the user cancelled the turn while this call ran", ToolErrorType.CANCELLED
            )
            self.session.state.record_call(p.name, True)
            raise
        except Exception as e:  # a tool's bug: the model and the client get a reference
            p.status = ToolCallStatus.FAILED.value
            p.result = CallResult.error(
                internal_error(repr(e), what=f"the tool {p.name}", exc_info=e), ToolErrorType.INTERNAL
            )
        else:
            p.status = ToolCallStatus.SUCCEEDED.value
            diff = dataclasses.asdict(result.diff) if result.diff is not None else None
            files = [
                {"media_type": a.media_type, "data": base64.b64encode(a.data).decode("ascii")}
                for a in result.attachments
            ]
            p.result = CallResult(result.text, diff=diff, data=result.data, files=files)
        await self._after_hooks(p, emit)
        await checkpoints.after_edit(self.session, checkpoint)
        self.session.state.record_call(p.name, p.status != ToolCallStatus.SUCCEEDED.value)
        emit(ToolCallUpdate(call_view(p, live_output=call.live_output)))

    async def _after_hooks(self, p: PendingCall, emit: Emit) -> None:
        """The PostToolUse hooks (PostToolUseFailure for a call that failed) see the result; what
        they say (a block's reason, context) is added to the result the model reads. The call
        ran: nothing is undone."""
        failed = p.status == ToolCallStatus.FAILED.value
        event = "PostToolUseFailure" if failed else "PostToolUse"
        verdict = await (hook_points.after_failure if failed else hook_points.after_tool)(self.session, p)
        self._tell(verdict, emit)
        note = hook_points.hook_note(event, verdict)
        if note and p.result is not None:
            p.result = dataclasses.replace(p.result, text=f"{p.result.text}\n\n{note}")

    def _relay(self, p: PendingCall, questions: list[PendingCall]) -> None:
        """The call waits for answers to questions it relays (its subagent's): they join the
        step's waiting calls (the answered ones of an earlier pause are replaced). Each was shown
        already, as the subagent's nested call."""
        p.needs = "relay"
        state = self.session.state
        ids = {q.id for q in questions}
        state.pending = [q for q in state.pending if q.id not in ids] + questions

    # --- closing ------------------------------------------------------------------------------

    def waiting(self) -> bool:
        return any(p.needs and p.result is None for p in self.session.state.pending)

    def close_open(self, reason: str, kind: ToolErrorType) -> None:
        """Every call without a result ends cancelled with `reason` (it never runs)."""
        for p in self.session.state.pending:
            if p.result is None:
                p.status = ToolCallStatus.CANCELLED.value
                p.result = CallResult.error(reason, kind)
                traces.not_run(p, "cancelled")
