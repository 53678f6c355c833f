"""The development-tool extension's schemas (RFC §3.2), as plain JSON in the RFC's snake_case.

Agent-to-client objects are built straight from the core's dataclasses into dicts (no models, no
validation on the hot path); client-to-agent objects (AgentSettings, ToolCallConfirmation,
ExecuteSlashCommandRequest) are parsed leniently from dicts and refused with a reason when they
cannot be used.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devagent.agent.api import (
    ConfirmationRequest,
    ExecuteDetails,
    FileDiff,
    FileDiffs,
    GenericDetails,
    McpDetails,
    QuestionDetails,
    RepositoryRequest,
    ToolCall,
    ToolOutput,
    parse_repository,
    requested_cap,
)
from devagent.common.errors import DevagentError

EXTENSION_VERSION = "0.1.0"
# The RFC's URI, so RFC clients find it; the version is the extension's semantic version.
EXTENSION_URI = "https://github.com/google-gemini/gemini-cli/blob/main/docs/a2a/developer-profile/v0/spec.md"
EXTENSION_DESCRIPTION = (
    "An extension for interactive development tasks, enabling features like code generation, "
    "tool usage, and real-time status updates."
)
LEGACY_KEY = "coderAgent"  # the older Gemini CLI dialect's metadata key

# DevelopmentToolEvent kinds
TOOL_CALL_CONFIRMATION = "TOOL_CALL_CONFIRMATION"
TOOL_CALL_UPDATE = "TOOL_CALL_UPDATE"
TEXT_CONTENT = "TEXT_CONTENT"
STATE_CHANGE = "STATE_CHANGE"
THOUGHT = "THOUGHT"


class SettingsError(DevagentError, ValueError):
    """AgentSettings or a confirmation the server cannot accept; the message says why."""


# --- agent -> client -----------------------------------------------------------------------------


def event_metadata(
    kind: str, model: str, error: str | None = None, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """`{URI: DevelopmentToolEvent}` for a TaskStatusUpdateEvent. `extra`: further
    fields (client tools, tool statistics) that the task's metadata keeps from its last event."""
    ev: dict[str, Any] = {"kind": kind, "model": model}
    if error:
        ev["error"] = error
    if extra:
        ev.update(extra)
    return {EXTENSION_URI: ev}


def file_diff_json(d: FileDiff) -> dict[str, Any]:
    out: dict[str, Any] = {"file_name": d.file_name, "file_path": d.file_path, "new_content": d.new_content}
    if d.old_content is not None:
        out["old_content"] = d.old_content
    if d.formatted_diff:
        out["formatted_diff"] = d.formatted_diff
    return out


def confirmation_request_json(req: ConfirmationRequest) -> dict[str, Any]:
    out: dict[str, Any] = {
        "options": [
            {"id": o.id, "name": o.name, "description": o.description}
            if o.description
            else {"id": o.id, "name": o.name}
            for o in req.options
        ]
    }
    det = req.details
    if isinstance(det, FileDiff):
        out["file_edit_details"] = file_diff_json(det)
    elif isinstance(det, FileDiffs):
        # The RFC's file_edit_details hold one file: a change of several is shown as text.
        described = f"Change {len(det.files)} files:\n\n{det.formatted_diff}"
        out["generic_details"] = {"description": described}
    elif isinstance(det, ExecuteDetails):
        ex: dict[str, Any] = {"command": det.command}
        if det.working_directory:
            ex["working_directory"] = det.working_directory
        out["execute_details"] = ex
    elif isinstance(det, McpDetails):
        out["mcp_details"] = {"server_name": det.server_name, "tool_name": det.tool_name}
    elif isinstance(det, GenericDetails):
        out["generic_details"] = {"description": det.description}
    elif isinstance(det, QuestionDetails):
        # devagent's addition (ask_user): the options are the choices, `answer` and `cancel`
        out["question_details"] = {
            "question": det.question,
            "choices": list(det.choices),
            "allow_free_text": det.allow_free_text,
        }
    return out


