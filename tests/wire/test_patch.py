"""apply_patch over the wire protocol: one approval request showing each file's diff."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.core_helpers import call
from tests.wire.conftest import WireProc, events, is_response

PATCH = (
    "*** Begin Patch\n*** Add File: notes.txt\n+one\n*** Update File: README.md\n@@\n-# Demo\n+# Démo\n"
    "*** End Patch\n"
)


def test_issue30_item1_a_patch_of_two_files_is_one_approval_with_two_diffs(
    start_wire: Callable[..., WireProc], work_dir: Path
) -> None:
    w = start_wire(
        [
            {"items": [call("read_file", {"path": "README.md"})]},  # the model reads what it will change
            {"items": [call("apply_patch", {"input": PATCH}, "p1")]},
            {"items": [{"text": "patched"}]},
        ]
    )
    w.initialize()
    w.prompt("patch")
    _, req = w.until_request("ApprovalRequest")
    p = req["params"]["payload"]
    assert p["tool_call_id"] == "p1" and p["sender"] == "apply_patch" and p["action"] == "edit file"
    assert p["description"] == "Change 2 files"
    assert [(d["type"], Path(d["path"]).name, d["old_text"], d["new_text"]) for d in p["display"]] == [
        ("diff", "notes.txt", "", "one\n"),
        ("diff", "README.md", "# Demo\n", "# Démo\n"),
    ]
    w.approve(req, "approve")
    msgs, resp = w.until(lambda m: is_response(m, "p1"))
    result = next(e for e in events(msgs, "ToolResult") if e["tool_call_id"] == "p1")["return_value"]
    assert result["is_error"] is False and [Path(d["path"]).name for d in result["display"]] == [
        "notes.txt",
        "README.md",
    ]
    assert resp["result"] == {"status": "finished"}
    assert (work_dir / "notes.txt").read_text() == "one\n"
    assert (work_dir / "README.md").read_text() == "# Démo\n"
