"""apply_patch: files added, deleted, moved and changed by one patch in the V4A format
(`patch_format`), all or none.

Every file is read and every change computed before anything is written: a path outside the
workspace or protected, a file to add that exists, one to change or delete that does not, a
chunk whose lines are not in the file (or are in several places) refuses the whole patch with a
message naming the file and the lines. Writes go through the same helpers as `write_file` and
`edit` (the confined walk, `atomic_write`, the client's file backend when a door supplies one;
deletions are always on disk), and one that fails puts back the files already written. The
permission question shows every file's diff (`FileDiffs`; a patch of one file added or changed in
place is an ordinary `FileDiff`, which the user may edit before it is written).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from devagent.agent.events import ConfirmationDetails, FileDiff, FileDiffs, ToolErrorType, ToolKind
from devagent.agent.tools import freshness
from devagent.agent.tools._util import (
    BINARY_SNIFF_BYTES,
    atomic_write,
    file_diff,
    in_thread,
    parameter,
    parameters_schema,
    remove_file,
    str_arg,
)
from devagent.agent.tools.base import Tool, ToolContext, ToolResult
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.patch_format import FileOp, apply_update, parse
from devagent.agent.tools.remote_files import remote_files
from devagent.agent.tools.write import _client_current, _current, vet_proposal, write_checked


@dataclass(slots=True)
class _Change:
    """One file of a patch, planned: its real path, its text now (None: absent) and after (None:
    deleted), where it moves to, and what its chunks' matches tolerated."""

    action: Literal["add", "delete", "update"]
    shown: str
    real: Path
    old: str | None
    new: str | None
    dest: Path | None = None
    notes: list[str] = field(default_factory=list)


class ApplyPatch(Tool):
    name = "apply_patch"
    description = (
        "Change files with a patch: add, delete, move and edit several files at once, all or none. "
        "`input` is the whole patch:\n"
        "*** Begin Patch\n"
        "*** Add File: path/new.py\n"
        "+every line of the new file, each starting with +\n"
        "*** Delete File: path/old.py\n"
        "*** Update File: path/app.py\n"
        "*** Move to: path/main.py   (optional: rename it too)\n"
        "@@ def greet():   (optional: a line of the file above the change, to find the place)\n"
        " an unchanged line (starts with a space)\n"
        "-a removed line\n"
        "+an added line\n"
        "*** End Patch\n"
        "Give about 3 unchanged lines before and after each change, copied exactly from the file, and "
        "an '@@' line naming the class or function when those are not unique; several '@@' sections "
        "may follow one Update File, in file order; '*** End of File' after a section's lines that end "
        "the file. Paths are relative to the workspace root. Lines that differ from the file only in "
        "trailing whitespace, indentation, tabs against spaces or typographic quotes are still found, "
        "and the result says so. The user may be shown the diffs before anything is written."
    )
    parameters = parameters_schema(
        ["input"],
        input=parameter("string", "The whole patch, from '*** Begin Patch' to '*** End Patch'."),
    )
    kind = ToolKind.EDIT

    def describe(self, args: dict[str, Any]) -> str:
        try:
            ops = parse(str_arg(args, "input"))
        except ToolFailure:
            return "Apply a patch"
        names = [op.path for op in ops]
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        return f"Patch {shown}"

    def touched_paths(self, args: dict[str, Any], ctx: ToolContext) -> list[Path]:
        """The files the patch writes or removes (for the checkpoint taken before it runs)."""
        remote = remote_files(ctx)
        resolve = remote.resolve if remote is not None else ctx.workspace.resolve
        paths: list[Path] = []
        for op in parse(str_arg(args, "input")):
            paths.append(resolve(op.path))
            if op.move_to:
                paths.append(resolve(op.move_to))
        return paths

    async def confirmation(self, args: dict[str, Any], ctx: ToolContext) -> ConfirmationDetails:
        changes = await _plan(ctx, parse(str_arg(args, "input")))
        return _details(ctx, changes)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        changes = await _plan(ctx, parse(str_arg(args, "input")))
        if ctx.new_content is not None and not isinstance(_details(ctx, changes), FileDiff):
            raise ToolFailure(
                "the user's own version of the content applies to one file, and this patch changes "
                f"{len(changes)} files (or moves or deletes one); nothing was written",
                ToolErrorType.INVALID_ARGUMENTS,
            )
        results = await _apply(ctx, changes)
        return _result(ctx, changes, results)


