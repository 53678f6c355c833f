"""Writing tools: write_file and edit. Files are opened through the confined walk and written
atomically (`_util.atomic_write`: a temporary file renamed over the target), so a crash never leaves
a truncated file and a hard link to a file outside the workspace is never written through."""

from __future__ import annotations

import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from devagent.agent.events import ConfirmationDetails, FileDiff, ToolErrorType, ToolKind
from devagent.agent.tools import diagnostics, freshness, syntax
from devagent.agent.tools._util import (
    BINARY_SNIFF_BYTES,
    atomic_write,
    bool_arg,
    count_lines,
    file_diff,
    file_io,
    file_status,
    fs_failure,
    in_thread,
    parameter,
    parameters_schema,
    read_text,
    str_arg,
)
from devagent.agent.tools.base import Tool, ToolContext, ToolResult
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.matching import Replaced, replace_in
from devagent.agent.tools.region import edited_region
from devagent.agent.tools.remote_files import SandboxFiles, remote_files
from devagent.agent.tools.workspace import Workspace

T = TypeVar("T")


class WriteFile(Tool):
    name = "write_file"
    description = (
        "Write a whole file in the workspace, replacing its content, or create it (and its parent "
        "directories). Give the complete content: nothing of the old file is kept. To change part of "
        "an existing file prefer `edit`. Replacing an existing file needs a read of it in this session "
        "first. The user may be shown a diff and may change the content before it is written; the "
        "result says so when that happened, shows the changed part with line numbers and reports "
        "syntax errors the write introduced."
    )
    parameters = parameters_schema(
        ["path", "content"],
        path=parameter(
            "string", "The file to write, relative to the workspace root (or absolute inside it)."
        ),
        content=parameter("string", "The complete new content of the file."),
    )
    kind = ToolKind.EDIT

    def describe(self, args: dict[str, Any]) -> str:
        return f"Write {args.get('path', '')}"

    def _plan(
        self, args: dict[str, Any], ctx: ToolContext, current: _Current | None = None
    ) -> tuple[Path, str | None, str]:
        path = str_arg(args, "path")
        content = str_arg(args, "content", allow_empty=True)
        real, old = current or _current(ctx.workspace, path)
        return real, old, content

    async def confirmation(self, args: dict[str, Any], ctx: ToolContext) -> ConfirmationDetails:
        current = await _client_current(ctx, args)
        real, old, new = await _planned(self._plan, args, ctx, current)
        await in_thread(vet_proposal, ctx, real, old, new)
        return file_diff(ctx.workspace, real, old, new)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        current = await _client_current(ctx, args)
        real, old, proposed = await _planned(self._plan, args, ctx, current)
        return await write_checked(ctx, real, old, proposed, "Created" if old is None else "Wrote")


_Current = tuple[Path, str | None]


async def _planned(
    plan: Callable[[dict[str, Any], ToolContext, _Current | None], T],
    args: dict[str, Any],
    ctx: ToolContext,
    current: _Current | None,
) -> T:
    """`plan(args, ctx, current)` through `file_io`: it reads the file the call names from disk
    (nothing when the client's file backend gave its text); the plan resolves and checks it."""
    reads: list[Path] = []
    if current is None:
        try:
            reads = [ctx.workspace.absolute(args.get("path", ""))]
        except ToolFailure:
            pass  # the plan says what is wrong with the path
    return await file_io(reads, ctx.workspace, plan, args, ctx, current)


async def _client_current(ctx: ToolContext, args: dict[str, Any]) -> _Current | None:
    """With a client file backend: the real path the call names and the client's text of it (None
    when it does not exist). Without one: None (the tool reads the disk itself)."""
    files = ctx.backends.files
    if files is None:
        return None
    path = str_arg(args, "path")
    if (remote := remote_files(ctx)) is not None:
        return await _remote_current(remote, path)
    real = await in_thread(ctx.workspace.resolve, path)
    ctx.workspace.check_writable(real, path)
    status = await in_thread(file_status, real, ctx.workspace)
    if status is not None and stat.S_ISDIR(status.st_mode):
        raise ToolFailure(f"{path!r} is a directory; give a file path", ToolErrorType.IS_DIRECTORY)
    return real, await files.read_text(real)


async def _remote_current(files: SandboxFiles, path: str) -> _Current:
    """`_client_current` through the session's sandbox: the path checked by its words and by its
    real path there (a link cannot carry a write into what no tool may change)."""
    real = files.resolve(path)
    await files.checked_real(real, path)
    try:  # a folder is told by the read itself: one command in the sandbox fewer
        return real, await files.read_text(real)
    except ToolFailure as e:
        if e.type == ToolErrorType.IS_DIRECTORY:
            raise ToolFailure(
                f"{path!r} is a directory; give a file path", ToolErrorType.IS_DIRECTORY
            ) from None
        raise


