"""The older Gemini CLI a2a-server dialect (`coderAgent`), beside the RFC translation in executor.py.

Clients built against Gemini CLI's shipped `a2a-server` (IDE agent modes) speak a dialect the RFC
does not describe: metadata under the key `coderAgent` with kebab-case kinds, tool calls as
serialized gemini-core `ToolCall` objects (`request.callId`, statuses `scheduled` ...
`cancelled`, `confirmationDetails` typed `edit | exec | mcp | info`), live output as
`artifact-update` events, confirmations as `{callId, outcome, newContent?}`, and every normal turn
ending `input-required` with `final: true`.

A task speaks it when its first message carries `metadata.coderAgent` (AgentSettings
`{kind: "agent-settings", workspacePath, autoExecute?}`, or any `coderAgent` object from a client
that did not activate the RFC extension). The choice is made once per request (the task's metadata
keeps the `coderAgent` key), so RFC tasks pay nothing per event. The core is the same; only this
translation differs. Nothing here widens permissions: `autoExecute` asks for the `yolo` mode, which
the core grants only if server policy allows it, `isTrusted` is ignored, and a legacy outcome maps
onto one of the options the core offered for the call, never a wider one.
"""

from __future__ import annotations

import difflib
import uuid
from typing import TYPE_CHECKING, Any

from a2a.types import (
    Artifact,
    Part,
    TaskArtifactUpdateEvent,
    TaskState,
)

from devagent.a2a import extension as ext
from devagent.a2a.emitter import Emitter, data_value, tool_calls_part

# The request's legacy part lives with the rest of the hand-off (request.py); named here too, as
# the executor refers to it.
from devagent.a2a.request import LegacyRequest as LegacyRequest
from devagent.agent.api import (
    ExecuteDetails,
    FileDiff,
    FileDiffs,
    GenericDetails,
    McpDetails,
    QuestionDetails,
    ToolCall,
    ToolCallStatus,
    ToolKind,
)

if TYPE_CHECKING:
    from a2a.server.events import EventQueue
    from a2a.types import Task

    from devagent.a2a.request import Prepared
    from devagent.agent.api import Session, TurnView

KEY = ext.LEGACY_KEY  # "coderAgent"

STATE_CHANGE = "state-change"
TEXT_CONTENT = "text-content"
THOUGHT = "thought"
TOOL_CALL_UPDATE = "tool-call-update"
TOOL_CALL_CONFIRMATION = "tool-call-confirmation"
CITATION = "citation"
AGENT_SETTINGS = "agent-settings"

# Every outcome the original accepts (gemini-core ToolConfirmationOutcome).
OUTCOMES = frozenset(
    (
        "proceed_once",
        "proceed_always",
        "proceed_always_and_save",
        "proceed_always_server",
        "proceed_always_tool",
        "modify_with_editor",
        "cancel",
    )
)
MODIFY = "modify_with_editor"
EDITS_KEY = "legacy_edits"  # session.state.extra: call id -> content from modify_with_editor

# A legacy outcome -> the core's options, nearest first. The first one the call offers is taken,
# so a client never gets more than the core offered (the "and save" of proceed_always_and_save is
# a policy file the server does not let clients write: it is a session grant here).
_NEAREST: dict[str, tuple[str, ...]] = {
    "proceed_once": ("proceed_once",),
    "proceed_always": ("proceed_always", "proceed_always_tool", "proceed_once"),
    "proceed_always_tool": ("proceed_always_tool", "proceed_always", "proceed_once"),
    "proceed_always_server": ("proceed_always_server", "proceed_always", "proceed_once"),
    "proceed_always_and_save": ("proceed_always", "proceed_always_tool", "proceed_once"),
    "cancel": ("cancel",),
}

WORKING = TaskState.TASK_STATE_WORKING
INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED
COMPLETED = TaskState.TASK_STATE_COMPLETED
FAILED = TaskState.TASK_STATE_FAILED

