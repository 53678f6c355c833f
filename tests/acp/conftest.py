"""Driving a real `devagent acp` subprocess with the official ACP clients (issue 15 item 3)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def acp_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVAGENT_")}
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        env.pop(var, None)
    env["DEVAGENT_DATA_DIR"] = str(tmp_path / "data")
    env["DEVAGENT_DB"] = f"sqlite+aiosqlite:///{tmp_path / 'acp.db'}"
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture
def work_dir(tmp_path: Path) -> Path:
    wd = tmp_path / "work"
    wd.mkdir()
    (wd / "README.md").write_text("# Demo on disk\n")
    return wd


@pytest.fixture
def script(tmp_path: Path) -> Callable[[list[Any]], Path]:
    counter = iter(range(1000))

    def write(steps: list[Any]) -> Path:
        path = tmp_path / f"script{next(counter)}.json"
        path.write_text(json.dumps({"steps": steps}))
        return path

    return write


def acp_argv(script: Path, *flags: str) -> list[str]:
    return [sys.executable, "-m", "devagent", "acp", "--model", f"scripted:{script}", *flags]
