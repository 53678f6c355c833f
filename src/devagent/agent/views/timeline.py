"""The conversation as readers show it: the read model of the web console, MCP's session view, and
the doors that rebuild a client's view after a restart.

Built from the stored transcript and the waiting step only (`transcript.py` writes what it needs:
each call's result, an edit's diff in the return's metadata), so any process can build it for a
session another process runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic_ai import messages as pm

from devagent.agent.events import (
    FileDiff,
    TextDelta,
    ThoughtDelta,
    ToolCall,
    ToolCallStatus,
    ToolError,
    ToolErrorType,
    ToolKind,
    ToolOutput,
    UserPrompt,
    file_diffs,
)
from devagent.agent.history.serial import confirmation_from_json, output_from_result
from devagent.agent.history.transcript import ERROR_PREFIX, json_text
from devagent.agent.state import CallResult, PendingCall
from devagent.agent.tools import shell_patch

if TYPE_CHECKING:
    from devagent.agent.tools.base import Tool

Item = UserPrompt | TextDelta | ThoughtDelta | ToolCall


def call_view(p: PendingCall, live_output: str | None = None) -> ToolCall:
    """A call of the current step as doors show it."""
    r = p.result
    output = error = None
    if r is not None:
        if r.is_error:
            error = ToolError(r.text, r.error_type or ToolErrorType.TOOL_ERROR.value)
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
        parent_call_id=p.parent_call or None,
    )


def returned_call(
    call: pm.ToolCallPart, returned: pm.ToolReturnPart | None, tools: Mapping[str, Tool]
) -> ToolCall:
    """A settled call as its transcript entries say (the text and an edit's diff); with no
    return yet, the call as the model asked for it."""
    text = returned.model_response_str() if returned is not None else ""
    output = None
    status = ToolCallStatus.SUCCEEDED if returned is not None else ToolCallStatus.EXECUTING
    error = returned_error(text) if returned is not None else None
    if error is not None:
        status = settled_status(error)
    elif returned is not None:
        diff = returned.metadata.get("diff") if isinstance(returned.metadata, dict) else None
        output = output_from_result(CallResult(text, diff=diff if isinstance(diff, dict) else None))
    try:
        args = call.args_as_dict()
    except Exception:
        args = {}
    name, args = shell_patch.routed(call.tool_name, args, tools)  # shown as the call that ran
    tool = tools.get(name)
    return ToolCall(
        id=call.tool_call_id,
        name=name,
        args=args,
        kind=tool.kind_for(args) if tool is not None else ToolKind.INTERNAL,
        description=tool.describe(args) if tool is not None else name,
        status=status,
        output=output,
        error=error,
    )


def returned_error(text: str) -> ToolError | None:
    """The error a tool return's text says (`transcript.append_tool_returns` writes a failed or
    refused call's result as `Error (TYPE): MESSAGE`), or None for a result."""
    kind, _, rest = text.removeprefix(ERROR_PREFIX).partition("): ")
    return ToolError(rest, kind) if text.startswith(ERROR_PREFIX) and rest else None


def settled_status(error: ToolError | None) -> ToolCallStatus:
    """A settled call's status: refused by the user (cancelled), failed, or done."""
    if error is None:
        return ToolCallStatus.SUCCEEDED
    return ToolCallStatus.CANCELLED if error.type == ToolErrorType.CANCELLED else ToolCallStatus.FAILED


def timeline(
    messages: Iterable[pm.ModelMessage], pending: list[PendingCall], tools: Mapping[str, Tool]
) -> list[Item]:
    """The user's prompts, the model's whole texts and thoughts, and each tool call once with what
    became of it; the waiting step's calls as they wait (with their confirmation request)."""
    out: list[Item] = []
    asked: dict[str, tuple[int, pm.ToolCallPart]] = {}
    for m in messages:
        for part in m.parts:
            if isinstance(part, pm.UserPromptPart):
                content = part.content
                out.append(UserPrompt(content if isinstance(content, str) else json_text(content)))
            elif isinstance(part, pm.TextPart) and part.content:
                out.append(TextDelta(part.content))
            elif isinstance(part, pm.ThinkingPart) and part.content:
                out.append(ThoughtDelta(part.content))
            elif isinstance(part, pm.ToolCallPart):
                asked[part.tool_call_id] = (len(out), part)
                out.append(returned_call(part, None, tools))
            elif isinstance(part, pm.ToolReturnPart) and part.tool_call_id in asked:
                at, call = asked[part.tool_call_id]
                out[at] = returned_call(call, part, tools)
    waiting = {p.id: p for p in pending}
    for i, item in enumerate(out):
        if isinstance(item, ToolCall) and item.id in waiting:
            out[i] = call_view(waiting[item.id])
    return out


def settled_calls(
    messages: Iterable[pm.ModelMessage], pending: list[PendingCall], ids: set[str], tools: Mapping[str, Tool]
) -> list[ToolCall]:
    """What became of these calls, for a reader that rebuilds a client's view after a crash: each
    call among `ids` that has a result, from the waiting step or else from the transcript's tool
    returns (the model's call gives its name and arguments). Calls without a result are left out."""
    out = {p.id: call_view(p) for p in pending if p.id in ids and p.result is not None}
    missing = ids - set(out)
    if missing:
        asked: dict[str, pm.ToolCallPart] = {}
        for m in messages:
            for part in m.parts:
                if isinstance(part, pm.ToolCallPart) and part.tool_call_id in missing:
                    asked[part.tool_call_id] = part
                elif isinstance(part, pm.ToolReturnPart) and part.tool_call_id in asked:
                    out[part.tool_call_id] = returned_call(asked[part.tool_call_id], part, tools)
    return [out[i] for i in ids if i in out]


def answered_calls(messages: Iterable[pm.ModelMessage], call_ids: set[str]) -> set[str]:
    """Which of these calls have a result in the transcript."""
    done: set[str] = set()
    for m in messages:
        if isinstance(m, pm.ModelRequest):
            for part in m.parts:
                if isinstance(part, pm.ToolReturnPart) and part.tool_call_id in call_ids:
                    done.add(part.tool_call_id)
    return done


def call_results(messages: Iterable[pm.ModelMessage]) -> dict[str, tuple[str, bool]]:
    """What the model read back for each answered call, by call id: the text and whether the call
    failed (a retry prompt: refused arguments, a tool's error)."""
    results: dict[str, tuple[str, bool]] = {}
    for m in messages:
        if isinstance(m, pm.ModelRequest):
            for p in m.parts:
                if isinstance(p, pm.ToolReturnPart):
                    results[p.tool_call_id] = (p.model_response_str(), False)
                elif isinstance(p, pm.RetryPromptPart) and p.tool_call_id:
                    results[p.tool_call_id] = (p.model_response(), True)
    return results


def replayed_call(
    part: pm.ToolCallPart,
    tools: Mapping[str, Tool],
    client_tools: set[str],
    results: Mapping[str, tuple[str, bool]],
) -> ToolCall:
    """A call of a stored conversation shown again in its final state, with the result the model
    read (`call_results`; none: failed with "no result"). A tool the session does not have is the
    client's when it supplied one by that name, else an MCP server's."""
    name, args = shell_patch.routed(part.tool_name, part.args_as_dict() if part.args else {}, tools)
    tool = tools.get(name)
    if tool is not None:
        kind = tool.kind_for(args)
    else:
        kind = ToolKind.CLIENT if name in client_tools else ToolKind.MCP
    try:
        description = tool.describe(args) if tool is not None else name
    except Exception:  # a description from arguments the tool would refuse
        description = name
    text, failed = results.get(part.tool_call_id, ("", True))
    # a result the call's tool failed or the user refused is written as an error's text
    error = ToolError(text or "no result") if failed else returned_error(text)
    return ToolCall(
        id=part.tool_call_id,
        name=name,
        args=args,
        kind=kind,
        description=description,
        status=settled_status(error),
        output=None if error is not None else ToolOutput(text),
        error=error,
    )


@dataclass(slots=True)
class ChangedFile:
    """A file a session's file tools changed: its path and the diff of each change, oldest first."""

    path: str
    changes: list[FileDiff] = field(default_factory=list)

    @property
    def formatted_diff(self) -> str:
        """Each change's unified diff, one after the other."""
        return "".join(d.formatted_diff for d in self.changes)


def changed_files(items: Iterable[Item]) -> list[ChangedFile]:
    """The files the calls of a timeline changed (an edit's, a write's, a patch's diff, per file),
    in the order each was first changed. Only calls that succeeded count; a command's changes are
    not known to the session, so they are not here."""
    files: dict[str, ChangedFile] = {}
    for item in items:
        if not isinstance(item, ToolCall) or item.status is not ToolCallStatus.SUCCEEDED:
            continue
        for diff in file_diffs(item.output.diff if item.output is not None else None):
            if diff.formatted_diff:
                path = diff.file_path or diff.file_name
                files.setdefault(path, ChangedFile(path)).changes.append(diff)
    return list(files.values())
