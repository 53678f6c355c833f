"""The container backend's tests run real Podman (with runc) on a small image built here
(tests/sandbox/image.py). Each test gets a provider whose containers and volumes carry a label of
the test's own; the fixture removes them all and checks with the engine that none is left."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from devagent.agent.sandbox.container import ContainerProvider
from devagent.agent.sandbox.podman import Engine, Template
from tests.sandbox import image

TEST_LABEL = "devagent.test"


def _podman_problem() -> str | None:
    """None when podman can run a container here, else why not (the reason the tests skip)."""
    if shutil.which("podman") is None:
        return "podman is not installed (apt-get install podman runc; scripts/test installs them)"
    info = subprocess.run(["podman", "info"], capture_output=True, text=True)
    if info.returncode != 0:
        return f"podman cannot run here: {info.stderr.strip().splitlines()[-1:]}"
    return None


@pytest.fixture(scope="session")
def sandbox_image() -> str:
    problem = _podman_problem()
    if problem is not None:
        pytest.skip(problem)
    tag = image.ensure("podman")
    probe = subprocess.run(
        [
            "podman",
            "--runtime",
            "runc",
            "run",
            "--rm",
            "--ulimit",
            "nofile=1024:1024",
            "--ulimit",
            "nproc=1024:1024",
            "--network",
            "none",
            tag,
            "true",
        ],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        pytest.skip(f"podman cannot start containers on this machine: {probe.stderr.strip()[-300:]}")
    return tag


def template(tag: str, **limits: object) -> Template:
    fields: dict[str, object] = {"memory_mb": 256, "pids": 64, **limits}
    return Template("default", tag, **fields)  # type: ignore[arg-type]


def leftovers(test_id: str) -> list[str]:
    """What the engine still holds with the test's label: containers, then volumes."""
    label = f"label={TEST_LABEL}={test_id}"
    containers = subprocess.run(
        ["podman", "ps", "-a", "--format", "{{.Names}}", "--filter", label], capture_output=True, text=True
    ).stdout.split()
    volumes = subprocess.run(
        ["podman", "volume", "ls", "--quiet", "--filter", label], capture_output=True, text=True
    ).stdout.split()
    return containers + volumes


@pytest.fixture
async def make_provider(sandbox_image: str, tmp_path: Path) -> AsyncIterator[object]:
    """A factory of providers for this test (`make_provider(warm=1, pids=32)`); all of them are
    closed and swept afterwards, and the engine is asked that nothing of the test's is left."""
    test_id = uuid.uuid4().hex[:12]
    made: list[ContainerProvider] = []

    def make(
        warm: int = 0, idle_seconds: float = 300.0, labels: dict[str, str] | None = None, **limits: object
    ) -> ContainerProvider:
        provider = ContainerProvider(
            engine=Engine("podman"),
            templates={"default": template(sandbox_image, **limits)},
            warm=warm,
            idle_seconds=idle_seconds,
            labels={TEST_LABEL: test_id, **(labels or {})},
        )
        made.append(provider)
        return provider

    yield make
    for provider in made:
        await provider.close(drain=True)
        await provider.sweep()
    left = await asyncio.to_thread(leftovers, test_id)
    assert left == [], f"containers or volumes left behind: {left}"
