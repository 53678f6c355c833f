"""Fixtures and helpers the MCP door's tests share."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest


def devagent_mcp(workspace: Path, model: str, db: str, *approval: str) -> list[str]:
    """The command line an MCP host starts devagent's MCP server with."""
    return [
        sys.executable, "-m", "devagent", "mcp",
        "--work-dir", str(workspace), "--model", model, "--db", db, *approval,
    ]  # fmt: skip


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    """An MCP host's own folder (its home, or Codex's CODEX_HOME) and the project folder it runs in."""
    own, cwd = tmp_path / "host", tmp_path / "project"
    own.mkdir()
    cwd.mkdir()
    return own, cwd