_KINDS = {
    ext.STATE_CHANGE: STATE_CHANGE,
    ext.TEXT_CONTENT: TEXT_CONTENT,
    ext.THOUGHT: THOUGHT,
    ext.TOOL_CALL_UPDATE: TOOL_CALL_UPDATE,
    ext.TOOL_CALL_CONFIRMATION: TOOL_CALL_CONFIRMATION,
}
_STATUS = {
    ToolCallStatus.EXECUTING: "executing",
    ToolCallStatus.SUCCEEDED: "success",
    ToolCallStatus.FAILED: "error",
    ToolCallStatus.CANCELLED: "cancelled",
}
_TERMINAL = frozenset(("success", "error", "cancelled"))
# gemini-core tool Kind values
_TOOL_KIND = {
    ToolKind.READ: "read",
    ToolKind.EDIT: "edit",
    ToolKind.EXECUTE: "execute",
    ToolKind.FETCH: "fetch",
    ToolKind.INTERNAL: "think",
    ToolKind.CLIENT: "other",
    ToolKind.MCP: "other",
    ToolKind.QUESTION: "communicate",
}


# --- choosing the dialect ------------------------------------------------------------------------


def is_legacy_message(
    message_metadata: dict[str, Any] | None,
    request_metadata: dict[str, Any] | None,
    requested_extensions: set[str] | frozenset[str],
) -> bool:
    """A new task's dialect: legacy when its first message (or the request) carries legacy
    AgentSettings, or any `coderAgent` object from a client that did not activate the extension."""
    activated = ext.EXTENSION_URI in requested_extensions
    for md in (message_metadata, request_metadata):
        if not md:
            continue
        raw = md.get(KEY)
        if isinstance(raw, dict) and (raw.get("kind") == AGENT_SETTINGS or not activated):
            return True
    return False


def is_legacy_task(task: Task) -> bool:
    """An existing task's dialect: legacy tasks keep the `coderAgent` key in their metadata
    (written with the first event and by every event after it)."""
    return KEY in task.metadata.fields


def map_outcome(outcome: str, offered: list[str]) -> str:
    """The option to give the core for a legacy outcome: the nearest one the call offered."""
    if outcome not in _NEAREST:
        raise ext.SettingsError(f"unknown outcome {outcome!r}; expected one of {', '.join(sorted(OUTCOMES))}")
    for option in _NEAREST[outcome]:
        if option in offered:
            return option
    raise ext.SettingsError(f"outcome {outcome!r} matches none of the options offered: {offered}")


def apply_confirmations(session: Session, prepared: Prepared, lreq: LegacyRequest) -> bool:
    """Legacy outcomes onto the options the core offered for each call (the handler already
    refused unknown call ids). modify_with_editor decides nothing: the call keeps waiting, and
    content sent with it is what a later proceed writes. That content is kept in the session's
    adapter-owned state until the call is answered, so it survives a restart like the pending
    call itself. Returns whether that state changed (the caller saves it)."""
    edits: dict[str, str] = session.state.extra.setdefault(EDITS_KEY, {})
    changed = False
    for c in prepared.confirmations:
        if c.selected_option_id not in OUTCOMES:
            map_outcome(c.selected_option_id, [])  # raises, naming the outcomes accepted
    waiting = {c.id: c for c in session.waiting_calls()}
    kept: list[ext.Confirmation] = []
    for c in prepared.confirmations:
        call = waiting[c.tool_call_id]
        lreq.outcomes[c.tool_call_id] = c.selected_option_id
        if call.question is not None:
            kept.append(question_confirmation(call.question, c))
            continue
        req = call.confirmation
        offered = [o.id for o in req.options] if req is not None else []
        is_edit = req is not None and isinstance(req.details, FileDiff)
        key = c.tool_call_id
        if c.selected_option_id == MODIFY:
            if c.new_content is not None and is_edit:
                edits[key] = c.new_content
                changed = True
            continue
        option = map_outcome(c.selected_option_id, offered)
        edited = edits.pop(key, None)
        changed = changed or edited is not None
        new_content = c.new_content if c.new_content is not None else edited
        kept.append(
            ext.Confirmation(c.tool_call_id, option, new_content if is_edit and option != "cancel" else None)
        )
    prepared.confirmations = kept
    if not kept and not prepared.text:
        lreq.reannounce = True
        lreq.edits = dict(edits)
    return changed