# --- planning: every file read and every change computed, nothing written -----------------------


async def _read(ctx: ToolContext, path: str) -> tuple[Path, str | None]:
    """The real path a patch names and its text now (None when absent), through the client's
    file backend when there is one; a path no tool may write is refused."""
    try:
        current = await _client_current(ctx, {"path": path})
        if current is not None:
            return current
        return await in_thread(_current, ctx.workspace, path)
    except ToolFailure as e:
        raise ToolFailure(f"{e.message}. Nothing was changed.", e.type) from None


async def _plan(ctx: ToolContext, ops: list[FileOp]) -> list[_Change]:
    changes: list[_Change] = []
    named: dict[Path, str] = {}

    def claim(real: Path, shown: str) -> None:
        if real in named:
            also = f" (also as {named[real]})" if named[real] != shown else ""
            raise ToolFailure(
                f"invalid patch: {shown} is named twice{also}; put all of a file's changes under one "
                "'*** Update File' header. Nothing was changed.",
                ToolErrorType.INVALID_PATCH,
            )
        named[real] = shown

    for op in ops:
        real, text = await _read(ctx, op.path)
        claim(real, op.path)
        change = _planned(op, real, text)
        if change.action == "update" and change.new is not None:  # read first, as for edit
            if change.old is not None and all(any(x.strip() for x in c.old) for c in op.chunks):
                freshness.seen_in_patch(ctx.state, real, change.old)  # its lines show it was read
            await in_thread(vet_proposal, ctx, real, change.old, change.new)
        if op.move_to is not None:
            dest, there = await _read(ctx, op.move_to)
            if dest != real:
                claim(dest, op.move_to)
                if there is not None:
                    raise ToolFailure(
                        f"{op.path}: cannot move it to {op.move_to}: that file exists. Delete it in the "
                        "patch first, or choose another name. Nothing was changed.",
                        ToolErrorType.FILE_EXISTS,
                    )
                change.dest = dest
        changes.append(change)
    return changes


def _planned(op: FileOp, real: Path, text: str | None) -> _Change:
    if op.action == "add":
        if text is not None:
            raise ToolFailure(
                f"{op.path}: cannot add it: it exists. Use '*** Update File: {op.path}' to change it. "
                "Nothing was changed.",
                ToolErrorType.FILE_EXISTS,
            )
        return _Change("add", op.path, real, None, op.content)
    if text is None:
        hint = "" if op.action == "delete" else f" Use '*** Add File: {op.path}' to create it."
        raise ToolFailure(
            f"{op.path}: cannot {op.action} it: it does not exist.{hint} Nothing was changed.",
            ToolErrorType.NOT_FOUND,
        )
    if op.action == "delete":
        return _Change("delete", op.path, real, text, None)
    if "\x00" in text[:BINARY_SNIFF_BYTES]:
        raise ToolFailure(
            f"{op.path}: it is a binary file; a patch cannot change it", ToolErrorType.BINARY_FILE
        )
    new, notes = apply_update(text, op.chunks, op.path)
    if new == text and op.move_to is None:
        raise ToolFailure(
            f"{op.path}: the patch changes nothing in it. Nothing was changed.", ToolErrorType.EDIT_NO_CHANGE
        )
    return _Change("update", op.path, real, text, new, notes=notes)


def _diff_of(ctx: ToolContext, c: _Change) -> FileDiff:
    """One file's diff: a deletion goes to /dev/null, a move from the old path to the new."""
    if c.new is None:
        d = file_diff(ctx.workspace, c.real, c.old, "")
        d.formatted_diff = _retitle(d.formatted_diff, minus=None, plus="/dev/null")
        return d
    if c.dest is None:
        return file_diff(ctx.workspace, c.real, c.old, c.new)
    d = file_diff(ctx.workspace, c.dest, c.old, c.new)
    shown = f"a/{ctx.workspace.display(c.real)}"
    d.formatted_diff = _retitle(d.formatted_diff, minus=shown, plus=None) or (
        f"--- {shown}\n+++ b/{ctx.workspace.display(c.dest)}\n"
    )
    return d


