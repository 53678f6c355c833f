"""Issue 41 item 5: the console shows the workers (alive, sessions held, load) to the operator
role of the identity provider, and to nobody else; /metrics counts them, alive and lost."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx

from tests.a2a.helpers import TOKEN, running_server
from tests.conftest import Script
from tests.identity.conftest import CLIENTS, ROLES
from tests.identity.idp import running_idp
from tests.workers.conftest import WITHIN

WORKER_TOKEN = "console-worker-token"


def spawn_worker(url: str, tmp_path: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVAGENT_")}
    env.update({"DEVAGENT_WORKER_TOKEN": WORKER_TOKEN, "HOME": str(tmp_path), "PYTHONUNBUFFERED": "1"})
    argv = [sys.executable, "-m", "devagent", "worker", "--server", url, "--capacity", "3"]
    argv += ["--state-dir", str(tmp_path / "w1")]
    with (tmp_path / "w1.log").open("wb") as log:
        return subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)


async def workers(c: httpx.AsyncClient, url: str, token: str) -> tuple[int, Any]:
    r = await c.get(url + "ui/api/workers", headers={"Authorization": f"Bearer {token}"})
    return r.status_code, r.json()


async def test_issue41_item5_console_and_metrics_show_the_workers_to_the_operator(
    tmp_path: Path, script: Script, sqlite_url: str, workspace: Path
) -> None:
    from devagent.agent.sandbox.worker import WorkerProvider
    from devagent.common.identity import OidcSettings

    with running_idp(tmp_path, CLIENTS, ROLES) as idp:
        kw: dict[str, Any] = {
            "tokens": {TOKEN: "ci"},
            "a2a_kw": {"oidc": OidcSettings(issuer=idp.issuer, roles_claim="roles")},
            "core_kw": {"worker_tokens": (f"w1={WORKER_TOKEN}",), "worker_lease_seconds": 3},
        }
        async with running_server(script([[{"text": "hi"}]]), sqlite_url, workspace, **kw) as srv:
            proc = spawn_worker(srv.url, tmp_path)
            provider = WorkerProvider(
                SimpleNamespace(db_url=sqlite_url, worker_lease_seconds=3, worker_wait_seconds=WITHIN)
            )
            try:
                base = srv.url.rstrip("/")
                ops, alice = idp.token("ops", base), idp.token("alice", base)
                sandbox = provider.for_session("held-session", [workspace])
                await sandbox.write_atomic_async("x.txt", b"x")  # waits for the worker: one session held
                async with httpx.AsyncClient(timeout=60) as c:
                    status, body = await workers(c, srv.url, ops)
                    assert status == 200, body
                    [w] = body["workers"]
                    assert (w["alive"], w["sessions"], w["capacity"], w["pool"]) == (True, 1, 3, "default")
                    assert w["load"] == round(1 / 3, 3) and w["token"] == "w1"
                    for other in (alice, TOKEN):
                        assert (await workers(c, srv.url, other))[0] == 403
                    r = await c.get(srv.url + "metrics", headers={"Authorization": f"Bearer {ops}"})
                    assert 'devagent_workers{pool="default",state="alive"} 1.0' in r.text, r.text
                    assert 'devagent_worker_sessions{pool="default"} 1.0' in r.text
                    assert 'devagent_worker_capacity{pool="default"} 3.0' in r.text
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait(30)
                    for _ in range(int(WITHIN / 0.1)):  # a hang guard: lost once its lease expires
                        status, body = await workers(c, srv.url, ops)
                        w = body["workers"][0]
                        if not w["alive"] and w["sessions"] == 0:  # its lease expires with it
                            break
                        await asyncio.sleep(0.1)
                    assert body["workers"][0]["alive"] is False and body["workers"][0]["sessions"] == 0
                    r = await c.get(srv.url + "metrics", headers={"Authorization": f"Bearer {ops}"})
                    assert 'devagent_workers{pool="default",state="lost"} 1.0' in r.text, r.text
            finally:
                await provider.close()
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(30)
