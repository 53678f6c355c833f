"""Diagnostics after edits (issue 43 item 1), timed: what an `edit` costs alone, with the ruff
fallback, and with a warm language server (basedpyright; typescript-language-server when its npm
package is installed), each as a ratio of the edit alone in the same run; and each server's
memory (its processes' RSS). A tool run straight through the tool object, no model or door.

    .venv/bin/python bench/diagnostics_timings.py [--rounds 6]

ruff and basedpyright come with the virtualenv (`scripts/test` installs them); the TypeScript
server with the npm packages of tests/unit/agent/tools/js. A checker that is missing is left out.
(This was a test that printed these figures; a benchmark is its own process, not a CI step.)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]


def rss_kib(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total


async def timed_edits(ctx: Any, path: str, swaps: tuple[str, str], rounds: int) -> float:
    """The mean seconds of an edit of `path` that swaps the two texts back and forth."""
    from devagent.agent.tools import builtin_tools

    edit = builtin_tools()["edit"]
    first, second = swaps
    started = time.perf_counter()
    for i in range(rounds):
        old, new = (first, second) if i % 2 == 0 else (second, first)
        result = await edit.run({"path": path, "old_string": old, "new_string": new}, ctx)
        assert result.text.startswith("Edited"), result.text
    return (time.perf_counter() - started) / rounds


def checkers_bin(folder: Path) -> str:
    """A folder of links to the virtualenv's ruff and basedpyright (those installed)."""
    venv_bin = str(Path(sys.executable).parent)
    folder.mkdir()
    for program in ("ruff", "basedpyright-langserver"):
        found = shutil.which(program, path=venv_bin)
        if found is not None:
            (folder / program).symlink_to(found)
    return str(folder)


async def measure(ws: Path, rounds: int) -> list[str]:
    from tests.unit.agent.tools import test_diagnostics as td

    from devagent.agent.state import SessionState
    from devagent.agent.tools import freshness
    from devagent.agent.tools.base import ToolContext
    from devagent.agent.tools.language_servers import SERVERS, SessionServers
    from devagent.agent.tools.workspace import Workspace

    folders = [checkers_bin(ws.parent / "bin")]
    if (td.JS_BIN / "typescript-language-server").exists():
        folders.append(str(td.JS_BIN))
    os.environ["PATH"] = td.path_with(*folders)
    (ws / "app.py").write_text(td.OLD_PY)
    (ws / "app.ts").write_text(td.OLD_TS)
    state = SessionState(workspace_roots=[str(ws)])
    for name in ("app.py", "app.ts"):
        freshness.remember(state, (ws / name).resolve(), freshness.mark_of((ws / name).read_text()))
    servers = SessionServers()

    def ctx(mode: str, lsp: SessionServers | None = None) -> ToolContext:
        return ToolContext(workspace=Workspace([ws]), state=state, diagnostics=mode, language_servers=lsp)

    py, ts = ("[1, 2]", "[1, 3]"), ("twice(2)", "twice(3)")
    alone = await timed_edits(ctx("off"), "app.py", py, rounds)
    lines = [f"edit alone: {alone * 1000:.1f} ms"]
    if shutil.which("ruff"):
        ruff = await timed_edits(ctx("warn"), "app.py", py, rounds)
        lines.append(f"with ruff: {ruff * 1000:.1f} ms ({ruff / alone:.1f}x)")
    before = 0  # KiB of the servers measured already
    try:
        for path, swap, name in (
            ("app.py", py, "basedpyright"),
            ("app.ts", ts, "typescript-language-server"),
        ):
            if name not in {s.name for s in SERVERS if shutil.which(s.argv[0])}:
                lines.append(f"with {name}: not installed")
                continue
            cold = await timed_edits(ctx("warn", servers), path, swap, 1)  # leaves the second text
            warm = await timed_edits(ctx("warn", servers), path, swap[::-1], rounds)
            memory = (rss_kib(td._tree(servers.pids())) - before) // 1024
            before += memory * 1024
            lines.append(
                f"with {name}: first {cold * 1000:.0f} ms, warm {warm * 1000:.1f} ms "
                f"({warm / alone:.1f}x the edit alone); its processes {memory} MiB RSS in all"
            )
    finally:
        await servers.stop()
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        ws = Path(d) / "ws"
        ws.mkdir()
        print("\n".join(asyncio.run(measure(ws, args.rounds))))


if __name__ == "__main__":
    main()
