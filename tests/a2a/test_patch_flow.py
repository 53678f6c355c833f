"""apply_patch over A2A: one question showing every file's diff, the answer, the result."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.a2a.helpers import dev_meta, parts_of, results, running_server, stream_message, v03_message
from tests.conftest import Script
from tests.core_helpers import call, call_then_text

PATCH = (
    "*** Begin Patch\n*** Add File: notes.txt\n+one\n*** Update File: README.md\n@@\n-Hello.\n+Bonjour.\n"
    "*** End Patch\n"
)


async def test_issue30_item1_a_patch_of_two_files_is_asked_once_over_a2a(
    script: Script, db_url: str, workspace: Path
) -> None:
    read = {"items": [call("read_file", {"path": "README.md"})]}  # the model reads what it will change
    steps = [read, *call_then_text(call("apply_patch", {"input": PATCH}, "p1"), "patched")]
    async with running_server(script(steps), db_url, workspace) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            settings = {"workspace_path": str(workspace)}
            evs = results(await stream_message(c, srv.url, v03_message("patch", settings=settings)))
            task_id, ctx = evs[0]["id"], evs[0]["contextId"]
            pending = [parts_of(e)[0]["data"] for e in evs if dev_meta(e).get("kind") == "TOOL_CALL_UPDATE"][
                -1
            ]
            assert pending["status"] == "PENDING" and pending["tool_name"] == "apply_patch"
            described = pending["confirmation_request"]["generic_details"]["description"]
            assert described.startswith("Change 2 files:\n\n--- a/notes.txt\n+++ b/notes.txt\n")
            assert "--- a/README.md\n+++ b/README.md\n" in described and "+Bonjour." in described
            assert evs[-1]["status"]["state"] == "input-required"
            assert not (workspace / "notes.txt").exists()
            conf = {"tool_call_id": "p1", "selected_option_id": "proceed_once"}
            evs2 = results(
                await stream_message(c, srv.url, v03_message(data=[conf], task_id=task_id, context_id=ctx))
            )
            done = [
                parts_of(e)[0]["data"]
                for e in evs2
                if "status" in e and dev_meta(e).get("kind") == "TOOL_CALL_UPDATE"
            ][-1]
            assert done["status"] == "SUCCEEDED"
            diff = done["output"]["diff"]  # the RFC's output holds one diff: every file's, together
            assert diff["file_name"] == "2 files" and "+Bonjour." in diff["formatted_diff"]
            assert evs2[-1]["status"]["state"] == "completed"
    assert (workspace / "notes.txt").read_text() == "one\n"
    assert (workspace / "README.md").read_text() == "# Demo project\nBonjour.\n"


async def test_issue37_item8_codex_shell_heredoc_is_asked_as_a_patch_over_a2a(
    script: Script, db_url: str, workspace: Path
) -> None:
    """A model trained in Codex runs its patch in the shell, without a read_file first: the client
    is asked about a patch with the files' diffs, never about a command line."""
    command = f"apply_patch <<'EOF'\n{PATCH}EOF\n"
    steps = call_then_text(call("run_shell_command", {"command": command}, "p1"), "patched")
    async with running_server(script(steps), db_url, workspace) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            settings = {"workspace_path": str(workspace)}
            evs = results(await stream_message(c, srv.url, v03_message("patch", settings=settings)))
            task_id, ctx = evs[0]["id"], evs[0]["contextId"]
            updates = [parts_of(e)[0]["data"] for e in evs if dev_meta(e).get("kind") == "TOOL_CALL_UPDATE"]
            pending = updates[-1]
            assert pending["status"] == "PENDING" and pending["tool_name"] == "apply_patch"
            request = pending["confirmation_request"]
            assert "execute_details" not in request
            described = request["generic_details"]["description"]
            assert described.startswith("Change 2 files:\n\n--- a/notes.txt\n+++ b/notes.txt\n")
            assert "+Bonjour." in described and "apply_patch <<" not in described
            assert evs[-1]["status"]["state"] == "input-required"
            conf = {"tool_call_id": "p1", "selected_option_id": "proceed_once"}
            evs2 = results(
                await stream_message(c, srv.url, v03_message(data=[conf], task_id=task_id, context_id=ctx))
            )
            assert evs2[-1]["status"]["state"] == "completed"
    assert (workspace / "notes.txt").read_text() == "one\n"
    assert (workspace / "README.md").read_text() == "# Demo project\nBonjour.\n"
