"""Issue 22: devagent as an MCP server (`devagent mcp`), driven by the official `mcp` Python
client over stdio against a real subprocess with a scripted model: the tools, permission through
elicitation (accept and decline), progress, the input-required result for a host without
elicitation answered with devagent_continue after a SIGKILL and restart, cancellation of a
running command, and bad input."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp_types import ElicitResult

from tests.conftest import Script
from tests.core_helpers import shell_call, write_call


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
    usage = {
        "usage": {"input_tokens": 300, "output_tokens": 9, "cache_read_tokens": 250, "cache_write_tokens": 40}
    }
    model = script([[write_call("hello.txt", "hi\n", "w1")], [{"text": "I wrote hello.txt."}, usage]])
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
    # the turn's tokens (two requests, the first estimated), cached ones included (issue 24 item 2)
    u = data["usage"]
    assert u["requests"] == 2 and (u["cache_read_tokens"], u["cache_write_tokens"]) == (250, 40), u
    assert (workspace / "hello.txt").read_text() == "hi\n"
    assert asked and "create hello.txt" in asked[0] and "+hi" in asked[0]
    assert any("write_file" in m for m in progress)
    assert "I wrote hello.txt." in res.content[0].text and data["session_id"] in res.content[0].text


async def test_issue22_declined_elicitation_refuses_and_the_model_is_told(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    model = script([[write_call("no.txt", "x\n", "w1")], [{"text": "Told: {last_tool_results}"}]])

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
    model = script([[write_call("later.txt", "L\n", "w1")], [{"text": "done later"}]])
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
    from devagent.agent.core import AgentCore
    from devagent.agent.settings import CoreConfig

    model = script([[{"text": "fine"}]])
    outside = tmp_path / "outside"
    outside.mkdir()
    core = await AgentCore.open(CoreConfig(db_url=sqlite_url, default_model=model))
    other = (await core.create_session([workspace])).id  # another door's session, same database
    await core.close()
    async with Client(params(workspace, model, sqlite_url)) as client:
        bad = [
            ("devagent_continue", {"session_id": "nope", "prompt": "hi"}, "no session 'nope'"),
            ("devagent_continue", {"session_id": other, "prompt": "hi"}, "no session"),
            ("devagent_sessions", {"session_id": other}, "no session"),
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
        listed = structured(await client.call_tool("devagent_sessions", {}))["sessions"]
        assert [x["session_id"] for x in listed] == [data["session_id"]]  # only this door's


class Raw:
    """`devagent mcp` as a subprocess spoken to in raw JSON-RPC lines (MCP 2025-11-25), so that a
    test can SIGKILL it at a moment of its choosing."""

    def __init__(self, p: StdioServerParameters) -> None:
        import subprocess

        self.proc = subprocess.Popen(
            [p.command, *p.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=p.env,
        )
        self.next_id = 0

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> int:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.next_id

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "the server closed its output"
        msg: dict[str, Any] = json.loads(line)
        return msg

    def until_response(self, rid: int, seen: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        while True:
            msg = self.read()
            if msg.get("id") == rid and "method" not in msg:
                return msg
            if seen is not None:
                seen.append(msg)

    def initialize(self) -> None:
        rid = self.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        )
        self.until_response(rid)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})


def call_tool(raw: Raw, name: str, args: dict[str, Any]) -> dict[str, Any]:
    rid = raw.request("tools/call", {"name": name, "arguments": args})
    result: dict[str, Any] = raw.until_response(rid)["result"]
    return result


def test_issue22_a_pending_permission_survives_a_sigkill(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """issue 22 item 5: the server waits for permission (a host without elicitation), is
    SIGKILLed, and a new `devagent mcp` on the same database takes the answer: the write happens
    once and the turn completes."""
    import signal

    model = script([[write_call("k.txt", "K\n", "w1")], [{"text": "written after the kill"}]])
    p = params(workspace, model, sqlite_url)
    raw = Raw(p)
    try:
        raw.initialize()
        data = call_tool(raw, "devagent_start", {"prompt": "write k"})["structuredContent"]
        assert data["status"] == "input_required", data
    finally:
        raw.proc.send_signal(signal.SIGKILL)
        raw.proc.wait()
    assert not (workspace / "k.txt").exists()
    again = Raw(p)
    try:
        again.initialize()
        res = call_tool(again, "devagent_continue", {"session_id": data["session_id"], "answer": "yes"})
        assert res["structuredContent"]["status"] == "completed", res
        assert res["structuredContent"]["answer"] == "written after the kill"
    finally:
        again.proc.kill()
        again.proc.wait()
    assert (workspace / "k.txt").read_text() == "K\n"


def test_issue22_cancel_from_the_host_stops_the_running_command(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """issue 22 item 4: the host cancels the tool call (notifications/cancelled) while a command
    runs; the command's shell is gone once the session reads idle, and the session goes on."""
    gate = workspace / "started"
    pidfile = workspace / "pid"
    command = f"echo $$ > {pidfile}; touch {gate}; while [ ! -e {workspace}/never ]; do sleep 0.05; done"
    steps = [
        [shell_call(command, "s1")],
        [{"text": "unreachable"}],
        [{"text": "back again"}],
    ]
    model = script(steps)
    raw = Raw(params(workspace, model, sqlite_url, "--approval", "yolo"))
    try:
        raw.initialize()
        rid = raw.request(
            "tools/call", {"name": "devagent_start", "arguments": {"prompt": "run", "approval_mode": "yolo"}}
        )
        import time

        deadline = time.monotonic() + 60  # a bound, never a pace: the command signals it started
        while not gate.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert gate.exists()
        raw.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}})
        sid = None
        listed = call_tool(raw, "devagent_sessions", {})["structuredContent"]["sessions"]
        sid = listed[0]["session_id"]
        deadline = time.monotonic() + 60
        status = ""
        while time.monotonic() < deadline:
            status = call_tool(raw, "devagent_sessions", {"session_id": sid})["structuredContent"][
                "sessions"
            ][0]["status"]
            if status != "running":
                break
            time.sleep(0.05)
        assert status == "idle", status
        pid = int(pidfile.read_text())
        with pytest.raises(ProcessLookupError):  # (bwrap off: the shell is the command's own)
            os.kill(pid, 0)
        res = call_tool(raw, "devagent_continue", {"session_id": sid, "prompt": "again"})
        assert res["structuredContent"]["status"] == "completed", res
    finally:
        raw.proc.kill()
        raw.proc.wait()