async def _client_write(
    ctx: ToolContext, real: Path, old: str | None, proposed: str | None, verb: str
) -> ToolResult:
    """`_write` through the client's file backend (the editor writes it, into its buffer)."""
    assert ctx.backends.files is not None
    content, modified = _content(ctx, proposed)
    report = await in_thread(_vet, ctx, real, old, content, modified)
    await ctx.backends.files.write_text(real, content)
    return _written(ctx, real, old, content, modified, verb, report)


async def write_checked(
    ctx: ToolContext, real: Path, old: str | None, proposed: str | None, verb: str
) -> ToolResult:
    """Writes the proposed content (or the user's version of it) as `_write` does, through the
    client's file backend when there is one, then reports what the project's checkers find the
    write introduced (`diagnostics.after_write`: in refuse mode the write is undone)."""
    if ctx.backends.files is not None:
        result = await _client_write(ctx, real, old, proposed, verb)
    else:
        result = await in_thread(_write, ctx, real, old, proposed, verb)
    content, modified = _content(ctx, proposed)
    return await diagnostics.after_write(ctx, real, old, content, modified, result)


def _current(workspace: Workspace, path: str) -> tuple[Path, str | None]:
    """The real path a write would replace and its current text (None when it does not exist),
    read through the confined walk."""
    real = workspace.resolve(path)
    workspace.check_writable(real, path)
    status = file_status(real, workspace)
    if status is None:
        return real, None
    if stat.S_ISDIR(status.st_mode):
        raise ToolFailure(f"{path!r} is a directory; give a file path", ToolErrorType.IS_DIRECTORY)
    try:
        return real, read_text(real, workspace)
    except FileNotFoundError:
        return real, None
    except OSError as e:
        raise fs_failure(e, path) from e


def _content(ctx: ToolContext, proposed: str | None) -> tuple[str, bool]:
    """What is written: the proposed content or the user's version of it, and whether the
    user changed it."""
    modified = ctx.new_content is not None and ctx.new_content != proposed
    content = ctx.new_content if ctx.new_content is not None else proposed
    if content is None:  # pragma: no cover - callers pass one of the two
        raise ToolFailure("there is no content to write", ToolErrorType.INVALID_ARGUMENTS)
    return content, modified


def _write(ctx: ToolContext, real: Path, old: str | None, proposed: str | None, verb: str) -> ToolResult:
    """Writes the proposed content, or the user's version of it, and describes the change. Refused
    (nothing written) when the session has not seen the file's current text, or when the operator
    refuses writes that break the syntax (`_vet`)."""
    content, modified = _content(ctx, proposed)
    report = _vet(ctx, real, old, content, modified)
    try:  # a crash leaves the old file or the new one; written through the confined walk
        atomic_write(real, content, ctx.workspace)
    except OSError as e:
        raise fs_failure(e, ctx.workspace.display(real)) from e
    return _written(ctx, real, old, content, modified, verb, report)


def vet_proposal(ctx: ToolContext, real: Path, old: str | None, proposed: str) -> None:
    """Before the user is asked about a write: a ToolFailure if it would be refused when run
    (the file not read or changed since; a syntax error the operator refuses)."""
    if ctx.syntax_check == "refuse":
        _vet(ctx, real, old, proposed, False)
    else:
        freshness.check_before_write(ctx.state, ctx.workspace, real, old)


def _vet(ctx: ToolContext, real: Path, old: str | None, content: str, modified: bool) -> syntax.Report | None:
    """What a write must pass before it is made: the session has seen the file as it is now
    (`freshness`), and, when the operator refuses writes that break the syntax, the model's content
    introduces no syntax error (what the user wrote is theirs and is written). Returns the syntax
    check's report (None: not checked)."""
    freshness.check_before_write(ctx.state, ctx.workspace, real, old)
    if ctx.syntax_check == "off":
        return None
    report = syntax.introduced(real, old, content)
    if report is not None and report.problems and ctx.syntax_check == "refuse" and not modified:
        raise ToolFailure(
            f"Nothing was written: this change would introduce syntax errors in "
            f"{ctx.workspace.display(real)} ({report.language}):\n{report.shown()}\n"
            "The file is unchanged; correct the change and try again.",
            ToolErrorType.SYNTAX_ERROR,
        )
    return report


