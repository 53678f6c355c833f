"""The container sandbox backend's cost against the local backend's, in one run:

- per tool call: `true` run N times through the sandbox interface (`Sandbox.start`, its output
  read to the end, as the shell tool runs it) on the local backend (bubblewrap, as `devagent
  serve` chooses it) and on the container backend (a session's container over a host folder, as
  on a server, and over a named volume of its own); a plain subprocess for scale; a 4 KiB file
  read through the container against a read of the host folder;
- a new session's first command: cold (volume and container created and started) against one
  claimed from the warm pool;
- S sessions at once in this process (the provider alone, no server: bench/container_scale.py
  runs them through `devagent serve`): each created, running one command and released; all
  complete, this process's peak RSS, and the containers and volumes left afterwards (0).

    .venv/bin/python bench/container_overhead.py [--calls 20] [--starts 5] [--sessions 50]

Needs podman (with runc) and bubblewrap (else the local backend is left out) and builds the test
image (tests/sandbox/image.py) if it is missing. Prints figures and ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


async def median_seconds(step: Callable[[], Awaitable[object]], runs: int) -> float:
    """The median seconds of `runs` runs of `step` (bench/worker_overhead.py's too)."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        await step()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


async def _local(argv: list[str]) -> None:
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.DEVNULL)
    await proc.wait()


async def _through(sandbox: Any, command: str, cwd: str) -> bytes:
    """`command` through the sandbox interface, as the shell tool runs it: started, its output
    read to its end, waited for."""
    from devagent.agent.sandbox.base import Limits

    started = await sandbox.start(command, cwd=cwd, env={"LANG": "C.UTF-8"}, limits=Limits())
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(started.output_fd, "rb", buffering=0)
    )
    try:
        out = await reader.read()
    finally:
        transport.close()
    await started.proc.wait()
    return out


def _local_backend(root: Path) -> Any:
    """The local backend as `devagent serve` chooses it (bubblewrap; as root its commands run as
    the sandbox user), or None where bubblewrap cannot run here."""
    from devagent.agent.sandbox.base import SandboxError
    from devagent.agent.sandbox.choose import choose_provider
    from devagent.agent.sandbox.local import LocalProvider
    from devagent.agent.settings import CoreConfig

    config = CoreConfig(data_dir=root.parent.parent / "data")
    try:
        provider, _ = choose_provider(True, config, "serve", hide=[root.parent], owned_by=[root.parent])
    except SandboxError as e:
        print(f"the local backend cannot run here: {e}")
        return None
    return provider if isinstance(provider, LocalProvider) else None


async def per_call(provider: object, calls: int) -> None:
    """A tool call's cost on each backend through the same interface (`Sandbox.start`): the
    local backend and the container backend over a host folder, as on a server, and the
    container backend over a named volume of its own."""
    from devagent.agent.sandbox.container import ContainerProvider
    from devagent.agent.sandbox.podman import WORKSPACE

    assert isinstance(provider, ContainerProvider)
    with tempfile.TemporaryDirectory(prefix="devagent-bench-") as temp:
        root = Path(temp) / "roots" / "ws"
        root.mkdir(parents=True)
        os.chmod(root, 0o777)  # the sandbox user's (nobody's, the image user's) to write
        local_provider = _local_backend(root)
        bound_provider = ContainerProvider(
            engine=provider.engine, templates=provider.templates, labels=provider.labels, host_workspace=True
        )
        volume_box = await provider.open("bench-calls", [])
        bound_box = await bound_provider.open("bench-calls-bound", [root])
        for box in (volume_box, bound_box):
            await _through(box, "true", WORKSPACE)  # started, the image in the page cache
        plain = await median_seconds(lambda: _local(["bash", "-c", "true"]), calls)
        local = None
        if local_provider is not None:
            local_box = local_provider.for_session("bench-local", [root])
            local = await median_seconds(lambda: _through(local_box, "true", str(root)), calls)
        bound = await median_seconds(lambda: _through(bound_box, "true", WORKSPACE), calls)
        volume = await median_seconds(lambda: _through(volume_box, "true", WORKSPACE), calls)
        print(f"per tool call, `true` through Sandbox.start (median of {calls}):")
        print(f"  plain subprocess (no sandbox)     {plain * 1000:7.1f} ms")
        if local is None:
            print("  local backend (bubblewrap)        cannot run here")
        else:
            print(f"  local backend (bubblewrap)        {local * 1000:7.1f} ms")
        for name, took in (("host folder", bound), ("named volume", volume)):
            ratio = f"  ({took / local:.1f}x the local backend)" if local else ""
            print(f"  container backend, {name:<14} {took * 1000:7.1f} ms{ratio}")
        if local:
            print(f"  container overhead per call over the local backend: {(bound - local) * 1000:.0f} ms")
        await volume_box.write_atomic_async("bench.txt", b"x" * 4096)
        (root / "bench.txt").write_bytes(b"x" * 4096)
        local_read = await median_seconds(lambda: asyncio.to_thread((root / "bench.txt").read_bytes), calls)
        container_read = await median_seconds(lambda: volume_box.read_bytes_async("bench.txt"), calls)
        print(
            f"file read of 4 KiB: host folder {local_read * 1000:.2f} ms, through the container "
            f"{container_read * 1000:.1f} ms ({container_read / local_read:.0f}x)"
        )
        await volume_box.release(keep=False)
        await bound_box.release(keep=False)
        await bound_provider.close()


