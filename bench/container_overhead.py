"""The container sandbox backend's cost, against the local ways of running a command, in one run:

- per call: `true` run N times as a plain local subprocess (`bash -c`), under bubblewrap (when
  bwrap can run here) and in a session's container (`ContainerSandbox.run`); a file read through
  the container against a local read;
- a new session's first command: cold (volume and container created and started) against one
  claimed from the warm pool;
- S sessions at once: each created, running one command and released; all complete, the server's
  RSS, and the containers and volumes left afterwards (should be 0).

    .venv/bin/python bench/container_overhead.py [--calls 20] [--starts 5] [--sessions 50]

Needs podman (with runc) and builds the test image (tests/sandbox/image.py) if it is missing.
Prints figures and ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


async def _timed(step: Callable[[], Awaitable[object]], runs: int) -> float:
    """The median seconds of `runs` runs of `step`."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        await step()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


async def _local(argv: list[str]) -> None:
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.DEVNULL)
    await proc.wait()


def _bwrap_argv() -> list[str] | None:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None
    argv = [
        bwrap,
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--unshare-all",
        "--die-with-parent",
    ]
    argv += ["bash", "-c", "true"]
    return argv if os.spawnv(os.P_WAIT, bwrap, argv) == 0 else None


async def per_call(provider: object, calls: int) -> None:
    from devagent.agent.sandbox.container import ContainerProvider

    assert isinstance(provider, ContainerProvider)
    sandbox = await provider.open("bench-calls", [])
    await sandbox.run("true")  # started, image in the page cache
    local = await _timed(lambda: _local(["bash", "-c", "true"]), calls)
    bwrap = _bwrap_argv()
    sandboxed = await _timed(lambda: _local(bwrap), calls) if bwrap else None
    container = await _timed(lambda: sandbox.run("true"), calls)
    print(f"per call (median of {calls}): local {local * 1000:.1f} ms", end="")
    if sandboxed is not None:
        print(f", bwrap {sandboxed * 1000:.1f} ms", end="")
    print(f", container {container * 1000:.1f} ms")
    print(f"  container / local: {container / local:.1f}x", end="")
    if sandboxed is not None:
        print(f"; container / bwrap (the local backend): {container / sandboxed:.1f}x")
    else:
        print("; bwrap cannot run here")
    await sandbox.write_atomic_async("bench.txt", b"x" * 4096)
    with tempfile.NamedTemporaryFile() as f:
        f.write(b"x" * 4096)
        f.flush()
        local_read = await _timed(lambda: asyncio.to_thread(Path(f.name).read_bytes), calls)
    container_read = await _timed(lambda: sandbox.read_bytes_async("bench.txt"), calls)
    print(
        f"file read of 4 KiB: local {local_read * 1000:.2f} ms, container {container_read * 1000:.1f} ms "
        f"({container_read / local_read:.0f}x)"
    )
    await sandbox.release(keep=False)


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
    parser.add_argument("--sessions", type=int, default=10)
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
