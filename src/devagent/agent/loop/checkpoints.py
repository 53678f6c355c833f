"""Checkpoints before edits, which `/restore` undoes.

Before a tool of kind EDIT runs (write_file, edit, save_memory) the session takes a checkpoint:
the files the call will touch (their bytes, or "absent") and the conversation position (the
transcript's length, a hash of the model response that made the call, and the calls of that
step). When the call is done the checkpoint also records what the files became (a hash, or
"absent").

Where: a table of the session database (`devagent_checkpoints`; its SQL is in
`devagent.store.checkpoints`, this module knows only that module's functions), next to the
transcript the checkpoint points into. So a checkpoint lives exactly as long and as far as its
session does (a fresh process on the same database, a server on PostgreSQL with several workers),
nothing is written into the workspace, and nothing touches the user's git history. Files larger than
`MAX_FILE_BYTES` are noted but not saved (they cannot be restored).

`/restore ID` (`commands/restore.py`) undoes every checkpointed edit from checkpoint ID on,
newest first, and truncates the conversation to just before the model step that made the first
of them (a short note takes its place, so the model knows). The rule that keeps a restore from
destroying work: for each file, its current content must be either what the agent's last
checkpointed edit left there, or already the content being restored. Anything else means the
file changed in another way since (the user, a shell command, another program), and the restore
is refused with the list of those files; nothing is changed. A checkpoint whose edit never
recorded its outcome (the process died during the write) restores only files that are already
back to their old content. Files are put back with `atomic_write`, like the edits wrote them.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import stat
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from devagent.agent.events import ToolKind
from devagent.agent.tools._util import file_status, off_loop_unless_small, read_bytes
from devagent.agent.tools.base import Tool, ToolContext
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.memory import memory_path
from devagent.agent.tools.remote_files import SandboxFiles, remote_files
from devagent.agent.tools.workspace import Workspace
from devagent.common.dataclass_json import fields_json

if TYPE_CHECKING:
    from devagent.agent.sandbox.base import Sandbox
    from devagent.agent.state import PendingCall, SessionState
    from devagent.store.db import Store

log = logging.getLogger("devagent.checkpoints")

MAX_FILE_BYTES = 8 * 1024 * 1024
ABSENT = "absent"


class CheckpointSession(Protocol):
    """What checkpoints need of a session: its id, state and workspace, its conversation, the
    store, and its next save (`Session` is the one implementation)."""

    id: str
    state: SessionState
    workspace: Workspace
    sandbox: Sandbox

    @property
    def store(self) -> Store: ...

    async def messages(self) -> list[Any]: ...

    def write_with_next_save(self, write: Callable[[Any], Awaitable[object]]) -> None:
        """`write(connection)` runs in the transaction of the session's next save."""
        ...


@dataclass(slots=True)
class FileState:
    path: str  # absolute
    display: str  # as the user reads it
    before: str | None  # base64 of the bytes, or None when the file did not exist
    too_large: bool = False
    after: str | None = None  # sha256 or ABSENT once the edit finished; None: unknown

    @property
    def before_state(self) -> str:
        return ABSENT if self.before is None else _sha(base64.b64decode(self.before))


@dataclass(slots=True)
class Checkpoint:
    seq: int
    created_at: float
    call_id: str
    tool_name: str
    description: str
    position: int  # transcript length when the edit ran (the response with the call included)
    anchor: str  # sha256 of that response's JSON, to notice a transcript replaced since
    files: list[FileState] = field(default_factory=list)
    step_calls: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """What is stored of it beside its row's number and time."""
        return fields_json(self, leave_out=("seq", "created_at"))

    @classmethod
    def from_row(cls, seq: int, created_at: float, data: str) -> Checkpoint:
        d = json.loads(data)
        return cls(
            seq=seq,
            created_at=created_at,
            call_id=d.get("call_id", ""),
            tool_name=d.get("tool_name", ""),
            description=d.get("description", ""),
            position=int(d.get("position", 0)),
            anchor=d.get("anchor", ""),
            files=[FileState(**f) for f in d.get("files", [])],
            step_calls=list(d.get("step_calls", [])),
        )


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def current_state(path: Path, workspace: Workspace) -> str:
    """What the file is now, read through the confined walk."""
    try:
        status = file_status(path, workspace)
        if status is None:
            return ABSENT
        if not stat.S_ISREG(status.st_mode):
            return "not a file"
        return _sha(read_bytes(path, workspace))
    except FileNotFoundError:
        return ABSENT
    except (OSError, ToolFailure):
        return "not readable"


