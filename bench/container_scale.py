"""Many sessions at once through a real `devagent serve`, on the local backend and on the container
backend in the same run (issue 40's speed and scale):

- S new conversations sent at once (each its own caller folder, the scripted model running one
  shell command and answering): how many complete, the wall time, the median turn;
- the server's memory: its own peak RSS (VmHWM), and the peak of the server with every process
  it started (the container backend's relays, the engine's clients) sampled as they run;
- the containers afterwards: running once the idle reaper has stopped them, kept stopped for
  the sessions' later turns, and after the bench removes them: 0.

    .venv/bin/python bench/container_scale.py [--sessions 50] [--idle 2]

Needs podman (with runc) and bubblewrap; builds the test image (tests/sandbox/image.py) if it is
missing. Runs as root (as the test machines do): the callers' folders are given to the image's
user. Prints figures and ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _rss_kb(pid: int, field: str = "VmRSS") -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _tree(pid: int) -> list[int]:
    """`pid` and every process below it (by /proc's parent links)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


class Sampler:
    """The peak RSS of a server's whole process tree, sampled until stopped."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_kb = 0
        self.peak_processes = 0
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            tree = await asyncio.to_thread(_tree, self.pid)
            self.peak_kb = max(self.peak_kb, sum(_rss_kb(p) for p in tree))
            self.peak_processes = max(self.peak_processes, len(tree))
            await asyncio.sleep(0.2)

    async def stop(self) -> None:
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass


def _podman(*args: str) -> list[str]:
    done = subprocess.run(["podman", *args], capture_output=True, text=True)
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def containers_under(folder: Path) -> dict[str, bool]:
    """The sandbox containers whose /workspace is a folder under `folder`: id -> running."""
    found: dict[str, bool] = {}
    for line in _podman("ps", "-a", "--filter", "label=devagent.sandbox", "--format", "{{.ID}} {{.State}}"):
        cid, state = line.split(maxsplit=1)
        mounts = _podman("container", "inspect", "--format", "{{json .Mounts}}", cid)
        for mount in json.loads(mounts[0] if mounts else "[]") or []:
            if str(mount.get("Source") or "").startswith(str(folder) + "/"):
                found[cid] = state == "running"
    return found


async def one_turn(client: Any, url: str, i: int, folder: Path) -> tuple[bool, float]:
    from tests.a2a.helpers import auth, rpc, v03_message
    from tests.a2a.procs import TOKEN

    msg = v03_message(f"session {i}", settings={"workspace_path": str(folder)})
    started = time.perf_counter()
    frames: list[Any] = []
    try:
        async with client.stream(
            "POST", url, json=rpc("message/stream", {"message": msg}), headers=auth(TOKEN)
        ) as r:
            async for line in r.aiter_lines():
                if line.startswith("data:"):
                    frames.append(json.loads(line[5:]))
    except Exception as e:  # one failure counts, the bench goes on
        print(f"  session {i}: {e!r}")
        return False, time.perf_counter() - started
    took = time.perf_counter() - started
    states = [f["result"]["status"]["state"] for f in frames if "status" in f.get("result", {})]
    said = json.dumps(frames)
    ok = bool(states) and states[-1] == "completed" and f"session-{i}-ran" in said
    if not ok:
        print(f"  session {i} did not complete: {said[-300:]}")
    return ok, took


async def run_backend(backend: str, sessions: int, idle: float, tag: str, temp: Path) -> dict[str, Any]:
    import httpx
    from tests.a2a.procs import TOKEN, serving
    from tests.sandbox.image import UID

    base = temp / backend
    roots = base / "roots"
    for i in range(sessions):
        folder = roots / f"caller{i}"
        folder.mkdir(parents=True)
        (folder / "who").write_text(f"session-{i}")
        os.chown(folder, UID, UID)
        os.chown(folder / "who", UID, UID)
    os.chown(roots, UID, UID)  # the local backend's commands then run as that user, as root's never do
    (base / "home").mkdir()
    steps = [
        {
            "items": [
                {"tool_call": {"name": "run_shell_command", "args": {"command": 'echo "$(cat who)-ran"'}}}
            ]
        },
        {"items": [{"text": "done"}]},
    ]
    model = base / "script.json"
    model.write_text(json.dumps({"steps": steps}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVAGENT_")}
    env.update(
        {
            "HOME": str(base / "home"),
            "DEVAGENT_DATA_DIR": str(base / "data"),
            "DEVAGENT_DB": f"sqlite+aiosqlite:///{base / 'devagent.db'}",
            "DEVAGENT_SANDBOX_BACKEND": backend,
            "DEVAGENT_SANDBOX_IDLE_SECONDS": str(idle),
            "DEVAGENT_SANDBOX_TEMPLATES": json.dumps(
                {"default": {"image": tag, "memory_mb": 256, "pids": 64}}
            ),
        }
    )
    args = ["--workspace-root", str(roots), "--token", TOKEN, "--model", f"scripted:{model}"]
    # one token for all: its default limit of 32 streams at once would refuse the rest
    args += ["--approval", "yolo", "--sandbox", "--max-streams-per-token", "0"]
    out: dict[str, Any] = {}
    try:
        with serving(args, base / "serve.log", env=env) as server:
            sampler = Sampler(server.proc.pid)
            limits = httpx.Limits(max_connections=sessions + 10)
            async with httpx.AsyncClient(timeout=900, limits=limits) as client:
                began = time.perf_counter()
                results = await asyncio.gather(
                    *(one_turn(client, server.url, i, roots / f"caller{i}") for i in range(sessions))
                )
                out["wall"] = time.perf_counter() - began
            await sampler.stop()
            out["ok"] = sum(1 for ok, _ in results if ok)
            out["median_turn"] = statistics.median(t for _, t in results)
            out["server_hwm_mb"] = _rss_kb(server.proc.pid, "VmHWM") / 1024
            out["tree_peak_mb"] = sampler.peak_kb / 1024
            out["peak_processes"] = sampler.peak_processes
            if backend == "container":
                out["after_run"] = containers_under(roots)
                deadline = time.monotonic() + max(60.0, idle * 10)
                while any(containers_under(roots).values()) and time.monotonic() < deadline:  # noqa: ASYNC110
                    await asyncio.sleep(0.5)  # the idle reaper stops them
                out["after_idle"] = containers_under(roots)
    finally:
        for cid in containers_under(roots):
            subprocess.run(["podman", "rm", "--force", cid], capture_output=True)  # noqa: ASYNC221
        out["left"] = len(containers_under(roots))
    return out


def report(backend: str, sessions: int, r: dict[str, Any]) -> None:
    print(
        f"{backend:>9}: {r['ok']}/{sessions} completed in {r['wall']:.1f} s (median turn "
        f"{r['median_turn']:.2f} s); server RSS peak {r['server_hwm_mb']:.0f} MB, with its processes "
        f"{r['tree_peak_mb']:.0f} MB ({r['peak_processes']} processes at most)"
    )
    if "after_run" in r:
        after, idle = r["after_run"], r["after_idle"]
        print(
            f"           containers after the run: {len(after)} ({sum(after.values())} running); "
            f"after the idle reaper: {sum(idle.values())} running, {len(idle) - sum(idle.values())} "
            f"stopped, kept for the sessions' next turns; after removing them: {r['left']}"
        )


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--idle", type=float, default=2.0, help="sandbox_idle_seconds of the server")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.sandbox import image

    if shutil.which("bwrap") is None or shutil.which("podman") is None:
        sys.exit("needs bubblewrap and podman (apt-get install bubblewrap podman runc)")
    tag = image.ensure()
    with tempfile.TemporaryDirectory(prefix="devagent-scale-") as temp:
        os.chmod(temp, 0o755)
        results = {}
        for backend in ("local", "container"):
            results[backend] = await run_backend(backend, args.sessions, args.idle, tag, Path(temp))
            report(backend, args.sessions, results[backend])
    local, container = results["local"], results["container"]
    print(
        f"container / local: wall {container['wall'] / local['wall']:.1f}x, median turn "
        f"{container['median_turn'] / local['median_turn']:.1f}x, server RSS "
        f"{container['server_hwm_mb'] / local['server_hwm_mb']:.2f}x"
    )


if __name__ == "__main__":
    asyncio.run(main())
