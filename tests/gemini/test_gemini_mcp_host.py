"""Gemini CLI (`@google/gemini-cli` from npm, pinned in tests/gemini/js) as a real MCP host of
`devagent mcp` (issue 22): devagent is an MCP server in Gemini CLI's settings (`mcpServers`), a
fake Gemini API plays a model that calls devagent's start tool with a task, and the answer and
the file devagent wrote come back to it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Script
from tests.core_helpers import write_call
from tests.fakes.gemini_server import FakeGemini
from tests.gemini.helpers import SETTINGS, need_gemini_cli, run_gemini

pytestmark = pytest.mark.npm


class CallsDevagent:
    """A scripted Gemini model: calls the MCP tool whose name ends in `devagent_start` (Gemini CLI
    may prefix it) with the task, then ends the turn quoting the tool's answer."""

    def __init__(self, task: str) -> None:
        self.task = task
        self.tool_names: list[str] = []
        self.results: list[str] = []

    def __call__(self, body: dict[str, Any]) -> tuple[list[list[dict[str, Any]]], dict[str, int]]:
        usage = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}
        names = [d["name"] for t in body.get("tools") or [] for d in t.get("functionDeclarations") or []]
        self.tool_names = names
        last = body["contents"][-1]
        responses = [p["functionResponse"] for p in last.get("parts", []) if "functionResponse" in p]
        if not responses:
            start = next((n for n in names if n.endswith("devagent_start")), None)
            if start is None:
                return [[{"text": "no devagent tool"}]], usage
            return [[{"functionCall": {"name": start, "args": {"prompt": self.task}}}]], usage
        said = json.dumps([r.get("response") for r in responses])
        self.results.append(said)
        return [[{"text": f"devagent says: {said[:300]}"}]], usage


async def test_issue22_gemini_cli_as_an_mcp_host_hands_devagent_a_task(
    script: Script, sqlite_url: str, workspace: Path, tmp_path: Path
) -> None:
    need_gemini_cli()
    steps = [
        {"items": [write_call("mcp.txt", "via mcp\n")]},
        {"items": [{"text": "I wrote mcp.txt."}]},
    ]
    model = CallsDevagent("Write 'via mcp' to mcp.txt")
    home, cwd = tmp_path / "home", tmp_path / "project"
    (home / ".gemini").mkdir(parents=True)
    cwd.mkdir()
    devagent = [
        "-m", "devagent", "mcp", "--work-dir", str(workspace), "--model", script(steps),
        "--db", sqlite_url, "--approval", "auto-edit",
    ]  # fmt: skip
    settings = {
        **SETTINGS,
        "mcpServers": {
            "devagent": {"command": sys.executable, "args": devagent, "trust": True, "timeout": 120000}
        },
    }
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    async with FakeGemini(model) as gemini_url:
        out = await run_gemini("Use devagent to write 'via mcp' to mcp.txt", cwd, home, gemini_url)
    assert any(n.endswith("devagent_start") for n in model.tool_names), model.tool_names
    assert (workspace / "mcp.txt").read_text() == "via mcp\n"
    assert model.results and "I wrote mcp.txt." in model.results[-1], model.results
    assert "devagent says" in out
