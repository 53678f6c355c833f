"""The `@a2a-js/sdk` client from npm (pinned in tests/a2a/js/package.json) drives the appendix."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.a2a.helpers import TOKEN, need_js_sdk, run_js_client, running_server
from tests.conftest import Script
from tests.core_helpers import call_then_text, write_call

pytestmark = pytest.mark.npm

WRITE = call_then_text(write_call("js.txt", "JS\n", "j1"), "written for node")


async def test_js_sdk_appendix(script: Script, sqlite_url: str, workspace: Path) -> None:
    """A2 B4-B10: the a2a-js client streams the appendix flow (v0.3) and confirms the write."""
    need_js_sdk()
    async with running_server(script(WRITE), sqlite_url, workspace) as srv:
        res = await run_js_client("confirmation_flow.mjs", srv.url, TOKEN, str(workspace))
    assert res["card"]["extension"].endswith("developer-profile/v0/spec.md")
    first, second = res["first"], res["second"]
    assert first[0]["kind"] == "task" and first[0]["state"] == "submitted"
    assert first[1].get("devKind") == "STATE_CHANGE" and first[1]["state"] == "working"
    pend = [e for e in first if e.get("devKind") == "TOOL_CALL_UPDATE"][-1]["data"]
    assert (
        pend["status"] == "PENDING"
        and pend["confirmation_request"]["file_edit_details"]["new_content"] == "JS\n"
    )
    assert first[-1]["state"] == "input-required" and first[-1]["final"] is True
    statuses = [e["data"]["status"] for e in second if e.get("devKind") == "TOOL_CALL_UPDATE"]
    assert statuses[0] == "EXECUTING" and statuses[-1] == "SUCCEEDED"
    assert (
        "".join(e.get("text") or "" for e in second if e.get("devKind") == "TEXT_CONTENT")
        == "written for node"
    )
    assert second[-1]["state"] == "completed" and second[-1]["final"] is True
    assert res["final"] == "completed"
    assert (workspace / "js.txt").read_text() == "JS\n"


PLAIN_WRITE = call_then_text(write_call("hello.txt", "hi\n", "p1"), "I wrote hello.txt for you.")


async def test_issue21_generic_js_client_approves_on_the_context_and_sees_the_answer_once(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """issue 21 items 1 and 2 with a real generic client (@a2a-js/sdk, no extension, contextId
    only): "yes" on the context continues the waiting task, the file is written once, and what a
    chat UI shows (status texts and artifact chunks) holds the answer exactly once."""
    need_js_sdk()
    async with running_server(script(PLAIN_WRITE), sqlite_url, workspace) as srv:
        res = await run_js_client("plain.mjs", srv.url, TOKEN)
    question = res["first"][-1]
    assert question["state"] == "input-required" and "hello.txt" in question["text"]
    assert "Reply yes" in question["text"]
    # the answer went to the waiting task (no new task, nothing cancelled)
    assert {e["taskId"] for e in res["second"]} == {res["firstTask"]}
    assert res["final"] == "completed"
    assert (workspace.parent / "hello.txt").read_text() == "hi\n"
    shown = "".join(e.get("text") or "" for e in res["second"])
    assert shown.count("I wrote hello.txt for you.") == 1, res["second"]
    chunks = [e for e in res["second"] if e["kind"] == "artifact"]
    assert chunks and {c["name"] for c in chunks} == {"reply"} and chunks[-1]["lastChunk"] is True
