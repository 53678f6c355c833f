"""Issue 15 item 1, the pieces: what `translate.py` builds is valid against the SDK's schema
models, the fast `initialize` answer is the SDK's shape, other protocol versions get 1, bad lines
get JSON-RPC errors and the server goes on, ACP MCP servers become the core's specs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("acp", reason="agent-client-protocol is installed by scripts/test (pyproject.toml)")

from subprocess import DEVNULL, PIPE

from acp.schema import (
    HttpMcpServer,
    InitializeResponse,
    McpServerStdio,
    PermissionOption,
    SessionModeState,
    SessionNotification,
    SseMcpServer,
    ToolCallUpdate,
)

from devagent.acp import translate as t
from devagent.acp.agent import _mcp_servers
from devagent.agent.commands import registry
from devagent.agent.events import (
    ConfirmationRequest,
    ExecuteDetails,
    FileDiff,
    ToolCall,
    ToolCallStatus,
    ToolError,
    ToolKind,
    ToolOutput,
    TurnEnd,
)
from devagent.agent.events import PermissionOption as CorePermissionOption
from tests.acp.conftest import acp_argv


def _valid(update: dict[str, Any]) -> None:
    SessionNotification.model_validate({"sessionId": "s", "update": update})


def test_issue15_initialize_answer_is_the_sdks_shape() -> None:
    result = t.initialize_result(mcp_http=True, version="9.9")
    model = InitializeResponse.model_validate(result)
    assert (
        model.model_dump(by_alias=True, exclude_none=True, exclude_unset=True) == result
    )  # as the SDK sends it
    assert result["agentCapabilities"]["mcpCapabilities"] == {"http": True, "sse": False}
    assert t.negotiate(2) == t.negotiate(0) == t.negotiate("x") == 1


@pytest.mark.parametrize("status", list(ToolCallStatus))
@pytest.mark.parametrize(
    ("name", "kind", "acp_kind"),
    [
        ("read_file", ToolKind.READ, "read"),
        ("grep", ToolKind.READ, "search"),
        ("edit", ToolKind.EDIT, "edit"),
        ("run_shell_command", ToolKind.EXECUTE, "execute"),
        ("write_todos", ToolKind.INTERNAL, "think"),
        ("srv__tool", ToolKind.MCP, "other"),
        ("web_fetch", ToolKind.FETCH, "fetch"),
        ("web_search", ToolKind.READ, "search"),
    ],
)
def test_issue15_tool_call_updates_are_valid(
    name: str, kind: ToolKind, acp_kind: str, status: ToolCallStatus
) -> None:
    diff = FileDiff("a.py", "/w/a.py", "old\n", "new\n", "@@")
    call = ToolCall(
        id="c1",
        name=name,
        args={"path": "a.py", "command": "ls -l", "offset": 3},
        kind=kind,
        description=f"{name} a.py",
        status=status,
        live_output="partial" if status is ToolCallStatus.EXECUTING else None,
        output=ToolOutput("done", diff=diff if kind is ToolKind.EDIT else None, data={"n": 1})
        if status is ToolCallStatus.SUCCEEDED
        else None,
        error=ToolError("boom") if status in (ToolCallStatus.FAILED, ToolCallStatus.CANCELLED) else None,
    )
    for first in (True, False):
        upd = t.tool_call_update(call, Path("/w"), first=first)
        _valid(upd)
        assert upd["kind"] == acp_kind
        assert upd["locations"] == [{"path": "/w/a.py", "line": 3}]
    if kind is ToolKind.EXECUTE and status is ToolCallStatus.EXECUTING:
        assert upd["content"] == [
            {"type": "content", "content": {"type": "text", "text": "```\npartial\n```"}}
        ]
        assert upd["title"] == "`ls -l`"
    if kind is ToolKind.EDIT and status is ToolCallStatus.SUCCEEDED:
        assert upd["content"][0] == {
            "type": "diff",
            "path": "/w/a.py",
            "oldText": "old\n",
            "newText": "new\n",
        }


def test_issue15_permission_options_map_onto_the_cores() -> None:
    options = [
        CorePermissionOption("proceed_once", "Allow once", ""),
        CorePermissionOption("proceed_always", "Allow always", ""),
        CorePermissionOption("proceed_always_server", "Always allow this server", ""),
        CorePermissionOption("cancel", "Cancel", ""),
    ]
    call = ToolCall(
        id="c",
        name="run_shell_command",
        args={"command": "make"},
        kind=ToolKind.EXECUTE,
        confirmation=ConfirmationRequest(options, ExecuteDetails("make", "/w/sub", "make")),
    )
    tool_call, opts = t.permission_request(call, Path("/w"))
    ToolCallUpdate.model_validate(tool_call)
    assert tool_call["rawInput"] == {"command": "make", "cwd": "/w/sub"}
    assert [PermissionOption.model_validate(o).kind for o in opts] == [
        "allow_once",
        "allow_always",
        "allow_always",
        "reject_once",
    ]
    assert [o["optionId"] for o in opts] == [
        "proceed_once",
        "proceed_always",
        "proceed_always_server",
        "cancel",
    ]


def test_issue15_plan_commands_modes_and_stop_reasons() -> None:
    plan = t.plan(
        [
            {"description": "a", "status": "completed"},
            {"description": "b", "status": "in_progress"},
            {"description": "c", "status": "cancelled"},
        ]
    )
    _valid(plan)
    assert [(e["content"], e["status"]) for e in plan["entries"]] == [
        ("a", "completed"),
        ("b", "in_progress"),
        ("c (cancelled)", "completed"),
    ]
    commands = t.available_commands(registry().list())
    _valid(commands)
    memory = next(c for c in commands["availableCommands"] if c["name"] == "memory")
    assert "add" in memory["input"]["hint"]
    SessionModeState.model_validate(t.modes("ask", ["ask", "plan"]))
    assert t.stop_reason(TurnEnd("finished")) == "end_turn"
    assert t.stop_reason(TurnEnd("max_steps_reached")) == "max_turn_requests"
    assert t.stop_reason(TurnEnd("cancelled")) == "cancelled"
    assert t.stop_reason(TurnEnd("error", error="x")) is None
    assert t.stop_reason(TurnEnd("finished", finish_reason="content_filter")) == "refusal"
    assert t.stop_reason(TurnEnd("finished", finish_reason="length")) == "max_tokens"
    assert t.stop_reason(TurnEnd("finished", finish_reason="stop")) == "end_turn"


def test_issue15_prompt_content_kinds() -> None:
    text, refused = t.prompt_text(
        [
            {"type": "text", "text": "look at"},
            {"type": "resource_link", "name": "a.py", "uri": "file:///w/a.py"},
            {"type": "resource", "resource": {"uri": "file:///w/b.py", "text": "print(1)"}},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///w/c.bin", "blob": "AAAA"}},
        ]
    )
    assert "look at" in text and "[@a.py](/w/a.py)" in text and '<context ref="/w/b.py">\nprint(1)' in text
    assert refused == ["image", "binary resource"]


def test_issue15_mcp_servers_become_core_specs() -> None:
    servers = [
        McpServerStdio(name="fs", command="mcp-fs", args=["--root", "/w"], env=[{"name": "A", "value": "1"}]),
        HttpMcpServer(
            type="http", name="web", url="https://mcp.example/x", headers=[{"name": "K", "value": "v"}]
        ),
        SseMcpServer(type="sse", name="old", url="https://mcp.example/sse", headers=[]),
    ]
    assert _mcp_servers(servers) == {
        "fs": {"command": "mcp-fs", "args": ["--root", "/w"], "env": {"A": "1"}},
        "web": {"url": "https://mcp.example/x", "headers": {"K": "v"}},
    }
    assert _mcp_servers([]) is None


def test_issue15_raw_stdio_version_errors_and_going_on(
    acp_env: dict[str, str], work_dir: Path, tmp_path: Path
) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"steps": [[{"text": "hi"}]]}))
    proc = subprocess.Popen(
        acp_argv(script), stdin=PIPE, stdout=PIPE, stderr=DEVNULL, env=acp_env, cwd=work_dir
    )
    assert proc.stdin is not None and proc.stdout is not None
    lines = [
        b"this is not json",
        b"[1, 2]",
        json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 2}}
        ).encode(),
        json.dumps(
            {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "relative"}}
        ).encode(),
        json.dumps({"jsonrpc": "2.0", "id": 3, "method": "no/such_method", "params": {}}).encode(),
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 4,
                "method": "session/new",
                "params": {"cwd": str(work_dir), "mcpServers": []},
            }
        ).encode(),
        # A second initialize is answered by the SDK's side (the fast path takes only the first
        # one): with the same answer.
        json.dumps(
            {"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": {"protocolVersion": 1}}
        ).encode(),
    ]
    by_id: dict[Any, list[dict[str, Any]]] = {}
    try:
        proc.stdin.write(b"\n".join(lines) + b"\n")
        proc.stdin.flush()
        while sum(len(v) for v in by_id.values()) < 7:  # responses; notifications are skipped
            answer = json.loads(proc.stdout.readline())
            if "method" not in answer:
                by_id.setdefault(answer.get("id"), []).append(answer)
    finally:
        proc.stdin.close()
        proc.wait(60)
    assert [e["error"]["code"] for e in by_id[None]] == [-32700, -32600]
    # the message says what went wrong (issue 21): editors show it, not data
    assert [e["error"]["message"] for e in by_id[None]] == [
        "Parse error: the line is not JSON",
        "Invalid request: the line is not a JSON object",
    ]
    assert by_id[1][0]["result"]["protocolVersion"] == 1  # asked for 2: gets the one devagent speaks
    assert by_id[2][0]["error"]["code"] == -32602
    assert by_id[2][0]["error"]["message"] == "Invalid params: mcpServers: Field required"
    assert by_id[3][0]["error"] == {
        "code": -32601,
        "message": "Method not found: no/such_method",
        "data": {"method": "no/such_method"},
    }
    assert "sessionId" in by_id[4][0]["result"]
    assert by_id[5][0]["result"] == by_id[1][0]["result"]
    assert proc.returncode == 0


def test_issue21_sdk_errors_get_their_reason_in_the_message() -> None:
    errors = [{"type": "missing", "loc": ["sessionId"], "msg": "Field required", "input": {}}]
    made = {"code": -32602, "message": "Invalid params", "data": {"errors": errors}}
    assert t.explain_error(made) == {**made, "message": "Invalid params: sessionId: Field required"}
    many = [{"loc": ["prompt", i, "text"], "msg": "Field required"} for i in range(5)]
    said = t.explain_error({"code": -32602, "message": "Invalid params", "data": {"errors": many}})
    assert said["message"] == (
        "Invalid params: prompt.0.text: Field required; prompt.1.text: Field required; "
        "prompt.2.text: Field required (and 2 more in data)"
    )
    crash = {"code": -32603, "message": "Internal error", "data": {"details": "boom"}}
    assert t.explain_error(crash)["message"] == "Internal error: boom"
    assert (
        t.explain_error({"code": -32601, "message": "Method not found", "data": {"method": "x/y"}})["message"]
        == "Method not found: x/y"
    )
    # already explained, or nothing to explain: unchanged
    mine = {"code": -32602, "message": "Invalid params: the prompt is empty", "data": {"reason": "x"}}
    assert t.explain_error(mine) == mine
    assert t.explain_error({"code": -32700, "message": "Parse error"}) == {
        "code": -32700,
        "message": "Parse error",
    }
    assert t.error_message(-32602, "cwd must be absolute") == "Invalid params: cwd must be absolute"
    assert t.error_message(-32099, "odd") == "odd"
