"""The points of a session where hooks fire, and each event's input as Claude Code's hooks read
it: a tool's Claude Code name as `tool_name` (devagent's as `devagent_tool_name`), its arguments
with Claude Code's spelling of a file's path beside devagent's, and the result after the call."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from devagent.agent.events import Event, Notice, ToolCall, ToolKind
from devagent.agent.hooks.verdict import HookVerdict
from devagent.agent.naming.claude import claude_names
from devagent.agent.naming.mcp import server_of

if TYPE_CHECKING:
    from devagent.agent.hooks import Hooks
    from devagent.agent.sandbox.base import Sandbox
    from devagent.agent.state import PendingCall, SessionState
    from devagent.agent.tools.workspace import Workspace

log = logging.getLogger("devagent.hooks")

Emit = Callable[[Event], None]


class HookSession(Protocol):
    """What the hook points read of a session (`Session` is the one implementation)."""

    id: str
    state: SessionState
    workspace: Workspace
    sandbox: Sandbox

    @property
    def hooks(self) -> Hooks: ...

    async def messages(self) -> list[Any]: ...


async def fire(
    session: HookSession, event: str, data: dict[str, Any], names: tuple[str, ...] = ()
) -> HookVerdict:
    hooks = session.hooks
    if not hooks.has(event):
        return HookVerdict()
    state = session.state
    return await hooks.fire(
        event,
        session.id,
        state.workspace_roots,
        state.approval_mode,
        data,
        names,
        messages=session.messages,
        sidechain=state.subagent_of is not None,
        sandbox=session.sandbox,
    )


def tool_names(call: PendingCall) -> tuple[str, ...]:
    """The names a matcher may use for the call's tool: devagent's, then Claude Code's."""
    server = server_of(call.name) if call.kind == ToolKind.MCP.value else None
    return (call.name, *claude_names(call.name, server))


def _tool_fields(session: HookSession, call: PendingCall) -> dict[str, Any]:
    names = tool_names(call)
    tool_input = dict(call.args)
    path = call.args.get("path")
    if isinstance(path, str) and "file_path" not in tool_input:
        try:
            tool_input["file_path"] = str(session.workspace.absolute(path))
        except Exception:  # a path the tool refuses anyway: the hook sees it as given
            tool_input["file_path"] = path
    return {
        "tool_name": names[1] if len(names) > 1 else names[0],
        "devagent_tool_name": call.name,
        "tool_input": tool_input,
        "tool_use_id": call.id,
    }


async def before_tool(session: HookSession, call: PendingCall) -> HookVerdict:
    """PreToolUse: after the call's arguments are checked, before the approval policy."""
    if not session.hooks.has("PreToolUse"):
        return HookVerdict()
    return await fire(session, "PreToolUse", _tool_fields(session, call), tool_names(call))


async def after_tool(session: HookSession, call: PendingCall) -> HookVerdict:
    """PostToolUse: after a call that succeeded, with its result (`tool_response`)."""
    if not session.hooks.has("PostToolUse") or call.result is None:
        return HookVerdict()
    result = call.result
    response: dict[str, Any] = {"output": result.text, "success": True}
    if isinstance(result.data, dict):
        response.update(result.data)
    if call.name == "run_shell_command":
        response.setdefault("stdout", result.text)
        response.setdefault("stderr", "")
    fields = _tool_fields(session, call)
    if "file_path" in fields["tool_input"]:
        response.setdefault("filePath", fields["tool_input"]["file_path"])
    return await fire(session, "PostToolUse", {**fields, "tool_response": response}, tool_names(call))


async def after_failure(session: HookSession, call: PendingCall, interrupted: bool = False) -> HookVerdict:
    """PostToolUseFailure: after a call that ran and failed, with its error as the model reads it."""
    if not session.hooks.has("PostToolUseFailure") or call.result is None:
        return HookVerdict()
    data = {**_tool_fields(session, call), "error": call.result.text, "is_interrupt": interrupted}
    return await fire(session, "PostToolUseFailure", data, tool_names(call))


def hook_note(event: str, verdict: HookVerdict) -> str:
    """What a tool's result gains from its PostToolUse hooks: a block's reason and their context."""
    lines = [f"[{event} hook] {verdict.reason}"] if verdict.blocked else []
    lines += [f"[{event} hook context] {c}" for c in verdict.context]
    return "\n".join(lines)


