"""The container tests' own hygiene: what a killed test run left on Podman (its sessions'
containers and volumes, under fixed names such as `devagent-ws-files`) is removed by the next
run before its sessions of the same names start, and what a running test process holds is not."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from devagent.agent.sandbox.podman import Engine
from tests.sandbox import conftest
from tests.sandbox.conftest import OWNER_LABEL, TEST_LABEL, EngineUnderTest


def _dead_pid() -> str:
    """The id of a process that ran here and has ended (and was reaped)."""
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    return done.stdout.strip()


def test_a_killed_runs_containers_and_volumes_are_swept_and_a_live_ones_kept(
    sandbox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = EngineUnderTest("podman", Engine("podman"), sandbox_image)
    tag = uuid.uuid4().hex[:8]
    dead, alive = _dead_pid(), str(os.getpid())
    made = {
        "dead": (f"devagent-test-stale-{tag}", f"devagent-test-stale-vol-{tag}", dead),
        "alive": (f"devagent-test-live-{tag}", f"devagent-test-live-vol-{tag}", alive),
    }
    try:
        for container, volume, owner in made.values():
            labels = ["--label", f"{TEST_LABEL}={tag}", "--label", f"{OWNER_LABEL}={owner}"]
            subprocess.run(["podman", "volume", "create", *labels, volume], check=True, capture_output=True)
            create = ["podman", "create", "--runtime", "runc", "--name", container, *labels]
            subprocess.run([*create, sandbox_image, "true"], check=True, capture_output=True)
        monkeypatch.setattr(conftest, "_swept", set())  # as at a run's first container test
        swept = conftest.sweep_dead_owners(engine)
        assert made["dead"][0] in swept and made["dead"][1] in swept, swept
        assert made["alive"][0] not in swept and made["alive"][1] not in swept, swept
        left = engine.lines("ps", "-a", "--filter", f"label={TEST_LABEL}={tag}", "--format", "{{.Names}}")
        left += engine.lines("volume", "ls", "--filter", f"label={TEST_LABEL}={tag}", "--quiet")
        assert sorted(left) == sorted(made["alive"][:2]), left
        assert conftest.sweep_dead_owners(engine) == []  # once a process: the rest is the tests' own
    finally:
        for container, volume, _ in made.values():
            subprocess.run(["podman", "rm", "--force", container], capture_output=True)
            subprocess.run(["podman", "volume", "rm", "--force", volume], capture_output=True)