@pytest.mark.parametrize("version", ["2024-11-05", "2025-06-18", "2025-11-25", "1999-01-01"])
def test_issue22_initialize_is_answered_before_the_sdk_loads_as_the_sdk_would(
    script: Script, sqlite_url: str, workspace: Path, version: str
) -> None:
    """issue 22 (cold start): the process answers `initialize` itself while the SDK loads; the
    answer is the SDK's own (a second `initialize`, which the SDK answers, is the same), and the
    SDK's answer to the first is not sent twice."""
    raw = Raw(params(workspace, script([[{"text": "x"}]]), sqlite_url))
    try:
        init = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
        first = raw.until_response(raw.request("initialize", init))
        raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        seen: list[dict[str, Any]] = []
        second = raw.until_response(raw.request("initialize", init), seen)
        assert first["result"] == second["result"]
        tools = raw.until_response(raw.request("tools/list", {}), seen)
        assert {t["name"] for t in tools["result"]["tools"]} >= {"devagent_start"}
        assert not any(m.get("id") == 1 for m in seen)  # no second answer to the first initialize
    finally:
        raw.proc.kill()
        raw.proc.wait()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_issue28_item8_a_dismissed_elicitation_waits_for_continue_and_decline_refuses(
    script: Script, sqlite_url: str, workspace: Path, mode: str
) -> None:
    """issue 28 item 8: a host that dismisses the question (a cancelled elicitation, as `claude
    -p` and `codex exec` do) gets input_required, as a host without elicitation does, and
    devagent_continue "yes" then runs the call. Declining the question still refuses it, and the
    model is told so in plain words. Both eras of MCP, as in the test above."""
    model = script([[write_call("c.txt", "C\n", "w1")], [{"text": "Told: {last_tool_results}"}]])
    actions = ["cancel", "decline"]

    async def elicit(context: Any, p: Any) -> ElicitResult:
        return ElicitResult(action=actions.pop(0))  # type: ignore[arg-type]

    p = params(workspace, model, sqlite_url)
    async with Client(p, elicitation_callback=elicit, mode=mode) as client:
        data = structured(await client.call_tool("devagent_start", {"prompt": "write c.txt"}))
        assert data["status"] == "input_required", data
        assert data["pending"][0]["description"].startswith("create c.txt"), data
        assert not (workspace / "c.txt").exists()
        sid = data["session_id"]
        data = structured(await client.call_tool("devagent_continue", {"session_id": sid, "answer": "yes"}))
        assert data["status"] == "completed", data
        assert (workspace / "c.txt").read_text() == "C\n"
        (workspace / "c.txt").unlink()
        data = structured(await client.call_tool("devagent_start", {"prompt": "write c.txt again"}))
    assert data["status"] == "completed", data
    assert "declined" in data["answer"] and "canceld" not in data["answer"], data
    assert not (workspace / "c.txt").exists()
    assert actions == []


