"""The wire vocabulary: JSON-RPC framing and the `{type, payload}` envelopes of the reference's
protocol 1.x (kimi-cli wire mode, KLIP-12), as plain dicts.

This module imports only the standard library and `devagent.agent.events` (dataclasses), so the
server can answer `initialize` before anything heavy is loaded. Builders return JSON-ready dicts;
parsers turn client input into small dataclasses or raise `ParamsError`.

Field sets and defaults follow what the reference puts on the wire (every payload field is always
present, `null` where unknown), because its clients validate payloads with strict schemas.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from devagent.agent.api import (
    ExecuteDetails,
    FileDiff,
    FileDiffs,
    McpDetails,
    QuestionDetails,
    StatusUpdate,
    ToolCall,
    ToolCallStatus,
    ToolKind,
    file_diffs,
    parse_repository,
    requested_cap,
    subagent_name,
)
from devagent.common.errors import DevagentError

JSON = dict[str, Any]
RpcId = str | int

# The newest protocol version this server speaks completely: 1.1 (initialize, external tools,
# ToolCallRequest, ApprovalResponse) and 1.2 (TurnEnd). Of 1.4 it has questions (`QuestionRequest`,
# sent to a client that declared `capabilities.supports_question`), not steer or set_plan_mode;
# later reference features (replay 1.3, hooks 1.7, StepRetry 1.10) are not implemented, so this
# server does not claim them.
WIRE_PROTOCOL_VERSION = "1.2"
WIRE_PROTOCOL_MIN_VERSION = "1.1"  # the first version that has `initialize`
SERVER_NAME = "devagent"

# --- JSON-RPC error codes (the reference's `ErrorCodes`) -------------------------------------------

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
INVALID_STATE = -32000
LLM_NOT_SET = -32001
LLM_NOT_SUPPORTED = -32002
CHAT_PROVIDER_ERROR = -32003

IN_METHODS = frozenset({"initialize", "prompt", "cancel"})

ApprovalAnswer = Literal["approve", "approve_for_session", "reject"]
APPROVAL_ANSWERS: tuple[str, ...] = ("approve", "approve_for_session", "reject")

# The name older clients (protocol 1.0) use for an approval answer; still understood.
LEGACY_APPROVAL_RESPONSE = "ApprovalRequestResolved"


def version_tuple(v: str) -> tuple[int, ...] | None:
    try:
        parts = tuple(int(p) for p in v.strip().split("."))
    except (ValueError, AttributeError):
        return None
    return parts or None


def negotiate_version(client_version: str) -> str:
    """The version both sides speak: the client's if it is older than ours (but at least 1.1,
    since a client that sends `initialize` speaks that much), else ours."""
    ours = version_tuple(WIRE_PROTOCOL_VERSION)
    theirs = version_tuple(client_version)
    assert ours is not None
    if theirs is None or theirs >= ours:
        return WIRE_PROTOCOL_VERSION
    floor = version_tuple(WIRE_PROTOCOL_MIN_VERSION)
    assert floor is not None
    if theirs <= floor:
        return WIRE_PROTOCOL_MIN_VERSION
    return ".".join(str(p) for p in theirs)


# --- JSON-RPC envelopes ----------------------------------------------------------------------------


def error_response(rpc_id: RpcId | None, code: int, message: str, data: Any = None) -> JSON:
    return {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": code, "message": message, "data": data}}


def result_response(rpc_id: RpcId, result: Any) -> JSON:
    return {"jsonrpc": "2.0", "id": rpc_id, "result": result}


def event(type_: str, payload: JSON) -> JSON:
    return {"jsonrpc": "2.0", "method": "event", "params": {"type": type_, "payload": payload}}


def request(rpc_id: str, type_: str, payload: JSON) -> JSON:
    return {
        "jsonrpc": "2.0",
        "method": "request",
        "id": rpc_id,
        "params": {"type": type_, "payload": payload},
    }


# --- events ----------------------------------------------------------------------------------------


def turn_begin(user_input: str | list[JSON]) -> JSON:
    return event("TurnBegin", {"user_input": user_input})


def turn_end() -> JSON:
    return event("TurnEnd", {})


def step_begin(n: int) -> JSON:
    return event("StepBegin", {"n": n})


def text_part(text: str) -> JSON:
    return event("ContentPart", {"type": "text", "text": text})


def think_part(text: str) -> JSON:
    return event("ContentPart", {"type": "think", "think": text, "encrypted": None})


def tool_call_event(call: ToolCall) -> JSON:
    return event(
        "ToolCall",
        {
            "type": "function",
            "id": call.id,
            "function": {"name": call.name, "arguments": tool_arguments(call)},
            "extras": None,
        },
    )


def subagent_event(call: ToolCall, inner: JSON) -> JSON:
    """A subagent's event (its ToolCall or ToolResult), as kimi-cli's `SubagentEvent` carries it:
    the `task` call it runs under (`parent_tool_call_id`, and the older `task_tool_call_id`)."""
    payload = inner["params"]
    return event(
        "SubagentEvent",
        {
            "parent_tool_call_id": call.parent_call_id,
            "task_tool_call_id": call.parent_call_id,
            "agent_id": None,
            "subagent_type": None,
            "event": {"type": payload["type"], "payload": payload["payload"]},
        },
    )


def tool_arguments(call: ToolCall) -> str:
    return json.dumps(call.args, ensure_ascii=False)


def return_value(is_error: bool, output: str, message: str, display: list[JSON]) -> JSON:
    return {"is_error": is_error, "output": output, "message": message, "display": display, "extras": None}


def brief(text: str) -> JSON:
    return {"type": "brief", "text": text}


def tool_result_event(call: ToolCall) -> JSON:
    """ToolResult for a call in a terminal state."""
    if call.status == ToolCallStatus.SUCCEEDED:
        out = call.output
        display: list[JSON] = []
        if out is not None:
            display += [diff_block(d) for d in file_diffs(out.diff)]
        rv = return_value(False, out.text if out else "", "", display)
    else:
        err = call.error
        message = (
            err.message if err else ("cancelled" if call.status == ToolCallStatus.CANCELLED else "failed")
        )
        label = "Cancelled" if call.status == ToolCallStatus.CANCELLED else "Failed"
        rv = return_value(True, "", message, [brief(f"{label}: {message}" if err else label)])
    return event("ToolResult", {"tool_call_id": call.id, "return_value": rv})


def status_update(ev: StatusUpdate, plan_mode: bool) -> JSON:
    u = ev.usage
    # The reference's TokenUsage splits the prompt in three parts that add up to it.
    cache_read = max(0, u.cache_read_tokens)
    cache_write = max(0, min(u.cache_write_tokens, u.input_tokens - cache_read))
    return event(
        "StatusUpdate",
        {
            "context_usage": (
                min(1.0, ev.context_tokens / ev.max_context_tokens) if ev.max_context_tokens else None
            ),
            "context_tokens": ev.context_tokens or None,
            "max_context_tokens": ev.max_context_tokens or None,
            "token_usage": {
                "input_other": max(0, u.input_tokens - cache_read - cache_write),
                "output": u.output_tokens,
                "input_cache_read": cache_read,
                "input_cache_creation": cache_write,
            },
            "message_id": None,
            "plan_mode": plan_mode,
            "mcp_status": None,
        },
    )


def approval_response_event(request_id: str, response: str, feedback: str = "") -> JSON:
    return event("ApprovalResponse", {"request_id": request_id, "response": response, "feedback": feedback})


# --- requests --------------------------------------------------------------------------------------


def diff_block(d: FileDiff) -> JSON:
    return {
        "type": "diff",
        "path": d.file_path,
        "old_text": d.old_content or "",
        "new_text": d.new_content,
        "old_start": 1,
        "new_start": 1,
        "is_summary": False,
    }


def approval_request_payload(request_id: str, call: ToolCall, turn_id: str) -> JSON:
    """An ApprovalRequest for a call whose `confirmation` is set."""
    details = call.confirmation.details if call.confirmation else None
    display: list[JSON] = []
    if isinstance(details, ExecuteDetails):
        action = "run command"
        description = f"Run command `{details.command}`"
        display.append({"type": "shell", "language": "bash", "command": details.command})
    elif isinstance(details, FileDiff):
        action = "edit file"
        verb = "Write" if details.old_content is None else "Edit"
        description = f"{verb} file `{details.file_path}`"
        display.append(diff_block(details))
    elif isinstance(details, FileDiffs):
        action = "edit file"
        description = f"Change {len(details.files)} files"
        display += [diff_block(d) for d in details.files]
    elif isinstance(details, McpDetails):
        action = f"mcp:{details.tool_name}"
        description = f"Call MCP tool `{details.tool_name}` of server `{details.server_name}`."
    else:
        action = {
            ToolKind.EXECUTE: "run command",
            ToolKind.EDIT: "edit file",
            ToolKind.FETCH: "fetch URL",
        }.get(call.kind, f"call {call.name}")
        description = getattr(details, "description", "") or call.description or call.name
        display.append(brief(description))
    subagent = subagent_name(call)
    if subagent and not description.startswith(f"{subagent}: "):
        description = f"{subagent}: {description}"  # which subagent asks
    return {
        "id": request_id,
        "tool_call_id": call.id,
        "sender": call.name,
        "action": action,
        "description": description,
        "source_kind": "foreground_turn",
        "source_id": turn_id,
        "agent_id": None,
        "subagent_type": None,
        "source_description": subagent or None,
        "display": display,
    }


def tool_call_request_payload(call: ToolCall) -> JSON:
    return {"id": call.id, "name": call.name, "arguments": tool_arguments(call)}


def question_request_payload(request_id: str, call: ToolCall, q: QuestionDetails) -> JSON:
    """A QuestionRequest of one question: its choices as the options (the client offers its own
    "other" answer, taken as the free answer where the question allows one)."""
    return {
        "id": request_id,
        "tool_call_id": call.id,
        "questions": [
            {
                "question": q.question,
                "header": "",
                "options": [{"label": c, "description": ""} for c in q.choices],
                "multi_select": False,
                "body": "",
                "other_label": "",
                "other_description": "",
            }
        ],
    }


# --- inbound ---------------------------------------------------------------------------------------


class ParamsError(DevagentError, ValueError):
    """The params of a known method do not have the required shape (-32602)."""


@dataclass(slots=True)
class ExternalToolDef:
    name: str
    description: str
    parameters: Any


@dataclass(slots=True)
class InitializeParams:
    protocol_version: str
    client_name: str = ""
    client_version: str | None = None
    external_tools: list[ExternalToolDef] = field(default_factory=list)
    supports_question: bool = False  # capabilities.supports_question: it can show a QuestionRequest
    max_cost_usd: float | None = None  # the client's cap on each turn's cost (USD)
    repository: Any = None  # a new session's workspace cloned from {url, ref, push?, setup?}


def parse_initialize(params: Any) -> InitializeParams:
    if not isinstance(params, dict):
        raise ParamsError("params must be an object")
    pv = params.get("protocol_version")
    if not isinstance(pv, str):
        raise ParamsError("protocol_version must be a string")
    out = InitializeParams(protocol_version=pv)
    client = params.get("client")
    if client is not None:
        if not isinstance(client, dict) or not isinstance(client.get("name"), str):
            raise ParamsError("client must be {name, version}")
        out.client_name = client["name"]
        cv = client.get("version")
        out.client_version = cv if isinstance(cv, str) else None
    caps = params.get("capabilities")
    if caps is not None and not isinstance(caps, dict):
        raise ParamsError("capabilities must be an object")
    out.supports_question = bool(caps and caps.get("supports_question") is True)
    tools = params.get("external_tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise ParamsError("external_tools must be a list")
        for t in tools:
            if not isinstance(t, dict) or not isinstance(t.get("name"), str):
                raise ParamsError("each external tool needs a string name")
            desc = t.get("description")
            out.external_tools.append(
                ExternalToolDef(
                    name=t["name"],
                    description=desc if isinstance(desc, str) else "",
                    parameters=t.get("parameters"),
                )
            )
    try:
        out.max_cost_usd = requested_cap(params.get("max_cost_usd"))
        out.repository = parse_repository(params.get("repository"))
    except ValueError as e:
        raise ParamsError(str(e)) from None
    return out


ContentParts = list[JSON]


def parse_user_input(params: Any) -> str | ContentParts:
    if not isinstance(params, dict):
        raise ParamsError("params must be an object")
    ui = params.get("user_input")
    if isinstance(ui, str):
        return ui
    if isinstance(ui, list) and all(isinstance(p, dict) and isinstance(p.get("type"), str) for p in ui):
        for p in ui:
            if p["type"] == "text" and not isinstance(p.get("text"), str):
                raise ParamsError("a text part needs a string text")
        return ui
    raise ParamsError("user_input must be a string or a list of content parts")


def input_text(user_input: str | ContentParts) -> tuple[str, list[str]]:
    """The prompt text of a user input and the kinds of parts that cannot be taken (the core
    accepts text only)."""
    if isinstance(user_input, str):
        return user_input, []
    texts: list[str] = []
    unsupported: list[str] = []
    for p in user_input:
        if p["type"] == "text":
            texts.append(p["text"])
        elif p["type"] != "think":
            unsupported.append(p["type"])
    return "\n".join(texts), unsupported


def unwrap_result(result: Any) -> tuple[str | None, Any]:
    """A client's answer to a request, either bare or wrapped in a `{type, payload}` envelope.
    Returns (type name or None if bare, payload)."""
    if isinstance(result, dict) and isinstance(result.get("type"), str) and "payload" in result:
        return result["type"], result["payload"]
    return None, result


@dataclass(slots=True)
class ApprovalAnswerMsg:
    request_id: str | None
    response: str
    feedback: str = ""


def parse_approval_answer(payload: Any) -> ApprovalAnswerMsg | None:
    if not isinstance(payload, dict):
        return None
    resp = payload.get("response")
    if resp not in APPROVAL_ANSWERS:
        return None
    rid = payload.get("request_id")
    fb = payload.get("feedback")
    return ApprovalAnswerMsg(
        request_id=rid if isinstance(rid, str) else None,
        response=str(resp),
        feedback=fb if isinstance(fb, str) else "",
    )


def parse_question_answer(payload: Any) -> dict[str, str] | None:
    """A QuestionResponse's `answers` (question text -> the label chosen or the text typed; empty
    when the user dismissed the questions), or None when the payload is not one."""
    if not isinstance(payload, dict):
        return None
    answers = payload.get("answers", {})
    if not isinstance(answers, dict) or not all(isinstance(v, str) for v in answers.values()):
        return None
    return {str(k): v for k, v in answers.items()}


@dataclass(slots=True)
class ToolResultMsg:
    tool_call_id: str | None
    is_error: bool
    output: str
    message: str


def _output_text(output: Any) -> str | None:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        texts: list[str] = []
        for p in output:
            if not isinstance(p, dict):
                return None
            if p.get("type") == "text" and isinstance(p.get("text"), str):
                texts.append(p["text"])
        return "\n".join(texts)
    return None


def parse_tool_result(payload: Any) -> ToolResultMsg | None:
    if not isinstance(payload, dict):
        return None
    rv = payload.get("return_value")
    if not isinstance(rv, dict) or not isinstance(rv.get("is_error"), bool):
        return None
    output = _output_text(rv.get("output", ""))
    message = rv.get("message", "")
    if output is None or not isinstance(message, str):
        return None
    tcid = payload.get("tool_call_id")
    return ToolResultMsg(
        tool_call_id=tcid if isinstance(tcid, str) else None,
        is_error=rv["is_error"],
        output=output,
        message=message,
    )
