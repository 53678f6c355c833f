"""Issue 22: the MCP Inspector's command-line mode (npm `@modelcontextprotocol/inspector`, pinned
in tests/mcpdoor/js/package.json) as a real third-party host of devagent's MCP door. Each test runs
the Inspector's own binary as a subprocess and reads the one JSON object it prints (`--format
json`):

- over stdio, the Inspector starts `devagent mcp` itself, lists the tools and calls
  `devagent_start`; the Inspector's CLI offers no elicitation, so the write waits for permission
  and a second Inspector run (a new `devagent mcp` process on the same database) approves it with
  `devagent_continue`: the state is in the store, not in a process;
- over streamable HTTP, against a real `devagent serve --mcp` behind a bearer token: the tools, a
  task, a bad session id (devagent's tool error, exit status 5) and the same server going on with
  the session, and a wrong token refused with devagent's reason.

Only `--cli` is used: the Inspector's other modes open a browser or listen on ports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.a2a.procs import TOKEN, serving
from tests.conftest import Script
from tests.core_helpers import write_call
from tests.npm import ensure_installed

JS = Path(__file__).parent / "js"
INSPECTOR = JS / "node_modules" / ".bin" / "mcp-inspector"
RUN_WITHIN = 180  # seconds for one Inspector run: a safety net on 2 shared cores, never a pace

pytestmark = pytest.mark.npm


class Inspector:
    """Runs `mcp-inspector --cli --format json ...` with an environment of its own: a home folder
    in the test's temporary directory (the Inspector keeps a catalog and OAuth state under
    ~/.mcp-inspector), secrets in memory only, and none of the developer's MCP_*/DEVAGENT_*
    variables."""

    def __init__(self, home: Path) -> None:
        home.mkdir(parents=True, exist_ok=True)
        self.env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(home),
            "NO_COLOR": "1",
            "MCP_INSPECTOR_SECRET_STORE": "memory",
        }

    def run(self, *args: str) -> tuple[int, dict[str, Any], str]:
        """The exit status, the JSON object printed on stdout ({} when none) and stderr."""
        r = subprocess.run(
            [str(INSPECTOR), "--cli", "--format", "json", "--connect-timeout", "120000", *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=RUN_WITHIN,
        )
        out: dict[str, Any] = json.loads(r.stdout) if r.stdout.strip() else {}
        return r.returncode, out, r.stderr

    def ok(self, *args: str) -> dict[str, Any]:
        """A run that must succeed; its `result`."""
        code, out, err = self.run(*args)
        assert code == 0 and "result" in out, (code, out, err)
        result: dict[str, Any] = out["result"]
        return result


def devagent_mcp(workspace: Path, model: str, db: str) -> list[str]:
    """The server command line the Inspector starts (its target, after `--` so that no flag of
    devagent's is taken for one of the Inspector's), in the default `ask` mode."""
    return [
        sys.executable, "-m", "devagent", "mcp",
        "--work-dir", str(workspace), "--model", model, "--db", db,
    ]  # fmt: skip


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_issue22_inspector_cli_over_stdio_lists_starts_and_continues_from_a_new_process(
    script: Script, sqlite_url: str, workspace: Path, tmp_path: Path, era: str
) -> None:
    """Both of MCP's eras, as the Inspector negotiates them (`--protocol-era`): `legacy`
    (initialize, 2025-11-25) and `modern` (2026-07-28)."""
    ensure_installed(JS, INSPECTOR, "@modelcontextprotocol/inspector")
    model = script([[write_call("hello.txt", "hi\n", "w1")], [{"text": "I wrote hello.txt."}]])
    inspector = Inspector(tmp_path / "home")
    server = devagent_mcp(workspace, model, sqlite_url)
    era_flag = ["--protocol-era", era]

    # --strict: the Inspector's schema portability check exits 6 on an error-severity problem.
    listed = inspector.ok(*era_flag, "--strict", "--method", "tools/list", "--", *server)
    tools = {t["name"]: t for t in listed["tools"]}
    assert set(tools) == {"devagent_start", "devagent_continue", "devagent_sessions"}
    assert all(t["description"].strip() for t in tools.values())
    assert "coding task" in tools["devagent_start"]["description"]
    assert "prompt" in tools["devagent_start"]["inputSchema"]["required"]
    assert "session_id" in tools["devagent_continue"]["inputSchema"]["required"]
    assert "status" in tools["devagent_start"]["outputSchema"]["properties"]

    started = inspector.ok(
        *era_flag, "--method", "tools/call",
        "--tool-name", "devagent_start", "--tool-arg", "prompt=say hi in a file", "--", *server,
    )  # fmt: skip
    assert started["isError"] is False, started
    data = started["structuredContent"]
    assert data["status"] == "input_required", data
    assert data["pending"][0]["description"] == "create hello.txt (new file, 1 line)"
    sid = data["session_id"]
    text = started["content"][0]["text"]
    assert sid in text and "devagent_continue" in text
    assert not (workspace / "hello.txt").exists()

    # A second Inspector run starts a second `devagent mcp`: the pause is in the database.
    done = inspector.ok(
        *era_flag, "--method", "tools/call",
        "--tool-name", "devagent_continue", "--tool-arg", f"session_id={sid}", "answer=yes", "--", *server,
    )  # fmt: skip
    data = done["structuredContent"]
    assert data["status"] == "completed" and data["answer"] == "I wrote hello.txt.", data
    assert data["session_id"] == sid
    assert data["files_changed"] == [{"path": "hello.txt", "summary": "new file, 1 line"}]
    assert "I wrote hello.txt." in done["content"][0]["text"] and sid in done["content"][0]["text"]
    assert (workspace / "hello.txt").read_text() == "hi\n"


def test_issue22_inspector_cli_over_streamable_http_with_a_bearer_token(
    script: Script, sqlite_url: str, tmp_path: Path
) -> None:
    ensure_installed(JS, INSPECTOR, "@modelcontextprotocol/inspector")
    steps = [
        [write_call("h.txt", "over http\n", "w1")],
        [{"text": "done over http"}],
        [{"text": "You said: {last_user}"}],
    ]
    root = tmp_path / "root"
    root.mkdir()
    args = [
        "--db", sqlite_url, "--workspace-root", str(root), "--model", script(steps),
        "--approval", "auto-edit", "--token", f"alice={TOKEN}", "--mcp",
    ]  # fmt: skip
    inspector = Inspector(tmp_path / "home")
    with serving(args, tmp_path / "serve.log") as s:
        # The Inspector guesses the transport from a URL ending in /mcp but not /mcp/: named here.
        target = ["--transport", "http", "--server-url", s.url + "mcp/"]
        alice = [*target, "--header", f"Authorization: Bearer {TOKEN}"]

        listed = inspector.ok(*alice, "--method", "tools/list")
        assert {t["name"] for t in listed["tools"]} == {
            "devagent_start", "devagent_continue", "devagent_sessions",
        }  # fmt: skip

        started = inspector.ok(
            *alice, "--method", "tools/call", "--tool-name", "devagent_start", "--tool-arg", "prompt=write h"
        )
        data = started["structuredContent"]
        assert data["status"] == "completed" and data["answer"] == "done over http", data
        assert data["workspace"] == str(root.resolve())
        assert data["session_id"] in started["content"][0]["text"]
        assert (root / "h.txt").read_text() == "over http\n"

        # Bad input: devagent's tool error in the result, the Inspector's exit status 5.
        code, out, err = inspector.run(
            *alice, "--method", "tools/call",
            "--tool-name", "devagent_continue", "--tool-arg", "session_id=nope", "prompt=hi",
        )  # fmt: skip
        assert code == 5, (code, out, err)
        assert out["result"]["isError"] is True
        assert out["result"]["content"][0]["text"] == "no session 'nope': devagent_sessions lists them"
        assert "tool_is_error" in err

        # The same server goes on with the session.
        assert s.proc.poll() is None
        again = inspector.ok(
            *alice, "--method", "tools/call",
            "--tool-name", "devagent_continue", "--tool-arg", f"session_id={data['session_id']}",
            "prompt=and now?",
        )  # fmt: skip
        assert again["structuredContent"]["status"] == "completed", again
        assert again["structuredContent"]["answer"] == "You said: and now?"

        # A wrong token: refused with devagent's reason (--stored-auth-only: no OAuth attempt).
        code, out, err = inspector.run(
            *target, "--stored-auth-only", "--header", "Authorization: Bearer wrong", "--method", "tools/list"
        )
        assert code == 3 and "auth_required" in err and "invalid token" in err, (code, out, err)
        assert s.proc.poll() is None
