"""The RFC's Appendix A flow over real HTTP/SSE, step by step (v0.3 JSON-RPC, raw)."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.a2a.helpers import (
    dev_meta,
    parts_of,
    results,
    running_server,
    stream_message,
    text_of,
    v03_message,
)
from tests.conftest import Script
from tests.core_helpers import call_then_text, write_call

WRITE_THEN_ANSWER = [
    *call_then_text(write_call("hello.txt", "hi\n", "c1"), "I wrote hello.txt."),
    {"items": [{"text": "Second turn: {last_user}"}]},
]


async def test_appendix_flow_v03(script: Script, db_url: str, workspace: Path) -> None:
    """A3 B1 B2 B3 B4 B5 B6 B7 B8 B9 B10 B14 A6: the appendix, event by event, on SQLite and
    PostgreSQL (the task store shares the core's database)."""
    async with running_server(script(WRITE_THEN_ANSWER), db_url, workspace) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            # 1-2: message/stream with AgentSettings
            frames = await stream_message(
                c, srv.url, v03_message("write hello", settings={"workspace_path": str(workspace)})
            )
            evs = results(frames)
            assert evs[0]["kind"] == "task" and evs[0]["status"]["state"] == "submitted"
            task_id, ctx = evs[0]["id"], evs[0]["contextId"]
            assert evs[1]["kind"] == "status-update" and evs[1]["status"]["state"] == "working"
            assert dev_meta(evs[1])["kind"] == "STATE_CHANGE"
            # 4: event 3 PENDING tool call with confirmation_request
            tc_events = [e for e in evs if dev_meta(e).get("kind") == "TOOL_CALL_UPDATE"]
            assert tc_events, evs
            tc = parts_of(tc_events[-1])[0]["data"]
            assert tc["status"] == "PENDING" and tc["tool_name"] == "write_file"
            assert tc["tool_call_id"] == "c1"
            cr = tc["confirmation_request"]
            assert {o["id"] for o in cr["options"]} >= {"proceed_once", "cancel"}
            assert cr["file_edit_details"]["new_content"] == "hi\n"
            assert cr["file_edit_details"]["file_path"].endswith("hello.txt")
            # event 4: input-required, final true, STATE_CHANGE; stream ends there
            last = evs[-1]
            assert last["status"]["state"] == "input-required" and last["final"] is True
            assert dev_meta(last)["kind"] == "STATE_CHANGE"
            assert sum(1 for e in evs if e.get("final")) == 1
            assert not (workspace / "hello.txt").exists()

            # 6-9: the confirmation
            conf = {"tool_call_id": "c1", "selected_option_id": "proceed_once"}
            evs2 = results(
                await stream_message(c, srv.url, v03_message(data=[conf], task_id=task_id, context_id=ctx))
            )
            # the reply also comes as an artifact holding it whole, before the final event
            replies = [e for e in evs2 if e.get("kind") == "artifact-update"]
            assert [p["text"] for e in replies for p in e["artifact"]["parts"]] == ["I wrote hello.txt."]
            evs2 = [e for e in evs2 if "status" in e]
            kinds = [(dev_meta(e).get("kind"), e["status"]["state"]) for e in evs2]
            statuses = [
                parts_of(e)[0]["data"]["status"]
                for e in evs2
                if dev_meta(e).get("kind") == "TOOL_CALL_UPDATE"
            ]
            assert statuses[0] == "EXECUTING" and statuses[-1] == "SUCCEEDED", statuses
            texts = text_of(evs2)
            assert texts == "I wrote hello.txt."
            assert kinds[-1] == ("STATE_CHANGE", "completed") and evs2[-1]["final"] is True
            assert sum(1 for e in evs2 if e.get("final")) == 1  # A3: exactly one final event
            assert (workspace / "hello.txt").read_text() == "hi\n"

            # 10: the same taskId continues (extension client)
            evs3 = results(
                await stream_message(c, srv.url, v03_message("and now?", task_id=task_id, context_id=ctx))
            )
            evs3 = [e for e in evs3 if "status" in e]
            texts = text_of(evs3)
            assert texts == "Second turn: and now?"
            assert evs3[-1]["status"]["state"] == "completed" and evs3[-1]["final"] is True
            assert sum(1 for e in evs3 if e.get("final")) == 1