def question_confirmation(q: QuestionDetails, c: ext.Confirmation) -> ext.Confirmation:
    """A legacy answer to a question: `cancel` dismisses it; any other outcome answers it with
    the text sent (gemini-core's `answers`, or `newContent`): a choice's label or number picks it,
    other text is the free answer."""
    if c.selected_option_id == "cancel":
        return ext.Confirmation(c.tool_call_id, "cancel")
    if c.selected_option_id not in _NEAREST:
        raise ext.SettingsError(f"outcome {c.selected_option_id!r} does not answer a question")
    got = q.answer_for(c.new_content or "")
    if got is None:
        wanted = "one of its options" if not q.allow_free_text else "its text"
        raise ext.SettingsError(f"an answer to the question {q.question!r} needs {wanted} in `answers`")
    return ext.Confirmation(c.tool_call_id, got[0], got[1])


# --- agent -> client -----------------------------------------------------------------------------


def event_metadata(kind: str, model: str, error: str | None = None) -> dict[str, Any]:
    md: dict[str, Any] = {KEY: {"kind": kind}, "model": model}
    if error:
        md["error"] = error
    return md


def unified_diff(name: str, old: str | None, new: str) -> str:
    return "".join(
        difflib.unified_diff(
            (old or "").splitlines(keepends=True),
            new.splitlines(keepends=True),
            f"a/{name}" if old is not None else "/dev/null",
            f"b/{name}",
        )
    )


def file_diff_json(d: FileDiff) -> dict[str, Any]:
    """gemini-core FileDiff (a result display)."""
    return {
        "fileDiff": d.formatted_diff,
        "fileName": d.file_name,
        "filePath": d.file_path,
        "originalContent": d.old_content,
        "newContent": d.new_content,
        "isNewFile": d.old_content is None,
    }


def _result_display(diff: FileDiff | FileDiffs | None, text: str) -> Any:
    if diff is None:
        return text
    return file_diff_json(diff if isinstance(diff, FileDiff) else diff.combined())


def confirmation_details_json(c: ToolCall, edited: str | None = None) -> dict[str, Any]:
    """gemini-core ToolCallConfirmationDetails with its `type`."""
    assert c.confirmation is not None
    det = c.confirmation.details
    if isinstance(det, FileDiff):
        new = det.new_content if edited is None else edited
        return {
            "type": "edit",
            "title": f"Confirm Edit: {det.file_name}",
            "fileName": det.file_name,
            "filePath": det.file_path,
            "fileDiff": det.formatted_diff
            if edited is None
            else unified_diff(det.file_name, det.old_content, new),
            "originalContent": det.old_content,
            "newContent": new,
            "isModifying": edited is not None,
        }
    if isinstance(det, ExecuteDetails):
        root = det.root_command or (det.command.split() or [""])[0]
        return {
            "type": "exec",
            "title": "Confirm Shell Command",
            "command": det.command,
            "rootCommand": root,
            "rootCommands": [root] if root else [],
        }
    if isinstance(det, FileDiffs):
        return {
            "type": "info",
            "title": f"Confirm changes to {len(det.files)} files",
            "prompt": det.formatted_diff,
        }
    if isinstance(det, McpDetails):
        return {
            "type": "mcp",
            "title": "Confirm MCP Tool Execution",
            "serverName": det.server_name,
            "toolName": det.tool_name,
            "toolDisplayName": det.tool_name,
            "toolArgs": c.args,
        }
    if isinstance(det, QuestionDetails):  # gemini-core's ask_user confirmation
        return {
            "type": "ask_user",
            "title": "Ask User",
            "questions": [
                {
                    "question": det.question,
                    "header": "Question",
                    "type": "choice" if det.choices else "text",
                    "options": [{"label": choice, "description": ""} for choice in det.choices],
                    "multiSelect": False,
                }
            ],
        }
    assert isinstance(det, GenericDetails)
    return {"type": "info", "title": f"Confirm {c.name}", "prompt": det.description}


