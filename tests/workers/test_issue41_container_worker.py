"""Issue 41 item 1: a worker whose own backend is `container` (`devagent worker --backend
container`): the session's command runs in a container of its own on the worker's machine, as
the image's non-root user, in /workspace (the session's folder on the worker, bound); what a file
operation wrote there the command reads. The session's container is removed when the worker
stops."""

from __future__ import annotations

import asyncio
import json
import subprocess
from types import SimpleNamespace

from tests.a2a.test_hostile import script
from tests.sandbox.conftest import sandbox_image  # noqa: F401 (the fixture)
from tests.sandbox.image import UID
from tests.workers.conftest import WITHIN, WorkerSite
from tests.workers.test_issue41_workers import read_to_end

SESSION = "container-worker-session"


def containers() -> list[str]:
    done = subprocess.run(
        ["podman", "ps", "-a", "--filter", f"label=devagent.session={SESSION}", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
    )
    return [n for n in done.stdout.split() if n]


def remove_left() -> None:
    for name in containers():
        subprocess.run(["podman", "rm", "--force", name], capture_output=True)


async def test_issue41_item1_a_worker_with_the_container_backend(tmp_path, sandbox_image: str) -> None:  # noqa: F811
    from devagent.agent.sandbox.base import Limits
    from devagent.agent.sandbox.worker import WorkerProvider

    site = WorkerSite(tmp_path)
    template = {"default": {"image": sandbox_image, "memory_mb": 256, "pids": 64}}
    site.env["DEVAGENT_SANDBOX_TEMPLATES"] = json.dumps(template)
    config = SimpleNamespace(db_url=site.db_url, worker_lease_seconds=15, worker_wait_seconds=WITHIN)
    provider = WorkerProvider(config)
    ws = site.root / "alice"
    try:
        with site.server(script(tmp_path / "s.json", [[{"text": "done"}]])) as s:
            with site.worker(s, "wc", netns=False, backend="container") as worker:
                worker.wait_connected()
                sb = provider.for_session(SESSION, [ws])
                await sb.write_atomic_async("from-the-tool.txt", b"written by a file operation\n")
                command = "id -u; pwd; cat from-the-tool.txt; echo made here > by-shell.txt"
                run = await sb.start(command, cwd=str(ws), env={}, limits=Limits())
                output = (await asyncio.to_thread(read_to_end, run.output_fd)).decode()
                assert await run.proc.wait() == 0, output
                assert await sb.read_bytes_async("by-shell.txt") == b"made here\n"
                assert containers(), "the session's container"
        assert f"{UID}\n/workspace\nwritten by a file operation\n" in output, output
        assert "Sandbox: containers (podman)" in worker.log_text()
        assert containers() == []  # removed when the worker stopped
    finally:
        await provider.close()
        remove_left()
        site.cleanup()
