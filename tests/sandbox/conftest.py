"""The container backend's tests run real engines on a small image built here
(tests/sandbox/image.py): Podman (with runc), and Docker through a private `dockerd` of the
session's own (tests/sandbox/docker_daemon.py), where each can run; `make_provider` tests run on
both (`sandbox_engine`'s parameter). Each test gets a provider whose containers and volumes carry
a label of the test's own; the fixture removes them all and checks with the engine that none is
left."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from devagent.agent.sandbox.container import ContainerProvider
from devagent.agent.sandbox.podman import Engine, Template
from tests.sandbox import docker_daemon as dockerd
from tests.sandbox import image

TEST_LABEL = "devagent.test"
# The test process that made a container or volume: what a run killed midway (a CI timeout, a
# SIGKILL) leaves behind is found by it and removed by the next run, before its sessions of the
# same names (`open("files")`) would meet a volume holding the dead run's files.
OWNER_LABEL = "devagent.test.owner"
_swept: set[str] = set()  # the engines this process has swept


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


@pytest.fixture(scope="session")
def docker_daemon() -> Iterator[dockerd.Daemon]:
    """A private dockerd for the session with the tests' image imported; skips where none can
    start. Stopped, and its folders, containers and volumes removed, whatever the tests did."""
    problem = dockerd.problem()
    if problem is not None:
        pytest.skip(problem)
    try:
        daemon = dockerd.start()
    except dockerd.DaemonFailed as e:
        pytest.skip(str(e))
    try:
        tag = dockerd.import_image(daemon)
        flags = ("--runtime", "runc", "--network", "none", "--ulimit", "nofile=1024:1024")
        probe = daemon.run("run", "--rm", *flags, tag, "true")
        if probe.returncode != 0:
            pytest.skip(f"docker cannot start containers on this machine: {probe.stderr.strip()[-300:]}")
        yield daemon
    finally:
        left = dockerd.stop(daemon)
        assert left == [], left


@dataclass
class EngineUnderTest:
    """An engine the tests drive: its name, the backend's `Engine`, the image's tag there, and
    the environment its command line needs (Docker's DOCKER_HOST)."""

    name: str
    engine: Engine
    image: str
    env: dict[str, str] = field(default_factory=dict)

    def lines(self, *args: str) -> list[str]:
        done = subprocess.run(
            [self.engine.program, *args], capture_output=True, text=True, env={**os.environ, **self.env}
        )
        return [line.strip() for line in done.stdout.splitlines() if line.strip()]


@pytest.fixture(params=["podman", "docker"])
def sandbox_engine(request: pytest.FixtureRequest) -> EngineUnderTest:
    if request.param == "podman":
        return EngineUnderTest("podman", Engine("podman"), request.getfixturevalue("sandbox_image"))
    daemon: dockerd.Daemon = request.getfixturevalue("docker_daemon")
    return EngineUnderTest("docker", daemon.engine(), image.tag(), {"DOCKER_HOST": daemon.host})


def template(tag: str, **limits: object) -> Template:
    fields: dict[str, object] = {"memory_mb": 256, "pids": 64, **limits}
    return Template("default", tag, **fields)  # type: ignore[arg-type]


def _alive(pid: str) -> bool:
    """Whether a process of this id runs on this machine (an id that is not one: as if it did,
    so nothing of it is touched)."""
    try:
        os.kill(int(pid), 0)
    except (ValueError, OverflowError):
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_dead_owners(engine: EngineUnderTest) -> list[str]:
    """Removes the containers, then the volumes, that a test process no longer running made;
    returns their names. Podman only: Docker runs in a daemon of the run's own, whose storage goes
    with it."""
    if engine.engine.program != "podman" or engine.engine.program in _swept:
        return []
    _swept.add(engine.engine.program)
    label = f"label={OWNER_LABEL}"
    owned = f'{{{{index .Labels "{OWNER_LABEL}"}}}}'
    containers = engine.lines("ps", "-a", "--filter", label, "--format", "{{.Names}} " + owned)
    dead = [c.split()[0] for c in containers if len(c.split()) == 2 and not _alive(c.split()[1])]
    if dead:
        engine.lines("rm", "--force", "--time", "0", *dead)
    volumes = engine.lines("volume", "ls", "--filter", label, "--format", "{{.Name}} " + owned)
    gone = [v.split()[0] for v in volumes if len(v.split()) == 2 and not _alive(v.split()[1])]
    if gone:
        engine.lines("volume", "rm", "--force", *gone)
    return dead + gone


def leftovers(engine: EngineUnderTest, test_id: str) -> list[str]:
    """What the engine still holds with the test's label: containers, then volumes."""
    label = f"label={TEST_LABEL}={test_id}"
    containers = engine.lines("ps", "-a", "--format", "{{.Names}}", "--filter", label)
    return containers + engine.lines("volume", "ls", "--quiet", "--filter", label)


@pytest.fixture
async def make_provider(sandbox_engine: EngineUnderTest, tmp_path: Path) -> AsyncIterator[object]:
    """A factory of providers for this test (`make_provider(warm=1, pids=32)`); all of them are
    closed and swept afterwards, and the engine is asked that nothing of the test's is left."""
    test_id = uuid.uuid4().hex[:12]
    made: list[ContainerProvider] = []
    await asyncio.to_thread(sweep_dead_owners, sandbox_engine)

    def make(
        warm: int = 0, idle_seconds: float = 300.0, labels: dict[str, str] | None = None, **limits: object
    ) -> ContainerProvider:
        provider = ContainerProvider(
            engine=sandbox_engine.engine,
            templates={"default": template(sandbox_engine.image, **limits)},
            warm=warm,
            idle_seconds=idle_seconds,
            labels={TEST_LABEL: test_id, OWNER_LABEL: str(os.getpid()), **(labels or {})},
        )
        made.append(provider)
        return provider

    yield make
    for provider in made:
        await provider.close(drain=True)
        await provider.sweep()
    left = await asyncio.to_thread(leftovers, sandbox_engine, test_id)
    assert left == [], f"containers or volumes left behind: {left}"
