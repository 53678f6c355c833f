"""Core events and state as ACP messages, as plain JSON (standard library only).

Nothing here decides anything: it maps the core's vocabulary (`devagent.agent.events`) onto the
Agent Client Protocol's (`session/update` kinds, tool call fields, permission options, modes,
stop reasons). The shapes are the protocol's JSON (camelCase); `acp/agent.py` validates them
through the SDK's models before they are sent, and the tests check them against the same models.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from devagent.agent.api import (
    ANSWER_OPTION,
    ExecuteDetails,
    FileDiff,
    QuestionDetails,
    ToolCall,
    ToolCallStatus,
    ToolKind,
    TurnEnd,
    Usage,
    file_diffs,
)

if TYPE_CHECKING:
    from devagent.agent.api import CommandInfo

JSON = dict[str, Any]

# ACP protocol version spoken (the SDK's `acp.PROTOCOL_VERSION`; Zed and the TypeScript SDK send 1).
PROTOCOL_VERSION = 1

MODES: dict[str, tuple[str, str]] = {
    "ask": ("Ask", "Ask before edits and commands"),
    "auto-edit": ("Auto-edit", "Edit files without asking; ask before commands"),
    "yolo": ("Yolo", "Run every tool call without asking"),
    "plan": ("Plan", "Read-only: no edits, no commands"),
}

_STATUS = {
    ToolCallStatus.PENDING: "pending",
    ToolCallStatus.EXECUTING: "in_progress",
    ToolCallStatus.SUCCEEDED: "completed",
    ToolCallStatus.FAILED: "failed",
    ToolCallStatus.CANCELLED: "failed",
}

_SEARCH_TOOLS = frozenset(("grep", "glob", "web_search"))

# The core's permission options and the ACP kinds they are (allow_once, allow_always,
# reject_once, reject_always). The option id sent to the client is the core's own, so the
# client's choice goes back unchanged as the core's Decision.
_OPTION_KINDS = {
    "proceed_once": "allow_once",
    "proceed_always": "allow_always",
    "proceed_always_tool": "allow_always",
    "proceed_always_server": "allow_always",
    "cancel": "reject_once",
    "cancel_always": "reject_always",
}


def initialize_result(*, mcp_http: bool, version: str) -> JSON:
    """The answer to `initialize`: what devagent can do, honestly. Sessions can be listed, loaded
    (history replayed), resumed (without it) and closed; prompts
    take text, resource links and embedded text resources (no images or audio: the model layer
    takes text); MCP servers over stdio (the protocol's baseline, subject to the operator's policy)
    and streamable HTTP when the operator allows it (not the deprecated SSE transport). There is
    nothing to authenticate: the model's credentials are the server's."""
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
            "mcpCapabilities": {"http": mcp_http, "sse": False},
            "sessionCapabilities": {"list": {}, "resume": {}, "close": {}},
        },
        "authMethods": [],
        "agentInfo": {"name": "devagent", "title": "devagent", "version": version},
    }


def session_title(title: str) -> JSON:
    """The session's title, once its first prompt gave it one (`session/list` shows the same)."""
    return {"sessionUpdate": "session_info_update", "title": title}


def negotiate(requested: Any) -> int:
    """The protocol version answered: ACP's rule is the client's if the agent speaks it, else the
    agent's latest. devagent speaks 1 only, so every client gets 1 (one asking for 2 may then
    disconnect; 0, the pre-release numbering, gets 1 too)."""
    return PROTOCOL_VERSION


def prompt_text(blocks: list[JSON]) -> tuple[str, list[str]]:
    """A prompt's content blocks as the one text the core takes, and the kinds refused (image,
    audio, binary resources). Resource links become a reference the model can read with its
    tools; embedded text resources are inlined with their URI."""
    parts: list[str] = []
    refused: list[str] = []
    for b in blocks:
        kind = b.get("type")
        if kind == "text":
            parts.append(str(b.get("text", "")))
        elif kind == "resource_link":
            parts.append(f"[@{b.get('name') or b.get('uri')}]({_path_of(str(b.get('uri', '')))})")
        elif kind == "resource":
            res = b.get("resource") or {}
            if "text" in res:
                uri = _path_of(str(res.get("uri", "")))
                parts.append(f'\n<context ref="{uri}">\n{res["text"]}\n</context>\n')
            else:
                refused.append("binary resource")
        else:
            refused.append(str(kind))
    return "\n".join(p for p in parts if p), refused


def _path_of(uri: str) -> str:
    return uri[len("file://") :] if uri.startswith("file://") else uri


def stop_reason(end: TurnEnd) -> str | None:
    """The prompt's stopReason, or None for an ending that is an error (the prompt then fails)."""
    if end.refusal:
        return "refusal"
    if end.truncated:
        return "max_tokens"
    return {
        "finished": "end_turn",
        "cancelled": "cancelled",
        "max_steps_reached": "max_turn_requests",
    }.get(end.reason)


