"""Issue 40 on the container sandbox backend across replicas: two `devagent serve` replicas on one
PostgreSQL database, `sandbox_backend = container` on the locally built test image
(tests/sandbox/image.py). A replica SIGKILLed in the middle of a session's command, and the
session continued through the other replica: the same container and workspace, the earlier
calls' files there, the interrupted call reported interrupted and never run again. And the
session's container killed (`podman kill -s KILL`) in the middle of a command: that call reported
interrupted, not run again, the turn going on in a container started again on the same workspace.

Every container and volume the replicas made for a test's sessions is removed afterwards, and
the engine is asked that none is left."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.a2a.helpers import auth, call, rpc, v03_message
from tests.a2a.test_hostile import tool_outputs
from tests.conftest import Script
from tests.core_helpers import shell_call
from tests.replicas.conftest import LEASE_SECONDS, StartCluster
from tests.replicas.helpers import SSE, WITHIN, final_state, status_text, tool_status
from tests.sandbox.conftest import sandbox_image  # noqa: F401  (the fixture: builds the image)
from tests.sandbox.image import UID

pytestmark = pytest.mark.postgres

SLEEP = "4747"  # the long command's sleep, told apart in the container's process list
HOST = re.compile(r"host=([0-9a-f]{12})")


def podman(*args: str) -> list[str]:
    done = subprocess.run(["podman", *args], capture_output=True, text=True)
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def session_of(container: str) -> str:
    label = '{{index .Config.Labels "devagent.session"}}'
    found = podman("container", "inspect", "--format", label, container)
    return found[0] if found else ""


def sandbox_containers() -> set[str]:
    return set(podman("ps", "-a", "--filter", "label=devagent.sandbox", "--format", "{{.ID}}"))


def mounted_under(container: str, folder: Path) -> bool:
    mounts = podman("container", "inspect", "--format", "{{json .Mounts}}", container)
    return any(
        str(m.get("Source") or "").startswith(str(folder) + "/")
        for m in json.loads(mounts[0] if mounts else "[]") or []
    )


class Made:
    """What the engine holds for this test's sessions: found by the container ids the commands
    print (their hostname), or else by a host folder of the test's mounted in them."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.before = sandbox_containers()
        self.sessions: set[str] = set()

    def learn(self, container: str) -> str:
        session = session_of(container)
        assert session, f"container {container} has no session label"
        self.sessions.add(session)
        return session

    def containers(self) -> list[str]:
        ids = set()
        for session in self.sessions:
            label = f"label=devagent.session={session}"
            ids |= set(podman("ps", "-a", "--filter", label, "--format", "{{.ID}}"))
        ids |= {c for c in sandbox_containers() - self.before if mounted_under(c, self.folder)}
        return sorted(ids)

    def volumes(self) -> list[str]:
        out: list[str] = []
        for session in self.sessions:
            out += podman("volume", "ls", "--quiet", "--filter", f"label=devagent.session={session}")
        return out

    def remove_all(self) -> None:
        for container in self.containers():
            subprocess.run(["podman", "rm", "--force", container], capture_output=True)
        for volume in self.volumes():
            subprocess.run(["podman", "volume", "rm", "--force", volume], capture_output=True)


@pytest.fixture
def made(tmp_path: Path, sandbox_image: str) -> Iterator[Made]:  # noqa: F811
    tracked = Made(tmp_path)
    try:
        yield tracked
    finally:
        tracked.remove_all()
        assert tracked.containers() == [] and tracked.volumes() == []


@pytest.fixture
def container_env(sandbox_image: str, workspace: Path) -> dict[str, str]:  # noqa: F811
    """The replicas' settings for the container backend; the workspace the image user's (as an
    operator gives a bind-mounted folder to it)."""
    for path in [workspace, *workspace.rglob("*")]:
        os.chown(path, UID, UID, follow_symlinks=False)
    template = {"default": {"image": sandbox_image, "memory_mb": 256, "pids": 64}}
    return {"DEVAGENT_SANDBOX_BACKEND": "container", "DEVAGENT_SANDBOX_TEMPLATES": json.dumps(template)}


