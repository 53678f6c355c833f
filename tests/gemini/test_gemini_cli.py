"""Gemini CLI (`@google/gemini-cli` from npm, pinned in tests/gemini/js/package.json) as a real
A2A client of devagent (issue 11 item 5): devagent is a remote subagent in a user-level agent file
(its card URL and bearer token); a fake Gemini API (GOOGLE_GEMINI_BASE_URL) plays a model that
delegates a write to it and, asked permission in words, answers "yes" in words. The write must
land."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.a2a.helpers import TOKEN, running_server
from tests.fakes.gemini_delegate import DelegatingModel
from tests.fakes.gemini_server import FakeGemini
from tests.npm import ensure_installed

JS = Path(__file__).parent / "js"
GEMINI = JS / "node_modules" / ".bin" / "gemini"

pytestmark = pytest.mark.npm


def _gemini_home(home: Path, card_url: str) -> None:
    """Gemini CLI's user settings (API-key auth, no folder-trust prompt, no telemetry or update
    check) and the remote agent file for devagent, token from the environment."""
    gemini = home / ".gemini"
    (gemini / "agents").mkdir(parents=True)
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        "privacy": {"usageStatisticsEnabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
    }
    (gemini / "settings.json").write_text(json.dumps(settings))
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


WRITE = [
    {
        "items": [
            {
                "tool_call": {
                    "name": "write_file",
                    "args": {"path": "greeting.txt", "content": "hello\n"},
                    "id": "g1",
                }
            }
        ]
    },
    {"items": [{"text": "I wrote greeting.txt."}]},
]


async def test_gemini_cli_delegates_a_write_answered_yes(
    script: Callable[[list[Any]], str], sqlite_url: str, workspace: Path, tmp_path: Path
) -> None:
    """Issue 11 item 5: Gemini CLI delegates to devagent; devagent asks permission in words (the
    plain dialect); Gemini's model answers "yes" in words on the same task; the file is written
    and the reply reaches Gemini CLI's model."""
    ensure_installed(JS, GEMINI, "@google/gemini-cli")
    model = DelegatingModel("devagent", "Write hello to greeting.txt")
    home, cwd = tmp_path / "home", tmp_path / "project"
    cwd.mkdir()
    async with running_server(script(WRITE), sqlite_url, workspace) as srv, FakeGemini(model) as gemini_url:
        _gemini_home(home, srv.url + ".well-known/agent-card.json")
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(home),
            "GEMINI_API_KEY": "fake-key",
            "GOOGLE_GEMINI_BASE_URL": gemini_url,
            "DEVAGENT_TOKEN": TOKEN,
            "NO_COLOR": "1",
            "CI": "1",
        }
        proc = await asyncio.create_subprocess_exec(
            str(GEMINI),
            "-p",
            "Please create greeting.txt saying hello",
            "--yolo",  # Gemini CLI's own confirmation of the delegation; devagent still asks
            "-m",
            "gemini-2.5-flash",
            cwd=cwd,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 240)
        assert proc.returncode == 0, err.decode()[-2000:]
    assert (workspace.parent / "greeting.txt").read_text() == "hello\n"
    assert model.delegations == ["Write hello to greeting.txt", "yes"]
    assert "I want to create greeting.txt" in model.results[0] and "Reply yes" in model.results[0]
    assert model.results[-1].count("I wrote greeting.txt.") == 1, model.results[-1]  # once (issue 21)
    assert "The agent is done" in out.decode()
