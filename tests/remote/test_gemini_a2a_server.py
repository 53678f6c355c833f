"""Gemini CLI's own A2A server (`@google/gemini-cli-a2a-server` 0.25.2 from npm, on a fake Gemini
API) as a remote subagent of a real `devagent serve`: its answer streams as `coderAgent`
`text-content` status messages and its turn ends `input-required` with no message, which is the
end of the answer, not a question."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.a2a.test_remote_agents import _delegate
from tests.a2a.test_subagents import _reply
from tests.remote.gemini_a2a import gemini_a2a_server


def gemini_settings(card_url: str) -> str:
    """The parent's settings: the `gemini` type is the server (on localhost, as its card says)."""
    return f"""
outbound_allow = ["127.0.0.1/32", "::1/128"]
[remote_agents.gemini]
card_url = "{card_url}"
"""


@pytest.mark.npm
async def test_issue38_item6_gemini_cli_a2a_server_answers_as_a_subagent(tmp_path: Path) -> None:
    """The parent's `task` call of type `gemini` gets the answer Gemini's model streamed (both
    pieces, in order) as its result, the parent's turn completes (no question is asked), and the
    prompt is what reached Gemini's model."""
    chunks = ["Gemini read the repo: ", "three modules.\nAll fine."]
    async with gemini_a2a_server(tmp_path, chunks) as (card, fake):
        frames = await _delegate(tmp_path, "gemini", gemini_settings(card))
        prompts = [
            p.get("text", "")
            for body in fake.requests
            for content in body.get("contents", [])
            if content.get("role") == "user"
            for p in content.get("parts", [])
        ]
    assert frames[-1]["status"]["state"] == "completed", frames
    assert _reply(frames) == "parent: Gemini read the repo: three modules.\nAll fine.", _reply(frames)
    assert any("write notes.txt with hello" in p for p in prompts), prompts
