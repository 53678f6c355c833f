"""Issue 15 item 3 (a) and "done when": an ACP client from npm (@agentclientprotocol/sdk, the
official TypeScript library) drives a real `devagent acp` subprocess through a permission, a
refusal, a cancel during a running command (fs methods delegated to the client), then a reload of
the session in a new process."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.acp.conftest import acp_argv
from tests.conftest import ScriptFile
from tests.core_helpers import shell_call, write_call
from tests.npm import ensure_installed

pytestmark = pytest.mark.npm

JS = Path(__file__).parent / "js"


def _drive(scenario: str, config: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run(
        ["node", str(JS / "drive.mjs"), scenario, json.dumps(config)],
        capture_output=True,
        text=True,
        timeout=300,  # a hang guard only
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert lines, done.stderr
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def test_issue15_typescript_client_permission_refusal_cancel_and_reload(
    acp_env: dict[str, str], work_dir: Path, script: ScriptFile
) -> None:
    ensure_installed(JS, JS / "node_modules" / "@agentclientprotocol" / "sdk", "@agentclientprotocol/sdk")
    slow = "echo started; while [ ! -f release ]; do sleep 0.05; done; echo released"
    path = script(
        [
            [
                {"tool_call": {"name": "read_file", "args": {"path": "README.md"}, "id": "r"}},
                write_call("a.txt", "A\n", "a"),
            ],
            [{"text": "Did: {last_tool_results}"}],
            [write_call("b.txt", "B\n", "b")],
            [{"text": "Not written."}],
            [shell_call(slow, "sh")],
            [{"text": "unused: the cancel closes the step with a note in the transcript"}],
            [{"text": "After the reload."}],
        ]
    )
    readme = str(work_dir / "README.md")
    config = {
        "argv": acp_argv(path),
        "cwd": str(work_dir),
        "env": acp_env,
        "answers": ["proceed_once", "cancel", "proceed_once"],
        "buffers": {readme: "# Demo in the editor\n"},
    }
    out = _drive("main", config)
    assert out["init"]["protocolVersion"] == 1
    assert out["init"]["agentCapabilities"]["loadSession"] is True
    assert out["stopReasons"] == ["end_turn", "end_turn", "cancelled"]
    assert [p["toolCall"]["toolCallId"] for p in out["permissions"]] == ["a", "b", "sh"]
    assert {o["kind"] for o in out["permissions"][0]["options"]} == {
        "allow_once",
        "allow_always",
        "reject_once",
        "reject_always",
    }
    # fs methods went to the client: the buffer was read, the write landed through the editor.
    assert readme in out["reads"]
    assert str(work_dir / "a.txt") not in out["reads"]  # a new file: the editor is not asked (issue 21)
    assert [w[0] for w in out["writes"]] == [str(work_dir / "a.txt")]
    assert (work_dir / "a.txt").read_text() == "A\n"
    assert not (work_dir / "b.txt").exists()
    text = "".join(
        u["content"]["text"] for u in out["updates"] if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert "# Demo in the editor" in text
    status = {u["toolCallId"]: u["status"] for u in out["updates"] if "toolCallId" in u}
    assert status == {"r": "completed", "a": "completed", "b": "failed", "sh": "failed"}
    kinds = {u["sessionUpdate"] for u in out["updates"]}
    assert {"available_commands_update", "tool_call", "tool_call_update", "agent_message_chunk"} <= kinds
    (work_dir / "release").write_text("")

    # A new process, session/load: the history comes back, and the session goes on.
    loaded = _drive("load", {**config, "answers": [], "sessionId": out["session"]["sessionId"]})
    assert loaded["stopReasons"] == ["end_turn"]
    replayed = loaded["updates"][: loaded["replayed"]]
    users = [u["content"]["text"] for u in replayed if u["sessionUpdate"] == "user_message_chunk"]
    assert users == ["read the readme and write a.txt", "write b.txt", "run the slow command"]
    assert {u["toolCallId"] for u in replayed if u["sessionUpdate"] == "tool_call"} == {"r", "a", "b", "sh"}
    after = loaded["updates"][loaded["replayed"] :]
    assert "After the reload." in "".join(
        u["content"]["text"] for u in after if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert os.path.exists(work_dir / "a.txt")


async def test_issue38_item8_typescript_client_lists_sessions_by_cwd_through_the_cursor(
    acp_env: dict[str, str], script: ScriptFile, tmp_path: Path, core_factory: Callable[..., Any]
) -> None:
    ensure_installed(JS, JS / "node_modules" / "@agentclientprotocol" / "sdk", "@agentclientprotocol/sdk")
    from devagent.agent.state import SessionState

    a = (tmp_path / "proj-a").resolve()
    b = (tmp_path / "proj-b").resolve()
    a.mkdir()
    b.mkdir()
    core = await core_factory(db=acp_env["DEVAGENT_DB"])
    # Stored one after the other, the last the most recent; ids that sort the same way on a tie.
    for sid, folder in (("id3", a), ("id2", b), ("id1", a)):
        state = SessionState(workspace_roots=[str(folder)], title=f"task {sid}")
        await core.store.create_session(sid, state.to_json())
    config = {
        "argv": acp_argv(script([[{"text": "unused"}]])),
        "cwd": str(tmp_path),
        "env": {**acp_env, "DEVAGENT_ACP_PAGE_SIZE": "1"},
        "listCwds": [None, str(a), str(b)],
    }
    out = await asyncio.to_thread(_drive, "list", config)
    assert out["init"]["agentCapabilities"]["sessionCapabilities"]["list"] == {}
    ids = [[[s["sessionId"] for s in page] for page in pages] for pages in out["listings"]]
    assert ids == [[["id1"], ["id2"], ["id3"]], [["id1"], ["id3"]], [["id2"]]]
    first = out["listings"][0][0][0]
    assert first["cwd"] == str(a) and first["title"] == "task id1" and first["updatedAt"].endswith("Z")
