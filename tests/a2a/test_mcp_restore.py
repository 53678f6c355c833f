"""B15 and G5 over A2A: MCP servers named in AgentSettings, their calls confirmed with
`mcp_details`, and /restore of a checkpoint, through the real server and SSE."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.a2a.helpers import results, running_server, stream_message, text_of, tool_updates, v03_message
from tests.conftest import Script
from tests.core_helpers import write_call
from tests.mcp_servers import start_http_server


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from start_http_server(tmp_path_factory.mktemp("mcp_http_a2a"))


def updates_and_confirmations(evs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return tool_updates(evs, ("TOOL_CALL_UPDATE", "TOOL_CALL_CONFIRMATION"))


async def test_b15_g5_mcp_tool_and_restore_over_a2a(
    script: Script, sqlite_url: str, workspace: Path, http_server: str
) -> None:
    steps = [
        {"items": [{"tool_call": {"name": "web__add", "args": {"a": 40, "b": 2}, "id": "m1"}}]},
        {
            "items": [
                {"tool_call": {"name": "web__picture", "args": {}, "id": "p1"}},  # the server is allowed now
                write_call("f.txt", "x\n", "w1"),
            ]
        },
        {"items": [{"text": "sum and file done"}]},
    ]
    # the test's MCP server is on loopback: the operator allows that here (default: refused)
    async with running_server(
        script(steps),
        sqlite_url,
        workspace,
        core_kw={"mcp_client_private_urls": True, "allowed_approval_modes": ("auto-edit",)},
    ) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            settings = {
                "workspace_path": str(workspace),
                "approval_mode": "auto-edit",
                "mcp_servers": {"web": {"url": http_server}},
            }
            m = v03_message("add and write", settings=settings)
            evs = results(await stream_message(c, srv.url, m))
            task = evs[0]
            assert evs[-1]["status"]["state"] == "input-required" and evs[-1]["final"] is True
            pending = updates_and_confirmations(evs)[-1]
            assert pending["tool_name"] == "web__add" and pending["status"] == "PENDING"
            req = pending["confirmation_request"]
            assert req["mcp_details"] == {"server_name": "web", "tool_name": "add"}  # B8
            assert [o["id"] for o in req["options"]] == [
                "proceed_once",
                "proceed_always_tool",
                "proceed_always_server",
                "cancel",
                "cancel_always",
            ]

            conf = {"tool_call_id": "m1", "selected_option_id": "proceed_always_server"}
            m = v03_message(data=[conf], task_id=task["id"], context_id=task["contextId"])
            evs = results(await stream_message(c, srv.url, m))
            ups = updates_and_confirmations(evs)
            done = [u for u in ups if u["tool_call_id"] == "m1"][-1]
            assert done["status"] == "SUCCEEDED" and done["output"] == {"text": "42"}
            pic = [u for u in ups if u["tool_call_id"] == "p1"][-1]["output"]["structured_data"]
            assert "a red dot" in pic["text"] and "[image image/png" in pic["text"]
            image = next(b for b in pic["content"] if b["type"] == "image")
            assert image["mime_type"] == "image/png" and image["data"]  # the picture reaches the client
            assert [u for u in ups if u["tool_call_id"] == "w1"][-1]["status"] == "SUCCEEDED"
            assert (workspace / "f.txt").read_text() == "x\n"
            assert evs[-1]["status"]["state"] == "completed"

            # /mcp and /restore as prompts of the same task (B14 with the extension)
            async def say(text: str) -> str:
                m = v03_message(text, task_id=task["id"], context_id=task["contextId"])
                evs = results(await stream_message(c, srv.url, m))
                return text_of(evs)

            assert "web (http, from session settings): ready" in await say("/mcp")
            assert "1  " in await say("/restore")
            out = await say("/restore 1")
            assert "Restored checkpoint 1 (Write f.txt): f.txt." in out
            assert not (workspace / "f.txt").exists()