def response_json(c: ToolCall) -> dict[str, Any]:
    """gemini-core ToolCallResponseInfo; an error carries its message (never `{}`)."""
    if c.output is not None:
        text = c.output.text
        return {
            "callId": c.id,
            "responseParts": [
                {"functionResponse": {"id": c.id, "name": c.name, "response": {"output": text}}}
            ],
            "resultDisplay": _result_display(c.output.diff, text),
            "contentLength": len(text),
        }
    message = c.error.message if c.error is not None else "no result"
    out: dict[str, Any] = {
        "callId": c.id,
        "responseParts": [{"functionResponse": {"id": c.id, "name": c.name, "response": {"error": message}}}],
        "resultDisplay": message,
        "error": {"message": message},
    }
    if c.error is not None and c.error.type:
        out["errorType"] = c.error.type
    return out


def tool_status(c: ToolCall) -> str:
    if c.status is ToolCallStatus.PENDING:
        return "awaiting_approval" if c.confirmation is not None and not c.awaiting_client else "scheduled"
    return _STATUS[c.status]


def tool_call_json(c: ToolCall, outcome: str | None = None, edited: str | None = None) -> dict[str, Any]:
    """A serialized gemini-core ToolCall, read from the core's snapshot at once."""
    status = tool_status(c)
    description = c.description or c.name
    out: dict[str, Any] = {
        "request": {
            "callId": c.id,
            "name": c.name,
            "args": c.args,
            "isClientInitiated": False,
            "display": {"name": c.name, "description": description},
        },
        "status": status,
        "tool": {
            "name": c.name,
            "displayName": c.name,
            "description": description,
            "kind": _TOOL_KIND.get(c.kind, "other"),
            "isOutputMarkdown": False,
            "canUpdateOutput": c.kind is ToolKind.EXECUTE,
        },
    }
    if status == "awaiting_approval":
        out["confirmationDetails"] = confirmation_details_json(c, edited)
    if c.live_output is not None:
        out["liveOutput"] = c.live_output
    if status in _TERMINAL:
        out["response"] = response_json(c)
    if outcome:
        out["outcome"] = outcome
    elif status == "cancelled":
        out["outcome"] = "cancel"
    return out