def step(*items: dict[str, Any]) -> dict[str, Any]:
    return {"items": list(items)}


LOOK = (
    "cat before.txt; echo runs=$(cat runs.txt | wc -l); "
    f"echo sleeping=$(ps -eo args | grep -c '[s]leep {SLEEP}'); echo host=$(hostname)"
)


async def tasks_get(c: httpx.AsyncClient, url: str, task_id: str) -> dict[str, Any]:
    got = await call(c, url, rpc("tasks/get", {"id": task_id, "historyLength": 100}), auth())
    assert "error" not in got, got
    task: dict[str, Any] = got["result"]
    return task


async def until_failed(c: httpx.AsyncClient, url: str, task_id: str) -> dict[str, Any]:
    """tasks/get on `url` until the task reads failed (once the dead replica's lease lapsed)."""
    deadline = time.monotonic() + LEASE_SECONDS + WITHIN
    states = []
    while True:
        got = await tasks_get(c, url, task_id)
        states.append(got["status"]["state"])
        if states[-1] == "failed" or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.25)
    assert states[-1] == "failed" and set(states) <= {"working", "failed"}, states
    return got


async def calls_shown(c: httpx.AsyncClient, url: str, context_id: str, call_id: str) -> list[Any]:
    """The call `call_id` as the console's view of the conversation shows it (tasks/get in yolo
    mode carries no tool calls in its history)."""
    r = await c.get(f"{url}ui/api/sessions/{context_id}", headers=auth(ext=False))
    assert r.status_code == 200, r.text
    items = r.json()["items"]
    return [i["call"] for i in items if i["kind"] == "tool" and i["call"]["tool_call_id"] == call_id]


async def in_container(container: str, command: str) -> str:
    done = await asyncio.to_thread(
        subprocess.run,
        ["podman", "--runtime", "runc", "exec", container, "sh", "-c", command],
        capture_output=True,
        text=True,
    )
    return done.stdout


async def until_in_container(container: str, command: str, wanted: str) -> None:
    """Polls `command` in the container until its output holds `wanted` (a hang guard only)."""
    async with asyncio.timeout(WITHIN):
        while wanted not in await in_container(container, command):  # noqa: ASYNC110
            await asyncio.sleep(0.1)


async def test_issue40_item4_replica_killed_mid_command_session_continues_on_another_replica(
    script: Script,
    start_cluster: StartCluster,
    workspace: Path,
    container_env: dict[str, str],
    made: Made,
) -> None:
    """issue 40 item 4 ("a repository session survives a replica's death"): replica 0 runs a
    turn whose first command writes a file and whose second runs long; replica 0 is SIGKILLed
    while that command runs in the session's container. Through replica 1 the task reads failed,
    the long call FAILED with the error type `interrupted`; a new message continues the session
    there: its command runs in the same container (its hostname), sees the first command's file,
    the long command's one start (never run again) and no leftover of it."""
    steps = [
        step(shell_call("echo written-before-the-kill > before.txt; echo host=$(hostname)", "s0")),
        step(shell_call(f"echo run >> runs.txt; exec sleep {SLEEP}", "g1")),
        step(shell_call(LOOK, "s2")),
        step({"text": "continued: {last_user}"}),
    ]
    cl = await start_cluster(script(steps), n=2, approval="yolo", env=container_env, sandbox=True)
    a, b = cl.replicas
    async with httpx.AsyncClient(timeout=WITHIN) as c:
        m = v03_message("write, then run long", settings={"workspace_path": str(workspace)})
        first = SSE(c, a.url, rpc("message/stream", {"message": m}), auth())
        try:
            await first.wait_for(lambda frames: "EXECUTING" in tool_status(frames, "g1"))
            found = HOST.search(tool_outputs(json.dumps(first.frames)))
            assert found, first.frames
            container = found.group(1)
            made.learn(container)
            # the long command runs in the container before the kill (a running turn is not proof)
            await until_in_container(container, "ps -eo args", f"sleep {SLEEP}")
            task_id, context_id = first.frames[0]["result"]["id"], first.frames[0]["result"]["contextId"]
            cl.kill(a.index)
            await first.finish()
        finally:
            await first.aclose()
        # the dead replica's relay ends the command in the container (it outlives no server)
        await until_in_container(container, f"echo left=$(ps -eo args | grep -c '[s]leep {SLEEP}')", "left=0")

        got = await until_failed(c, b.url, task_id)
        assert "interrupt" in status_text(got), got["status"]
        settled = await calls_shown(c, b.url, context_id, "g1")
        assert settled and settled[-1]["status"] == "FAILED", settled
        assert settled[-1]["error"]["type"] == "interrupted", settled[-1]

        m = v03_message("go on", context_id=context_id)
        second = SSE(c, b.url, rpc("message/stream", {"message": m}), auth())
        frames = await second.finish(WITHIN * 2)
        events = second.results()
    assert final_state(events) == "completed", events[-1]
    assert tool_status(frames, "s2")[-1] == "SUCCEEDED" and not tool_status(frames, "g1"), frames
    said = tool_outputs(json.dumps(frames))
    assert "written-before-the-kill" in said, said
    assert "runs=1" in said and "sleeping=0" in said, said
    assert f"host={container}" in said, said  # the same container, found again by replica 1
    assert "continued: go on" in json.dumps(frames)


