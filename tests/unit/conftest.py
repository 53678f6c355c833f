"""Fixtures of the tool tests: an empty workspace root, and a folder outside it holding a secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import folder_with


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return folder_with(tmp_path / "ws", {})


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    return folder_with(tmp_path / "outside", {"secret.txt": "TOP SECRET\n"})