def _written(
    ctx: ToolContext,
    real: Path,
    old: str | None,
    content: str,
    modified: bool,
    verb: str,
    report: syntax.Report | None = None,
) -> ToolResult:
    """The result of a write that was made: what was written, the changed part with line
    numbers, and the syntax errors it introduced. The session now knows the file's text (unless
    the user changed it: the model must read it again)."""
    display = ctx.workspace.display(real)
    n = count_lines(content)
    text = f"{verb} {display} ({n} line{'' if n == 1 else 's'})."
    # The mark of a file the user changed matches no text: the next edit is asked to read it first.
    freshness.remember(ctx.state, real, "" if modified else freshness.mark_of(content))
    if modified:
        text += (
            " The user modified the proposed content before it was written; read the file again "
            "before editing it further."
        )
    region = edited_region(old, content) if old is not None else ""
    if region:
        shown = region.rstrip("\n")
        text += f"\n\nThe changed part of {display} now reads (line number, a tab, the line):\n{shown}"
    if report is None and ctx.syntax_check != "off":
        report = syntax.introduced(real, old, content)
    data: dict[str, Any] = {"path": display, "user_modified": modified}
    if report is not None and report.problems:
        text += (
            f"\n\nSyntax check ({report.language}): this write introduced syntax errors:\n"
            f"{report.shown()}\nThe file was written as shown; fix them with another edit."
        )
        data["syntax_errors"] = [{"line": p.line, "message": p.message} for p in report.problems]
    diff: FileDiff = file_diff(ctx.workspace, real, old, content)
    return ToolResult(text=text, diff=diff, data=data)


class Edit(Tool):
    name = "edit"
    description = (
        "Replace text in a file. Copy `old_string` exactly from the file (whitespace and indentation "
        "included); it must occur once, unless `replace_all` is true: include enough surrounding lines to "
        "make it unique. When it is not in the file exactly, one place that differs from it only in "
        "trailing whitespace, a consistent indentation shift, tabs against spaces, line endings or "
        "typographic quotes and dashes is used (new_string re-indented the same way) and the result says "
        "what was tolerated; otherwise the error shows the closest lines of the file. For several changes "
        "to one file give `edits`, a list applied in order, all or none. Read the file first. To create a "
        "new file, give an empty `old_string` and the content as `new_string`. The user may be shown a "
        "diff and may change the result before it is written."
    )
    parameters = parameters_schema(
        ["path"],
        path=parameter(
            "string", "The file to change, relative to the workspace root (or absolute inside it)."
        ),
        old_string=parameter(
            "string", "The exact text to replace. Empty only to create a file that does not exist."
        ),
        new_string=parameter("string", "The text to put in its place."),
        replace_all=parameter("boolean", "Replace every occurrence instead of exactly one. Default false."),
        edits=parameter(
            "array",
            "Instead of old_string/new_string/replace_all: several replacements in this file, applied "
            "in order (each sees the text the ones before it left); if one fails, none is written.",
            items=parameters_schema(
                ["old_string", "new_string"],
                old_string=parameter("string", "The exact text to replace."),
                new_string=parameter("string", "The text to put in its place."),
                replace_all=parameter("boolean", "Replace every occurrence. Default false."),
            ),
            minItems=1,
        ),
    )
    kind = ToolKind.EDIT

    def describe(self, args: dict[str, Any]) -> str:
        return f"Edit {args.get('path', '')}"

    def _plan(self, args: dict[str, Any], ctx: ToolContext, current: _Current | None = None) -> _EditPlan:
        """What the edit does to the file, or a ToolFailure."""
        path = str_arg(args, "path")
        edits = _edit_list(args)
        real, content = current or _current(ctx.workspace, path)
        if content is None:
            if len(edits) == 1 and edits[0][0] == "":
                return _EditPlan(real, None, edits[0][1], 1)
            raise ToolFailure(
                f"{path!r} does not exist. To create it, call edit with an empty old_string "
                "(or use write_file).",
                ToolErrorType.NOT_FOUND,
            )
        if "\x00" in content[:BINARY_SNIFF_BYTES]:
            raise ToolFailure(f"{path!r} is a binary file; it cannot be edited", ToolErrorType.BINARY_FILE)
        plan = _EditPlan(real, content, content, 0)
        for i, (old_string, new_string, replace_all) in enumerate(edits):
            which = f"edits[{i}]: " if len(edits) > 1 else ""
            try:
                done = _one_edit(plan.new, old_string, new_string, replace_all, path)
            except ToolFailure as e:
                raise ToolFailure(which + e.message + _none_written(len(edits)), e.type) from None
            plan.new, plan.count = done.text, plan.count + done.count
            if done.tolerated:
                plan.notes.append(f"{which}tolerated {done.tolerated}")
        return plan

    async def confirmation(self, args: dict[str, Any], ctx: ToolContext) -> ConfirmationDetails:
        current = await _client_current(ctx, args)
        plan = await _planned(self._plan, args, ctx, current)
        await in_thread(vet_proposal, ctx, plan.real, plan.old, plan.new)
        return file_diff(ctx.workspace, plan.real, plan.old, plan.new)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        current = await _client_current(ctx, args)
        plan, proposed, verb = await _planned(self._change, args, ctx, current)
        result = await write_checked(ctx, plan.real, plan.old, proposed, verb)
        return self._say(result, plan, proposed)

    def _change(
        self, args: dict[str, Any], ctx: ToolContext, current: _Current | None
    ) -> tuple[_EditPlan, str | None, str]:
        """The plan, the proposed content (None when the user's replaces an edit that no longer
        applies) and the verb."""
        if ctx.new_content is not None:
            # The user's whole new file replaces the proposal; the edit need not apply any more.
            path = str_arg(args, "path")
            real, old = current or _current(ctx.workspace, path)
            try:
                plan = self._plan(args, ctx, (real, old))
                proposed: str | None = plan.new
            except ToolFailure:
                plan, proposed = _EditPlan(real, old, "", 0), None  # whatever the user wrote is theirs
            plan.count = -1  # the user's content was written: no count to report
            return plan, proposed, "Edited" if old is not None else "Created"
        plan = self._plan(args, ctx, current)
        return plan, plan.new, "Created" if plan.old is None else "Edited"

    @staticmethod
    def _say(result: ToolResult, plan: _EditPlan, proposed: str | None) -> ToolResult:
        if plan.count < 0 or plan.old is None:
            return result
        n = plan.count
        first, rest = result.text.split("\n", 1) if "\n" in result.text else (result.text, "")
        said = first.rstrip(".") + f": replaced {n} occurrence{'s' if n != 1 else ''}."
        if plan.notes:
            said += " Not an exact match: " + "; ".join(plan.notes) + "."
        result.text = said + ("\n" + rest if rest else "")
        return result


