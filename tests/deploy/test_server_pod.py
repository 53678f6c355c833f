"""The pods' command lines and environments, taken from deploy/kubernetes/ as the kubelet would
assemble them (the ConfigMap and the Secrets as variables, `$(VAR)` expanded in the args), start
a real `devagent serve` and a real `devagent worker`: the probes' path answers without a token,
`/healthz`, which the probes cannot use, wants one, and the worker pod's worker joins the server
pod's server. The only changes are the ones a pod makes anyway: its volumes' paths (here folders
of the test), the addresses (loopback and a free port here, for the Service's name), and the
database (SQLite here: the Secret's PostgreSQL URL is a placeholder)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.deploy import manifests as m
from tests.process_stop import stop_process

OBJECTS = [o for _p, o in m.all_objects()]
START_WITHIN = 120.0  # a hang guard, not a timing assertion


def listening_port(pid: int) -> int | None:
    """The TCP port the process `pid` listens on (read from /proc), once it listens."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target.removeprefix("socket:[").rstrip("]"))
        for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                return int(fields[1].rsplit(":", 1)[1], 16)
    return None


def container_of(name: str) -> dict:
    (c,) = m.find(OBJECTS, "Deployment", name)["spec"]["template"]["spec"]["containers"]
    return c


def pod_environment(c: dict, sources: list[dict[str, str]], tmp_path: Path) -> dict[str, str]:
    """The container's environment: `sources` (a ConfigMap's or Secret's data) then its own
    variables, with every path under one of its volume mounts moved to a folder of tmp_path."""
    env: dict[str, str] = {"PATH": "/usr/bin:/bin", "PYTHONUNBUFFERED": "1"}
    if "PYTHONPATH" in os.environ:  # a devagent other than the installed one, tried by hand
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    for source in sources:
        env |= source
    for e in c.get("env", []):
        ref = e.get("valueFrom", {}).get("secretKeyRef")
        env[e["name"]] = (
            e["value"] if ref is None else m.find(OBJECTS, "Secret", ref["name"])["stringData"][ref["key"]]
        )
    mounts = {v["mountPath"]: tmp_path / f"{c['name']}-{v['name']}" for v in c["volumeMounts"]}
    for mount, folder in mounts.items():
        folder.mkdir()
        for key, value in env.items():
            if value == mount or value.startswith(mount + "/"):
                env[key] = str(folder) + value[len(mount) :]
    return env


def moved_args(c: dict, env: dict[str, str], tmp_path: Path, **values: str) -> list[str]:
    """The container's args, `$(VAR)` expanded from env, paths under its mounts moved like the
    environment's, and the flags named in `values` (--host, --port, --server) replaced."""
    args = [re.sub(r"\$\((\w+)\)", lambda g: env[g.group(1)], a) for a in c["args"]]
    for mount in (v["mountPath"] for v in c["volumeMounts"]):
        folder = next(
            tmp_path / f"{c['name']}-{v['name']}" for v in c["volumeMounts"] if v["mountPath"] == mount
        )
        args = [str(folder) + a[len(mount) :] if a == mount or a.startswith(mount + "/") else a for a in args]
    for flag, value in values.items():
        args[args.index(f"--{flag.replace('_', '-')}") + 1] = value
    return args


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


def can_make_root_read_only() -> bool:
    return os.geteuid() == 0 and bool(shutil.which("unshare") and shutil.which("findmnt"))


@contextmanager
def started(command: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        yield proc
    finally:
        stop_process(proc, 30)


@contextmanager
def server_pod(tmp_path: Path, prefix: list[str]) -> Iterator[tuple[str, dict[str, str]]]:
    """`devagent serve` as the server pod runs it; (its URL, its environment) once it answers."""
    c = container_of("devagent-server")
    sources = [m.find(OBJECTS, "ConfigMap", "devagent-server")["data"]]
    sources.append(m.find(OBJECTS, "Secret", "devagent-server")["stringData"])
    env = pod_environment(c, sources, tmp_path)
    env["DEVAGENT_DB"] = f"sqlite+aiosqlite:///{tmp_path / 'devagent.db'}"
    # port 0: the server binds a free port itself (a port picked here and handed over could be
    # taken meanwhile by another test's server, which would then answer in its place); the one it
    # took is read from /proc (what it prints is the pod's public URL)
    args = moved_args(c, env, tmp_path, host="127.0.0.1", port="0")
    log = tmp_path / "serve.log"
    with started([*prefix, sys.executable, "-m", "devagent", *args], env, log) as proc:
        wait_until(lambda: listening_port(proc.pid) is not None, proc, log)
        url = f"http://127.0.0.1:{listening_port(proc.pid)}"
        wait_until(
            lambda: httpx.get(url + c["readinessProbe"]["httpGet"]["path"]).status_code == 200, proc, log
        )
        yield url, env
        assert proc.poll() is None, log.read_text(errors="replace")


@pytest.mark.parametrize("root", ["writable", "read-only"])
def test_issue41_item4_the_server_pod_starts_devagent_and_its_probes_need_no_token(
    tmp_path: Path, root: str
) -> None:
    if root == "read-only" and not can_make_root_read_only():
        pytest.skip("a read-only root needs root, unshare and findmnt")
    prefix = read_only_root([tmp_path, Path("/tmp")]) if root == "read-only" else []
    with server_pod(tmp_path, prefix) as (url, env):
        card = httpx.get(url + "/.well-known/agent-card.json")
        # --public-url came from the ConfigMap's PUBLIC_URL through the args' $(PUBLIC_URL).
        assert card.json()["url"].startswith(env["PUBLIC_URL"])
        assert httpx.get(url + "/healthz").status_code == 401
        token = {"Authorization": f"Bearer {env['DEVAGENT_TOKEN']}"}
        assert httpx.get(url + "/healthz", headers=token).status_code == 200


def test_issue41_item4_the_worker_pod_joins_the_server_pod(tmp_path: Path) -> None:
    prefix = read_only_root([tmp_path, Path("/tmp")]) if can_make_root_read_only() else []
    with server_pod(tmp_path, prefix) as (url, env):
        c = container_of("devagent-worker")
        wenv = pod_environment(c, [], tmp_path)
        pool = c["args"][c["args"].index("--pool") + 1]
        log = tmp_path / "worker.log"
        with started(
            [*prefix, sys.executable, "-m", "devagent", *moved_args(c, wenv, tmp_path, server=url)], wenv, log
        ) as w:
            metrics = {"Authorization": f"Bearer {env['DEVAGENT_METRICS_TOKEN']}"}
            alive = f'devagent_workers{{pool="{pool}",state="alive"}} 1.0'
            wait_until(lambda: alive in httpx.get(url + "/metrics", headers=metrics).text, w, log)


def wait_until(check, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_WITHIN
    while True:
        try:
            if check():
                return
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"{proc.args[-1]!r}... not ready:\n{log.read_text(errors='replace')}")
        time.sleep(0.1)
