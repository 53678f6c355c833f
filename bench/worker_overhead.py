"""The worker backend's cost per tool call, against the local backend's, in one run:

- a command (`true`) run N times through a session's sandbox: the local backend (bubblewrap on
  this host) and the worker backend (the call queued in the store, taken by a `devagent worker`
  process over HTTP through the server's workers' door, run there under bubblewrap, its output
  and exit code sent back, the relay here ending with it);
- a file read (a small file) N times: the local backend's confined read against the worker's.

The server's app runs in this process (as in `devagent serve`, where the sandboxes and the
workers' door share a process and wake each other), on a SQLite database in a temporary folder;
the worker is a real subprocess connected over loopback HTTP.

    .venv/bin/python bench/worker_overhead.py [--calls 30]

Prints medians and the ratios worker/local; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from container_overhead import median_seconds

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "bench-worker-token"


async def _run(sandbox: Any, folder: Path) -> None:
    from devagent.agent.sandbox.base import Limits

    started = await sandbox.start("true", cwd=str(folder), env={"PATH": os.environ["PATH"]}, limits=Limits())
    while await asyncio.to_thread(os.read, started.output_fd, 65536):
        pass
    os.close(started.output_fd)
    code = await started.proc.wait()
    assert code == 0, code


async def _server(tmp: Path) -> tuple[str, Any, Any]:
    """The A2A app with the workers' door, in this process, on a free port: its URL, the uvicorn
    server and the core."""
    import uvicorn

    from devagent.a2a import A2ASettings, create_app
    from devagent.agent.core import AgentCore
    from devagent.agent.settings import CoreConfig

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as `devagent serve`'s (a2a/server.py)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    config = CoreConfig(db_url=f"sqlite+aiosqlite:///{tmp / 'db'}", worker_tokens=(f"w={TOKEN}",))
    core = await AgentCore.open(config)
    settings = A2ASettings(host="127.0.0.1", port=port, workspace_roots=[tmp], tokens={"caller": "bench"})
    server = uvicorn.Server(uvicorn.Config(create_app(core, settings), log_level="warning", lifespan="on"))
    serving = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
    while not server.started:  # noqa: ASYNC110 - uvicorn offers no event to wait on
        await asyncio.sleep(0.01)
    return f"http://127.0.0.1:{port}", (server, serving), core


def _report(what: str, local: float, worker: float) -> None:
    print(f"{what}: local {local * 1000:.2f} ms, worker {worker * 1000:.1f} ms")
    print(f"  worker / local: {worker / local:.1f}x (+{(worker - local) * 1000:.1f} ms each)")


def _start_worker(url: str, tmp: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVAGENT_")}
    env.update({"DEVAGENT_WORKER_TOKEN": TOKEN, "HOME": str(tmp)})
    argv = [sys.executable, "-m", "devagent", "worker", "--server", url, "--state-dir", str(tmp / "w")]
    return subprocess.Popen(argv, env=env, stderr=subprocess.DEVNULL, cwd=ROOT)


async def main(calls: int) -> None:
    from types import SimpleNamespace

    from devagent.agent.sandbox.choose import choose_sandbox, provider_of
    from devagent.agent.sandbox.worker import WorkerProvider
    from devagent.agent.settings import CoreConfig

    tmp = Path(tempfile.mkdtemp(prefix="devagent-bench-workers-", dir="/var/tmp"))
    os.chmod(tmp, 0o755)  # the sandbox user passes through to the workspace
    folder = tmp / "ws"
    folder.mkdir()
    choice, line = choose_sandbox(True, CoreConfig(), "bench")
    local_provider = provider_of(choice)
    local_provider.give(folder)
    local = local_provider.for_session("local", [folder])
    (folder / "f.txt").write_text("x" * 1000)
    url, server, core = await _server(tmp)
    worker = _start_worker(url, tmp)
    provider = WorkerProvider(SimpleNamespace(db_url=core.config.db_url, worker_lease_seconds=15))
    try:
        remote = provider.for_session("bench", [folder])
        await remote.write_atomic_async("f.txt", b"x" * 1000)  # the worker takes the session
        await _run(remote, folder)
        print(f"local backend: {line}")
        local_run = await median_seconds(lambda: _run(local, folder), calls)
        worker_run = await median_seconds(lambda: _run(remote, folder), calls)
        local_read = await median_seconds(lambda: local.read_bytes_async("f.txt"), calls)
        worker_read = await median_seconds(lambda: remote.read_bytes_async("f.txt"), calls)
        _report(f"command `true`, median of {calls}", local_run, worker_run)
        _report(f"file read (1 kB), median of {calls}", local_read, worker_read)
    finally:
        await provider.close()
        worker.terminate()
        worker.wait(30)
        uvicorn_server, serving = server
        uvicorn_server.should_exit = True
        await asyncio.wait_for(serving, 30)
        await core.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=30)
    asyncio.run(main(parser.parse_args().calls))
