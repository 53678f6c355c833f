"""Real-patch replay: 300 upstream single-file commits (tests/real_patches.py) through `edit` (a
call per hunk) and `apply_patch` (a patch per commit), as they are and with their hunks altered the
way models err. Prints, per tool and alteration, how many records applied exactly at the first try,
applied through a tolerated difference, were refused (nothing written), or were written wrong.

    .venv/bin/python bench/edit_replay.py [--list] [--data PATH]

`--list` also prints each refused or wrong record with the message the model got. The data is read
from `--data`, else `$DEVAGENT_REAL_PATCHES`, else the first shared/data/real-patches/commits.jsonl in
a folder above the checkout, else /work/shared/data/real-patches/commits.jsonl. Each replay is by a
session that has read the file, as a model reads a file before it changes it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="print each refused or wrong record")
    parser.add_argument("--data", help="the commits.jsonl to read")
    args = parser.parse_args()
    if args.data:
        os.environ["DEVAGENT_REAL_PATCHES"] = args.data
    from tests import real_patches as rp

    if args.data:
        rp.DATA = Path(args.data)
    if not rp.DATA.exists():
        sys.exit(f"no data at {rp.DATA}")
    counts: dict[tuple[str, str], Counter[str]] = {}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="edit-replay-") as tmp:
        for tool in ("edit", "apply_patch"):
            got, odd = await rp.replay_all(tool, Path(tmp))
            counts.update(got)
            if args.list:
                for kind, rid, outcome, message in odd:
                    first = message.splitlines()[0] if message else ""
                    print(f"{tool} / {kind} / {outcome}: {rid}\n    {first}")
    print(
        f"{len(rp.records())} records, {sum(len(r['hunks']) for r in rp.records())} hunks "
        f"({time.monotonic() - started:.0f} s)\n"
    )
    print(rp.table(counts))


if __name__ == "__main__":
    asyncio.run(main())
