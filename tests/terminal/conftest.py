"""The fixture the pty tests start `devagent` with: each program in a pty of its own, read by a
screen, with a HOME of the test's own; every one closed at the end of the test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.terminal.screen import PtyScreen, devagent


@pytest.fixture
def screens(tmp_path: Path) -> Iterator[Callable[..., PtyScreen]]:
    """`screens(cwd, *args)`: `devagent *args` started in `cwd`, on a PtyScreen."""
    made: list[PtyScreen] = []
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "PYTHONUNBUFFERED": "1"}

    def start(cwd: Path, *args: str) -> PtyScreen:
        s = PtyScreen(devagent(*args), cwd, env)
        made.append(s)
        return s

    yield start
    for s in made:
        s.close()