@dataclass(slots=True)
class _EditPlan:
    real: Path
    old: str | None  # None: the file does not exist
    new: str
    count: int  # places replaced
    notes: list[str] = field(default_factory=list)  # what each edit's match tolerated


def _edit_list(args: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """The call's replacements: its `edits`, or its one old_string/new_string."""
    edits = args.get("edits") if isinstance(args, dict) else None
    if edits is None:
        return [
            (
                str_arg(args, "old_string", allow_empty=True),
                str_arg(args, "new_string", allow_empty=True),
                bool_arg(args, "replace_all", False),
            )
        ]
    if any(args.get(k) is not None for k in ("old_string", "new_string", "replace_all")):
        raise ToolFailure(
            "give either old_string and new_string or edits, not both", ToolErrorType.INVALID_ARGUMENTS
        )
    if not isinstance(edits, list) or not edits or not all(isinstance(e, dict) for e in edits):
        raise ToolFailure(
            "the argument 'edits' must be a non-empty list of objects", ToolErrorType.INVALID_ARGUMENTS
        )
    out = []
    for i, e in enumerate(edits):
        try:
            old_string = str_arg(e, "old_string", allow_empty=True)
            new_string = str_arg(e, "new_string", allow_empty=True)
            replace_all = bool_arg(e, "replace_all", False)
        except ToolFailure as f:
            raise ToolFailure(f"edits[{i}]: {f.message}", f.type) from None
        if old_string == "" and len(edits) > 1:
            raise ToolFailure(
                f"edits[{i}]: old_string is empty; an empty old_string only creates a new file, "
                "in a call of its own",
                ToolErrorType.INVALID_ARGUMENTS,
            )
        out.append((old_string, new_string, replace_all))
    return out


def _one_edit(content: str, old_string: str, new_string: str, replace_all: bool, path: str) -> Replaced:
    if old_string == "":
        raise ToolFailure(
            f"{path!r} already exists; an empty old_string only creates new files. Give the text "
            "to replace, or use write_file to replace the whole file.",
            ToolErrorType.FILE_EXISTS,
        )
    if old_string == new_string:
        raise ToolFailure(
            "old_string and new_string are the same; nothing would change", ToolErrorType.EDIT_NO_CHANGE
        )
    return replace_in(content, old_string, new_string, replace_all=replace_all, path=path)


def _none_written(n: int) -> str:
    return " None of the edits was written." if n > 1 else ""