def usage(u: Usage) -> JSON | None:
    """The turn's tokens as the prompt response's `usage` (unstable in ACP, ignored by clients
    that do not know it), cache reads and writes included; None for a turn without a model
    request (a slash command)."""
    if not u.requests:
        return None
    out: JSON = {
        "totalTokens": u.input_tokens + u.output_tokens,
        "inputTokens": u.input_tokens,
        "outputTokens": u.output_tokens,
        "cachedReadTokens": u.cache_read_tokens,
        "cachedWriteTokens": u.cache_write_tokens,
    }
    if u.reasoning_tokens:
        out["thoughtTokens"] = u.reasoning_tokens
    return out


def tool_kind(call: ToolCall) -> str:
    if call.kind is ToolKind.READ:
        return "search" if call.name in _SEARCH_TOOLS else "read"
    if call.kind is ToolKind.EDIT:
        return "edit"
    if call.kind is ToolKind.EXECUTE:
        return "execute"
    if call.kind is ToolKind.FETCH:
        return "fetch"
    if call.kind is ToolKind.INTERNAL:
        return "think"
    return "other"  # client, MCP and question calls


def locations(call: ToolCall, root: Path) -> list[JSON]:
    """The files a call touches (the editor follows along): its `path` argument(s)."""
    paths: list[str] = []
    for key in ("path", "file_path", "absolute_path"):
        v = call.args.get(key)
        if isinstance(v, str) and v:
            paths.append(v)
    many = call.args.get("paths")
    if isinstance(many, list):
        paths += [p for p in many if isinstance(p, str)]
    out: list[JSON] = []
    for p in paths:
        full = Path(p) if Path(p).is_absolute() else root / p
        loc: JSON = {"path": str(full)}
        line = call.args.get("offset")
        if isinstance(line, int) and not isinstance(line, bool):
            loc["line"] = line
        out.append(loc)
    return out


def _diff(d: FileDiff) -> JSON:
    return {"type": "diff", "path": d.file_path, "oldText": d.old_content, "newText": d.new_content}


def _text(text: str) -> JSON:
    return {"type": "content", "content": {"type": "text", "text": text}}


def _fenced(text: str) -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}\n{text.rstrip()}\n{fence}"


def tool_content(call: ToolCall, terminal_id: str | None = None) -> list[JSON]:
    """What the editor shows in a call: the diff of an edit (proposed while it waits, written when
    done), a command's output (live while it runs, the editor's terminal when it runs there), the
    result text of other tools, the error of a failed call."""
    content: list[JSON] = []
    details = call.confirmation.details if call.confirmation is not None else None
    if call.output is not None and call.output.diff is not None:
        content += [_diff(d) for d in file_diffs(call.output.diff)]
    else:
        content += [_diff(d) for d in file_diffs(details)]
    if terminal_id is not None:
        content.append({"type": "terminal", "terminalId": terminal_id})
    elif call.kind is ToolKind.EXECUTE:
        shown = call.output.text if call.output is not None else call.live_output
        if shown:
            content.append(_text(_fenced(shown)))
    elif call.output is not None and call.output.diff is None and call.kind is not ToolKind.INTERNAL:
        content.append(_text(call.output.text))
    if call.error is not None:
        content.append(_text(call.error.message))
    return content


def title(call: ToolCall) -> str:
    if call.kind is ToolKind.EXECUTE:
        command = call.args.get("command")
        if isinstance(command, str):
            return f"`{command}`" if "`" not in command else command
    return call.description or call.name


def tool_call_update(call: ToolCall, root: Path, *, first: bool, terminal_id: str | None = None) -> JSON:
    """A `tool_call` (the first time a call is seen) or `tool_call_update` notification."""
    upd: JSON = {
        "sessionUpdate": "tool_call" if first else "tool_call_update",
        "toolCallId": call.id,
        "title": title(call),
        "kind": tool_kind(call),
        "status": _STATUS[call.status],
        "content": tool_content(call, terminal_id),
        "locations": locations(call, root),
        "rawInput": call.args,
    }
    if call.parent_call_id:  # a subagent's call: the `task` call it runs under
        upd["_meta"] = {"devagent": {"parentToolCallId": call.parent_call_id}}
    if call.status.terminal:
        if call.output is not None:
            upd["rawOutput"] = (
                call.output.data if call.output.data is not None else {"text": call.output.text}
            )
        elif call.error is not None:
            upd["rawOutput"] = {"error": call.error.message, "type": call.error.type}
    return upd


def permission_request(call: ToolCall, root: Path) -> tuple[JSON, list[JSON]]:
    """The `toolCall` and `options` of `session/request_permission` for a call that waits."""
    tool_call = tool_call_update(call, root, first=False)
    del tool_call["sessionUpdate"]
    details = call.confirmation.details if call.confirmation else None
    if isinstance(details, ExecuteDetails):
        tool_call["rawInput"] = {**call.args, "cwd": details.working_directory}
    options = [
        {"optionId": o.id, "name": o.name, "kind": _OPTION_KINDS.get(o.id, "allow_once")}
        for o in (call.confirmation.options if call.confirmation else [])
        # a question's choices are options; its typed answer needs a form (`question_form`)
        if o.id != ANSWER_OPTION
    ]
    return tool_call, options


