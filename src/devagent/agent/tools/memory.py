"""The memory tool: facts the user wants remembered, kept as a list under a heading of the
project's agent guide (AGENTS.md by default) so that every later session reads them."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devagent.agent.events import ConfirmationDetails, ToolErrorType, ToolKind
from devagent.agent.tools._util import (
    atomic_write,
    file_diff,
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
from devagent.agent.tools.remote_files import SandboxFiles, remote_files
from devagent.agent.tools.workspace import Workspace
from devagent.common.errors import DevagentError

if TYPE_CHECKING:
    from devagent.agent.sandbox.base import Sandbox

MEMORY_HEADING = "## devagent memories"
MEMORY_MAX_CHARS = 64 * 1024


def memory_path(workspace: Workspace, memory_file: str) -> Path:
    """The memory file at the workspace's primary root (refused if it resolves outside)."""
    return workspace.resolve(str(workspace.primary / memory_file))


def read_memory(workspace: Workspace, memory_file: str = "AGENTS.md") -> str:
    """The memory file's content for the session to put into its instructions at start, or "" when
    there is none (or it cannot be read). Capped at 64 KiB."""
    try:  # through the confined walk
        text = read_text(memory_path(workspace, memory_file), workspace)
    except (ToolFailure, OSError):
        return ""
    if len(text) > MEMORY_MAX_CHARS:
        text = text[:MEMORY_MAX_CHARS] + "\n[… the memory file was cut here …]\n"
    return text


def read_memory_in(sandbox: Sandbox, workspace: Workspace, memory_file: str = "AGENTS.md") -> str:
    """`read_memory` where the workspace is in the session's sandbox, not on this host: the file
    read by the sandbox's own (blocking) file operation, which confines it; "" when there is none."""
    try:
        path = Path(os.path.normpath(workspace.primary / memory_file))
        if not path.is_relative_to(workspace.primary):
            return ""
        text = sandbox.read_bytes(path).decode("utf-8", errors="replace")
    except (OSError, DevagentError):
        return ""
    if len(text) > MEMORY_MAX_CHARS:
        text = text[:MEMORY_MAX_CHARS] + "\n[… the memory file was cut here …]\n"
    return text


def add_memory(content: str | None, fact: str) -> str:
    """`content` with `- fact` appended to the memories section (created when missing). The fact
    is kept on one line."""
    item = f"- {' '.join(fact.split())}\n"
    if not content:
        return f"{MEMORY_HEADING}\n\n{item}"
    lines = content.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.strip() == MEMORY_HEADING), None)
    if start is None:
        sep = "" if content.endswith("\n\n") else ("\n" if content.endswith("\n") else "\n\n")
        return f"{content}{sep}{MEMORY_HEADING}\n\n{item}"
    end = len(lines)
    for i in range(start + 1, len(lines)):
        if lines[i].startswith("#"):
            end = i
            break
    # After the section's last non-blank line.
    insert = end
    while insert > start + 1 and not lines[insert - 1].strip():
        insert -= 1
    if insert > 0 and not lines[insert - 1].endswith("\n"):
        lines[insert - 1] += "\n"
    if insert == start + 1:
        lines.insert(insert, "\n")
        insert += 1
    lines.insert(insert, item)
    if insert + 1 < len(lines) and lines[insert + 1].startswith("#"):
        lines.insert(insert + 1, "\n")
    return "".join(lines)


def _fact(args: dict[str, Any]) -> str:
    fact = " ".join(str_arg(args, "fact").split())
    if fact.startswith("- "):
        fact = fact[2:].strip()
    if not fact:
        raise ToolFailure("the argument 'fact' must not be empty", ToolErrorType.INVALID_ARGUMENTS)
    return fact


class SaveMemory(Tool):
    name = "save_memory"
    description = (
        "Remember a fact for future sessions in this workspace: a user preference, a project "
        "convention, a command that works. The fact is added as one line to the project's agent guide "
        "and read at the start of every later session. Use it only when the user asks to remember "
        "something or states a lasting preference; not for facts about the current task."
    )
    parameters = parameters_schema(
        ["fact"],
        fact=parameter("string", "One short self-contained sentence, e.g. 'Run tests with make test'."),
    )
    kind = ToolKind.EDIT

    def describe(self, args: dict[str, Any]) -> str:
        return f"Remember: {args.get('fact', '')}"

    def _plan(self, args: dict[str, Any], ctx: ToolContext) -> tuple[Path, str | None, str]:
        fact = _fact(args)
        path = memory_path(ctx.workspace, ctx.memory_file)
        status = file_status(path, ctx.workspace)
        try:
            old = read_text(path, ctx.workspace) if status and stat.S_ISREG(status.st_mode) else None
        except OSError as e:
            raise fs_failure(e, ctx.workspace.display(path)) from e
        return path, old, add_memory(old, fact)

    async def _plan_remote(
        self, args: dict[str, Any], ctx: ToolContext, files: SandboxFiles
    ) -> tuple[Path, str | None, str]:
        """`_plan` through the session's sandbox (its workspace is not on this host)."""
        fact = _fact(args)
        path = files.resolve(files.workspace.primary / ctx.memory_file)
        await files.checked_real(path, files.workspace.display(path))
        status = await files.stat(path)
        old = await files.read_text(path) if status and stat.S_ISREG(status.st_mode) else None
        return path, old, add_memory(old, fact)

    async def confirmation(self, args: dict[str, Any], ctx: ToolContext) -> ConfirmationDetails:
        if (remote := remote_files(ctx)) is not None:
            path, old, new = await self._plan_remote(args, ctx, remote)
        else:
            path, old, new = await in_thread(self._plan, args, ctx)
        return file_diff(ctx.workspace, path, old, new)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        if (remote := remote_files(ctx)) is None:
            return await in_thread(self._run, args, ctx)
        path, old, new = await self._plan_remote(args, ctx, remote)
        content = ctx.new_content if ctx.new_content is not None else new
        await remote.write_text(path, content)
        return self._saved(args, ctx, path, old, new, content)

    def _run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path, old, new = self._plan(args, ctx)
        content = ctx.new_content if ctx.new_content is not None else new
        try:  # a crash leaves the old guide or the new one; through the confined walk
            atomic_write(path, content, ctx.workspace)
        except OSError as e:
            raise fs_failure(e, ctx.workspace.display(path)) from e
        return self._saved(args, ctx, path, old, new, content)

    @staticmethod
    def _saved(
        args: dict[str, Any], ctx: ToolContext, path: Path, old: str | None, new: str, content: str
    ) -> ToolResult:
        display = ctx.workspace.display(path)
        text = f"Saved to {display}: {_fact(args)}"
        if ctx.new_content is not None and ctx.new_content != new:
            text += " (the user modified the change before it was written)"
        return ToolResult(
            text=text, diff=file_diff(ctx.workspace, path, old, content), data={"path": display}
        )