class LegacyEmitter(Emitter):
    """The events of one legacy execution, through the one `Emitter` interface."""

    __slots__ = ("_live", "_msg_id", "_status", "outcomes")

    def __init__(
        self,
        queue: EventQueue,
        task_id: str,
        context_id: str,
        model: str,
        outcomes: dict[str, str] | None = None,
    ) -> None:
        super().__init__(queue, task_id, context_id, model)
        self.outcomes = outcomes or {}
        self._msg_id: str | None = None  # the pieces of one model response share a messageId
        self._status: dict[str, str] = {}  # call id -> status last sent
        self._live: dict[str, str] = {}  # call id -> live output sent so far

    def tool_json(self, c: ToolCall) -> dict[str, Any]:
        return tool_call_json(c, self.outcomes.get(c.id))

    def metadata_of(self, kind: str, error: str | None = None, extra: dict[str, Any] | None = None) -> Any:
        return event_metadata(_KINDS.get(kind, STATE_CHANGE), self.model, error)

    async def reply(self, text: str) -> list[Part] | None:
        """These clients have had the reply as text-content events; the end carries none."""
        return None

    def pause_parts(self, calls: list[ToolCall]) -> list[Part] | None:
        """These clients learn of permission requests from their tool-call-confirmation events:
        a pause's status message carries only the calls the client runs (its own tools)."""
        client_calls = [c for c in calls if c.awaiting_client]
        return [tool_calls_part(client_calls)] if client_calls else None

    def status_of(self, turn: TurnView) -> tuple[TaskState, list[Part] | None, str]:
        """A turn that ended leaves a legacy task waiting for the next message (`task_state`)."""
        task_state, parts, error = super().status_of(turn)
        return self.task_state(task_state), parts, error

    def task_state(self, state: TaskState) -> TaskState:
        """A turn that ends (finished, a model error, the step limit) leaves the task waiting for
        the client's next message, as these clients expect; an error never makes it terminal."""
        return INPUT_REQUIRED if state in (COMPLETED, FAILED) else state

    def message_id(self, kind: str, given: str | None) -> str | None:
        """The text pieces of one model response share a messageId; anything else ends it."""
        shared = _KINDS.get(kind, STATE_CHANGE) == TEXT_CONTENT
        if not shared:
            self._msg_id = None
        return self._shared_id(shared)

    def _shared_id(self, shared: bool) -> str | None:
        """The messageId the pieces of the model's response share (None: not shared, a new one)."""
        if not shared:
            return None
        if self._msg_id is None:
            self._msg_id = str(uuid.uuid4())
        return self._msg_id

    async def _send(
        self,
        state: TaskState,
        kind: str,
        parts: list[Part] | None,
        error: str | None = None,
        shared: bool = False,
    ) -> None:
        await self._status_update(
            state, parts, self._shared_id(shared), event_metadata(kind, self.model, error)
        )

    async def text(self, text: str) -> None:
        await self._send(WORKING, TEXT_CONTENT, [Part(text=text)], shared=True)

    async def data(self, kind: str, data: dict[str, Any]) -> None:
        if kind == ext.THOUGHT:
            await self._send(WORKING, THOUGHT, [Part(data=data_value(data))], shared=True)
        else:
            await self._tool(data)

    async def _tool_event(self, data: dict[str, Any]) -> None:
        kind = TOOL_CALL_CONFIRMATION if data["status"] == "awaiting_approval" else TOOL_CALL_UPDATE
        await self._send(WORKING, kind, [Part(data=data_value(data))])

    async def _tool(self, data: dict[str, Any]) -> None:
        """A tool-call-update (or -confirmation) when the call's status changes, as the original
        does; live output as artifact-update events carrying what is new."""
        self._msg_id = None  # the model's next response is a new message
        cid: str = data["request"]["callId"]
        status: str = data["status"]
        live = data.pop("liveOutput", None)
        prev = self._status.get(cid)
        if prev is None and status in ("awaiting_approval", "executing"):
            first: dict[str, Any] = {k: data[k] for k in ("request", "tool", "outcome") if k in data}
            first["status"] = "scheduled"
            await self._tool_event(first)
        if status in _TERMINAL:
            await self._live_chunk(cid, live, last=True)
        if status != prev:
            self._status[cid] = status
            if live is not None and status == "executing":
                data["liveOutput"] = live
            await self._tool_event(data)
        if status == "executing" and live is not None:
            await self._live_chunk(cid, live, last=False)

    async def _live_chunk(self, cid: str, live: str | None, last: bool) -> None:
        sent = self._live.get(cid)
        if last:
            if sent is None:
                return
            del self._live[cid]
            text = live if live is not None else sent
        else:
            if live is None or live == sent:
                return
            self._live[cid] = text = live
        if sent is not None and text.startswith(sent):
            delta, append = text[len(sent) :], True
        else:
            delta, append = text, False
        await self.queue.enqueue_event(
            TaskArtifactUpdateEvent(
                task_id=self.task_id,
                context_id=self.context_id,
                artifact=Artifact(artifact_id=f"tool-{cid}-output", parts=[Part(text=delta)]),
                append=append,
                last_chunk=last,
            )
        )

    async def reannounce(self, calls: list[ToolCall], edits: dict[str, str]) -> None:
        """After modify_with_editor: the waiting calls again (with the edited content), then the
        end of the turn; the client answers with another outcome."""
        for c in calls:
            self._status[c.id] = "awaiting_approval"
            await self._tool_event(tool_call_json(c, self.outcomes.get(c.id), edits.get(c.id)))
        await self.emit(INPUT_REQUIRED, ext.STATE_CHANGE)
