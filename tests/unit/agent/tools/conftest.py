"""Fixtures of the background-process tests: each test that takes `sandboxes` runs with the core's
commands unsandboxed, then in bubblewrap where it runs here; `sandboxing` says which; `yolo_core`
makes a core that asks nothing, with those sandboxes. A test module may override `sandboxes`
(with the network allowed, say): the other two follow it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.sandbox.base import SandboxProvider
from tests.sandboxes import bwrap_or_skip, provider


@pytest.fixture(params=["unsandboxed", "sandboxed"])
def sandboxes(request: pytest.FixtureRequest) -> SandboxProvider | None:
    if request.param == "sandboxed":
        return provider(bwrap_or_skip())
    return None


@pytest.fixture
def sandboxing(sandboxes: SandboxProvider | None) -> bool:
    return sandboxes is not None


@pytest.fixture
def yolo_core(core_factory: Any, tmp_path: Path, request: pytest.FixtureRequest) -> Callable[..., Any]:
    sandboxes = request.getfixturevalue("sandboxes") if "sandboxes" in request.fixturenames else None

    async def make(spec: str, **kw: Any) -> Any:
        return await core_factory(
            spec, approval_mode="yolo", data_dir=tmp_path / "data", sandboxes=sandboxes, **kw
        )

    return make