async def test_issue40_item2_container_killed_mid_command_through_a_replica_reads_interrupted(
    script: Script,
    start_cluster: StartCluster,
    workspace: Path,
    container_env: dict[str, str],
    made: Made,
) -> None:
    """issue 40 item 2 through a server (the backend's own test is tests/sandbox/test_container.py
    ::test_issue40_item2_container_killed_mid_command_reports_interrupted_not_rerun): the
    session's container is killed (`podman kill -s KILL`, as the OOM killer or an operator would)
    while a command runs in it. That call's result says it was interrupted and not run again;
    the turn goes on: the next command starts the container again, on the same workspace, and
    the killed command had run once."""
    steps = [
        step(shell_call("echo written-before-the-kill > before.txt; echo host=$(hostname)", "s0")),
        step(shell_call(f"echo run >> runs.txt; exec sleep {SLEEP}", "g1")),
        step(shell_call(LOOK, "s2")),
        step({"text": "done"}),
    ]
    cl = await start_cluster(script(steps), n=1, approval="yolo", env=container_env, sandbox=True)
    [a] = cl.replicas
    async with httpx.AsyncClient(timeout=WITHIN) as c:
        m = v03_message("run long", settings={"workspace_path": str(workspace)})
        turn = SSE(c, a.url, rpc("message/stream", {"message": m}), auth())
        try:
            await turn.wait_for(lambda frames: "EXECUTING" in tool_status(frames, "g1"))
            found = HOST.search(tool_outputs(json.dumps(turn.frames)))
            assert found, turn.frames
            container = found.group(1)
            made.learn(container)
            await until_in_container(container, "ps -eo args", f"sleep {SLEEP}")
            killed = await asyncio.to_thread(
                subprocess.run, ["podman", "kill", "--signal", "KILL", container], capture_output=True
            )
            assert killed.returncode == 0, killed.stderr
            frames = await turn.finish(WITHIN * 2)
        finally:
            await turn.aclose()
        events = turn.results()
    assert final_state(events) == "completed", events[-1]
    assert tool_status(frames, "g1")[-1] in ("FAILED", "SUCCEEDED"), tool_status(frames, "g1")
    g1 = [e for e in frames if "g1" in json.dumps(e)]
    assert "interrupted and is not run again" in json.dumps(g1), g1
    said = tool_outputs(json.dumps(frames))
    assert "written-before-the-kill" in said and "runs=1" in said and "sleeping=0" in said, said
    assert f"host={container}" in said, said  # the same container, started again
