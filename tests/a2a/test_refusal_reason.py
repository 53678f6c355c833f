"""A refusal's reason (issue 13 item 2, "no with feedback", for A2A extension clients): a TextPart
in the same message as a `cancel` ToolCallConfirmation reaches the model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.a2a.helpers import running_server, stream_message, v03_message
from tests.conftest import Script
from tests.core_helpers import write_call

STEPS = [
    {"items": [write_call("r.txt", "R", "r1")]},
    {"items": [{"text": "model saw: {last_tool_results}"}]},
]


def _texts(frames: list[dict[str, Any]]) -> str:
    out = []
    for f in frames:
        msg = (f.get("result") or {}).get("status", {}).get("message") or {}
        out += [p.get("text", "") for p in msg.get("parts") or [] if p.get("kind") == "text"]
    return "".join(out)


async def test_text_beside_a_refusal_is_the_reason(script: Script, sqlite_url: str, workspace: Path) -> None:
    async with (
        running_server(script(STEPS), sqlite_url, workspace) as srv,
        httpx.AsyncClient(timeout=60) as c,
    ):
        first = await stream_message(
            c, srv.url, v03_message("write", settings={"workspace_path": str(workspace)})
        )
        task = first[0]["result"]
        assert first[-1]["result"]["status"]["state"] == "input-required"
        answer = v03_message(
            "use q.txt instead",
            data=[{"tool_call_id": "r1", "selected_option_id": "cancel"}],
            task_id=task["id"],
            context_id=task["contextId"],
        )
        frames = await stream_message(c, srv.url, answer)
        assert frames[-1]["result"]["status"]["state"] == "completed"
        assert "the user said: use q.txt instead" in _texts(frames)
        assert not (workspace / "r.txt").exists()
