"""`/restore` lists the checkpoints taken before edits; `/restore ID` undoes every checkpointed edit
from ID on, newest first, and rewinds the conversation to just before the step that made the
first of them (`checkpoints.py` says what a checkpoint holds and the rule that keeps a restore
from destroying work: a file changed since the agent's last edit is never overwritten)."""

from __future__ import annotations

import asyncio
import base64
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from devagent.agent.commands.output import Emit, say
from devagent.agent.events import Notice
from devagent.agent.loop.checkpoints import (
    MAX_FILE_BYTES,
    Checkpoint,
    CheckpointSession,
    FileState,
    delete_from,
    list_checkpoints,
    message_hash,
    sandbox_files,
    state_now,
)
from devagent.agent.tools._util import atomic_write, remove_file
from devagent.agent.tools.failure import ToolFailure

if TYPE_CHECKING:
    from devagent.agent.tools.remote_files import SandboxFiles
    from devagent.agent.tools.workspace import Workspace


class RestoringSession(CheckpointSession, Protocol):
    """What `/restore` needs of a session besides what its checkpoints read: replacing the
    conversation (`Session` is the one implementation)."""

    async def replace_messages(self, messages: list[Any]) -> None: ...


@dataclass(slots=True)
class _FilePlan:
    path: Path
    display: str
    first: FileState  # the earliest edit from the restored point on: its `before` is restored
    last_after: str | None  # what the latest edit left


async def restore(session: RestoringSession, args: str, emit: Emit) -> str | None:
    cps = await list_checkpoints(session)
    arg = args.strip()
    if not arg:
        say(emit, format_list(cps))
        return None
    try:
        seq = int(arg.split()[0])
    except ValueError:
        emit(Notice(f"Usage: /restore [ID]; {arg!r} is not a checkpoint id. /restore lists them.", "error"))
        return None
    target = next((c for c in cps if c.seq == seq), None)
    if target is None:
        emit(Notice(f"There is no checkpoint {seq} in this session; /restore lists them.", "error"))
        return None
    plans = _plans([c for c in cps if c.seq >= seq])
    files = sandbox_files(session.sandbox, session.workspace)
    writes, problems = await _check(plans, session.workspace, files)
    if problems:
        emit(
            Notice(
                f"Cannot restore checkpoint {seq}; nothing was changed:\n  "
                + "\n  ".join(problems)
                + "\nRestoring would overwrite those changes. Undo or save them elsewhere, then try again.",
                "error",
            )
        )
        return None
    try:
        if files is None:
            await asyncio.to_thread(_put_back, writes, session.workspace)
        else:
            await _put_back_in(files, writes)
    except (OSError, ToolFailure) as e:
        emit(Notice(f"Restoring checkpoint {seq} failed part way: {e}", "error"))
        return None
    conversation = await _rewind(session, target, ", ".join(p.display for p in plans.values()))
    await delete_from(session, seq)
    restored = ", ".join(p.display for p in writes) or "no file needed changing"
    say(emit, f"Restored checkpoint {seq} ({target.description}): {restored}.{conversation}")
    return None


def _plans(undone: list[Checkpoint]) -> dict[str, _FilePlan]:
    """Per file: the state before the first undone edit, and what the last one left."""
    plans: dict[str, _FilePlan] = {}
    for c in undone:
        for f in c.files:
            plan = plans.get(f.path)
            if plan is None:
                plans[f.path] = _FilePlan(Path(f.path), f.display, f, f.after)
            else:
                plan.last_after = f.after
    return plans


async def _check(
    plans: dict[str, _FilePlan], workspace: Workspace, files: SandboxFiles | None = None
) -> tuple[list[_FilePlan], list[str]]:
    """The files to write back, and why any may not be (a restore is all or nothing)."""
    problems: list[str] = []
    writes: list[_FilePlan] = []
    for plan in plans.values():
        if plan.first.too_large:
            limit = MAX_FILE_BYTES // (1024 * 1024)
            problems.append(f"{plan.display}: it was larger than {limit} MiB, so it was not saved")
            continue
        if not await _inside(plan.path, workspace, files):
            # confinement at restore time too: a root or a directory swapped for a symlink since
            problems.append(f"{plan.display}: it now resolves outside the workspace roots")
            continue
        current = await state_now(files, plan.path, workspace)
        if current == plan.first.before_state:
            continue  # already as it was
        if plan.last_after is not None and current == plan.last_after:
            writes.append(plan)
        elif plan.last_after is None:
            problems.append(
                f"{plan.display}: the edit's outcome was not recorded (interrupted), so it cannot be verified"
            )
        else:
            problems.append(
                f"{plan.display}: changed since the agent's last edit (by you, a command or another program)"
            )
    return writes, problems


def _put_back(writes: list[_FilePlan], workspace: Workspace) -> None:
    """Through the confined walk, relative to the open parent directory (a swap since the check
    cannot redirect it); atomic, like the edit it undoes."""
    for plan in writes:
        if plan.first.before is None:
            remove_file(plan.path, workspace)
        else:
            atomic_write(plan.path, base64.b64decode(plan.first.before), workspace)


async def _inside(path: Path, workspace: Workspace, files: SandboxFiles | None) -> bool:
    if files is None:
        return workspace.contains(path)
    try:
        return (await files.real([files.resolve(path)]))[0] is not None
    except ToolFailure:
        return False


async def _put_back_in(files: SandboxFiles, writes: list[_FilePlan]) -> None:
    """`_put_back` through the session's sandbox (its file operations confine and rename over)."""
    for plan in writes:
        if plan.first.before is None:
            await files.delete(plan.path)
        else:
            await files.write_bytes(plan.path, base64.b64decode(plan.first.before))


async def _rewind(session: RestoringSession, target: Checkpoint, files: str) -> str:
    """The conversation back to before the step that made the checkpoint's edit (a note in its
    place), when it is still the conversation the checkpoint points into. Says what it did."""
    from pydantic_ai import messages as pm  # loaded when a restore runs, not when commands are listed

    msgs = await session.messages()
    pos = target.position
    if not (0 < pos <= len(msgs) and message_hash(msgs[pos - 1]) == target.anchor):
        return " The conversation was cleared or compacted since the checkpoint, so it was left as it is."
    keep = list(msgs[: pos - 1] if isinstance(msgs[pos - 1], pm.ModelResponse) else msgs[:pos])
    note = (
        f"[The user restored checkpoint {target.seq}: the files ({files}) are back as they were before "
        f"`{target.description}`, and the conversation continues from before that step.]"
    )
    keep.append(pm.ModelResponse(parts=[pm.TextPart(content=note)]))
    session.state.pending = []
    await session.replace_messages(keep)
    removed = len(msgs) - len(keep) + 1
    return f" The conversation is back to before that step ({removed} messages removed)."


def format_list(cps: list[Checkpoint]) -> str:
    if not cps:
        return "No checkpoints in this session yet (one is taken before every file edit)."
    lines = ["Checkpoints (restore one with /restore ID):"]
    for c in cps:
        files = ", ".join(f.display for f in c.files)
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(c.created_at))
        lines.append(f"  {c.seq}  {when}  {c.description} [{c.tool_name} {c.call_id}]  files: {files}")
    return "\n".join(lines)
