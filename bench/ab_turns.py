"""Server CPU per turn of two devagent trees, in interleaved rounds (a change's before and after).

A change of a few percent is below what one run of bench/a2a_overhead.py can show on a shared
machine: its figures move by a tenth from run to run, and the cost per turn drifts as a server's
caches fill. Here both trees serve at once, on one fake OpenAI-compatible model (bench/provider_floor.py)
and one client, each on its own fresh SQLite database and the same workspace; a round is `--seq`
sequential turns on one and then on the other (the order alternating), and each round gives a
ratio, this tree's CPU over the base's. Printed: each tree's median CPU per turn and the median and
range of the rounds' ratios (below 1: this tree costs less).

The base is a git revision, checked out for the run in a temporary worktree (removed at the end),
or a folder holding a `src/` of devagent (`--base-src`). Both run with this checkout's virtualenv,
the base's `src/` first on PYTHONPATH.

    .venv/bin/python bench/ab_turns.py --base HEAD~1 [--kind tool|chat] [--seq 40] [--rounds 8]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import provider_floor as pf

ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def base_source(args: argparse.Namespace) -> Iterator[Path]:
    """The base tree's `src/`: the folder given, or a worktree of the revision for the run."""
    if args.base_src:
        yield Path(args.base_src).resolve()
        return
    with tempfile.TemporaryDirectory() as d:
        tree = Path(d) / "base"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(tree), args.base], check=True
        )
        try:
            yield tree / "src"
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)


async def rounds(base_src: Path, args: argparse.Namespace) -> dict[str, list[float]]:
    import httpx

    async with pf.bench_run("") as run:
        servers: dict[str, pf.Server] = {}
        for name, src in (("base", base_src), ("this tree", ROOT / "src")):
            cmd = pf.devagent_command(run)
            cmd[cmd.index("--db") + 1] = f"sqlite:///{run.tmp / (name.replace(' ', '-') + '.db')}"
            server = pf.Server(cmd, {**run.env, "PYTHONPATH": str(src)}, run.tmp / f"{name}.log")
            run.procs.append(server)
            servers[name] = server
        for server in servers.values():
            await server.ready()
        cpu: dict[str, list[float]] = {name: [] for name in servers}
        async with httpx.AsyncClient(timeout=600) as client:
            for r in range(args.rounds):
                order = list(servers) if r % 2 == 0 else list(reversed(servers))
                for name in order:
                    cpu[name].append((await pf.sequential(client, servers[name], args.kind, args.seq))["cpu"])
    return cpu


def report(cpu: dict[str, list[float]], args: argparse.Namespace) -> None:
    ratios = [b / a for a, b in zip(cpu["base"], cpu["this tree"], strict=True)]
    print(f"{args.kind} turns, server CPU per turn: {args.rounds} interleaved rounds of {args.seq}")
    for name, values in cpu.items():
        print(f"  {name:10}{statistics.median(values):8.2f} ms  ({min(values):.2f}-{max(values):.2f})")
    spread = f"{min(ratios):.3f}-{max(ratios):.3f}"
    print(f"  this tree / base, median of the rounds: {statistics.median(ratios):.3f}  ({spread})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default="HEAD", help="the git revision to compare with (default HEAD)")
    ap.add_argument(
        "--base-src", default="", help="instead: a folder holding devagent's src/ to compare with"
    )
    ap.add_argument("--kind", choices=("tool", "chat"), default="tool")
    ap.add_argument("--seq", type=int, default=40, help="sequential turns per server and round")
    ap.add_argument("--rounds", type=int, default=8)
    args = ap.parse_args()
    with base_source(args) as src:
        report(asyncio.run(rounds(src, args)), args)


if __name__ == "__main__":
    main()
