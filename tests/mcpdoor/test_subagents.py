"""A subagent through the MCP door (a real `devagent mcp`, the official client): its write is
asked of the host's user as an elicitation naming the subagent, and accepted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp import Client
from mcp_types import ElicitResult

from tests.core_helpers import notes_by_a_subagent
from tests.mcpdoor.test_stdio import params, structured


async def test_issue31_item3_mcp_subagent_write_asked_by_elicitation(
    sqlite_url: str, workspace: Path, tmp_path: Path
) -> None:
    spec = notes_by_a_subagent(tmp_path / "sub.json")
    asked: list[str] = []

    async def elicit(context: Any, p: Any) -> ElicitResult:
        asked.append(p.message)
        return ElicitResult(action="accept", content={"decision": "allow_once"})

    async with Client(params(workspace, spec, sqlite_url), elicitation_callback=elicit) as client:
        data = structured(await client.call_tool("devagent_start", {"prompt": "make notes"}))
    assert data["status"] == "completed", data
    assert data["answer"] == "parent: I wrote notes.txt."
    assert (workspace / "notes.txt").read_text() == "hello\n"
    [message] = asked
    assert "create notes.txt (new file, 1 line) (for the subagent “write the notes”)" in message
