"""Claude Code (npm `@anthropic-ai/claude-code`, pinned in tests/mcpdoor/js/package.json; its
native linux-x64 build comes in the npm package) as a real MCP host of `devagent mcp`, run
headless as `claude -p --output-format json` with a home of the test's own. devagent is added with
`claude mcp add`, as docs/mcp-server.md says; Claude Code's model is the fake Anthropic API of
tests/fakes/anthropic_server.py (`ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY`), scripted to call
devagent's tools, which Claude Code names `mcp__devagent__<tool>`. Claude Code defers MCP tools
behind its ToolSearch tool: the fake model loads them with it first, as Claude does.

What the tests show, from outside (the requests the fake model gets, Claude Code's JSON result,
the workspace):

- Claude Code calls `devagent_start`, devagent writes the file and its answer reaches the model;
- in `ask` mode devagent asks for the write; `claude -p` cancels the elicitation, so the tool
  result is `input_required` with the write pending, and the model's `devagent_continue` with
  `answer: yes` (same session) lets devagent write it;
- without `--allowedTools mcp__devagent` Claude Code denies its model the call itself."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Script
from tests.core_helpers import write_call
from tests.fakes.anthropic_server import Block, FakeAnthropic
from tests.mcpdoor.conftest import devagent_mcp
from tests.npm import ensure_installed, ensure_runs, run_headless

JS = Path(__file__).parent / "js"
CLAUDE = JS / "node_modules" / ".bin" / "claude"
RUN_WITHIN = 240  # seconds for one Claude Code run: a safety net on 2 shared cores, never a pace
START, CONTINUE = "mcp__devagent__devagent_start", "mcp__devagent__devagent_continue"
ALLOWED = ("--allowedTools", "mcp__devagent")  # every tool of the MCP server devagent

pytestmark = pytest.mark.npm


def need_claude_code() -> None:
    """Skips the calling test unless Claude Code is installed in tests/mcpdoor/js (installing it)
    and its native build runs here."""
    ensure_installed(JS, CLAUDE, "@anthropic-ai/claude-code")
    ensure_runs(CLAUDE, "@anthropic-ai/claude-code")


def tool_result(body: dict[str, Any], tool_use_id: str) -> dict[str, Any] | None:
    """The `tool_result` block answering `tool_use_id` in a request's messages."""
    for message in body.get("messages") or []:
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_result" and block.get("tool_use_id") == tool_use_id:
                found: dict[str, Any] = block
                return found
    return None


def result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


class CallsDevagent:
    """A scripted Claude model behind Claude Code: loads devagent's tools with ToolSearch when
    Claude Code defers them, calls `devagent_start` with the task, answers a permission devagent
    waits for with `devagent_continue` `yes` (once), then ends the turn quoting devagent's answer.
    It notes the calls it made and devagent's results (the structured content Claude Code passes
    on, as JSON)."""

    def __init__(self, task: str) -> None:
        self.task = task
        self.calls: list[str] = []
        self.results: list[dict[str, Any]] = []

    def _call(self, name: str, args: dict[str, Any]) -> list[Block]:
        self.calls.append(name)
        return [("tool_use", f"toolu_{len(self.calls)}", name, args)]

    def _next(self, body: dict[str, Any]) -> list[Block]:
        names = {t.get("name") for t in body.get("tools") or []}
        last = tool_result(body, f"toolu_{len(self.calls)}") if self.calls else None
        if last is not None and self.calls[-1] in (START, CONTINUE):
            text = result_text(last)
            self.results.append(json.loads(text) if text.startswith("{") else {"text": text})
            said = self.results[-1]
            if said.get("status") == "input_required" and CONTINUE not in self.calls:
                return self._call(CONTINUE, {"session_id": said["session_id"], "answer": "yes"})
            return [("text", f"devagent says: {said.get('answer', said.get('text'))}")]
        if START in names:
            return self._call(START, {"prompt": self.task})
        if "ToolSearch" in names and not self.calls:
            return self._call("ToolSearch", {"query": f"select:{START},{CONTINUE}"})
        return [("text", "no devagent tool")]

    def __call__(self, body: dict[str, Any]) -> tuple[list[Block], tuple[int | None, int]]:
        if len(self.calls) > 6:  # a loop would be a failure: end the run
            return [("text", "too many calls")], (10, 5)
        return self._next(body), (10, 5)


