"""What the stdio doors' cold-start benches (wire, acp, mcp) share: one server process spawned
with a fresh SQLite database, its `initialize` written at once and timed until the answer line is
read; the runs of two doors interleaved, so both see the same machine load; an SDK's import timed
alone; the medians printed."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def work_dir(tmp: Path) -> Path:
    """The servers' working folder under `tmp` (made once, shared by the runs)."""
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    return work


def spawn_to_answer(name: str, argv: list[str], init: dict[str, Any], tmp: Path, wait: float = 60) -> float:
    """Seconds from spawning `argv` (its database a new SQLite file under `tmp`, its data folder
    there too) to the answer to `init`, written at once, read. The answer must be the result for
    init's id (else the bench stops, naming `name`); the server is then closed (stdin) and waited
    for (at most `wait` seconds)."""
    env = dict(os.environ)
    env["DEVAGENT_DB"] = f"sqlite+aiosqlite:///{tmp / f'{uuid.uuid4().hex}.db'}"
    env["DEVAGENT_DATA_DIR"] = str(tmp / "data")
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write((json.dumps(init) + "\n").encode())
    proc.stdin.flush()
    line = proc.stdout.readline()
    elapsed = time.perf_counter() - t0
    proc.stdin.close()
    proc.wait(wait)
    reply = json.loads(line)
    if reply.get("id") != init["id"] or "result" not in reply:
        raise SystemExit(f"{name}: unexpected answer: {line!r}")
    return elapsed


def import_time(module: str) -> float:
    """Median of 3 fresh interpreters' seconds to import `module` alone."""

    def once() -> float:
        code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        return float(out.stdout)

    return statistics.median(once() for _ in range(3))


def interleaved(
    kinds: Sequence[str], runs: int, one_run: Callable[[str, Path], float]
) -> dict[str, list[float]]:
    """`runs` timings of each kind, `one_run(kind, tmp)` taking turns in one temporary folder;
    each kind run once before, to warm the OS file cache (not counted)."""
    times: dict[str, list[float]] = {kind: [] for kind in kinds}
    with tempfile.TemporaryDirectory() as d:
        for kind in kinds:
            one_run(kind, Path(d))
        for _ in range(runs):
            for kind in kinds:
                times[kind].append(one_run(kind, Path(d)))
    return times


def print_medians(times: dict[str, list[float]], runs: int) -> dict[str, float]:
    """Prints each kind's median, min and max; the medians."""
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"cold start (spawn -> initialize answered), {runs} runs each, interleaved:")
    for kind, taken in times.items():
        lo, hi = min(taken) * 1000, max(taken) * 1000
        print(f"  {kind:4}  median {med[kind] * 1000:4.0f} ms  min {lo:4.0f} ms  max {hi:4.0f} ms")
    return med


def compare_two(
    doc: str | None,
    kinds: tuple[str, str],
    one_run: Callable[[str, Path], float],
    sdk: tuple[str, str],
    aim: str,
) -> int:
    """A bench's main: `--runs` (default 20) interleaved runs of two doors (`kinds`), their medians,
    the first's ratio to the second's with its `aim`, and the import of the SDK (`sdk`: its module
    and how to name it) timed alone."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    times = interleaved(kinds, args.runs, one_run)
    imports = import_time(sdk[0])
    med = print_medians(times, args.runs)
    first, second = kinds
    print(f"  {first} / {second}: {med[first] / med[second]:.2f}   (aim: {aim})")
    print(f"  {sdk[1]}: {imports * 1000:.0f} ms")
    return 0
