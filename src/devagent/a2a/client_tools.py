"""Client-supplied tools over A2A: the DataParts that carry tool definitions, tool calls and
tool results, and the plain-text result forms of the design document.

Definitions arrive as `{"tools": [{"type": "function", "function": {name, description,
parameters}}]}` (part metadata `{"type": "tool-definitions", "format": "langchain", "count": N}`);
calls go out as `{"tool_calls": [{id, name, args}]}` (part metadata `{"type": "tool-calls",
"format": "langchain"}`); results come back as `{"tool_results": [{tool_call_id, name, result |
error}]}`, or as text: `Tool results: [{"name", "result" | "error"}, ...]`, `Tool "X" returned: ...`,
`Tool X failed: ...`. Parsing here is pure (no session); the core validates the schemas and
decides which calls wait.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from devagent.agent.api import ClientResult, ClientTool
from devagent.common.errors import DevagentError

if TYPE_CHECKING:
    from devagent.agent.api import ToolCall

DEFINITIONS_TYPE = "tool-definitions"
CALLS_TYPE = "tool-calls"
RESULTS_TYPE = "tool-results"
REJECTED_TYPE = "tool-definitions-rejected"
FORMAT = "langchain"


class ToolResultsError(DevagentError, ValueError):
    """Tool results that cannot be applied; the message says why (a JSON-RPC -32602)."""


def plain_numbers(v: Any) -> Any:
    """JSON as the client wrote it: DataParts pass through protobuf `Struct`, which turns every
    number into a float (`3` -> `3.0`); whole floats become ints again, so a schema's
    `maxLength` or a result's count reach the model as the client sent them."""
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
        return int(v)
    if isinstance(v, dict):
        return {k: plain_numbers(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain_numbers(x) for x in v]
    return v


# --- definitions ---------------------------------------------------------------------------------


def parse_definitions(raw: Any) -> tuple[list[ClientTool], list[tuple[str, str]]]:
    """The structurally sound definitions (the core still checks names, schemas, collisions and
    server policy) and `(name, reason)` for each one refused here."""
    if not isinstance(raw, list):
        return [], [("tools", "'tools' must be a list of tool definitions")]
    tools: list[ClientTool] = []
    rejected: list[tuple[str, str]] = []
    for i, d in enumerate(raw):
        label = f"#{i}"
        if not isinstance(d, dict):
            rejected.append((label, "a tool definition must be an object"))
            continue
        fn = d.get("function")
        if isinstance(fn, dict) and isinstance(fn.get("name"), str) and fn["name"]:
            label = fn["name"]
        if d.get("type") != "function":
            rejected.append((label, "'type' must be \"function\""))
            continue
        if not isinstance(fn, dict):
            rejected.append((label, "'function' must be an object with name, description and parameters"))
            continue
        name, description, params = fn.get("name"), fn.get("description"), fn.get("parameters")
        if not isinstance(name, str) or not name:
            rejected.append((label, "missing 'function.name'"))
            continue
        if not isinstance(description, str):
            rejected.append((name, "'function.description' must be a string"))
            continue
        if not isinstance(params, dict):
            rejected.append((name, "'function.parameters' must be a JSON Schema object"))
            continue
        tools.append(ClientTool(name=name, description=description, parameters=params))
    return tools, rejected


def rejected_json(rejected: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"name": n, "reason": r} for n, r in rejected]


# --- calls ---------------------------------------------------------------------------------------


def tool_calls_data(calls: list[ToolCall]) -> dict[str, Any]:
    return {"tool_calls": [{"id": c.id, "name": c.name, "args": dict(c.args)} for c in calls]}


def calls_of_data(data: Any) -> list[tuple[str, str]]:
    """`(id, name)` of the calls in a `tool_calls` DataPart's data (as stored in a task)."""
    if not isinstance(data, dict) or not isinstance(data.get("tool_calls"), list):
        return []
    return [
        (c["id"], str(c.get("name", "")))
        for c in data["tool_calls"]
        if isinstance(c, dict) and isinstance(c.get("id"), str)
    ]


# --- results -------------------------------------------------------------------------------------


@dataclass(slots=True)
class ResultIn:
    """One result as the client sent it, before it is matched to a waiting call."""

    tool_call_id: str | None
    name: str | None
    output: Any = None
    error: str | None = None


def _error_text(err: Any) -> str:
    if isinstance(err, str):
        return err
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        return str(err["message"])
    return json.dumps(err, ensure_ascii=False)


