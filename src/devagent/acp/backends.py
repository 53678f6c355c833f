"""The editor as the tools' backend (`devagent.agent.tools.backends`): when the client offers
`fs/read_text_file` / `fs/write_text_file`, file tools read and write through it (unsaved buffers
are seen, edits land in the editor); when it offers `terminal/*`, shell commands run in its
terminal. The core has already confined the path and decided approval before a backend is called.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from acp import RequestError
from acp.schema import EnvVariable

from devagent.agent.api import CallContext, CommandResult, ToolBackends, ToolErrorType, ToolFailure

if TYPE_CHECKING:
    from acp.agent.connection import AgentSideConnection

    from devagent.agent.api import Workspace

log = logging.getLogger("devagent.acp")

# What a terminal keeps for us (the client truncates from the start beyond it).
TERMINAL_OUTPUT_LIMIT = 256 * 1024


class Editor(Protocol):
    """The side of the ACP connection the backends use: the connection to the client (None
    until it is made) and what the client offered in `initialize`."""

    conn: AgentSideConnection | None

    def client_can(self, *path: str) -> bool: ...


class EditorFiles:
    def __init__(self, agent: Editor, session_id: str, workspace: Workspace) -> None:
        self.agent = agent
        self.session_id = session_id
        self.workspace = workspace

    async def read_text(self, path: Path) -> str | None:
        conn = self.agent.conn
        assert conn is not None
        # The workspace is on this machine: a file that is not on disk is new, and the editor is
        # not asked for it (editors show a failed fs/read_text_file as an error, and writing a
        # new file read it twice: for the permission's diff, then to write it).
        if not await asyncio.to_thread(os.path.lexists, path):
            return None
        try:
            resp = await conn.read_text_file(session_id=self.session_id, path=str(path))
        except RequestError as e:
            # The editor has no such buffer and the file is not on disk: it does not exist.
            if not await asyncio.to_thread(path.exists):
                return None
            raise ToolFailure(
                f"the editor could not read {self.workspace.display(path)}: {e}", ToolErrorType.OS_ERROR
            ) from e
        return resp.content

    async def write_text(self, path: Path, content: str) -> None:
        conn = self.agent.conn
        assert conn is not None
        try:
            await conn.write_text_file(session_id=self.session_id, path=str(path), content=content)
        except RequestError as e:
            raise ToolFailure(
                f"the editor could not write {self.workspace.display(path)}: {e}", ToolErrorType.OS_ERROR
            ) from e


class EditorTerminal:
    """Commands in the editor's terminal; `terminals` notes each call's terminal id (call id ->
    terminal id), which the call's updates embed."""

    def __init__(self, agent: Editor, session_id: str, terminals: dict[str, str]) -> None:
        self.agent = agent
        self.session_id = session_id
        self.terminals = terminals

    async def run(
        self, command: str, cwd: str, time_limit: float, ctx: CallContext, env: Mapping[str, str]
    ) -> CommandResult:
        conn = self.agent.conn
        assert conn is not None
        sid = self.session_id
        try:
            created = await conn.create_terminal(
                session_id=sid,
                command="bash",
                args=["-c", command],
                env=[EnvVariable(name=k, value=v) for k, v in env.items()] or None,
                cwd=cwd,
                output_byte_limit=TERMINAL_OUTPUT_LIMIT,
            )
        except RequestError as e:
            raise ToolFailure(f"the editor could not start a terminal: {e}", ToolErrorType.OS_ERROR) from e
        tid = created.terminal_id
        self.terminals[ctx.call_id] = tid
        await ctx.live("")  # the call's update now embeds the terminal: the editor shows it live
        timed_out = False
        try:
            try:
                await asyncio.wait_for(
                    conn.wait_for_terminal_exit(session_id=sid, terminal_id=tid), time_limit
                )
            except TimeoutError:
                timed_out = True
                await conn.kill_terminal(session_id=sid, terminal_id=tid)
            out = await conn.terminal_output(session_id=sid, terminal_id=tid)
        except BaseException:
            # Cancelled (session/cancel) or the client failed: the command must not go on.
            with contextlib.suppress(Exception):
                await asyncio.shield(conn.kill_terminal(session_id=sid, terminal_id=tid))
            with contextlib.suppress(Exception):
                await asyncio.shield(conn.release_terminal(session_id=sid, terminal_id=tid))
            raise
        with contextlib.suppress(Exception):
            await conn.release_terminal(session_id=sid, terminal_id=tid)
        if timed_out:
            raise ToolFailure(
                f"the command timed out after {time_limit:g} s and was killed. Output so far:\n{out.output}",
                ToolErrorType.TIMEOUT,
            )
        status = out.exit_status
        return CommandResult(
            output=out.output,
            exit_code=status.exit_code if status is not None else None,
            signal=status.signal if status is not None else None,
            truncated=out.truncated,
        )


def backends_for(
    agent: Editor, session_id: str, workspace: Workspace, terminals: dict[str, str]
) -> ToolBackends:
    """What the client offered in `initialize` (clientCapabilities); `terminals`: where the
    session notes its calls' terminals."""
    files = None
    if agent.client_can("fs", "readTextFile") and agent.client_can("fs", "writeTextFile"):
        files = EditorFiles(agent, session_id, workspace)
    elif agent.client_can("fs", "readTextFile") or agent.client_can("fs", "writeTextFile"):
        log.info("the client offers only one of fs/read_text_file and fs/write_text_file; files stay on disk")
    commands = EditorTerminal(agent, session_id, terminals) if agent.client_can("terminal") else None
    return ToolBackends(files=files, commands=commands)