async def run_claude(args: list[str], cwd: Path, home: Path, model_url: str = "") -> str:
    """`claude ARGS` in `cwd` with `home` as its home (its settings, `.claude.json` and logs), its
    model at `model_url` (none: no model), nothing sent elsewhere; run to its end. What it printed;
    it must succeed."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        **({"ANTHROPIC_BASE_URL": model_url, "ANTHROPIC_API_KEY": "fake-key"} if model_url else {}),
        # no telemetry, error reporting or update checks: no connection but the model's
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        # how long `claude -p` waits for devagent to start before its first request, and for a tool call
        "MCP_TIMEOUT": "120000",
        "MCP_TOOL_TIMEOUT": "600000",
        "NO_COLOR": "1",
        # devagent's sources as this test run has them (Claude Code gives devagent its environment)
        **({"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}),
    }
    code, out, err = await run_headless([str(CLAUDE), *args], cwd, env, RUN_WITHIN)
    assert code == 0, (out[-2000:], err[-2000:])
    return out


async def hand_devagent_a_task(
    model: CallsDevagent, home: Path, cwd: Path, devagent: list[str], allowed: tuple[str, ...] = ALLOWED
) -> dict[str, Any]:
    """Adds devagent (`devagent`: its command line) to Claude Code with `claude mcp add`, then runs
    `claude -p` with the fake model scripted by `model` and `allowed` (devagent's tools unless
    told otherwise) as its flags; Claude Code's JSON result."""
    added = await run_claude(["mcp", "add", "devagent", "--", *devagent], cwd, home)
    assert "Added stdio MCP server devagent" in added, added
    prompt = "Use devagent to write 'via mcp' to mcp.txt"
    async with FakeAnthropic(model) as url:
        out = await run_claude(["-p", prompt, "--output-format", "json", *allowed], cwd, home, url)
    result: dict[str, Any] = json.loads(out)
    return result


WRITE = [{"items": [write_call("mcp.txt", "via mcp\n")]}, {"items": [{"text": "I wrote mcp.txt."}]}]


@pytest.fixture
def claude_asked_to_write(dirs: tuple[Path, Path]) -> tuple[CallsDevagent, Path, Path]:
    """Claude Code present (else the test is skipped), its home and working folders, and a model that
    asks devagent to write mcp.txt."""
    need_claude_code()
    home, cwd = dirs
    return CallsDevagent("Write 'via mcp' to mcp.txt"), home, cwd


async def test_claude_code_as_an_mcp_host_hands_devagent_a_task(
    script: Script, sqlite_url: str, workspace: Path, claude_asked_to_write: tuple[CallsDevagent, Path, Path]
) -> None:
    model, home, cwd = claude_asked_to_write
    devagent = devagent_mcp(workspace, script(WRITE), sqlite_url, "--approval", "auto-edit")
    result = await hand_devagent_a_task(model, home, cwd, devagent)
    assert START in model.calls, model.calls
    assert (workspace / "mcp.txt").read_text() == "via mcp\n"
    [said] = model.results
    assert said["status"] == "completed" and said["answer"] == "I wrote mcp.txt.", said
    assert said["files_changed"] == [{"path": "mcp.txt", "summary": "new file, 1 line"}]
    assert result["is_error"] is False and result["result"] == "devagent says: I wrote mcp.txt.", result


async def test_claude_code_headless_permission_comes_back_input_required_and_is_continued(
    script: Script, sqlite_url: str, workspace: Path, claude_asked_to_write: tuple[CallsDevagent, Path, Path]
) -> None:
    model, home, cwd = claude_asked_to_write
    devagent = devagent_mcp(workspace, script(WRITE), sqlite_url)  # `ask`: the write is asked
    result = await hand_devagent_a_task(model, home, cwd, devagent)
    assert model.calls[-2:] == [START, CONTINUE], model.calls
    waiting, done = model.results
    assert waiting["status"] == "input_required" and waiting["files_changed"] == [], waiting
    [pending] = waiting["pending"]
    assert pending["tool"] == "write_file" and "mcp.txt" in pending["description"], pending
    assert done["session_id"] == waiting["session_id"]
    assert done["status"] == "completed" and done["answer"] == "I wrote mcp.txt.", done
    assert (workspace / "mcp.txt").read_text() == "via mcp\n"
    assert result["result"] == "devagent says: I wrote mcp.txt.", result


async def test_claude_code_headless_without_allowed_tools_denies_devagents_tools(
    script: Script, sqlite_url: str, workspace: Path, claude_asked_to_write: tuple[CallsDevagent, Path, Path]
) -> None:
    """`claude -p` has nobody to ask for its own permission to call an MCP tool: without
    `--allowedTools mcp__devagent` it denies the call, and devagent never runs the task."""
    model, home, cwd = claude_asked_to_write
    devagent = devagent_mcp(workspace, script(WRITE), sqlite_url, "--approval", "auto-edit")
    result = await hand_devagent_a_task(model, home, cwd, devagent, allowed=())
    [denied] = result["permission_denials"]
    assert denied["tool_name"] == START, denied
    [said] = model.results
    assert "haven't granted it yet" in said["text"], said
    assert not (workspace / "mcp.txt").exists()
