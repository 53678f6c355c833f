"""A subagent through the wire door (a real `devagent wire` process): its write asks through the
parent's turn (an ApprovalRequest for the call under the task call, naming the subagent), and its
calls come as kimi-cli's SubagentEvents naming the task call."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.core_helpers import notes_by_a_subagent
from tests.wire.conftest import events, is_response, text_of


def test_issue31_item3_wire_subagent_write_approved_through_the_parent(
    start_wire: Callable[..., Any], work_dir: Path, tmp_path: Path
) -> None:
    script = notes_by_a_subagent(tmp_path / "sub.json")
    w = start_wire(script=Path(script.removeprefix("scripted:")))
    w.initialize()
    w.prompt("make notes")
    msgs, req = w.until_request("ApprovalRequest", timeout=60)
    p = req["params"]["payload"]
    assert p["tool_call_id"] == "t1/w1" and p["sender"] == "write_file" and p["action"] == "edit file"
    assert p["description"] == f"write the notes: Write file `{work_dir / 'notes.txt'}`"
    assert p["source_description"] == "write the notes"
    assert [e["id"] for e in events(msgs, "ToolCall")] == ["t1"]  # the parent's own call
    nested = events(msgs, "SubagentEvent")
    assert nested[0]["parent_tool_call_id"] == "t1" and nested[0]["task_tool_call_id"] == "t1"
    assert nested[0]["event"]["type"] == "ToolCall" and nested[0]["event"]["payload"]["id"] == "t1/w1"
    assert not (work_dir / "notes.txt").exists()

    w.approve(req)
    msgs, resp = w.until(lambda m: is_response(m, "p1"), timeout=60)
    assert resp["result"] == {"status": "finished"}
    assert (work_dir / "notes.txt").read_text() == "hello\n"
    [child_result] = [e["event"] for e in events(msgs, "SubagentEvent") if e["event"]["type"] == "ToolResult"]
    assert child_result["payload"]["tool_call_id"] == "t1/w1"
    assert child_result["payload"]["return_value"]["is_error"] is False
    [task_result] = [e for e in events(msgs, "ToolResult") if e["tool_call_id"] == "t1"]
    assert task_result["return_value"]["output"] == "I wrote notes.txt."
    assert text_of(msgs) == "parent: I wrote notes.txt."
    assert w.close() == 0
