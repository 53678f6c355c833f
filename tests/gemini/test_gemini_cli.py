"""Gemini CLI (`@google/gemini-cli` from npm, pinned in tests/gemini/js/package.json) as a real
A2A client of devagent (issue 11 item 5): devagent is a remote subagent in a user-level agent file
(its card URL and bearer token); a fake Gemini API (GOOGLE_GEMINI_BASE_URL) plays a model that
delegates a write to it and, asked permission in words, answers "yes" in words. The write must
land."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.a2a.helpers import TOKEN, running_server
from tests.conftest import Script
from tests.core_helpers import call_then_text, write_call
from tests.fakes.gemini_delegate import DelegatingModel
from tests.fakes.gemini_server import FakeGemini
from tests.gemini.helpers import SETTINGS, need_gemini_cli, run_gemini

pytestmark = pytest.mark.npm


def _gemini_home(home: Path, card_url: str) -> None:
    """Gemini CLI's user settings and the remote agent file for devagent, token from the
    environment."""
    gemini = home / ".gemini"
    (gemini / "agents").mkdir(parents=True)
    (gemini / "settings.json").write_text(json.dumps(SETTINGS))
    (gemini / "agents" / "devagent.md").write_text(
        "---\n"
        "kind: remote\n"
        "name: devagent\n"
        f"agent_card_url: {card_url}\n"
        "auth:\n"
        "  type: http\n"
        "  scheme: Bearer\n"
        "  token: $DEVAGENT_TOKEN\n"
        "---\n"
    )


WRITE = call_then_text(write_call("greeting.txt", "hello\n", "g1"), "I wrote greeting.txt.")


async def test_gemini_cli_delegates_a_write_answered_yes(
    script: Script, sqlite_url: str, workspace: Path, tmp_path: Path
) -> None:
    """Issue 11 item 5: Gemini CLI delegates to devagent; devagent asks permission in words (the
    plain dialect); Gemini's model answers "yes" in words on the same task; the file is written
    and the reply reaches Gemini CLI's model."""
    need_gemini_cli()
    model = DelegatingModel("devagent", "Write hello to greeting.txt")
    home, cwd = tmp_path / "home", tmp_path / "project"
    cwd.mkdir()
    async with running_server(script(WRITE), sqlite_url, workspace) as srv, FakeGemini(model) as gemini_url:
        _gemini_home(home, srv.url + ".well-known/agent-card.json")
        prompt = "Please create greeting.txt saying hello"
        out = await run_gemini(prompt, cwd, home, gemini_url, DEVAGENT_TOKEN=TOKEN)
    assert (workspace.parent / "greeting.txt").read_text() == "hello\n"
    assert model.delegations == ["Write hello to greeting.txt", "yes"]
    assert "I want to create greeting.txt" in model.results[0] and "Reply yes" in model.results[0]
    assert model.results[-1].count("I wrote greeting.txt.") == 1, model.results[-1]  # once (issue 21)
    assert "The agent is done" in out
