"""Codex CLI (npm `@openai/codex`, pinned in tests/mcpdoor/js/package.json; its native linux-x64
binary comes in the npm package) as a real MCP host of `devagent mcp`, run headless as `codex exec`
with a home of the test's own (`CODEX_HOME`). Its model is a fake OpenAI Responses API (Codex
0.171.0 speaks only that: `wire_api = "chat"` is refused) that calls devagent's tools the way
Codex offers them, as the functions of the tool group `mcp__devagent`.

What the tests show, each from outside (the requests the fake model gets, the events `codex exec
--json` prints, the workspace):

- with the configuration docs/mcp-server.md gives, Codex lists devagent's tools, calls
  `devagent_start`, devagent writes the file and its answer comes back to the model;
- `codex exec` answers every elicitation with `decline`: a permission devagent asks for in `ask`
  mode is refused (the write does not happen, and devagent's model reads that the user declined);
- without `default_tools_approval_mode = "approve"` Codex refuses to call devagent's tools itself
  ("requires approval, but approval policy is never");
- without `required = true` Codex does not wait for devagent to start: its first model request
  goes out without devagent's tools (here devagent is held back until that request came)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Script
from tests.core_helpers import write_call
from tests.fakes.openai_responses_server import (
    FakeResponses,
    FunctionCall,
    Message,
    function_outputs,
    tool_groups,
)
from tests.mcpdoor.conftest import devagent_mcp
from tests.npm import ensure_installed, ensure_runs, run_headless

JS = Path(__file__).parent / "js"
CODEX = JS / "node_modules" / ".bin" / "codex"
RUN_WITHIN = 240  # seconds for one `codex exec`: a safety net on 2 shared cores, never a pace
GROUP = "mcp__devagent"  # the tool group Codex offers devagent's tools in

pytestmark = pytest.mark.npm


def need_codex() -> None:
    """Skips the calling test unless Codex CLI is installed in tests/mcpdoor/js (installing it)
    and its native build runs here."""
    ensure_installed(JS, CODEX, "@openai/codex")
    ensure_runs(CODEX, "@openai/codex")


def devagent_result(output: Any) -> dict[str, Any]:
    """devagent's structured result in the output Codex gives its model for an MCP tool call
    ("Wall time: ...\\nOutput:\\n{...}"); {"text": ...} when it holds no JSON object (an error)."""
    text = output if isinstance(output, str) else json.dumps(output)
    start = text.find("{")
    try:
        found: dict[str, Any] = json.loads(text[start:]) if start >= 0 else {"text": text}
    except json.JSONDecodeError:
        found = {"text": text}
    return found


class CallsDevagent:
    """A scripted model behind Codex: calls `devagent_start` with the task when Codex offers it,
    then ends the turn quoting devagent's answer. It notes the tools each request offered in
    devagent's group and devagent's results."""

    def __init__(self, task: str) -> None:
        self.task = task
        self.offered: list[list[str]] = []
        self.results: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> list[Message | FunctionCall]:
        self.offered.append(tool_groups(body).get(GROUP, []))
        outputs = function_outputs(body)
        if "call_start" in outputs:
            self.results.append(devagent_result(outputs["call_start"]))
            said = self.results[-1].get("answer", self.results[-1].get("text", ""))
            return [Message(f"devagent says: {said}")]
        if "devagent_start" not in self.offered[-1]:
            return [Message("no devagent tools")]
        return [FunctionCall("call_start", "devagent_start", {"prompt": self.task}, namespace=GROUP)]


def toml_value(value: Any) -> str:
    """A string, list of strings or bool as TOML (JSON's string escapes are TOML's)."""
    return json.dumps(value)


def codex_config(
    model_url: str, command: list[str], *, required: bool = True, approve: bool = True, startup: int = 120
) -> str:
    """Codex's config.toml: the fake model as its provider, nothing sent elsewhere (no analytics,
    no plugin sync), and devagent (`command`) as the MCP server `devagent`, given `startup` seconds
    to start, with `required` and `default_tools_approval_mode = "approve"` unless told otherwise."""
    server = [
        f"command = {toml_value(command[0])}",
        f"args = {toml_value(command[1:])}",
        f"startup_timeout_sec = {startup}",
        "tool_timeout_sec = 600",
        # Codex gives an MCP server only a few of its variables (HOME, PATH, ...) and these: here
        # devagent's sources as this test run has them
        'env_vars = ["PYTHONPATH"]',
    ]
    if required:
        server.append("required = true")
    if approve:
        server.append('default_tools_approval_mode = "approve"')
    return "\n".join(
        [
            'model = "fake-model"',
            'model_provider = "fake"',
            "",
            "[model_providers.fake]",
            'name = "fake OpenAI"',
            f"base_url = {toml_value(model_url)}",
            'env_key = "FAKE_OPENAI_KEY"',
            'wire_api = "responses"',
            "",
            "[analytics]",
            "enabled = false",
            "",
            "[features]",
            "plugins = false",
            "",
            "[mcp_servers.devagent]",
            *server,
            "",
        ]
    )


async def codex_exec(prompt: str, cwd: Path, codex_home: Path) -> list[dict[str, Any]]:
    """`codex exec --json PROMPT` in `cwd` with its configuration in `codex_home`, run to its end;
    the events it printed. It must succeed."""
    home = codex_home.parent / "home"
    home.mkdir(exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "CODEX_HOME": str(codex_home),
        "FAKE_OPENAI_KEY": "fake-key",
        "NO_COLOR": "1",
    }
    command = [str(CODEX), "exec", "--strict-config", "--skip-git-repo-check", "--json", prompt]
    code, out, err = await run_headless(command, cwd, env, RUN_WITHIN)
    assert code == 0, err[-2000:]
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


async def hand_codex_the_task(
    model: CallsDevagent, codex_home: Path, cwd: Path, command: list[str], **config: Any
) -> list[dict[str, Any]]:
    """Configures Codex (`codex_config` with `config`) with devagent (`command`: its command line)
    and the fake model scripted by `model`, then asks it with `codex exec` to use devagent to
    write mcp.txt; the events it printed."""
    async with FakeResponses(model) as url:
        (codex_home / "config.toml").write_text(codex_config(url, command, **config))
        return await codex_exec("Use devagent to write 'via mcp' to mcp.txt", cwd, codex_home)


def devagent_calls(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The MCP tool calls of devagent's that Codex reports done (`item.completed`)."""
    return [
        e["item"]
        for e in events
        if e.get("type") == "item.completed"
        and e["item"].get("type") == "mcp_tool_call"
        and e["item"].get("server") == "devagent"
    ]


