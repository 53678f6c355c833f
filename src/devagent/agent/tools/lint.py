"""The linter fallback of the diagnostics after a write: ruff's pyflakes rules (`--select F`:
undefined names, unused or redefined imports, ...) on a Python file, when `ruff` is on the PATH
of the session's commands.

ruff runs as the agent runs any command (`checker.run_checker`: the clean environment, the
per-command limits, the sandbox when it is on), in the file's workspace root, reading the text on
its standard input (`--stdin-filename` names the file, so the project's own ruff settings about
it apply): the old text and the new one are checked without touching the disk.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from devagent.agent.tools.base import ToolContext
from devagent.agent.tools.checker import Checked, run_checker
from devagent.agent.tools.findings import Diagnostic, Findings
from devagent.agent.tools.freshness import mark_of
from devagent.common.lru import LRU

PYTHON_SUFFIXES = (".py", ".pyi", ".pyw")
TIMEOUT = 10.0  # seconds one ruff run may take
_NOT_FOUND = 127  # the shell's answer for a program that is not on the PATH
# What ruff found in the texts it checked last (by command and the text's mark), so the next write
# of a file does not check its old text again.
_LAST: LRU[tuple[str, str], tuple[Diagnostic, ...]] = LRU(64)


async def findings(ctx: ToolContext, real: Path, old: str | None, new: str) -> Findings | None:
    """ruff's findings on the old and the new text of a Python file; None when the file is not
    Python or ruff is not installed."""
    if real.suffix.lower() not in PYTHON_SUFFIXES:
        return None
    root = next((r for r in ctx.workspace.roots if real.is_relative_to(r)), ctx.workspace.primary)
    command = (
        "ruff check --no-cache --quiet --exit-zero --select F --output-format json "
        f"--stdin-filename {shlex.quote(ctx.sandbox.show_path(real))} -"
    )
    after = await run_checker(ctx, command, str(root), new, TIMEOUT)
    if after.exit_code == _NOT_FOUND:
        return None
    parsed = _parse(after)
    if parsed is None:
        return Findings("ruff", note=f"ruff failed: {after.problem or _said(after)}")
    before = None
    if old is not None:
        before = _LAST.get((command, mark_of(old)))  # usually what the previous write of it found
        if before is None:
            before = _parse(await run_checker(ctx, command, str(root), old, TIMEOUT))
        if before is None:  # the old text is not checkable: nothing can be told apart
            return Findings("ruff", note="ruff could not check the file as it was before")
    _LAST[(command, mark_of(new))] = parsed
    return Findings("ruff", before, parsed)


def _parse(run: Checked) -> tuple[Diagnostic, ...] | None:
    """ruff's JSON report as diagnostics; None when it gave none."""
    if run.exit_code != 0:
        return None
    try:
        report: Any = json.loads(run.stdout or "[]")
    except ValueError:
        return None
    if not isinstance(report, list):
        return None
    found: list[Diagnostic] = []
    for item in report:
        if not isinstance(item, dict):
            continue
        location = item.get("location") or {}
        line = location.get("row") if isinstance(location, dict) else None
        code = item.get("code")
        if not code:  # a syntax error: the syntax check's to report
            continue
        found.append(
            Diagnostic(
                line if isinstance(line, int) else 1,
                str(item.get("message", "")),
                str(code),
                error=code in ("F821", "F822", "F823"),
            )
        )
    return tuple(found)


def _said(run: Checked) -> str:
    return " ".join(run.stderr.split())[:200] or f"exit {run.exit_code}"
