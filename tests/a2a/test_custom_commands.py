"""Custom slash commands over A2A: listed by `commands/get` (the user's and the caller's
workspace's) and run by `command/execute` as a prompt the model receives expanded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.a2a.helpers import auth, call, rpc, running_server
from tests.a2a.test_commands import _wait_final
from tests.conftest import Script


def _agent_text(task: dict[str, Any]) -> str:
    final = task["status"].get("message") or {"parts": [], "role": "agent"}
    return "".join(
        p.get("text", "") for m in [*task["history"], final] if m.get("role") == "agent" for p in m["parts"]
    )


ECHO = [{"items": [{"text": "MODEL GOT <<{last_user}>>"}]}]


async def test_issue32_item3_listed_by_commands_get_and_run_by_command_execute(
    script: Script, sqlite_url: str, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    user = config / "devagent" / "commands"
    user.mkdir(parents=True)
    (user / "review.md").write_text(
        "---\ndescription: Review a file\nargument-hint: <file> [focus]\n---\nReview $1 for $2.\n"
    )
    async with running_server(script(ECHO), sqlite_url, workspace) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            roots = (await call(c, srv.url, rpc("workspaces/get", {}), auth()))["result"]["workspaces"]
            repo = Path(roots[0]) / ".devagent" / "commands" / "frontend"
            repo.mkdir(parents=True)
            (repo / "component.md").write_text(
                "---\ndescription: A component\n---\nMake a component named $1.\n"
            )
            res = (await call(c, srv.url, rpc("commands/get", {}), auth()))["result"]
            by_name = {cmd["name"]: cmd for cmd in res["commands"]}
            assert {"help", "review", "frontend:component"} <= by_name.keys()
            assert by_name["review"] == {
                "name": "review",
                "description": "Review a file",
                "arguments": [
                    {"name": "<file> [focus]", "description": "The command's arguments", "is_required": False}
                ],
                "sub_commands": [],
            }
            params = {"command_path": ["review"], "args": '"src/my app.py" speed'}
            started = (await call(c, srv.url, rpc("command/execute", params), auth()))["result"]
            assert started["status"] == "STARTED", started
            task = await _wait_final(c, srv.url, started["execution_id"])
            assert task["status"]["state"] == "completed"
            said = _agent_text(task)
            assert "MODEL GOT <<Review src/my app.py for speed.>>" in said
            params = {"command_path": ["frontend:component"], "args": "Button"}
            started = (await call(c, srv.url, rpc("command/execute", params), auth()))["result"]
            task = await _wait_final(c, srv.url, started["execution_id"])
            said = _agent_text(task)
            assert "MODEL GOT <<Make a component named Button.>>" in said