def tell(verdict: HookVerdict, emit: Emit, event: str = "", *, blocks: bool = True) -> None:
    """Hooks' messages for the user. For an event a hook cannot block (`blocks` False), the
    stderr of an exit 2 is shown to the user too, as Claude Code does."""
    for text in verdict.notices:
        emit(Notice(text, "warning"))
    if verdict.blocked and not blocks:
        emit(Notice(f"The {event} hook said: {verdict.reason}", "warning"))


@dataclass
class PromptHooks:
    """What the hooks said of a prompt: blocked (why), or the context for the model beside it,
    each labelled with the event that gave it."""

    blocked: str | None = None
    context: list[str] = field(default_factory=list)


async def before_prompt(session: HookSession, text: str, start_source: str | None, emit: Emit) -> PromptHooks:
    """SessionStart (when the session starts here, or again after /clear or a compaction) and
    UserPromptSubmit, before the prompt joins the conversation. Not for a subagent: its prompt
    is its parent model's, and its end is SubagentStop."""
    out = PromptHooks()
    if session.state.subagent_of is not None:
        return out
    if start_source:
        started = await fire(session, "SessionStart", {"source": start_source}, (start_source,))
        tell(started, emit, "SessionStart", blocks=False)
        out.context += [f"[SessionStart hook context]\n{c}" for c in started.context]
    verdict = await fire(session, "UserPromptSubmit", {"prompt": text})
    tell(verdict, emit)
    if verdict.blocked or verdict.stop:
        out.blocked = verdict.reason if verdict.blocked else verdict.stop_reason or "a hook stopped it"
        return out
    out.context += [f"[UserPromptSubmit hook context]\n{c}" for c in verdict.context]
    return out


async def before_stop(session: HookSession, active: bool, answer: str, emit: Emit) -> str | None:
    """Stop (SubagentStop for a subagent) when the model has answered: a hook's block keeps the
    turn going, and its reason is what the model reads next (None: the turn ends)."""
    link = session.state.subagent_of
    event = "Stop" if link is None else "SubagentStop"
    data: dict[str, Any] = {"stop_hook_active": active, "last_assistant_message": answer}
    if link is not None:
        data.update(agent_type=link.agent, agent_id=session.id)
    verdict = await fire(session, event, data, (link.agent,) if link is not None else ())
    tell(verdict, emit)
    if verdict.blocked and not verdict.stop:
        return f"[{event} hook] {verdict.reason}"
    return None


async def before_compact(session: HookSession, trigger: str, instructions: str, emit: Emit) -> bool:
    """PreCompact: False when a hook blocked an automatic compaction (a /compact the user asked
    for goes on; the hook's reason is shown)."""
    verdict = await fire(
        session, "PreCompact", {"trigger": trigger, "custom_instructions": instructions}, (trigger,)
    )
    tell(verdict, emit, "PreCompact", blocks=trigger == "auto")
    if verdict.blocked and trigger == "auto":
        emit(Notice(f"A PreCompact hook blocked the compaction: {verdict.reason}", "warning"))
        return False
    return True


async def waiting(session: HookSession, calls: list[ToolCall], emit: Emit) -> None:
    """Notification: the turn waits for the user (a permission, a question)."""
    if not session.hooks.has("Notification") or not calls:
        return
    questions = [c for c in calls if c.kind is ToolKind.QUESTION]
    if questions:
        kind, message = "elicitation_dialog", "devagent is waiting for your answer to a question"
    else:
        names = ", ".join(dict.fromkeys(c.name for c in calls))
        kind, message = "permission_prompt", f"devagent needs your permission to use {names}"
    verdict = await fire(session, "Notification", {"message": message, "notification_type": kind}, (kind,))
    tell(verdict, emit, "Notification", blocks=False)


async def session_end(session: HookSession, reason: str) -> None:
    """SessionEnd: the door closed the session (`reason`: clear, prompt_input_exit, other)."""
    verdict = await fire(session, "SessionEnd", {"reason": reason}, (reason,))
    for text in [*verdict.notices, *([verdict.reason] if verdict.blocked else [])]:
        log.info("session %s: SessionEnd hook: %s", session.id, text)