def _before(path: Path, workspace: Workspace) -> FileState | None:
    """A file's state before an edit, read through the confined walk; None when it is neither a
    file nor missing (or resolves outside)."""
    display = workspace.display(path)
    try:
        status = file_status(path, workspace)
        if status is None:
            return FileState(str(path), display, None)
        if not stat.S_ISREG(status.st_mode):
            return None
        if status.st_size > MAX_FILE_BYTES:
            return FileState(str(path), display, None, too_large=True)
        return FileState(str(path), display, base64.b64encode(read_bytes(path, workspace)).decode())
    except FileNotFoundError:
        return FileState(str(path), display, None)
    except (OSError, ToolFailure):
        return None


# --- where the session's files are in its sandbox, not on this host ---------------------------------


def sandbox_files(sandbox: Sandbox | None, workspace: Workspace) -> SandboxFiles | None:
    """The session's files through its sandbox where they are not on this host, else None."""
    if sandbox is None or sandbox.files_here:
        return None
    return SandboxFiles(sandbox, workspace)


async def states_before(
    files: SandboxFiles | None, paths: list[Path], workspace: Workspace
) -> list[FileState | None]:
    """`_before` of each path: through the confined walk here, or the sandbox's file operations."""
    if files is None:
        return await off_loop_unless_small(paths, workspace, lambda: [_before(p, workspace) for p in paths])
    states: list[FileState | None] = []
    for path in paths:
        display = workspace.display(path)
        try:
            status = await files.stat(path)
            if status is None:
                states.append(FileState(str(path), display, None))
            elif not stat.S_ISREG(status.st_mode):
                states.append(None)
            elif status.st_size > MAX_FILE_BYTES:
                states.append(FileState(str(path), display, None, too_large=True))
            else:
                data = await files.read_bytes(path)
                states.append(FileState(str(path), display, base64.b64encode(data).decode()))
        except ToolFailure:
            states.append(None)
    return states


async def state_now(files: SandboxFiles | None, path: Path, workspace: Workspace) -> str:
    """`current_state` here, or through the sandbox's file operations."""
    if files is None:
        return await off_loop_unless_small([path], workspace, current_state, path, workspace)
    try:
        status = await files.stat(path)
        if status is None:
            return ABSENT
        if not stat.S_ISREG(status.st_mode):
            return "not a file"
        return _sha(await files.read_bytes(path))
    except ToolFailure:
        return "not readable"


def message_hash(m: Any) -> str:
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    return _sha(ModelMessagesTypeAdapter.dump_json([m]))


def touched_paths(tool: Tool, args: dict[str, Any], ctx: ToolContext) -> list[Path]:
    """The files an edit call will write. A tool may say so itself (`touched_paths(args, ctx)`);
    the built-in edits are known; a call whose path is refused touches nothing."""
    hook = getattr(tool, "touched_paths", None)
    try:
        if callable(hook):
            return list(hook(args, ctx))
        remote = remote_files(ctx)
        if tool.name == "save_memory":
            if remote is not None:
                return [remote.resolve(ctx.workspace.primary / ctx.memory_file)]
            return [memory_path(ctx.workspace, ctx.memory_file)]
        path = args.get("path")
        if isinstance(path, str) and path.strip():
            return [remote.resolve(path) if remote is not None else ctx.workspace.resolve(path)]
    except ToolFailure:
        return []
    return []


# --- taking checkpoints --------------------------------------------------------------------------


