"""A change of several files (FileDiffs: apply_patch's question and result) in every door's terms:
ACP, wire, the A2A extension and its legacy form, MCP's elicitation, the
terminal (local and remote), and the words plain clients read."""

from __future__ import annotations

import io

from rich.console import Console

from devagent.a2a import legacy
from devagent.a2a.extension import confirmation_request_json, tool_call_json, tool_output_json
from devagent.acp.translate import tool_content
from devagent.agent.events import (
    ConfirmationRequest,
    FileDiff,
    FileDiffs,
    GenericDetails,
    PermissionOption,
    ToolCall,
    ToolCallStatus,
    ToolCallUpdate,
    ToolKind,
    ToolOutput,
)
from devagent.agent.wording import request_text
from devagent.mcp.server import _elicit_message
from devagent.terminal.remote import tool_call_from_json
from devagent.terminal.render import Renderer
from devagent.wire.messages import approval_request_payload, tool_result_event

ADDED = FileDiff("n.txt", "/w/n.txt", None, "one\n", "--- a/n.txt\n+++ b/n.txt\n@@ -0,0 +1 @@\n+one\n")
CHANGED = FileDiff("r.md", "/w/r.md", "a\n", "b\n", "--- a/r.md\n+++ b/r.md\n@@ -1 +1 @@\n-a\n+b\n")
GONE = FileDiff("o.txt", "/w/o.txt", "x\n", "", "--- a/o.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n")
DIFFS = FileDiffs([ADDED, CHANGED, GONE])


def waiting() -> ToolCall:
    options = [PermissionOption("proceed_once", "Allow", ""), PermissionOption("cancel", "No", "")]
    return ToolCall(
        "p1", "apply_patch", {"input": "..."}, ToolKind.EDIT, "Patch n.txt, r.md, o.txt",
        confirmation=ConfirmationRequest(options, DIFFS),
    )  # fmt: skip


def done() -> ToolCall:
    c = waiting()
    c.status = ToolCallStatus.SUCCEEDED
    c.output = ToolOutput("Applied the patch to 3 files: ...", diff=DIFFS)
    return c


def test_issue30_item1_words_and_mcp_elicitation_name_every_file() -> None:
    assert request_text(waiting()) == (
        "change 3 files: n.txt (new file, 1 line), r.md (+1 -1 lines), o.txt (deleted, 1 line)"
    )
    message = _elicit_message(waiting())
    assert message.startswith("devagent wants to change 3 files:")
    assert "+++ b/n.txt" in message and "+++ b/r.md" in message and "+++ /dev/null" in message


def test_issue30_item1_acp_shows_a_diff_per_file() -> None:
    want = [
        {"type": "diff", "path": "/w/n.txt", "oldText": None, "newText": "one\n"},
        {"type": "diff", "path": "/w/r.md", "oldText": "a\n", "newText": "b\n"},
        {"type": "diff", "path": "/w/o.txt", "oldText": "x\n", "newText": ""},
    ]
    assert tool_content(waiting()) == want
    assert tool_content(done()) == want


def test_issue30_item1_wire_shows_a_diff_block_per_file() -> None:
    payload = approval_request_payload("r1", waiting(), "t1")
    assert payload["action"] == "edit file" and payload["description"] == "Change 3 files"
    assert [(d["type"], d["path"]) for d in payload["display"]] == [
        ("diff", "/w/n.txt"),
        ("diff", "/w/r.md"),
        ("diff", "/w/o.txt"),
    ]
    result = tool_result_event(done())["params"]["payload"]["return_value"]
    assert [d["path"] for d in result["display"]] == ["/w/n.txt", "/w/r.md", "/w/o.txt"]


def test_issue30_item1_a2a_extension_and_legacy_show_the_diffs_as_text() -> None:
    cr = confirmation_request_json(waiting().confirmation)  # type: ignore[arg-type]
    assert "file_edit_details" not in cr  # that holds one file, and its content may be edited
    assert cr["generic_details"]["description"] == "Change 3 files:\n\n" + DIFFS.formatted_diff
    out = tool_output_json(done().output)  # type: ignore[arg-type]
    assert out["diff"]["file_name"] == "3 files" and out["diff"]["formatted_diff"] == DIFFS.formatted_diff
    details = legacy.confirmation_details_json(waiting())
    assert details == {"type": "info", "title": "Confirm changes to 3 files", "prompt": DIFFS.formatted_diff}
    assert legacy.response_json(done())["resultDisplay"]["fileDiff"] == DIFFS.formatted_diff


def test_issue30_item1_terminal_renders_every_diff_locally_and_remotely() -> None:
    buf = io.StringIO()
    r = Renderer(Console(file=buf, width=100, force_terminal=False, color_system=None))
    r.new_turn()
    r.render(ToolCallUpdate(waiting()))
    r.show_request(waiting())
    shown = buf.getvalue()
    assert "+++ b/n.txt" in shown and "+b" in shown and "+++ /dev/null" in shown
    # Through a remote server: the A2A extension's JSON read back, the diffs shown all the same.
    remote = tool_call_from_json(tool_call_json(waiting()))
    assert remote.confirmation is not None and isinstance(remote.confirmation.details, GenericDetails)
    buf.truncate(0)
    buf.seek(0)
    r.show_request(remote)
    shown = buf.getvalue()
    assert "Change 3 files:" in shown and "+++ b/r.md" in shown and "-x" in shown
