"""`python -m devagent ARGS` run to its end as a user runs it, in a clean environment: none of
this run's DEVAGENT_* settings or provider keys, a data folder under the test's folder."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

HANG = 120.0  # only bounds a hang


async def devagent(args: list[str], tmp_path: Path, **env: str) -> tuple[int, str, str]:
    """`devagent ARGS` in `tmp_path` with no keys and no DEVAGENT_* but the data folder
    (`tmp_path`/data) and `env`; exit code, stdout, stderr."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("DEVAGENT_") and "_API_KEY" not in k}
    base.update({"DEVAGENT_DATA_DIR": str(tmp_path / "data"), "NO_COLOR": "1"})
    base.update(env)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "devagent",
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=base,
        cwd=tmp_path,
    )
    out, err = await asyncio.wait_for(proc.communicate(), HANG)
    return int(proc.returncode or 0), out.decode(), err.decode()
