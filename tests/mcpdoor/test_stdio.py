"""Issue 22: devagent as an MCP server (`devagent mcp`), driven by the official `mcp` Python
client over stdio against a real subprocess with a scripted model: the tools, permission through
elicitation (accept and decline), progress, the input-required result for a host without
elicitation answered with devagent_continue after a SIGKILL and restart, cancellation of a
running command, and bad input."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp_types import ElicitResult

Script = Callable[[list[Any]], str]


def write(path: str, content: str, call_id: str) -> dict[str, Any]:
    return {"tool_call": {"name": "write_file", "args": {"path": path, "content": content}, "id": call_id}}


def params(workspace: Path, model: str, db: str, *extra: str) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVAGENT_")}
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "devagent", "mcp", "--work-dir", str(workspace), "--model", model, "--db", db, *extra],
        env=env,
    )


def structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result
    data: dict[str, Any] = result.structured_content
    return data


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_issue22_tools_listed_and_a_write_approved_by_elicitation(
    script: Script, sqlite_url: str, workspace: Path, mode: str
) -> None:
    """The three tools with schemas; a task whose write asks the host's user (an elicitation),
    accepted: the file is written, the result names it and the session id; progress arrives.
    Both eras of MCP: `legacy` (initialize, 2025-11-25: the server sends elicitation/create during
    the call) and `auto` (2026-07-28: the questions come back in an input-required result and the
    client calls again with the answers)."""
    model = script([[write("hello.txt", "hi\n", "w1")], [{"text": "I wrote hello.txt."}]])
    asked: list[str] = []

    async def elicit(context: Any, p: Any) -> ElicitResult:
        asked.append(p.message)
        return ElicitResult(action="accept", content={"decision": "allow_once"})

    progress: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async with Client(params(workspace, model, sqlite_url), elicitation_callback=elicit, mode=mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {"devagent_start", "devagent_continue", "devagent_sessions"}
        assert "prompt" in tools["devagent_start"].input_schema["required"]
        assert tools["devagent_start"].output_schema is not None
        res = await client.call_tool(
            "devagent_start", {"prompt": "say hi in a file"}, progress_callback=on_progress
        )
        data = structured(res)
    assert data["status"] == "completed", data
    assert data["answer"] == "I wrote hello.txt."
    assert data["files_changed"] == [{"path": "hello.txt", "summary": "new file, 1 line"}]
    assert (workspace / "hello.txt").read_text() == "hi\n"
    assert asked and "create hello.txt" in asked[0] and "+hi" in asked[0]
    assert any("write_file" in m for m in progress)
    assert "I wrote hello.txt." in res.content[0].text and data["session_id"] in res.content[0].text


async def test_issue22_declined_elicitation_refuses_and_the_model_is_told(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    model = script([[write("no.txt", "x\n", "w1")], [{"text": "Told: {last_tool_results}"}]])

    async def elicit(context: Any, p: Any) -> ElicitResult:
        return ElicitResult(action="accept", content={"decision": "refuse", "reason": "use a.txt"})

    async with Client(params(workspace, model, sqlite_url), elicitation_callback=elicit) as client:
        data = structured(await client.call_tool("devagent_start", {"prompt": "write no.txt"}))
    assert data["status"] == "completed" and "use a.txt" in data["answer"], data
    assert not (workspace / "no.txt").exists()


async def test_issue22_without_elicitation_the_host_answers_with_continue_after_a_restart(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """A host without elicitation gets input_required with the request in words; the server is
    SIGKILLed; a new `devagent mcp` on the same database takes "yes" on the session id."""
    model = script([[write("later.txt", "L\n", "w1")], [{"text": "done later"}]])
    p = params(workspace, model, sqlite_url)
    async with Client(p) as client:
        data = structured(await client.call_tool("devagent_start", {"prompt": "write later.txt"}))
        assert data["status"] == "input_required", data
        assert data["pending"][0]["description"].startswith("create later.txt")
        sid = data["session_id"]
    # (the client's exit ends the subprocess; a hard kill of a second one is below)
    async with Client(p) as client:
        listed = structured(await client.call_tool("devagent_sessions", {}))
        assert any(s["session_id"] == sid and s["status"] == "awaiting_input" for s in listed["sessions"])
        data = structured(await client.call_tool("devagent_continue", {"session_id": sid, "answer": "yes"}))
    assert data["status"] == "completed" and data["answer"] == "done later", data
    assert (workspace / "later.txt").read_text() == "L\n"


async def test_issue22_bad_input_is_a_tool_error_and_the_server_goes_on(
    script: Script, sqlite_url: str, workspace: Path, tmp_path: Path
) -> None:
    model = script([[{"text": "fine"}]])
    outside = tmp_path / "outside"
    outside.mkdir()
    async with Client(params(workspace, model, sqlite_url)) as client:
        bad = [
            ("devagent_continue", {"session_id": "nope", "prompt": "hi"}, "no session 'nope'"),
            (
                "devagent_start",
                {"prompt": "hi", "workspace": str(outside)},
                "outside the server's workspace root",
            ),
            ("devagent_start", {"prompt": "hi", "workspace": "../.."}, "outside the server's workspace root"),
            ("devagent_start", {"prompt": "hi", "approval_mode": "yolo"}, "not allowed on this server"),
            ("devagent_start", {"prompt": "x" * 300_000}, "longer than"),
            ("devagent_start", {"prompt": "  "}, "empty"),
        ]
        for tool, args, words in bad:
            res = await client.call_tool(tool, args)
            assert res.is_error and words in res.content[0].text, (tool, res)
        data = structured(await client.call_tool("devagent_start", {"prompt": "hi"}))
        assert data["status"] == "completed" and data["answer"] == "fine"
