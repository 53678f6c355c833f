"""Diagnostics after a write: what the project's own checkers say of the file, beyond its syntax.

After every write (`write_file`, `edit`, `apply_patch`) the file's old and new text go to a
checker: the session's language server for the file's language when one is installed
(`tools/lsp.py`: basedpyright or pyright for Python, typescript-language-server for TypeScript
and JavaScript, gopls for Go, rust-analyzer for Rust), else, for Python, ruff's pyflakes rules
(`tools/lint.py`). The model is told only what its write introduced: the diagnostics of the new
text that the old text did not have, an old one matched by its message on the line the edit moved
it to, or failing that by its code and message. A checker that is missing, fails or takes too long
never fails the write: at most the result says so.

The operator chooses what happens (`edit_diagnostics`): warn (written, the diagnostics in the
result), refuse (the write is undone and refused with them; a user's own version of the content
is theirs and stays) or off.
"""

from __future__ import annotations

import difflib
from collections import Counter
from pathlib import Path

from devagent.agent.events import ToolErrorType
from devagent.agent.tools import freshness
from devagent.agent.tools._util import atomic_write, in_thread, remove_file
from devagent.agent.tools.base import ToolContext, ToolResult
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.findings import Diagnostic, Findings
from devagent.agent.tools.remote_files import remote_files

MODES = ("warn", "refuse", "off")
# At most this many diagnostics are shown for one write.
MAX_SHOWN = 20
# Past this size a file is not checked.
MAX_CHECKED_CHARS = 1_000_000


def introduced(
    before: tuple[Diagnostic, ...] | None, after: tuple[Diagnostic, ...], old: str | None, new: str
) -> list[Diagnostic]:
    """The diagnostics of `after` that `before` did not have: each old one accounts for one new
    one, first by its message on the line the edit moved it to, then by its code and message."""
    if not before:
        return sorted(after, key=lambda d: d.line)
    moved = _line_map(old or "", new)
    at_line: Counter[tuple[int, str]] = Counter()
    by_text: Counter[tuple[str, str]] = Counter()
    for d in before:
        by_text[(d.code, d.message)] += 1
        if d.line in moved:
            at_line[(moved[d.line], d.message)] += 1
    fresh: list[Diagnostic] = []
    pending: list[Diagnostic] = []
    for d in after:
        if at_line[(d.line, d.message)] > 0:
            at_line[(d.line, d.message)] -= 1
            by_text[(d.code, d.message)] -= 1
        else:
            pending.append(d)
    for d in pending:
        if by_text[(d.code, d.message)] > 0:
            by_text[(d.code, d.message)] -= 1
        else:
            fresh.append(d)
    return sorted(fresh, key=lambda d: d.line)


def _line_map(old: str, new: str) -> dict[int, int]:
    """Each unchanged line of `old` (1-based) to its line in `new`."""
    matcher = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    moved: dict[int, int] = {}
    for a, b, size in matcher.get_matching_blocks():
        for i in range(size):
            moved[a + i + 1] = b + i + 1
    return moved


def shown(found: list[Diagnostic]) -> str:
    lines = [f"  {d.shown()}" for d in found[:MAX_SHOWN]]
    if len(found) > MAX_SHOWN:
        lines.append(f"  ... and {len(found) - MAX_SHOWN} more")
    return "\n".join(lines)


async def findings(ctx: ToolContext, real: Path, old: str | None, new: str) -> Findings | None:
    """What the file's checker says of the old and the new text; None when nothing checks it."""
    if len(new) > MAX_CHECKED_CHARS or "\x00" in new or (old is not None and len(old) > MAX_CHECKED_CHARS):
        return None
    from devagent.agent.tools import lint  # late: only a checked write needs it

    servers = ctx.language_servers
    if not ctx.sandbox.files_here:  # a language server reads the files it checks here
        servers = None
    found = await servers.findings(ctx, real, old, new) if servers is not None else None
    if found is not None and not found.note:
        return found
    linted = await lint.findings(ctx, real, old, new)
    if linted is not None:
        return linted
    if found is None and servers is None and ctx.language_servers is not None and not ctx.sandbox.files_here:
        return Findings("language servers", note=REMOTE_NOTE)
    return found


# Why a write in a workspace that is not on this host gets no language server's diagnostics.
REMOTE_NOTE = (
    "language servers run on the server's host and the workspace is in the session's sandbox, so "
    "none checked this file"
)


async def after_write(
    ctx: ToolContext, real: Path, old: str | None, content: str, modified: bool, result: ToolResult
) -> ToolResult:
    """The result of a write that was made, with the diagnostics it introduced; in refuse mode
    (and when the content is the model's), the write undone and a ToolFailure instead."""
    if ctx.diagnostics == "off":
        return result
    found = await findings(ctx, real, old, content)
    if found is None:
        return result
    fresh = introduced(found.before, found.after, old, content)
    display = ctx.workspace.display(real)
    # A file created through the client's backend cannot be removed again: warned, not refused.
    undoable = not modified and (old is not None or _deletable(ctx))
    if fresh and ctx.diagnostics == "refuse" and undoable:
        await _undo(ctx, real, old)
        raise ToolFailure(
            f"Nothing was written: this change would introduce these problems in {display} "
            f"({found.source}):\n{shown(fresh)}\nThe file is unchanged; correct the change and try again.",
            ToolErrorType.DIAGNOSTICS,
        )
    data = result.data if isinstance(result.data, dict) else {}
    if fresh:
        result.text += (
            f"\n\nDiagnostics ({found.source}): this write introduced:\n{shown(fresh)}\n"
            "The file was written as shown; fix them with another edit."
        )
        data["diagnostics"] = [d.as_json() for d in fresh]
    elif found.note:
        result.text += f"\n\n(No diagnostics: {found.note}.)"
    data["diagnostics_source"] = found.source
    result.data = data
    return result


async def _undo(ctx: ToolContext, real: Path, old: str | None) -> None:
    """Puts back what the file held before the refused write (removes a file it created)."""
    if old is None:
        if (remote := remote_files(ctx)) is not None:
            await remote.delete(real)
        elif ctx.backends.files is None:
            await in_thread(remove_file, real, ctx.workspace)
        freshness.forget(ctx.state, real)
        return
    if ctx.backends.files is not None:
        await ctx.backends.files.write_text(real, old)
    else:
        await in_thread(atomic_write, real, old, ctx.workspace)
    freshness.remember(ctx.state, real, freshness.mark_of(old))


def _deletable(ctx: ToolContext) -> bool:
    """Whether a file the write created can be removed again (not one an editor holds)."""
    return ctx.backends.files is None or remote_files(ctx) is not None
