"""The extension's JSON shapes (B6 B8 B10 B11 B12), checked without a server."""

from __future__ import annotations

from pathlib import Path

import pytest

from devagent.a2a import extension as ext
from devagent.a2a.executor import split_subject
from devagent.agent.commands import registry
from devagent.agent.events import (
    ConfirmationRequest,
    ExecuteDetails,
    FileDiff,
    GenericDetails,
    McpDetails,
    PermissionOption,
    ToolCall,
    ToolCallStatus,
    ToolError,
    ToolKind,
    ToolOutput,
)

OPTS = [PermissionOption("proceed_once", "Allow once", "Run it"), PermissionOption("cancel", "Cancel", "")]


def test_tool_call_shapes() -> None:
    """B6 B8: snake_case fields, one result member, every confirmation detail kind."""
    call = ToolCall("c1", "run_shell_command", {"command": "ls"}, ToolKind.EXECUTE, description="List")
    call.confirmation = ConfirmationRequest(OPTS, ExecuteDetails("ls", "/w", "ls"))
    j = ext.tool_call_json(call)
    assert j == {
        "tool_call_id": "c1",
        "status": "PENDING",
        "tool_name": "run_shell_command",
        "input_parameters": {"command": "ls"},
        "description": "List",
        "confirmation_request": {
            "options": [
                {"id": "proceed_once", "name": "Allow once", "description": "Run it"},
                {"id": "cancel", "name": "Cancel"},
            ],
            "execute_details": {"command": "ls", "working_directory": "/w"},
        },
    }
    call.confirmation = ConfirmationRequest(OPTS, McpDetails("srv", "tool"))
    assert ext.tool_call_json(call)["confirmation_request"]["mcp_details"] == {
        "server_name": "srv",
        "tool_name": "tool",
    }
    call.confirmation = ConfirmationRequest(OPTS, GenericDetails("do it"))
    assert ext.tool_call_json(call)["confirmation_request"]["generic_details"] == {"description": "do it"}
    diff = FileDiff("a.txt", "/w/a.txt", None, "new\n", "+new")
    call.confirmation = ConfirmationRequest(OPTS, diff)
    fed = ext.tool_call_json(call)["confirmation_request"]["file_edit_details"]
    assert fed == {
        "file_name": "a.txt",
        "file_path": "/w/a.txt",
        "new_content": "new\n",
        "formatted_diff": "+new",
    }

    call.status = ToolCallStatus.EXECUTING
    call.live_output = "partial"
    j = ext.tool_call_json(call)
    assert j["live_content"] == "partial" and "confirmation_request" not in j
    call.status = ToolCallStatus.SUCCEEDED
    call.output = ToolOutput("out", data={"exit_code": 0})
    assert ext.tool_call_json(call)["output"] == {"text": "out"}
    call.output = ToolOutput("", data={"k": 1})
    assert ext.tool_call_json(call)["output"] == {"structured_data": {"k": 1}}
    call.output = ToolOutput("wrote", diff=diff)
    assert ext.tool_call_json(call)["output"]["diff"]["new_content"] == "new\n"
    call.output = None
    call.status = ToolCallStatus.FAILED
    call.error = ToolError("nope", "path_outside_workspace", 403)
    j = ext.tool_call_json(call)
    assert j["error"] == {"message": "nope", "type": "path_outside_workspace", "status_code": 403}
    assert "output" not in j


def test_confirmation_parsing() -> None:
    """B10 B16: RFC form (bare or keyed by the URI), legacy form, refusals."""
    c = ext.parse_confirmation(
        {"tool_call_id": "a", "selected_option_id": "proceed_once", "file_details": {"new_content": "x"}}
    )
    assert c == ext.Confirmation("a", "proceed_once", "x")
    c = ext.parse_confirmation({ext.EXTENSION_URI: {"tool_call_id": "a", "selected_option_id": "cancel"}})
    assert c == ext.Confirmation("a", "cancel", None)
    assert ext.parse_confirmation({"callId": "b", "outcome": "proceed_always"}) == ext.Confirmation(
        "b", "proceed_always", None
    )
    assert ext.parse_confirmation({"tools": []}) is None
    with pytest.raises(ext.SettingsError):
        ext.parse_confirmation({"tool_call_id": "a"})


def test_agent_settings(tmp_path: Path) -> None:
    """B3 B16: settings under the URI or the legacy key; workspace inside the roots."""
    s = ext.AgentSettings.from_metadata(
        None, {ext.EXTENSION_URI: {"workspace_path": "/x", "approval_mode": "plan", "model": "m", "mcp": 1}}
    )
    assert s is not None and (s.workspace_path, s.approval_mode, s.model, s.extra) == (
        "/x",
        "plan",
        "m",
        {"mcp": 1},
    )
    # a client cannot make the server read a file of its choosing as a scripted model
    for model in ("scripted:/etc/passwd", " Scripted:x.json"):
        s = ext.AgentSettings.from_metadata({ext.EXTENSION_URI: {"workspace_path": "/x", "model": model}})
        assert s is not None and s.model is None
    legacy = ext.AgentSettings.from_metadata(
        {"coderAgent": {"kind": "agent-settings", "workspacePath": "/y"}}
    )
    assert legacy is not None and legacy.workspace_path == "/y"
    assert ext.AgentSettings.from_metadata({"other": 1}) is None
    root = tmp_path / "root"
    (root / "ws").mkdir(parents=True)
    assert ext.validate_workspace(str(root / "ws"), [root.resolve()]) == str((root / "ws").resolve())
    assert ext.validate_workspace(str(root), [root.resolve()]) == str(root.resolve())
    for bad in ("ws", str(tmp_path), str(root / "ws" / ".." / "..")):
        with pytest.raises(ext.SettingsError):
            ext.validate_workspace(bad, [root.resolve()])


def test_thought_subject_and_commands() -> None:
    """B11 B12: bold titles become subjects; every registered command serialises."""
    assert split_subject("**Plan** do it") == ("Plan", "do it")
    assert split_subject("**unclosed") == ("", "**unclosed")
    cmds = [ext.slash_command_json(c) for c in registry().list()]
    assert cmds and all(set(c) == {"name", "description", "arguments", "sub_commands"} for c in cmds)