def _result_entry(d: Any, i: int, *, need_id: bool) -> ResultIn:
    if not isinstance(d, dict):
        raise ToolResultsError(f"tool result #{i} must be an object")
    tcid = d.get("tool_call_id", d.get("id"))
    name = d.get("name")
    if tcid is not None and (not isinstance(tcid, str) or not tcid):
        raise ToolResultsError(f"tool result #{i}: 'tool_call_id' must be a non-empty string")
    if name is not None and not isinstance(name, str):
        raise ToolResultsError(f"tool result #{i}: 'name' must be a string")
    if tcid is None and (need_id or not name):
        raise ToolResultsError(f"tool result #{i} has no 'tool_call_id'")
    label = tcid or name
    if "error" in d and d["error"] is not None:
        return ResultIn(tcid, name, error=_error_text(d["error"]))
    if "result" in d:
        return ResultIn(tcid, name, output=d["result"])
    raise ToolResultsError(f"tool result for {label} has neither 'result' nor 'error'")


def parse_results(raw: Any) -> list[ResultIn]:
    """A `tool_results` DataPart's list. Each entry needs `tool_call_id` (or, leniently, a `name`
    that identifies the call) and exactly what the call produced: `result` or `error`."""
    if not isinstance(raw, list) or not raw:
        raise ToolResultsError("'tool_results' must be a non-empty list")
    entries = [_result_entry(d, i, need_id=False) for i, d in enumerate(raw)]
    ids = [e.tool_call_id for e in entries if e.tool_call_id]
    if len(ids) != len(set(ids)):
        raise ToolResultsError("a tool_call_id appears twice in tool_results")
    return entries


_LIST_PREFIX = re.compile(r"^\s*Tool results\s*:\s*", re.IGNORECASE)
_ONE = re.compile(r'^Tool\s+"?([A-Za-z0-9_-]{1,64})"?\s+(returned|failed)\s*:\s?(.*)$', re.DOTALL)


@dataclass(slots=True)
class TextResults:
    """Results written as text. `exact`: the form lists every result of the step (`Tool results:`),
    so it must answer exactly the calls waiting; the one-line forms may answer some of them."""

    entries: list[ResultIn]
    exact: bool


def parse_text_results(text: str) -> TextResults | None:
    """The design's plain-text result forms; None if the text is not one (an ordinary prompt).
    Raises ToolResultsError for a text that is one but cannot be read."""
    m = _LIST_PREFIX.match(text)
    if m:
        body = text[m.end() :].strip()
        try:
            raw = json.loads(body)
        except ValueError:
            raise ToolResultsError("'Tool results:' must be followed by a JSON list") from None
        if not isinstance(raw, list) or not raw:
            raise ToolResultsError("'Tool results:' must be followed by a non-empty JSON list")
        return TextResults([_result_entry(d, i, need_id=False) for i, d in enumerate(raw)], exact=True)
    lines = text.strip().split("\n")
    if not lines or not _ONE.match(lines[0]):
        return None
    chunks: list[str] = []
    for line in lines:
        if _ONE.match(line) or not chunks:
            chunks.append(line)
        else:
            chunks[-1] += "\n" + line
    entries: list[ResultIn] = []
    for chunk in chunks:
        one = _ONE.match(chunk)
        assert one is not None
        name, verb, rest = one.group(1), one.group(2), one.group(3).strip()
        if verb == "failed":
            entries.append(ResultIn(None, name, error=rest or "the tool failed"))
            continue
        try:
            value: Any = json.loads(rest)
        except ValueError:
            value = rest
        entries.append(ResultIn(None, name, output=value))
    return TextResults(entries, exact=False)


def match_results(
    entries: list[ResultIn], waiting: list[ToolCall], *, exact: bool, answered: set[str] | None = None
) -> list[ClientResult]:
    """Pair each result with a call waiting for its client: by `tool_call_id`, else by name (the
    first waiting call of that name, in call order: clients answer in the order they were asked).
    `exact`: every waiting call must be answered. Raises ToolResultsError naming what does not fit."""
    remaining = [c for c in waiting if c.awaiting_client]
    answered = answered or set()
    out: list[ClientResult] = []
    for e in entries:
        if e.tool_call_id is not None:
            call = next((c for c in remaining if c.id == e.tool_call_id), None)
            if call is None:
                if e.tool_call_id in answered:
                    raise ToolResultsError(
                        f"tool call {e.tool_call_id} is no longer pending (it has a result)"
                    )
                if any(c.id == e.tool_call_id for c in waiting):  # matched earlier in this list
                    raise ToolResultsError(f"tool call {e.tool_call_id} is answered twice")
                raise ToolResultsError(f"no tool call {e.tool_call_id} is waiting for a result")
            if e.name and e.name != call.name:
                raise ToolResultsError(f"tool call {call.id} is a call of {call.name}, not {e.name}")
        else:
            call = next((c for c in remaining if c.name == e.name), None)
            if call is None:
                raise ToolResultsError(f"no call of tool {e.name!r} is waiting for a result")
        remaining.remove(call)
        out.append(ClientResult(call.id, output=e.output, error=e.error))
    if exact and remaining:
        missing = ", ".join(f"{c.id} ({c.name})" for c in remaining)
        raise ToolResultsError(f"missing results for tool calls {missing}")
    return out
