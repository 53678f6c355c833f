"""`commands/get` and `command/execute` (B12, B13) on the JSON-RPC endpoint."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from tests.a2a.helpers import auth, call, results, rpc, running_server, stream
from tests.conftest import Script

TEXT = [{"items": [{"text": "hello"}]}]


async def _wait_final(c: httpx.AsyncClient, url: str, task_id: str) -> dict[str, Any]:
    for _ in range(100):
        got = (await call(c, url, rpc("tasks/get", {"id": task_id}), auth()))["result"]
        if got["status"]["state"] in ("completed", "failed", "canceled", "input-required"):
            return dict(got)
        await asyncio.sleep(0.05)
    raise AssertionError("command did not finish")


async def test_commands_get(script: Script, sqlite_url: str, workspace: Path) -> None:
    """B12: GetAllSlashCommandsResponse with SlashCommand{name, description, arguments, sub_commands}."""
    async with running_server(script(TEXT), sqlite_url, workspace) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            res = (await call(c, srv.url, rpc("commands/get", {}), auth()))["result"]
            names = {cmd["name"] for cmd in res["commands"]}
            assert {"help", "memory", "init"} <= names
            for cmd in res["commands"]:
                assert set(cmd) == {"name", "description", "arguments", "sub_commands"}
            memory = next(cmd for cmd in res["commands"] if cmd["name"] == "memory")
            assert {s["name"] for s in memory["sub_commands"]} >= {"show", "add"}
            add = next(s for s in memory["sub_commands"] if s["name"] == "add")
            assert all(set(a) == {"name", "description", "is_required"} for a in add["arguments"])


async def test_command_execute(script: Script, sqlite_url: str, workspace: Path) -> None:
    """B13: STARTED with an execution_id at once; the command's progress is a task the client
    follows with tasks/get or tasks/resubscribe; an unknown command fails to start."""
    async with running_server(script(TEXT), sqlite_url, workspace) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            res = (
                await call(c, srv.url, rpc("command/execute", {"command_path": ["help"], "args": ""}), auth())
            )["result"]
            assert res["status"] == "STARTED" and res["execution_id"]
            task = await _wait_final(c, srv.url, res["execution_id"])
            assert task["status"]["state"] == "completed"
            out = "".join(
                p.get("text", "")
                for m in [*task["history"], task["status"].get("message") or {"parts": [], "role": "agent"}]
                if m.get("role") == "agent"
                for p in m["parts"]
            )
            assert "memory" in out
            # memory add, then memory show in the same context sees it
            add = {"command_path": ["memory", "add"], "args": "use tabs", "context_id": task["contextId"]}
            res2 = (await call(c, srv.url, rpc("command/execute", add), auth()))["result"]
            assert res2["status"] == "STARTED"
            await _wait_final(c, srv.url, res2["execution_id"])
            show = {"command_path": ["memory", "show"], "args": "", "context_id": task["contextId"]}
            res3 = (await call(c, srv.url, rpc("command/execute", show), auth()))["result"]
            frames = await stream(c, srv.url, rpc("tasks/resubscribe", {"id": res3["execution_id"]}), auth())
            if frames and "error" not in frames[0]:
                assert results(frames)[-1]["final"] is True
            t3 = await _wait_final(c, srv.url, res3["execution_id"])
            text3 = "".join(
                p.get("text", "") for m in t3["history"] if m.get("role") == "agent" for p in m["parts"]
            )
            assert "use tabs" in text3
            bad = (await call(c, srv.url, rpc("command/execute", {"command_path": ["nope"]}), auth()))[
                "result"
            ]
            assert bad["status"] == "FAILED_TO_START" and "nope" in bad["message"]
            err = await call(c, srv.url, rpc("command/execute", {"command_path": "help"}), auth())
            assert err["error"]["code"] == -32602
