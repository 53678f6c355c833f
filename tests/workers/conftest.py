"""A real `devagent serve` on the worker backend and real `devagent worker` processes, each in a
network namespace of its own that reaches only the server's port (netns.py).

    site = WorkerSite(tmp_path)             # folders, database, tokens, the server's environment
    with site.server(model) as s, site.worker(s, "w1") as w1:
        ...                                 # w1.proc, w1.log_text(), w1.kill()

Every server, worker and namespace is stopped or removed at the end of its block, whatever the
test did."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.a2a.procs import TOKEN as OPS
from tests.a2a.procs import Serve, start_serve
from tests.replicas.conftest import pg_database, start_cluster  # noqa: F401 (the replicas' fixtures, for test_issue41_replicas)
from tests.workers.netns import Netns, isolated

DEVAGENT = [sys.executable, "-m", "devagent"]
CALLER = "caller-token-1"
WORKER_TOKEN = "worker-token-1"
LEASE_SECONDS = 3
WITHIN = 90.0  # seconds a process may take on a loaded machine (a failure guard, not a pace)


@dataclass
class Worker:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    state_dir: Path
    ns: Netns | None

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill(self) -> None:
        """SIGKILL from outside (no goodbye of any kind)."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def wait_connected(self) -> None:
        deadline = time.monotonic() + WITHIN
        while "serving the pool" not in self.log_text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"worker {self.name} did not connect:\n{self.log_text()}")
            time.sleep(0.05)


@dataclass
class WorkerSite:
    tmp: Path
    root: Path = field(init=False)
    db_file: Path = field(init=False)
    env: dict[str, str] = field(init=False)
    shared: Path = field(init=False)  # visible inside the workers' sandboxes (not under /tmp)

    def __post_init__(self) -> None:
        self.root = self.tmp / "root"
        (self.root / "alice").mkdir(parents=True)
        self.db_file = self.tmp / "state" / "devagent.db"
        self.db_file.parent.mkdir()
        home = self.tmp / "home"
        home.mkdir()
        self.shared = Path(tempfile.mkdtemp(prefix="devagent-workers-", dir="/var/tmp"))
        os.chmod(self.shared, 0o755)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("DEVAGENT_")}
        self.env.update(
            {
                "HOME": str(home),
                "PYTHONUNBUFFERED": "1",
                "DEVAGENT_DATA_DIR": str(self.tmp / "data"),
                "DEVAGENT_DB": self.db_url,
                "DEVAGENT_APPROVAL": "yolo",
                "DEVAGENT_SANDBOX_BACKEND": "worker",
                "DEVAGENT_WORKER_TOKENS": f"w1={WORKER_TOKEN}",
                "DEVAGENT_WORKER_LEASE_SECONDS": str(LEASE_SECONDS),
                "DEVAGENT_WORKER_WAIT_SECONDS": "60",
                "OPENAI_API_KEY": "sk-leak-model-key",
            }
        )

    @property
    def db_url(self) -> str:
        return f"sqlite+aiosqlite:///{self.db_file}"

    def cleanup(self) -> None:
        import shutil

        shutil.rmtree(self.shared, ignore_errors=True)

    def _owned(self, name: str, user: int) -> Path:
        """A folder of `user`'s own, in the folder every user reaches."""
        folder = self.shared / name
        folder.mkdir(mode=0o700)
        os.chown(folder, user, user)
        return folder

    @contextmanager
    def server(self, model: str, port: int = 0, log: str = "serve") -> Iterator[Serve]:
        """`devagent serve` on every interface (the namespaces reach it through their veth), on
        `port` (0: a free one); its output in `<log>.log` (a name per replica when several run)."""
        args = ["--host", "0.0.0.0", "--workspace-root", str(self.root), "--token", f"alice={CALLER}"]
        args += ["--port", str(port)] if port else []
        args += ["--token", f"ops={OPS}"]  # the readiness probe's (tests/a2a/procs.py)
        args += ["--model", model, "--sandbox"]
        s = start_serve(args, self.tmp / f"{log}.log", env={**self.env, "DEVAGENT_TOKEN": ""})
        try:
            s.url = re.sub(r"//0\.0\.0\.0:", "//127.0.0.1:", s.url)
            yield s
        finally:
            s.stop()

    @contextmanager
    def worker(
        self,
        server: Serve,
        name: str,
        *,
        netns: bool = True,
        token: str = WORKER_TOKEN,
        backend: str = "local",
        more: tuple[str, ...] = (),
        user: int | None = None,
    ) -> Iterator[Worker]:
        """A worker (as root, or as the uid `user`, its state and home folders its own)."""
        port = int(server.url.rstrip("/").rsplit(":", 1)[1])
        with ExitStack() as stack:
            ns = stack.enter_context(isolated(port)) if netns else None
            url = ns.url() if ns is not None else f"http://127.0.0.1:{port}"
            state = self.tmp / f"state-{name}" if user is None else self._owned(f"state-{name}", user)
            argv = [*DEVAGENT, "worker", "--server", url, "--state-dir", str(state), "--capacity", "2"]
            argv += ["--backend", backend, *more]
            env = {**self.env, "DEVAGENT_WORKER_TOKEN": token, "PYTHONFAULTHANDLER": "1"}
            if user is not None:
                argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *argv]
                home = self._owned(f"home-{name}", user)
                env["HOME"] = str(home)
                env["DEVAGENT_DATA_DIR"] = str(home / "data")
                env["PATH"] = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"  # none of root's own
                for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
                    env[var] = str(home / var.lower())
            for secret in ("DEVAGENT_WORKER_TOKENS", "DEVAGENT_DB", "OPENAI_API_KEY"):
                env.pop(secret, None)  # a worker's machine has none of the server's
            log = self.tmp / f"{name}.log"
            with log.open("wb") as out:
                proc = subprocess.Popen(
                    ns.argv(argv) if ns is not None else argv, stdout=out, stderr=subprocess.STDOUT, env=env
                )
            w = Worker(name, proc, log, state, ns)
            try:
                yield w
            finally:
                if proc.poll() is None:
                    proc.terminate()
                    try:
                        proc.wait(20)
                    except subprocess.TimeoutExpired:
                        proc.send_signal(signal.SIGABRT)  # its threads' stacks into its log
                        try:
                            proc.wait(10)
                        except subprocess.TimeoutExpired:
                            proc.kill()
                            proc.wait(20)
