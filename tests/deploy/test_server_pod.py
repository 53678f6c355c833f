"""The server pod's command line and environment, taken from deploy/kubernetes/ as the kubelet
would assemble them (the ConfigMap and the Secret as variables, `$(VAR)` expanded in the args),
start a real `devagent serve`; the probes' path answers without a token, and `/healthz`, which the
probes cannot use, wants one. The only changes are the ones a pod makes anyway: its volumes'
paths (here folders of the test), and the address (loopback and a free port here), and the
database (SQLite here: the Secret's PostgreSQL URL is a placeholder)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from devagent.agent.sandbox.base import BACKENDS
from tests.deploy import manifests as m

OBJECTS = [o for _p, o in m.all_objects()]
START_WITHIN = 120.0  # a hang guard, not a timing assertion


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pod_environment(tmp_path: Path) -> tuple[dict[str, str], list[str], dict]:
    """(environment, args, container) of the server's container, its volumes under tmp_path."""
    dep = m.find(OBJECTS, "Deployment", "devagent-server")
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    mounts = {v["mountPath"]: tmp_path / v["name"] for v in c["volumeMounts"]}
    env: dict[str, str] = {"PATH": "/usr/bin:/bin", "PYTHONUNBUFFERED": "1"}
    env |= m.find(OBJECTS, "ConfigMap", "devagent-server")["data"]
    env |= m.find(OBJECTS, "Secret", "devagent-server")["stringData"]
    env |= {e["name"]: e["value"] for e in c["env"]}
    for key, value in list(env.items()):
        for mount, folder in mounts.items():
            if value == mount or value.startswith(mount + "/"):
                folder.mkdir(exist_ok=True)
                env[key] = str(folder) + value[len(mount) :]
    env["DEVAGENT_DB"] = f"sqlite+aiosqlite:///{tmp_path / 'devagent.db'}"
    if "worker" not in BACKENDS:  # before `devagent worker` exists, the rest is still checked
        env["DEVAGENT_SANDBOX_BACKEND"] = "local"
    args = [re.sub(r"\$\((\w+)\)", lambda g: env[g.group(1)], a) for a in c["args"]]
    return env, args, c


def read_only_root(writable: list[Path]) -> list[str]:
    """A command prefix that runs what follows in a mount namespace of its own where the
    filesystems holding /, the repository and Python are read-only and only `writable` is not:
    the pod's readOnlyRootFilesystem with its emptyDirs."""
    targets = {
        subprocess.run(
            ["findmnt", "-n", "-o", "TARGET", "-T", str(p)], capture_output=True, text=True
        ).stdout.strip()
        for p in (Path("/"), m.ROOT, Path(sys.prefix))
    }
    script = [f"mount --bind {w} {w}" for w in writable]
    script += [f"mount -o remount,bind,ro {t}" for t in sorted(targets)]
    script.append('exec "$@"')
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-ec", "; ".join(script), "sh"]


@pytest.mark.parametrize("root", ["writable", "read-only"])
def test_issue41_item4_the_server_pod_starts_devagent_and_its_probes_need_no_token(
    tmp_path: Path, root: str
) -> None:
    prefix: list[str] = []
    if root == "read-only":
        if os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("findmnt")):
            pytest.skip("a read-only root needs root, unshare and findmnt")
        prefix = read_only_root([tmp_path, Path("/tmp")])
    env, args, container = pod_environment(tmp_path)
    port = free_port()
    args[args.index("--host") + 1] = "127.0.0.1"
    args[args.index("--port") + 1] = str(port)
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*prefix, sys.executable, "-m", "devagent", *args], stdout=out, stderr=subprocess.STDOUT, env=env
        )
    try:
        url = f"http://127.0.0.1:{port}"
        probe = container["readinessProbe"]["httpGet"]["path"]
        card = wait_for(url + probe, proc, log)
        assert card.status_code == 200
        # --public-url came from the ConfigMap's PUBLIC_URL through the args' $(PUBLIC_URL).
        assert card.json()["url"].startswith(env["PUBLIC_URL"])
        assert httpx.get(url + "/healthz").status_code == 401
        token = {"Authorization": f"Bearer {env['DEVAGENT_TOKEN']}"}
        assert httpx.get(url + "/healthz", headers=token).status_code == 200
        assert proc.poll() is None, log.read_text(errors="replace")
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_for(url: str, proc: subprocess.Popen[bytes], log: Path) -> httpx.Response:
    deadline = time.monotonic() + START_WITHIN
    while True:
        try:
            return httpx.get(url)
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(
                    f"devagent serve did not start:\n{log.read_text(errors='replace')}"
                ) from None
            time.sleep(0.1)
