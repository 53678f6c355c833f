"""Unit tests of the terminal's pieces (issue 13 items 2 and 3): slash-command completion, the
remote adapter's inverse of the extension's ToolCall JSON, the card check, the renderer."""

from __future__ import annotations

import io

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from rich.console import Console

from devagent.a2a.extension import EXTENSION_URI, EXTENSION_VERSION, tool_call_json
from devagent.agent.commands import CommandInfo
from devagent.agent.events import (
    ConfirmationRequest,
    ExecuteDetails,
    FileDiff,
    PermissionOption,
    TextDelta,
    ThoughtDelta,
    ToolCall,
    ToolCallStatus,
    ToolCallUpdate,
    ToolKind,
    ToolOutput,
    TurnEnd,
)
from devagent.preflight import StartError
from devagent.terminal.remote import check_card, tool_call_from_json, understands
from devagent.terminal.render import Renderer
from devagent.terminal.repl import LOCAL_COMMANDS, SlashCompleter


def _complete(text: str) -> list[str]:
    cmds = [
        *LOCAL_COMMANDS,
        CommandInfo("memory", "", sub_commands=[CommandInfo("show", ""), CommandInfo("add", "")]),
        CommandInfo("stats", "", aliases=["usage"]),
    ]
    return [c.text for c in SlashCompleter(cmds).get_completions(Document(text), CompleteEvent())]


def test_slash_completion() -> None:
    assert _complete("/st") == ["status", "stats"]
    assert _complete("/memory ") == ["show", "add"]
    assert _complete("/memory a") == ["add"]
    assert _complete("/nosuch ") == []
    assert _complete("hello /st") == []  # only at the start of the input


def test_remote_tool_call_is_the_inverse_of_the_extension_json() -> None:
    diff = FileDiff("a.txt", "/w/a.txt", None, "A\n", "--- a/a.txt\n+++ b/a.txt\n@@ -0,0 +1 @@\n+A\n")
    pending = ToolCall(
        "c1",
        "write_file",
        {"path": "a.txt", "content": "A\n"},
        ToolKind.EDIT,
        description="Write a.txt",
        confirmation=ConfirmationRequest(
            [PermissionOption("proceed_once", "Allow once", ""), PermissionOption("cancel", "No", "")], diff
        ),
    )
    back = tool_call_from_json(tool_call_json(pending))
    assert (back.id, back.name, back.args, back.description, back.status) == (
        "c1",
        "write_file",
        {"path": "a.txt", "content": "A\n"},
        "Write a.txt",
        ToolCallStatus.PENDING,
    )
    assert back.confirmation is not None and back.confirmation.details == diff
    assert [o.id for o in back.confirmation.options] == ["proceed_once", "cancel"]

    ex = ToolCall(
        "c2",
        "run_shell_command",
        {"command": "ls"},
        ToolKind.EXECUTE,
        confirmation=ConfirmationRequest([], ExecuteDetails("ls", "/w")),
    )
    got = tool_call_from_json(tool_call_json(ex)).confirmation
    assert got is not None and got.details == ExecuteDetails("ls", "/w")

    done = ToolCall(
        "c3", "read_file", {}, ToolKind.READ, status=ToolCallStatus.SUCCEEDED, output=ToolOutput("hello")
    )
    out = tool_call_from_json(tool_call_json(done))
    assert out.status is ToolCallStatus.SUCCEEDED and out.output is not None and out.output.text == "hello"


def test_extension_versions_understood() -> None:
    major, minor = EXTENSION_VERSION.split(".")[:2]
    assert understands(EXTENSION_VERSION)
    assert understands(f"{major}.{minor}.99")
    assert not understands("7.0.0") and not understands("") and not understands("x.y")
    card = {
        "capabilities": {"extensions": [{"uri": EXTENSION_URI, "params": {"version": EXTENSION_VERSION}}]}
    }
    assert check_card(card, "http://h/") == EXTENSION_VERSION
    with pytest.raises(StartError, match="does not declare the development-tool extension"):
        check_card({"capabilities": {"extensions": [{"uri": "urn:other"}]}}, "http://h/")
    with pytest.raises(StartError, match=r"speaks version \(none given\)"):
        check_card({"capabilities": {"extensions": [{"uri": EXTENSION_URI}]}}, "http://h/")


def test_renderer_plain_output_folds_thoughts_and_shows_calls() -> None:
    buf = io.StringIO()
    r = Renderer(Console(file=buf, width=100, force_terminal=False, color_system=None))
    r.new_turn()
    r.render(ThoughtDelta("**Planning** look "))
    r.render(ThoughtDelta("at the files"))
    r.render(TextDelta("Hello "))
    r.render(TextDelta("world"))
    call = ToolCall("c", "read_file", {}, ToolKind.READ, description="Read a.txt")
    r.render(ToolCallUpdate(call))
    call.status = ToolCallStatus.SUCCEEDED
    call.output = ToolOutput("line one\nline two")
    r.render(ToolCallUpdate(call))
    r.render(TurnEnd("cancelled"))
    out = buf.getvalue()
    assert "✻ Planning  (/thoughts shows it)" in out and "look at the files" not in out
    assert r.last_thoughts == ["**Planning** look at the files"]
    assert "Hello world\n" in out
    assert "● Read a.txt" in out and "✓ read_file: line one …" in out
    assert out.rstrip().endswith("Cancelled.")


def test_issue37_item1_every_control_character_is_shown_escaped() -> None:
    """The one rule of terminal/controls.py, character by character: every C0 and C1 control and
    DEL, the bidirectional overrides, CR; line feeds and tabs kept only as a text's layout."""
    from devagent.terminal.controls import formatted, visible

    for code in [*range(0x00, 0x20), *range(0x7F, 0xA0)]:
        if chr(code) in "\n\t\r":
            continue
        assert visible(f"a{chr(code)}b") == f"a\\x{code:02x}b"
    assert visible("a\u202eb\u2066c\u200fd") == "a\\u202eb\\u2066c\\u200fd"
    assert visible("one\r\ntwo\tthree\rOVER") == "one\ntwo\tthree\\rOVER"
    assert visible("one\r\ntwo\tthree", layout=False) == "one\\r\\ntwo\\tthree"
    assert visible("plain text, ünïcode ✓ […]") == "plain text, ünïcode ✓ […]"
    assert formatted("rm\x1b[2D", "bold") == [("bold", "rm"), ("bold reverse", "\\x1b"), ("bold", "[2D")]
