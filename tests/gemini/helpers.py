"""Running Gemini CLI (`@google/gemini-cli` from npm, pinned in tests/gemini/js/package.json)
headless against a fake Gemini API, with a home folder of the test's own."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.npm import ensure_installed, run_headless

JS = Path(__file__).parent / "js"
GEMINI = JS / "node_modules" / ".bin" / "gemini"
# Gemini CLI's user settings: API-key auth, no folder-trust prompt, no telemetry or update check.
SETTINGS: dict[str, Any] = {
    "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
    "privacy": {"usageStatisticsEnabled": False},
    "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
}


def need_gemini_cli() -> None:
    """Skips the calling test unless Gemini CLI is installed in tests/gemini/js (installing it first)."""
    ensure_installed(JS, GEMINI, "@google/gemini-cli")


async def run_gemini(prompt: str, cwd: Path, home: Path, gemini_url: str, **env: str) -> str:
    """`gemini -p PROMPT --yolo` (Gemini CLI's own confirmations off; devagent still asks its own)
    in `cwd`, its model at the fake Gemini API `gemini_url`, its settings in `home`, `env` added;
    run to its end (four minutes at most). What it printed."""
    environ = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "GEMINI_API_KEY": "fake-key",
        "GOOGLE_GEMINI_BASE_URL": gemini_url,
        **env,
        "NO_COLOR": "1",
        "CI": "1",
    }
    command = [str(GEMINI), "-p", prompt, "--yolo", "-m", "gemini-2.5-flash"]
    code, out, err = await run_headless(command, cwd, environ, 240)
    assert code == 0, err[-2000:]
    return out
