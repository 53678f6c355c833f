"""The file tools on a container's volume (the workspace not on this host: `sandbox_workspace =
volume`) against the same tools on a host folder, in one run: the median seconds of read_file,
edit, write_file, glob, grep and list_directory over a small tree (FILES files), and their ratio.

    .venv/bin/python bench/volume_file_tools.py [--calls 10] [--files 200]

Needs podman (with runc) and builds the test image (tests/sandbox/image.py) if it is missing.
Prints figures and ratios; asserts nothing. Everything it makes carries a label of its own and
is removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


async def _median(tools: dict[str, Any], ctx: Any, name: str, args: dict[str, Any], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        await tools[name].run(args, ctx())
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _calls(i: int) -> list[tuple[str, dict[str, Any]]]:
    """One round of calls; the edit flips a word, so each round changes the file."""
    old, new = ("alpha", "beta") if i % 2 == 0 else ("beta", "alpha")
    return [
        ("read_file", {"path": "src/m0.py"}),
        ("edit", {"path": "src/m0.py", "old_string": old, "new_string": new}),
        ("write_file", {"path": "out.txt", "content": f"round {i}\n"}),
        ("glob", {"pattern": "**/*.py"}),
        ("grep", {"pattern": "def f1[0-9]"}),
        ("list_directory", {"path": "src"}),
    ]


async def _measure(sandbox: Any, root: Path, runs: int) -> dict[str, float]:
    from devagent.agent.state import SessionState
    from devagent.agent.tools import builtin_tools
    from devagent.agent.tools.base import ToolContext
    from devagent.agent.tools.workspace import Workspace

    state = SessionState(workspace_roots=[str(root)])
    tools = builtin_tools(None, None, sandbox)

    def ctx() -> ToolContext:
        return ToolContext(workspace=Workspace([root]), state=state, sandbox=sandbox)

    await tools["read_file"].run({"path": "src/m0.py"}, ctx())
    out: dict[str, list[float]] = {}
    for i in range(runs):
        for name, args in _calls(i):
            if name == "edit":
                await tools["read_file"].run({"path": "src/m0.py"}, ctx())
            out.setdefault(name, []).append(await _median(tools, ctx, name, args, 1))
    return {name: statistics.median(times) for name, times in out.items()}


def _tree(files: int) -> str:
    """A shell script making FILES Python files under src/ (and the first with the edited word)."""
    return (
        "mkdir -p src && for i in $(seq 0 " + str(files - 1) + "); do "
        'printf "def f$i():\\n    return $i\\n" > src/m$i.py; done && echo alpha >> src/m0.py'
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--files", type=int, default=200)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.sandbox import image

    from devagent.agent.sandbox.container import ContainerProvider
    from devagent.agent.sandbox.none import Unsandboxed
    from devagent.agent.sandbox.podman import Engine, Template

    tag = image.ensure()
    labels = {"devagent.bench": uuid.uuid4().hex[:12]}
    provider = ContainerProvider(
        engine=Engine("podman"),
        templates={"default": Template("default", tag, memory_mb=256, pids=128)},
        labels=labels,
    )
    try:
        with tempfile.TemporaryDirectory() as tmp:
            host = Path(tmp) / "host"
            host.mkdir()
            local = Unsandboxed([host])
            done = await local.start(
                f"cd {host} && {_tree(args.files)}", cwd=str(host), env={}, limits=_limits()
            )
            await done.proc.wait()
            volume = await provider.open("bench-volume-files", [Path(tmp) / "ws"])
            made = await volume.run(_tree(args.files), time_limit=300)
            assert made.code == 0, made
            here = await _measure(local, host, args.calls)
            there = await _measure(volume, Path(tmp) / "ws", args.calls)
    finally:
        await provider.close()
        await provider.sweep()
    print(f"{args.files} files, {args.calls} calls of each tool (median seconds)")
    print(f"{'tool':16} {'host folder':>12} {'volume':>10} {'ratio':>8}")
    for name, seconds in here.items():
        print(f"{name:16} {seconds:12.4f} {there[name]:10.4f} {there[name] / seconds:8.1f}x")


def _limits() -> Any:
    from devagent.agent.sandbox.base import Limits

    return Limits()


if __name__ == "__main__":
    asyncio.run(main())
