"""Workers killed at random points of turns (issue 41's kill tests, as a soak): one `devagent
serve` on the worker backend (SQLite), two `devagent worker` processes; each round is a new
session whose scripted turn runs K shell commands (each writes its start into a FIFO counter
outside the workers, then a file of its own) and then lists the workspace. At a random moment of
the turn a random worker is SIGKILLed (and a new one started after the turn). Checked from
outside, every round: the turn ends (none stuck); no command started twice; every command either
finished or was reported interrupted; the final listing holds exactly the files of the commands
that finished (the workspace as of the last finished call).

    .venv/bin/python bench/worker_kill_soak.py [--rounds 10] [--commands 4] [--seed 1]

Prints the counts; exits 1 if any check failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.a2a.test_hostile import script, tool_outputs  # noqa: E402
from tests.core_helpers import shell_call  # noqa: E402
from tests.workers.conftest import Worker, WorkerSite  # noqa: E402
from tests.workers.fifos import FifoCounter  # noqa: E402
from tests.workers.test_issue41_workers import turn  # noqa: E402

# Some work after a command's file is written (a loop, not a sleep: a kill lands in it often)
WORK = "n=0; while [ $n -lt 20000 ]; do n=$((n+1)); done"


def steps(counter: Path, commands: int) -> list[list[dict[str, Any]]]:
    out = [
        [
            shell_call(
                f'echo "$(basename "$PWD") c{i}" > {counter}; echo {i} > f{i}.txt; {WORK}; '
                f"echo DONE-$((1000 + {i}))"
            )
        ]
        for i in range(commands)
    ]
    return [
        *out,
        [shell_call("echo LIST-$((1 + 1)) $(ls f*.txt 2>/dev/null) END")],
        [{"text": "ok"}],
    ]


def check(output: str, lines: list[str], commands: int) -> tuple[list[str], int]:
    """The problems of one round's turn (empty: none) and how many calls it saw interrupted (the
    final listing may be one of them: then the workspace is not checked this round)."""
    problems: list[str] = []
    # per call (one line of the tool output each): finished when its marker (computed by the
    # command: its own text, shown with a failed call, never holds it) came and it was not then
    # reported interrupted (its output may have come before its worker was lost)
    calls = output.splitlines()
    note = "interrupted and is not run again"
    finished = {i for i in range(commands) if any(f"DONE-{1000 + i}" in c and note not in c for c in calls)}
    interrupted = output.count(note)
    listed = re.search(r"LIST-2 ?(.*?) END", output)
    if len(finished) + interrupted != commands + (0 if listed else 1):
        problems.append(f"{commands} commands: {len(finished)} finished, {interrupted} interrupted")
    started = [line.split()[-1] for line in lines]
    if len(started) != len(set(started)):
        problems.append(f"a command started twice: {started}")
    if listed and set(listed.group(1).split()) != {f"f{i}.txt" for i in finished}:
        problems.append(f"workspace {listed.group(1)!r} but finished {sorted(finished)}")
    return problems, interrupted


async def main(rounds: int, commands: int, seed: int) -> int:
    rng = random.Random(seed)
    tmp = Path(tempfile.mkdtemp(prefix="devagent-soak-"))
    site = WorkerSite(tmp)
    counter = FifoCounter(site.shared / "started")
    totals = {"rounds": 0, "kills": 0, "interrupted": 0, "problems": 0}
    with ExitStack() as stack:
        s = stack.enter_context(site.server(script(tmp / "s.json", steps(counter.path, commands))))
        workers: list[Worker] = []
        for r in range(rounds):
            while len(workers) < 2:
                # an earlier round's session is given back soon: each round's has room
                more = ("--idle-seconds", "5")
                w = stack.enter_context(site.worker(s, f"w{r}-{len(workers)}", netns=False, more=more))
                w.wait_connected()
                workers.append(w)
            before = len(counter.lines)
            running = asyncio.ensure_future(turn(s.url, f"round {r}", site.root / "alice"))
            await asyncio.sleep(rng.uniform(0.0, 1.5))
            victim = workers.pop(rng.randrange(len(workers)))
            os.kill(victim.proc.pid, signal.SIGKILL)
            victim.proc.wait(30)
            frames = await asyncio.wait_for(running, 300)
            output = tool_outputs(json.dumps(frames))
            problems, interrupted = check(output, counter.lines[before:], commands)
            totals["rounds"] += 1
            totals["kills"] += 1
            totals["interrupted"] += interrupted
            totals["problems"] += len(problems)
            if problems and os.environ.get("SOAK_DUMP"):
                Path(os.environ["SOAK_DUMP"]).write_text(output)
            print(f"round {r}: {interrupted} interrupted{'; ' + '; '.join(problems) if problems else ''}")
    counter.close()
    site.cleanup()
    print(json.dumps(totals))
    return 1 if totals["problems"] else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--commands", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.rounds, args.commands, args.seed)))
