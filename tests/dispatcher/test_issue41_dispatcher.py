"""Issue 41 item 4, the agent-sandbox path: `devagent dispatcher` gives each session of a worker
pool that waits for a sandbox a SandboxClaim of its own, whose pod runs a one-session
`devagent worker` that connects back to the server; the claim is deleted when the session lets
its sandbox go. No cluster runs here: the dispatcher's API calls go to a loopback stand-in for the
API server that also plays the agent-sandbox controller (kube_standin.py), starting real worker
processes as its warm pool. The server, the dispatcher and the workers are real processes."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import yaml

from tests.a2a.helpers import context_of, turn
from tests.a2a.test_hostile import script, tool_outputs
from tests.core_helpers import shell_call
from tests.dispatcher.kube_standin import StandIn
from tests.process_stop import stop_process
from tests.workers.conftest import CALLER, DEVAGENT, WITHIN, WORKER_TOKEN, WorkerSite

KUBE_TOKEN = "standin-kube-token-h-dispatch"
NAMESPACE = "devagent-workers"
WARM_POOL = "devagent-worker"
POOL = "pods"


@pytest.fixture
def site(tmp_path: Path) -> Iterator[WorkerSite]:
    s = WorkerSite(tmp_path)
    s.env["DEVAGENT_WORKER_POOL"] = POOL
    try:
        yield s
    finally:
        s.cleanup()


def add_dispatcher_token(site: WorkerSite) -> str:
    out = subprocess.run(
        [*DEVAGENT, "workers", "token", "add", "disp", "--pool", POOL, "--dispatcher", "--db", site.db_url],
        env=site.env,
        capture_output=True,
        text=True,
        timeout=WITHIN,
        check=True,
    )
    return out.stdout.strip()


def pod_env(site: WorkerSite) -> dict[str, str]:
    env = {
        k: v
        for k, v in site.env.items()
        if k not in ("DEVAGENT_WORKER_TOKENS", "DEVAGENT_DB", "OPENAI_API_KEY")
    }
    env["PYTHONFAULTHANDLER"] = "1"
    return env


@contextmanager
def standin(site: WorkerSite, server_url: str) -> Iterator[StandIn]:
    def start_pod(name: str, token_file: Path, state: Path, log: Path) -> subprocess.Popen[bytes]:
        argv = [*DEVAGENT, "worker", "--server", server_url, "--pool", POOL, "--capacity", "1"]
        argv += ["--backend", "local", "--state-dir", str(state), "--token-file", str(token_file)]
        argv += ["--idle-seconds", "3"]
        with log.open("wb") as out:
            return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=pod_env(site))

    s = StandIn(KUBE_TOKEN, NAMESPACE, WARM_POOL, start_pod, site.tmp / "pods")
    s.start()
    try:
        yield s
    finally:
        s.stop()


@contextmanager
def dispatcher(site: WorkerSite, server_url: str, api: StandIn, token: str) -> Iterator[Path]:
    kubeconfig = site.tmp / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "standin",
                "contexts": [
                    {"name": "standin", "context": {"cluster": "c", "user": "u", "namespace": NAMESPACE}}
                ],
                "clusters": [{"name": "c", "cluster": {"server": api.url}}],
                "users": [{"name": "u", "user": {"token": KUBE_TOKEN}}],
            }
        )
    )
    log = site.tmp / "dispatcher.log"
    argv = [*DEVAGENT, "dispatcher", "--server", server_url, "--kubeconfig", str(kubeconfig)]
    argv += ["--warm-pool", WARM_POOL, "--interval", "0.3"]
    env = {**pod_env(site), "DEVAGENT_DISPATCHER_TOKEN": token}
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        yield log
    finally:
        stop_process(proc, 20)


def hello(url: str, token: str) -> int:
    body = {"worker": "probe-h-dispatch", "pool": POOL, "capacity": 1}
    headers = {"Authorization": f"Bearer {token}"}
    r = httpx.post(f"{url.rstrip('/')}/workers/v1/hello", json=body, headers=headers)
    return r.status_code


def wait_for(what: str, check: object, logs: list[Path]) -> None:
    deadline = time.monotonic() + WITHIN
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(
                what + "\n" + "\n".join(f"--- {p}:\n{p.read_text(errors='replace')}" for p in logs)
            )
        time.sleep(0.1)


async def test_issue41_item4_dispatcher_claims_a_pod_per_waiting_session_and_deletes_it_at_release(
    site: WorkerSite,
) -> None:
    """issue 41 item 4: a turn on `sandbox_backend = worker` (pool `pods`, no worker connected)
    waits for a sandbox; the dispatcher sees it, gets a token for that session from the server and
    makes one SandboxClaim on the warm pool (checked against agent-sandbox's v1beta1 fields); the
    warm pod's worker reads the token, connects back, and runs the turn's command (its output names
    that pod's workspace). When the session lets its sandbox go (the pod's worker gives it back
    after 3 idle seconds), the dispatcher deletes the claim, the pod is stopped, and the session's
    token opens nothing any more; the dispatcher's own token never opens the workers' door. The
    session's next turn waits again and gets a new claim and pod, whose workspace is the one the
    first pod left (the server's snapshot)."""
    steps = [
        [shell_call("pwd; echo kept > made.txt; echo ran-in-the-claimed-pod")],
        [{"text": "done"}],
        [shell_call("pwd; cat made.txt; echo ran-in-the-second-pod")],
        [{"text": "done again"}],
    ]
    model = script(site.tmp / "s.json", steps)
    with site.server(model) as s:
        token = add_dispatcher_token(site)
        with standin(site, s.url) as api, dispatcher(site, s.url, api, token) as dlog:
            frames = await turn(s.url, CALLER, "run it", site.root / "alice")
            output = tool_outputs(json.dumps(frames))
            posts = [r for r in api.requests if r[0] == "POST"]
            assert [st for _, _, st in posts] == [201], api.requests  # one claim, for one session
            pod = next(p for p in api.pods if p.claim)
            assert "ran-in-the-claimed-pod" in output and str(pod.state_dir) in output, output
            session_token = pod.token_file.read_text().strip()
            assert session_token and session_token not in (token, WORKER_TOKEN)
            logs = [dlog, pod.log, s.log]
            wait_for("the claim was not deleted", lambda: not api.claims, logs)
            wait_for("the claimed pod was not stopped", lambda: pod.proc.poll() is not None, logs)
            assert ("DELETE", posts[0][1] + "/" + pod.claim, 200) in api.requests
            assert (
                len([p for p in api.pods if not p.claim and p.proc.poll() is None]) == 1
            )  # the pool refilled
            pod_log = pod.log_text()
            assert "waiting for a session's token" in pod_log and "serving the pool 'pods'" in pod_log, (
                pod_log
            )
            assert hello(s.url, session_token) == 401  # the session's token died with its sandbox
            assert hello(s.url, token) == 403  # a dispatcher's token claims no work

            # The session's next turn waits again: a new claim (same name), a new pod, and the
            # workspace as the first pod left it (the server's snapshot).
            context = context_of(frames)
            frames = await turn(s.url, CALLER, "again", site.root / "alice", context)
            output = tool_outputs(json.dumps(frames))
            assert [st for m_, _, st in api.requests if m_ == "POST"] == [201, 201], api.requests
            second = next(p for p in api.pods if p.claim and p is not pod)
            assert second.claim == pod.claim  # the session's claim name, made again
            assert str(second.state_dir) in output and "kept" in output, output
            assert "ran-in-the-second-pod" in output, output
    assert "Traceback" not in dlog.read_text(), dlog.read_text()
    assert token not in pod_log


def test_issue41_item4_the_dispatch_routes_open_only_to_a_dispatchers_token(site: WorkerSite) -> None:
    """issue 41 item 4: /workers/v1/dispatch/ refuses no token (401) and a worker's token (403);
    a dispatcher's token sees its own pool, and gets no session token for a session that does not
    wait for a sandbox (409)."""
    model = script(site.tmp / "s.json", [[{"text": "done"}]])
    with site.server(model) as s:
        token = add_dispatcher_token(site)
        base = f"{s.url.rstrip('/')}/workers/v1/dispatch"
        with httpx.Client(timeout=30) as c:
            assert c.post(f"{base}/poll", json={}).status_code == 401
            worker = {"Authorization": f"Bearer {WORKER_TOKEN}"}
            assert c.post(f"{base}/poll", json={}, headers=worker).status_code == 403
            mine = {"Authorization": f"Bearer {token}"}
            r = c.post(f"{base}/poll", json={"sessions": ["nope"]}, headers=mine)
            assert r.json() == {"pool": POOL, "waiting": [], "ended": ["nope"]}, r.text
            assert c.post(f"{base}/sessions/nope/token", headers=mine).status_code == 409
            for bad in (b"not json", b"[1, 2]", b'{"sessions": 7}'):  # a clear 400, never a 500
                assert c.post(f"{base}/poll", content=bad, headers=mine).status_code == 400, bad
            hello_url = f"{s.url.rstrip('/')}/workers/v1/hello"
            for bad in (b"not json", b"[]", b'{"worker": "w", "capacity": "many"}'):
                assert c.post(hello_url, content=bad, headers=worker).status_code == 400, bad
