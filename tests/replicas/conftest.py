"""Several real `devagent serve` processes on one fresh PostgreSQL database, behind the round-robin
balancer of tests/fakes/balancer.py (no sticky sessions).

    cluster = await start_cluster(script(steps), n=3, approval="yolo")
    cluster.url                 # the balancer: every request goes to the next replica
    cluster.replicas[i].url     # one replica directly
    cluster.balancer.served     # which replica served which request (also the X-Balancer-Backend header)
    cluster.kill(i)             # SIGKILL replica i (a crash: no shutdown of any kind)

Each test gets its own database (CREATE DATABASE on the `postgres` database, dropped afterwards)
and its own processes; all of them are stopped at teardown, whatever the test did. The session
lease is set short through DEVAGENT_LEASE_SECONDS (and `--lease-seconds` when `devagent serve`
has that flag), so a killed replica's turns are taken as interrupted within seconds.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.a2a.helpers import TOKEN
from tests.conftest import fresh_pg_database, pg_available
from tests.fakes.balancer import Balancer
from tests.process_stop import stop_process

LEASE_SECONDS = 2
START_WITHIN = 90.0  # seconds for a replica to listen and open its database (2 shared cores)
DEVAGENT = [sys.executable, "-m", "devagent"]

_serve_flags: str | None = None


def serve_help() -> str:
    global _serve_flags
    if _serve_flags is None:
        r = subprocess.run([*DEVAGENT, "serve", "--help"], capture_output=True, text=True, timeout=120)
        _serve_flags = r.stdout + r.stderr
    return _serve_flags


@dataclass
class Replica:
    index: int
    proc: subprocess.Popen[bytes]
    log: Path
    url: str = ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""


@dataclass
class Cluster:
    db_url: str
    workspace_root: Path
    replicas: list[Replica]
    balancer: Balancer
    url: str = ""
    token: str = TOKEN
    killed: list[int] = field(default_factory=list)

    def kill(self, index: int) -> None:
        """SIGKILL replica `index` and wait for it to be gone (its children, shell commands in
        their own process groups, are not signalled, as in a real crash)."""
        r = self.replicas[index]
        os.kill(r.proc.pid, signal.SIGKILL)
        r.proc.wait(30)
        self.killed.append(index)

    def survivors(self) -> list[Replica]:
        return [r for r in self.replicas if r.index not in self.killed]

    def logs(self) -> str:
        return "\n".join(
            f"--- replica {r.index} ({r.url}) ---\n{r.log_text()[-6000:]}" for r in self.replicas
        )


@pytest.fixture
async def pg_database() -> AsyncIterator[str]:
    """A fresh, empty PostgreSQL database for this test only; its SQLAlchemy URL."""
    if not pg_available():
        pytest.skip("PostgreSQL is not running on 127.0.0.1:5432")
    async with fresh_pg_database("devagent_replicas") as url:
        yield url


def _spawn(index: int, args: list[str], env: dict[str, str], log: Path) -> Replica:
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*DEVAGENT, "serve", "--host", "127.0.0.1", "--port", "0", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )
    return Replica(index, proc, log)


async def _ready(replica: Replica, client: httpx.AsyncClient) -> None:
    """Waits for the start-up line, then for /healthz (answered once the database is open)."""
    deadline = time.monotonic() + START_WITHIN
    while not replica.url:
        m = re.search(r"listening on (http://\S+)", replica.log_text())
        if m:
            replica.url = m.group(1).rstrip("/") + "/"
            break
        if not replica.alive() or time.monotonic() > deadline:
            raise AssertionError(f"replica {replica.index} did not start:\n{replica.log_text()[-4000:]}")
        await asyncio.sleep(0.05)
    while True:
        try:
            r = await client.get(replica.url + "healthz", headers={"Authorization": f"Bearer {TOKEN}"})
            if r.status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if not replica.alive() or time.monotonic() > deadline:
            raise AssertionError(f"replica {replica.index} not healthy:\n{replica.log_text()[-4000:]}")
        await asyncio.sleep(0.1)


StartCluster = Callable[..., Awaitable[Cluster]]


@pytest.fixture
async def start_cluster(pg_database: str, workspace: Path, tmp_path: Path) -> AsyncIterator[StartCluster]:
    """`await start_cluster(model, n=3, approval=None, together=False, env=None, sandbox=False)`:
    n replicas on the test's database (workspace root: the parent of `workspace`) and the balancer
    in front. By default the first replica starts alone (it creates the schema), then the others
    at once; `together=True` starts all of them at the same moment. `sandbox`: the replicas'
    commands run in the sandbox `env` chooses (else --no-sandbox)."""
    clusters: list[Cluster] = []
    spawned: list[Replica] = []

    async def start(
        model: str,
        n: int = 3,
        *,
        approval: str | None = None,
        together: bool = False,
        env: dict[str, str] | None = None,
        sandbox: bool = False,
    ) -> Cluster:
        args = ["--db", pg_database, "--workspace-root", str(workspace.parent), "--token", TOKEN]
        args += ["--model", model]
        if approval:
            args += ["--approval", approval]
        if "--lease-seconds" in serve_help():
            args += ["--lease-seconds", str(LEASE_SECONDS)]
        # The tests look at the commands' processes by the pids the commands print, which a
        # sandbox's own pid namespace would renumber (the sandbox is tested in test_sandbox.py);
        # `sandbox=True` for a test of the sandbox backend the environment chooses.
        args += ["--sandbox" if sandbox else "--no-sandbox"]
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("DEVAGENT_")}
        full_env.update({"PYTHONUNBUFFERED": "1", "DEVAGENT_LEASE_SECONDS": str(LEASE_SECONDS)})
        full_env.update(env or {})
        logs = tmp_path / "logs"
        logs.mkdir(exist_ok=True)
        base = len(spawned)
        replicas: list[Replica] = []
        async with httpx.AsyncClient(timeout=10) as c:
            for i in range(n):
                r = _spawn(i, args, full_env, logs / f"replica{base + i}.log")
                spawned.append(r)
                replicas.append(r)
                if i == 0 and not together:
                    await _ready(r, c)
            await asyncio.gather(*(_ready(r, c) for r in replicas))
        balancer = Balancer([r.url for r in replicas])
        cluster = Cluster(pg_database, workspace.parent, replicas, balancer)
        clusters.append(cluster)
        cluster.url = await balancer.start()
        return cluster

    try:
        yield start
    finally:
        for cl in clusters:
            await cl.balancer.stop()
        for r in spawned:
            stop_process(r.proc, 15)
        for r in spawned:  # shown with the test's output when it failed
            print(f"--- replica log {r.log.name} (exit {r.proc.returncode}) ---\n{r.log_text()[-8000:]}")