def agent_messages(events: list[dict[str, Any]]) -> list[str]:
    return [
        e["item"]["text"]
        for e in events
        if e.get("type") == "item.completed" and e["item"].get("type") == "agent_message"
    ]


WRITE = [
    {"items": [write_call("mcp.txt", "via mcp\n")]},
    {"items": [{"text": "I wrote mcp.txt. The write said: {last_tool_results}"}]},
]


@pytest.fixture
def codex_asked_to_write(dirs: tuple[Path, Path]) -> tuple[CallsDevagent, Path, Path]:
    """Codex present (else the test is skipped), its home and working folders, and a model that
    asks devagent to write mcp.txt."""
    need_codex()
    codex_home, cwd = dirs
    return CallsDevagent("Write 'via mcp' to mcp.txt"), codex_home, cwd


async def test_codex_exec_as_an_mcp_host_hands_devagent_a_task(
    script: Script, sqlite_url: str, workspace: Path, codex_asked_to_write: tuple[CallsDevagent, Path, Path]
) -> None:
    model, codex_home, cwd = codex_asked_to_write
    command = devagent_mcp(workspace, script(WRITE), sqlite_url, "--approval", "auto-edit")
    events = await hand_codex_the_task(model, codex_home, cwd, command)
    assert {"devagent_start", "devagent_continue", "devagent_sessions"} <= set(model.offered[0])
    assert (workspace / "mcp.txt").read_text() == "via mcp\n"
    [call] = devagent_calls(events)
    assert call["tool"] == "devagent_start" and call["status"] == "completed", call
    assert call["result"]["structured_content"]["files_changed"] == [
        {"path": "mcp.txt", "summary": "new file, 1 line"}
    ]
    [result] = model.results
    assert result["status"] == "completed" and result["answer"].startswith("I wrote mcp.txt."), result
    assert any(m.startswith("devagent says: I wrote mcp.txt.") for m in agent_messages(events))


async def test_codex_exec_declines_devagents_permission_so_the_write_is_refused(
    script: Script, sqlite_url: str, workspace: Path, codex_asked_to_write: tuple[CallsDevagent, Path, Path]
) -> None:
    """In `ask` mode devagent asks Codex's user with an elicitation; `codex exec` has none to ask
    and declines it: the call is refused (not left waiting), and devagent's model is told so."""
    model, codex_home, cwd = codex_asked_to_write
    command = devagent_mcp(workspace, script(WRITE), sqlite_url)
    await hand_codex_the_task(model, codex_home, cwd, command)
    assert not (workspace / "mcp.txt").exists()
    [result] = model.results
    assert result["status"] == "completed" and result["files_changed"] == [], result
    assert "the user declined to run this call" in result["answer"], result


async def test_codex_exec_without_approve_mode_refuses_to_call_devagent(
    script: Script, sqlite_url: str, workspace: Path, codex_asked_to_write: tuple[CallsDevagent, Path, Path]
) -> None:
    model, codex_home, cwd = codex_asked_to_write
    command = devagent_mcp(workspace, script(WRITE), sqlite_url, "--approval", "auto-edit")
    events = await hand_codex_the_task(model, codex_home, cwd, command, approve=False)
    assert not (workspace / "mcp.txt").exists()
    [result] = model.results
    assert "requires approval, but approval policy is never" in result["text"], result
    [call] = devagent_calls(events)
    assert call["status"] == "failed", call


async def test_codex_exec_without_required_does_not_wait_for_devagent_to_start(
    script: Script, sqlite_url: str, workspace: Path, dirs: tuple[Path, Path], tmp_path: Path
) -> None:
    """devagent is started by a shell that waits for a file the fake model writes when it gets
    Codex's first request. Without `required = true` that request comes at once, offering no
    devagent tool: Codex did not wait for devagent, though `startup_timeout_sec` (an hour here,
    longer than the run may last) would let it."""
    need_codex()
    codex_home, cwd = dirs
    asked = tmp_path / "asked"

    class NotesTheFirstRequest(CallsDevagent):
        def __call__(self, body: dict[str, Any]) -> list[Message | FunctionCall]:
            asked.touch()
            return super().__call__(body)

    model = NotesTheFirstRequest("Write 'via mcp' to mcp.txt")
    held = f'while [ ! -e "{asked}" ]; do sleep 0.05; done; exec "$0" "$@"'
    command = ["sh", "-c", held, *devagent_mcp(workspace, script(WRITE), sqlite_url)]
    events = await hand_codex_the_task(model, codex_home, cwd, command, required=False, startup=3600)
    assert model.offered[0] == [], model.offered
    assert "no devagent tools" in agent_messages(events)
    assert not devagent_calls(events)
