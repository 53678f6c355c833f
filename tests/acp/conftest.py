"""Driving a real `devagent acp` subprocess with the official ACP clients (issue 15 item 3)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import ScriptFile, child_env, folder_with


@pytest.fixture
def work_dir(tmp_path: Path) -> Path:
    """The project folder `devagent acp` works in, as it is on disk (editor buffers may differ)."""
    return folder_with(tmp_path / "work", {"README.md": "# Demo on disk\n"})


@pytest.fixture
def script(script_file: ScriptFile) -> ScriptFile:
    """The ACP tests' `script`: the scripted model's file (`acp_argv` makes the spec of it)."""
    return script_file


@pytest.fixture
def acp_env(tmp_path: Path) -> dict[str, str]:
    """The environment of the `devagent acp` processes the tests start."""
    return child_env(tmp_path, "acp.db")


def acp_argv(script: Path, *flags: str) -> list[str]:
    return [sys.executable, "-m", "devagent", "acp", "--model", f"scripted:{script}", *flags]