async def test_issue28_item8_a_session_read_says_when_it_was_updated_and_a_long_workspace_is_a_tool_error(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """issue 28 item 8: devagent_sessions with a session id gives the time the session was last
    stored (as the list does), not 0; a 4,000-character workspace is a tool error that says what
    is wrong (not an unhandled OSError), and the server goes on."""
    import time

    model = script([[{"text": "fine"}]])
    before = time.time()
    async with Client(params(workspace, model, sqlite_url)) as client:
        res = await client.call_tool("devagent_start", {"prompt": "hi", "workspace": "w" * 4000})
        assert res.is_error and "not a usable path" in res.content[0].text, res
        assert len(res.content[0].text) < 400, res.content[0].text
        sid = structured(await client.call_tool("devagent_start", {"prompt": "hi"}))["session_id"]
        listed = structured(await client.call_tool("devagent_sessions", {}))["sessions"]
        read = structured(await client.call_tool("devagent_sessions", {"session_id": sid}))["sessions"]
    assert read[0]["updated"] == listed[0]["updated"] and before - 5 < read[0]["updated"] < time.time() + 5, (
        read,
        listed,
    )


SDK_GATE = '''
import os, sys, time

class _WaitForGate:
    """Holds the first import of the MCP SDK until the file $SDK_GATE exists."""

    def find_spec(self, name, path=None, target=None):
        if name == "mcp":
            sys.meta_path.remove(self)
            while not os.path.exists(os.environ["SDK_GATE"]):
                time.sleep(0.01)
        return None

if os.environ.get("SDK_GATE"):
    sys.meta_path.insert(0, _WaitForGate())
'''


@pytest.mark.parametrize("version", ["2024-11-05", "2025-06-18", "2025-11-25"])
def test_issue28_item8_tools_are_listed_right_after_initialize_as_the_sdk_lists_them(
    script: Script, sqlite_url: str, workspace: Path, tmp_path: Path, version: str
) -> None:
    """issue 28 item 8: a host that lists the tools right after `initialize` (Codex CLI does, and
    does not wait) gets them while the SDK still loads. The test holds the SDK's import (a
    `sitecustomize` that waits for a file) instead of racing it: `initialize` and `tools/list` are
    answered while it is held; once it is let go, the SDK's own `tools/list` answer is the same."""
    import queue
    import threading

    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SDK_GATE)
    gate = tmp_path / "sdk-may-load"
    p = params(workspace, script([[{"text": "x"}]]), sqlite_url)
    assert p.env is not None
    p.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    p.env["SDK_GATE"] = str(gate)
    raw = Raw(p)
    lines: queue.Queue[dict[str, Any]] = queue.Queue()

    def read() -> None:
        while True:
            try:
                lines.put(raw.read())
            except (AssertionError, ValueError):
                return

    threading.Thread(target=read, daemon=True).start()

    def response(rid: int) -> dict[str, Any]:
        while True:
            try:
                msg = lines.get(timeout=60)  # a bound on 2 shared cores, never a pace
            except queue.Empty:
                raise AssertionError(f"no answer to request {rid} while the SDK is held") from None
            if msg.get("id") == rid and "method" not in msg:
                return msg

    try:
        init = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
        response(raw.request("initialize", init))
        raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        early = response(raw.request("tools/list", {}))["result"]
        assert {t["name"] for t in early["tools"]} == {
            "devagent_start",
            "devagent_continue",
            "devagent_sessions",
        }
        gate.touch()
        response(raw.request("ping", {}))  # the SDK serves now
        assert response(raw.request("tools/list", {}))["result"] == early, (
            "the stored tools/list answer is not the SDK's: write it again with "
            "`python -m devagent.mcp.listing`"
        )
    finally:
        gate.touch()
        raw.proc.kill()
        raw.proc.wait()