def _retitle(diff: str, *, minus: str | None, plus: str | None) -> str:
    lines = diff.split("\n", 2)
    if len(lines) < 3:
        return diff
    if minus is not None:
        lines[0] = f"--- {minus}"
    if plus is not None:
        lines[1] = f"+++ {plus}"
    return "\n".join(lines)


def _details(ctx: ToolContext, changes: list[_Change]) -> FileDiff | FileDiffs:
    if len(changes) == 1 and changes[0].new is not None and changes[0].dest is None:
        return _diff_of(ctx, changes[0])
    return FileDiffs([_diff_of(ctx, c) for c in changes])


# --- writing: all, or the ones written put back -------------------------------------------------


async def _apply(ctx: ToolContext, changes: list[_Change]) -> list[ToolResult | None]:
    """Writes the changes in order; one that fails puts back those written before it."""
    done: list[tuple[Path, str | None]] = []  # what each path held before this patch
    results: list[ToolResult | None] = []
    try:
        for c in changes:
            if c.new is None:
                await _remove(ctx, c.real)
                done.append((c.real, c.old))
                results.append(None)
            elif c.dest is not None:
                verb = f"Moved {ctx.workspace.display(c.real)} to"
                results.append(await write_checked(ctx, c.dest, None, c.new, verb))
                done.append((c.dest, None))
                await _remove(ctx, c.real)
                done.append((c.real, c.old))
            else:
                results.append(
                    await write_checked(ctx, c.real, c.old, c.new, "Created" if c.old is None else "Edited")
                )
                done.append((c.real, c.old))
    except ToolFailure as e:
        await _undo(ctx, done)
        raise ToolFailure(f"{e.message} The files the patch had changed were put back.", e.type) from e
    return results


async def _undo(ctx: ToolContext, done: list[tuple[Path, str | None]]) -> None:
    """Puts back what each path held; the session's view of it is the old text again."""
    for real, old in reversed(done):
        with contextlib.suppress(Exception):  # best effort: the first failure is what is reported
            if old is None:
                await _remove(ctx, real)
                freshness.forget(ctx.state, real)
                continue
            if ctx.backends.files is not None:
                await ctx.backends.files.write_text(real, old)
            else:
                await in_thread(atomic_write, real, old, ctx.workspace)
            freshness.remember(ctx.state, real, freshness.mark_of(old))


async def _remove(ctx: ToolContext, real: Path) -> None:
    """Deletes a file: through the session's sandbox when its workspace is there, else on disk."""
    if (remote := remote_files(ctx)) is not None:
        await remote.delete(real)
    else:
        await in_thread(remove_file, real, ctx.workspace)


def _result(ctx: ToolContext, changes: list[_Change], results: list[ToolResult | None]) -> ToolResult:
    lines: list[str] = []
    diffs: list[FileDiff] = []
    files: list[dict[str, Any]] = []
    for c, res in zip(changes, results, strict=True):
        display = ctx.workspace.display(c.real)
        text = res.text if res is not None else f"Deleted {display}."
        if c.notes:  # after the first line, before the changed part's numbered lines
            first, nl, rest = text.partition("\n")
            text = f"{first} Not an exact match: {'; '.join(c.notes)}.{nl}{rest}"
        lines.append(text)
        written = res.diff if res is not None and c.dest is None else None  # the user's version, if any
        diffs.append(written if isinstance(written, FileDiff) else _diff_of(ctx, c))
        files.append({"action": c.action, "path": display, **(res.data if res is not None else {})})
    if len(changes) == 1 and changes[0].new is not None and changes[0].dest is None:
        return ToolResult(text=lines[0], diff=diffs[0], data={"files": files})
    text = f"Applied the patch to {len(changes)} files:\n" + "\n".join(f"- {line}" for line in lines)
    return ToolResult(text=text, diff=FileDiffs(diffs), data={"files": files})