async def starts(provider: object, runs: int) -> None:
    from devagent.agent.sandbox.container import ContainerProvider

    assert isinstance(provider, ContainerProvider)
    pool = provider.pool(provider.template())

    async def first_command(warm: bool) -> float:
        if warm:
            await pool.fill()  # ahead of the session, as the pool's background refill does
        started = time.perf_counter()
        sandbox = await provider.open(f"bench-{uuid.uuid4().hex[:8]}", [])
        await sandbox.run("true")
        took = time.perf_counter() - started
        await sandbox.release(keep=False)
        return took

    saved = provider.warm
    provider.warm = 0
    cold = statistics.median([await first_command(False) for _ in range(runs)])
    provider.warm = saved
    warm = statistics.median([await first_command(True) for _ in range(runs)])
    await pool.close(drain=True)
    print(
        f"new session to first command (median of {runs}): cold {cold * 1000:.0f} ms, "
        f"warm pool {warm * 1000:.0f} ms"
    )
    print(f"  cold / warm: {cold / warm:.1f}x")


async def many(provider: object, sessions: int, labels: dict[str, str]) -> None:
    from devagent.agent.sandbox.container import ContainerProvider
    from devagent.agent.sandbox.podman import LABEL

    assert isinstance(provider, ContainerProvider)
    provider.warm = 0  # cold starts all: the pool's refills would be counted as left over

    async def one(i: int) -> bool:
        sandbox = await provider.open(f"bench-many-{i}", [])
        done = await sandbox.run(f"echo {i} > n.txt && cat n.txt", time_limit=600)
        await sandbox.release(keep=False)
        return done.output.strip() == str(i).encode()

    started = time.perf_counter()
    results = await asyncio.gather(*(one(i) for i in range(sessions)), return_exceptions=True)
    took = time.perf_counter() - started
    ok = sum(1 for r in results if r is True)
    failed = [r for r in results if r is not True]
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    left = await provider.engine.labelled({LABEL: "1", **labels})
    left_volumes = await provider.engine.labelled({LABEL: "1", **labels}, kind="volume")
    print(
        f"{sessions} sessions at once: {ok} completed in {took:.1f} s, server RSS peak {rss:.0f} MB, "
        f"containers left {len(left)}, volumes left {len(left_volumes)}"
    )
    for r in failed[:3]:
        print(f"  failed: {r!r}")


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--sessions", type=int, default=50)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.sandbox import image

    from devagent.agent.sandbox.container import ContainerProvider
    from devagent.agent.sandbox.podman import Engine, Template

    began = time.perf_counter()
    built = not image.exists()
    tag = image.ensure()
    if built:
        print(f"built the test image {tag} in {time.perf_counter() - began:.0f} s")
    labels = {"devagent.bench": uuid.uuid4().hex[:12]}
    template = Template("default", tag, memory_mb=256, pids=128)
    provider = ContainerProvider(
        engine=Engine("podman"), templates={"default": template}, warm=1, labels=labels
    )
    try:
        await per_call(provider, args.calls)
        await starts(provider, args.starts)
        await many(provider, args.sessions, labels)
    finally:
        await provider.close(drain=True)
        await provider.sweep()


if __name__ == "__main__":
    asyncio.run(main())