def tool_output_json(o: ToolOutput) -> dict[str, Any]:
    """The ToolOutput oneof: a diff for edits, else the text the model saw (a shell command's
    output, say), else the structured data."""
    if o.diff is not None:
        return {"diff": file_diff_json(o.diff if isinstance(o.diff, FileDiff) else o.diff.combined())}
    if _mcp_rich(o.data):  # an MCP result's images reach the client, with the text
        return {"structured_data": {"text": o.text, **o.data}}
    if o.text or o.data is None:
        return {"text": o.text}
    return {"structured_data": o.data if isinstance(o.data, dict) else {"value": o.data}}


def _mcp_rich(data: Any) -> bool:
    """An MCP tool result (core `mcp.convert_result`) with images or other non-text content,
    which the text output would only describe."""
    if not isinstance(data, dict) or "mcp" not in data:
        return False
    return any(isinstance(c, dict) and c.get("type") != "text" for c in data.get("content") or [])


def tool_call_json(c: ToolCall) -> dict[str, Any]:
    """The whole ToolCall, read from the core's snapshot at once (the core keeps mutating it)."""
    out: dict[str, Any] = {
        "tool_call_id": c.id,
        "status": c.status.value,
        "tool_name": c.name,
        "input_parameters": c.args,
    }
    if c.description:
        out["description"] = c.description
    if c.live_output is not None:
        out["live_content"] = c.live_output
    if c.output is not None:
        out["output"] = tool_output_json(c.output)
    elif c.error is not None:
        err: dict[str, Any] = {"message": c.error.message}
        if c.error.type:
            err["type"] = c.error.type
        if c.error.status_code is not None:
            err["status_code"] = c.error.status_code
        out["error"] = err
    if c.confirmation is not None and c.status.value == "PENDING":
        out["confirmation_request"] = confirmation_request_json(c.confirmation)
    if c.parent_call_id:  # a subagent's call: the `task` call it runs under
        out["parent_tool_call_id"] = c.parent_call_id
    return out


def thought_json(subject: str, description: str) -> dict[str, Any]:
    """AgentThought."""
    return {"subject": subject, "description": description}


# --- client -> agent -----------------------------------------------------------------------------


@dataclass(slots=True)
class AgentSettings:
    """AgentSettings plus the further settings the RFC invites."""

    workspace_path: str | None = None
    approval_mode: str | None = None
    model: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    max_cost_usd: float | None = None  # the caller's cap on each task's cost (USD)
    # A new conversation's workspace cloned from {url, ref, setup?, push?} (docs/repositories.md)
    repository: RepositoryRequest | None = None

    @classmethod
    def from_metadata(cls, *sources: dict[str, Any] | None) -> AgentSettings | None:
        """The settings from the first source (message metadata, then request metadata) that has
        them, under the extension URI or in the legacy `coderAgent` dialect."""
        for md in sources:
            if not md:
                continue
            raw = md.get(EXTENSION_URI)
            if isinstance(raw, dict):
                inner = raw.get("agent_settings")
                if isinstance(inner, dict):  # {URI: {"agent_settings": {...}}} is accepted too
                    raw = inner
                if any(k in raw for k in (*_NAMED, "mcp_servers")):
                    try:
                        cap = requested_cap(raw.get("max_cost_usd"))
                        repository = parse_repository(raw.get("repository"))
                    except ValueError as e:
                        raise SettingsError(str(e)) from None
                    return cls(
                        workspace_path=_opt_str(raw.get("workspace_path")),
                        approval_mode=_opt_str(raw.get("approval_mode")),
                        model=_client_model(raw.get("model")),
                        extra={k: v for k, v in raw.items() if k not in _NAMED},
                        max_cost_usd=cap,
                        repository=repository,
                    )
            legacy = md.get(LEGACY_KEY)
            if isinstance(legacy, dict) and legacy.get("kind") == "agent-settings":
                # Gemini CLI's autoExecute asks for yolo, which the core grants only if server policy
                # allows it; isTrusted is never taken from a client.
                return cls(
                    workspace_path=_opt_str(legacy.get("workspacePath")),
                    approval_mode="yolo" if legacy.get("autoExecute") is True else None,
                )
        return None


