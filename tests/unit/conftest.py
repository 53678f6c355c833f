"""Fixtures of the tool tests: an empty workspace root, a folder outside it holding a secret, and
grep's engine (each test that takes it runs on ripgrep and on the pure Python search)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from devagent.agent.tools import search as search_mod
from tests.conftest import folder_with


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return folder_with(tmp_path / "ws", {})


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    return folder_with(tmp_path / "outside", {"secret.txt": "TOP SECRET\n"})


@pytest.fixture(params=["python", "ripgrep"])
def grep_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "python":
        monkeypatch.setattr(search_mod, "USE_RIPGREP", False)
    elif shutil.which("rg") is None:
        pytest.skip("ripgrep is not installed")
    return str(request.param)