async def before_edit(
    session: CheckpointSession, p: PendingCall, tool: Tool, ctx: ToolContext
) -> Checkpoint | None:
    """Called by the session for each call about to run, before the save that precedes the run;
    None for tools other than EDIT. The checkpoint (the files as they are now) is written in that
    save's transaction (`Session.write_with_next_save`), so it is stored before the edit runs at
    no commit of its own; its `seq` is set then. A checkpoint that cannot be taken (a file error,
    the table not created) is logged and does not stop the approved edit."""
    if tool.kind is not ToolKind.EDIT:
        return None
    try:
        return await _take(session, p, tool, ctx)
    except Exception:
        log.exception("could not take a checkpoint before %s", p.name)
        return None


async def _take(
    session: CheckpointSession, p: PendingCall, tool: Tool, ctx: ToolContext
) -> Checkpoint | None:
    paths = touched_paths(tool, p.args, ctx)
    if not paths:
        return None
    states = await states_before(remote_files(ctx), paths, ctx.workspace)
    files = [f for f in states if f is not None]
    if not files:
        return None
    msgs = await session.messages()
    position = len(msgs)
    anchor = message_hash(msgs[-1]) if msgs else ""
    from devagent.store import checkpoints as rows  # late: SQLAlchemy, off a stdio door's `initialize`

    ckpt = Checkpoint(
        seq=0,
        created_at=time.time(),
        call_id=p.id,
        tool_name=p.name,
        description=p.description or p.name,
        position=position,
        anchor=anchor,
        files=files,
        step_calls=[{"id": c.id, "name": c.name, "args": c.args} for c in session.state.pending],
    )
    await rows.ensure_table(session.store)
    sid, data = session.id, json.dumps(ckpt.to_json())

    async def write(conn: Any) -> None:
        ckpt.seq = await rows.add_in(conn, sid, ckpt.created_at, data)

    session.write_with_next_save(write)
    return ckpt


async def after_edit(session: CheckpointSession, ckpt: Checkpoint | None) -> None:
    """Records what the edit left in each file (also when it failed: then nothing changed), in
    the transaction of the session's next save: the one that stores the step's results. A crash
    before it loses the outcome with the results (the call is then reported interrupted, and its
    checkpoint restores only files already back to their old content)."""
    if ckpt is None:
        return
    try:
        await _record_after(session, ckpt)
    except Exception:
        log.exception("could not record the outcome of checkpoint %d", ckpt.seq)


async def _record_after(session: CheckpointSession, ckpt: Checkpoint) -> None:
    files = sandbox_files(session.sandbox, session.workspace)
    if files is None:

        def after() -> None:
            for f in ckpt.files:
                f.after = current_state(Path(f.path), session.workspace)

        await off_loop_unless_small([f.path for f in ckpt.files], session.workspace, after)
    else:
        for f in ckpt.files:
            f.after = await state_now(files, Path(f.path), session.workspace)
    from devagent.store import checkpoints as rows  # late: SQLAlchemy, off a stdio door's `initialize`

    sid = session.id
    if all(not f.too_large and f.after == f.before_state for f in ckpt.files):
        # The edit changed nothing (it failed, or wrote the same bytes): nothing to restore.
        async def write(conn: Any) -> None:
            await rows.delete_one_in(conn, sid, ckpt.seq)
    else:
        data = json.dumps(ckpt.to_json())

        async def write(conn: Any) -> None:
            await rows.replace_data_in(conn, sid, ckpt.seq, data)

    session.write_with_next_save(write)


async def list_checkpoints(session: CheckpointSession) -> list[Checkpoint]:
    from devagent.store import checkpoints as rows  # late: SQLAlchemy, off a stdio door's `initialize`

    return [Checkpoint.from_row(*r) for r in await rows.list_rows(session.store, session.id)]


async def delete_from(session: CheckpointSession, seq: int) -> None:
    from devagent.store import checkpoints as rows  # late: SQLAlchemy, off a stdio door's `initialize`

    await rows.delete_from(session.store, session.id, seq)