def question_form(q: QuestionDetails) -> JSON:
    """The form of an elicitation that asks a question: its choices as a single-select of
    strings, and a text field for an answer in the user's own words where one is taken."""
    properties: JSON = {}
    if q.choices:
        properties["choice"] = {"type": "string", "title": "Choose", "enum": list(q.choices)}
    if q.allow_free_text:
        title = "Or answer in your own words" if q.choices else "Your answer"
        properties["answer"] = {"type": "string", "title": title}
    form: JSON = {"type": "object", "title": q.question, "properties": properties}
    if not q.choices:
        form["required"] = ["answer"]
    elif not q.allow_free_text:
        form["required"] = ["choice"]
    return form


def question_answer(q: QuestionDetails, content: Any) -> tuple[str, str | None] | None:
    """The answer in an accepted question form: the words typed, else the choice made; None when
    it holds neither (the question then counts as dismissed)."""
    content = content if isinstance(content, dict) else {}
    for key in ("answer", "choice"):
        value = content.get(key)
        if isinstance(value, str) and value.strip():
            return q.answer_for(value)
    return None


def plan(todos: list[JSON]) -> JSON:
    """The todo list as a `plan` update (ACP has no cancelled status: a cancelled step is shown
    completed and says so)."""
    entries = []
    for t in todos:
        status = t.get("status", "pending")
        text = str(t.get("description", ""))
        if status == "cancelled":
            status, text = "completed", f"{text} (cancelled)"
        entries.append({"content": text, "priority": "medium", "status": status})
    return {"sessionUpdate": "plan", "entries": entries}


def available_commands(commands: list[CommandInfo]) -> JSON:
    """The slash command registry as `available_commands_update` (`CommandInfo`s)."""
    out = []
    for c in commands:
        entry: JSON = {"name": c.name, "description": c.description}
        hint = c.usage()
        subs = [s.name for s in getattr(c, "sub_commands", []) or []]
        if subs:
            hint = ("|".join(subs) + " " + hint).strip()
        if hint:
            entry["input"] = {"hint": hint}
        out.append(entry)
    return {"sessionUpdate": "available_commands_update", "availableCommands": out}


def modes(current: str, allowed: list[str]) -> JSON:
    return {
        "currentModeId": current,
        "availableModes": [{"id": m, "name": MODES[m][0], "description": MODES[m][1]} for m in allowed],
    }


def text_chunk(kind: str, text: str) -> JSON:
    """`agent_message_chunk`, `agent_thought_chunk` or `user_message_chunk` of text."""
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}}


# --- errors --------------------------------------------------------------------------------

# The SDK's own texts for JSON-RPC errors (`acp.RequestError`'s constructors): alone they tell an
# editor, which shows `message` (acpx, Zed), nothing of what went wrong.
GENERIC_ERRORS = {
    -32700: "Parse error",
    -32600: "Invalid request",
    -32601: "Method not found",
    -32602: "Invalid params",
    -32603: "Internal error",
    -32002: "Resource not found",
    -32000: "Authentication required",
    -32800: "Request cancelled",
}
_MAX_SHOWN = 3  # validation errors named in the message; `data` keeps them all


def error_message(code: int, reason: str) -> str:
    """`message` of an error devagent raises: the code's name and what went wrong."""
    generic = GENERIC_ERRORS.get(code)
    return f"{generic}: {reason}" if generic else reason


def explain_error(error: JSON) -> JSON:
    """An error object the SDK made (its schema validation, a method it does not route, an
    unexpected exception) says only its code's name in `message`; this puts what went wrong
    there, from its `data` (which is kept). Messages that already say more are left as they are."""
    message, data = error.get("message"), error.get("data")
    if message not in GENERIC_ERRORS.values() or not isinstance(data, dict):
        return error
    reason = ""
    errors = data.get("errors")
    if isinstance(errors, list) and errors:
        parts = []
        for e in errors[:_MAX_SHOWN]:
            if not isinstance(e, dict):
                continue
            loc = ".".join(str(x) for x in e.get("loc") or ())
            msg = str(e.get("msg") or e.get("type") or "invalid")
            parts.append(f"{loc}: {msg}" if loc else msg)
        reason = "; ".join(parts)
        if len(errors) > _MAX_SHOWN:
            reason += f" (and {len(errors) - _MAX_SHOWN} more in data)"
    else:
        for key in ("reason", "details", "method", "uri"):
            value = data.get(key)
            if isinstance(value, str) and value:
                reason = value
                break
    if not reason:
        return error
    return {**error, "message": f"{message}: {reason}"}
