"""A private Docker daemon for the container backend's tests: `dockerd` from Debian's docker.io
with its own data and exec roots in a temporary folder, its own unix socket, its own daemon
settings file (no registry mirror, no bridge, no iptables, runc by default), its own containerd
namespace and cgroup parent. The backend reaches it through DOCKER_HOST, which the engine's client
environment keeps. `stop` removes every container and volume it holds, ends the daemon (and the
containerd it started), unmounts what it left mounted, and removes its folders and cgroups: the
machine is as before, whatever the tests did."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from devagent.agent.sandbox.podman import Engine
from tests.sandbox import image

GUARD = 120.0  # seconds: a hang guard for the daemon's start and end, never a pace


class DaemonFailed(RuntimeError):
    """dockerd did not come up here; the message says why (the tests skip with it)."""


@dataclass
class Daemon:
    folder: Path
    client: str  # the `docker` the backend runs: the one on PATH, as sandbox_engine = "docker" would
    proc: subprocess.Popen[bytes]
    cgroup: str

    @property
    def host(self) -> str:
        return f"unix://{self.folder / 'docker.sock'}"

    def env(self) -> dict[str, str]:
        return {**os.environ, "DOCKER_HOST": self.host}

    def engine(self) -> Engine:
        return Engine(self.client, extra_env={"DOCKER_HOST": self.host})

    def run(self, *args: str, **kw: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run(  # type: ignore[call-overload,no-any-return]
            [self.client, *args], capture_output=True, text=True, env=self.env(), timeout=GUARD, **kw
        )

    def version(self) -> str:
        return self.run("version", "--format", "{{.Client.Version}} / {{.Server.Version}}").stdout.strip()


def problem() -> str | None:
    """None when a private dockerd can be tried here, else why not."""
    missing = [p for p in ("dockerd", "docker", "containerd", "runc") if shutil.which(p) is None]
    if missing:
        return f"{', '.join(missing)} not installed (apt-get install docker.io; scripts/test installs it)"
    if os.geteuid() != 0:
        return "a private dockerd needs root here (rootless Docker is not set up by the tests)"
    return None


def start() -> Daemon:
    """Starts the daemon and waits until it answers; DaemonFailed (with its log's end) if not."""
    folder = Path(tempfile.mkdtemp(prefix="devagent-dockerd-", dir="/tmp"))  # a socket path is short
    # containerd takes a namespace of letters and digits joined by single separators: mkdtemp's
    # random part may hold "_" anywhere (about one run in 17 skipped every Docker test on that), so
    # the name is a hex id of its own
    cgroup = f"devagent-test-{uuid.uuid4().hex[:12]}"
    settings = {
        "deprecated-key-path": str(folder / "key.json"),  # else it writes /etc/docker/key.json
        "registry-mirrors": [],
        "default-runtime": "runc",
    }
    (folder / "daemon.json").write_text(json.dumps(settings))
    log = open(folder / "dockerd.log", "wb")  # the daemon's; closed here once it has it
    argv = [
        "dockerd",
        "--config-file",
        str(folder / "daemon.json"),
        "--data-root",
        str(folder / "data"),
        "--exec-root",
        str(folder / "exec"),
        "--pidfile",
        str(folder / "dockerd.pid"),
        "-H",
        f"unix://{folder / 'docker.sock'}",
        "--bridge=none",
        "--iptables=false",
        "--ip6tables=false",
        "--ip-masq=false",
        "--cgroup-parent",
        f"/{cgroup}",
        "--containerd-namespace",
        cgroup,
        "--containerd-plugins-namespace",
        f"{cgroup}-plugins",
    ]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    log.close()
    daemon = Daemon(folder, shutil.which("docker") or "docker", proc, cgroup)
    deadline = time.monotonic() + GUARD
    while daemon.run("version").returncode != 0:
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = (folder / "dockerd.log").read_text(errors="replace").strip().splitlines()[-3:]
            stop(daemon)
            raise DaemonFailed(f"dockerd did not start here: {' | '.join(tail)}")
        time.sleep(0.2)  # polling the socket; the deadline only guards a daemon that never answers
    return daemon


def import_image(daemon: Daemon) -> str:
    """The tests' image (tests/sandbox/image.py) in the daemon: Podman's copy of it exported and
    `docker import`ed with the same settings, or, without Podman, built from Debian's packages
    straight into this daemon. Its tag is the Podman image's."""
    tag = image.tag()
    if daemon.run("image", "inspect", tag).returncode == 0:
        return tag
    if shutil.which("podman") is not None:
        image.ensure("podman")
        made = subprocess.run(
            ["podman", "--runtime", "runc", "create", tag, "true"], capture_output=True, text=True, check=True
        )
        container = made.stdout.strip()
        try:
            export = subprocess.Popen(["podman", "export", container], stdout=subprocess.PIPE)
            done = subprocess.run(
                [daemon.client, "import", *image.changes(), "-", tag],
                stdin=export.stdout,
                capture_output=True,
                env=daemon.env(),
                timeout=GUARD * 5,
            )
            if export.stdout is not None:
                export.stdout.close()
            if export.wait(GUARD) != 0 or done.returncode != 0:
                raise DaemonFailed(f"docker import failed: {done.stderr.decode(errors='replace')[-300:]}")
        finally:
            subprocess.run(["podman", "rm", "--force", container], capture_output=True)
    else:
        image.build([daemon.client], env=daemon.env())
    return tag


def stop(daemon: Daemon) -> list[str]:
    """Removes every container and volume, ends the daemon and its containerd, unmounts and
    removes its folder and cgroups. What could not be removed, as lines (empty: all gone)."""
    left: list[str] = []
    if daemon.proc.poll() is None:
        with contextlib.suppress(subprocess.TimeoutExpired, OSError):
            ids = daemon.run("ps", "--all", "--quiet").stdout.split()
            if ids:
                daemon.run("rm", "--force", "--volumes", *ids)
            volumes = daemon.run("volume", "ls", "--quiet").stdout.split()
            if volumes:
                daemon.run("volume", "rm", "--force", *volumes)
        daemon.proc.send_signal(signal.SIGTERM)
        try:
            daemon.proc.wait(GUARD)
        except subprocess.TimeoutExpired:
            left.append("dockerd did not end on SIGTERM: killed")
            os.killpg(daemon.proc.pid, signal.SIGKILL)
            daemon.proc.wait()
    for pid in _processes_under(daemon.folder):  # its containerd, or shims, had any outlived it
        left.append(f"process {pid} left by dockerd: killed")
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    for mount in reversed(_mounts_under(daemon.folder)):
        subprocess.run(["umount", "--lazy", mount], capture_output=True)
    shutil.rmtree(daemon.folder, ignore_errors=True)
    if daemon.folder.exists():
        left.append(f"{daemon.folder} could not be removed")
    for hierarchy in Path("/sys/fs/cgroup").iterdir():
        for group in (hierarchy / daemon.cgroup, hierarchy / "unified" / daemon.cgroup):
            with contextlib.suppress(OSError):
                group.rmdir()
    return left


def _mounts_under(folder: Path) -> list[str]:
    with open("/proc/self/mounts") as mounts:
        points = [line.split()[1] for line in mounts]
    return [p for p in points if p == str(folder) or p.startswith(f"{folder}/")]


def _processes_under(folder: Path) -> list[int]:
    """Processes whose command line names the daemon's folder (its containerd and shims do)."""
    found = []
    wanted = str(folder).encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            if wanted in Path(f"/proc/{entry}/cmdline").read_bytes():
                found.append(int(entry))
    return found
