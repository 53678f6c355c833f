"""Custom slash commands over ACP: in the session's `available_commands_update`, and a prompt
`/NAME ARGS` reaches the model as the command's expanded text (a real `devagent acp` process)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("acp", reason="agent-client-protocol is installed by scripts/test (pyproject.toml)")

from acp import text_block

from tests.acp.conftest import acp_argv
from tests.acp.test_python_sdk import TIMEOUT, EditorClient, agent, new_session_id, start
from tests.conftest import ScriptFile


async def test_issue32_item3_available_commands_and_the_expanded_prompt(
    acp_env: dict[str, str], work_dir: Path, script: ScriptFile, tmp_path: Path
) -> None:
    acp_env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    user = tmp_path / "config" / "devagent" / "commands"
    user.mkdir(parents=True)
    (user / "review.md").write_text(
        "---\ndescription: Review a file\nargument-hint: <file> [focus]\n---\nReview $1 for $2.\n"
    )
    (work_dir / ".devagent" / "commands" / "frontend").mkdir(parents=True)
    (work_dir / ".devagent" / "commands" / "frontend" / "component.md").write_text("Make a component $1.\n")
    path = script([[{"text": "MODEL GOT <<{last_user}>>"}]])
    client = EditorClient()
    async with agent(client, acp_argv(path), acp_env, work_dir, tmp_path / "err.log") as (conn, _):
        await start(conn)
        sid = await new_session_id(conn, work_dir)
        await client.until(lambda: "available_commands_update" in client.kinds())
        update = next(u for u in client.updates if u["sessionUpdate"] == "available_commands_update")
        listed = {c["name"]: c for c in update["availableCommands"]}
        assert listed["review"] == {
            "name": "review",
            "description": "Review a file",
            "input": {"hint": "<file> [focus]"},
        }
        assert listed["frontend:component"]["description"] == "Make a component $1."
        assert "help" in listed
        prompt = [text_block('/review "src/my app.py" speed')]
        resp = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt), TIMEOUT)
        assert resp.stop_reason == "end_turn"
        assert client.text() == "MODEL GOT <<Review src/my app.py for speed.>>"