_NAMED = ("workspace_path", "approval_mode", "model", "max_cost_usd", "repository")  # AgentSettings' own


def _opt_str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def _client_model(v: Any) -> str | None:
    """The model a client asks for, if a client may name it at all: `scripted:FILE` reads a file
    on the server's machine (an oracle for any path, and the script would be the client's), so a
    client's scripted model is ignored like a mode policy forbids; the operator can still serve one
    with --model / DEVAGENT_MODEL."""
    model = _opt_str(v)
    if model is not None and model.strip().lower().startswith("scripted:"):
        return None
    return model


def validate_workspace(path: str, allowed_roots: list[Path]) -> str:
    """The resolved workspace path if it is absolute, an existing directory, and inside one of the
    server's allowed roots (symlinks resolved first, so a link cannot lead out)."""
    if not os.path.isabs(path):
        raise SettingsError(f"workspace_path must be absolute: {path!r}")
    resolved = Path(path).resolve()
    if not resolved.is_dir():
        raise SettingsError(f"workspace_path is not a directory: {path}")
    for root in allowed_roots:
        if resolved == root or resolved.is_relative_to(root):
            return str(resolved)
    allowed = ", ".join(map(str, allowed_roots))
    raise SettingsError(f"workspace_path {path} is outside your allowed workspace roots ({allowed})")


@dataclass(slots=True)
class Confirmation:
    """ToolCallConfirmation. `new_content`: an edit's content, or a question's typed answer."""

    tool_call_id: str
    selected_option_id: str
    new_content: str | None = None


def parse_confirmation(data: dict[str, Any]) -> Confirmation | None:
    """A ToolCallConfirmation from a DataPart's data, in the RFC's form (possibly keyed by the
    extension URI) or the legacy `{callId, outcome, newContent}`; None if it is not one. A
    question's typed answer is `question_details.answer` (RFC form) or, in the legacy form,
    `newContent` or the first of gemini-core's `answers` (`{"0": "..."}`)."""
    inner = data.get(EXTENSION_URI)
    if isinstance(inner, dict):
        data = inner
    if "tool_call_id" in data or "selected_option_id" in data:
        tcid, opt = data.get("tool_call_id"), data.get("selected_option_id")
        if not isinstance(tcid, str) or not tcid or not isinstance(opt, str) or not opt:
            raise SettingsError("ToolCallConfirmation needs tool_call_id and selected_option_id")
        new_content = None
        fd = data.get("file_details")
        qd = data.get("question_details")
        if isinstance(fd, dict) and isinstance(fd.get("new_content"), str):
            new_content = fd["new_content"]
        elif isinstance(qd, dict) and isinstance(qd.get("answer"), str):
            new_content = qd["answer"]
        return Confirmation(tcid, opt, new_content)
    if "callId" in data and "outcome" in data:
        call_id, outcome = data.get("callId"), data.get("outcome")
        if not isinstance(call_id, str) or not isinstance(outcome, str):
            raise SettingsError("confirmation needs callId and outcome")
        nc = data.get("newContent")
        answers = data.get("answers")
        if not isinstance(nc, str) and isinstance(answers, dict):
            nc = next((v for _, v in sorted(answers.items()) if isinstance(v, str)), None)
        return Confirmation(call_id, outcome, nc if isinstance(nc, str) else None)
    return None


def slash_command_json(info: Any) -> dict[str, Any]:
    """SlashCommand from the core registry's CommandInfo."""
    return {
        "name": info.name,
        "description": info.description,
        "arguments": [
            {"name": a.name, "description": a.description, "is_required": bool(a.required)}
            for a in getattr(info, "arguments", [])
        ],
        "sub_commands": [slash_command_json(s) for s in getattr(info, "sub_commands", [])],
    }
