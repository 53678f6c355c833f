"""The shell tool: runs `bash -c` in the workspace, streams its output live, and never leaves
processes behind when it times out or is cancelled (the whole process group is killed).

The command runs in the session's sandbox (`ctx.sandbox`, devagent/agent/sandbox/), which the
core hands the tool: bubblewrap on this host, or directly where the operator turned it off; where
the sandbox is on but cannot run here, the tool fails closed.
"""

from __future__ import annotations

import asyncio
import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from devagent.agent.events import ConfirmationDetails, ExecuteDetails, ToolErrorType, ToolKind
from devagent.agent.sandbox.base import Limits, Sandbox, SandboxError, Started
from devagent.agent.sandbox.childenv import child_env
from devagent.agent.sandbox.gitguard import granted_env
from devagent.agent.sandbox.groups import KILL_GRACE, kill_group, wait_exit
from devagent.agent.settings import SHELL_TIMEOUT, SHELL_TIMEOUT_MAX
from devagent.agent.tools import shell_reads
from devagent.agent.tools._util import (
    bool_arg,
    in_thread,
    int_arg,
    num_arg,
    opt_str_arg,
    parameter,
    parameters_schema,
    str_arg,
)
from devagent.agent.tools.base import OutputFileLike, Tool, ToolContext, ToolResult
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.output import HeadTail, head_and_tail
from devagent.agent.tools.remote_files import remote_files
from devagent.agent.tools.tty_screen import COLS as TTY_COLS
from devagent.agent.tools.tty_screen import ROWS as TTY_ROWS
from devagent.agent.tools.tty_screen import TERM, TtySize

if TYPE_CHECKING:
    from devagent.agent.tools.backends import CommandBackend

LIVE_INTERVAL = 0.05  # seconds between live updates at most
EOF_GRACE = 0.5  # seconds to wait for output after bash exited (background jobs may hold the pipe)
READ_CHUNK = 65536


def root_command(command: str) -> str:
    """The program a command line starts with ("git" for `GIT_PAGER=cat git log`)."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        words = command.split()
    for word in words:
        name, eq, _value = word.partition("=")
        if eq and name.isidentifier():
            continue  # a leading VAR=value assignment
        return word
    return ""


async def start_command(
    command: str,
    cwd: str,
    ctx: ToolContext,
    guard: dict[str, str],
    *,
    background: bool = False,
    tty: TtySize | None = None,
) -> Started:
    """Starts `command` in the session's sandbox (`ctx.sandbox`), in its own process group, with
    the agent's environment and limits. `background`: its input is a pipe for the caller to write
    (with `tty`, both its input and output are a pseudo-terminal of that size, its controlling
    terminal), and it never outlives the server; else its input is closed."""
    sandbox = ctx.sandbox
    if (why := sandbox.refuses(cwd)) is not None:
        raise ToolFailure(why, ToolErrorType.SANDBOX_UNAVAILABLE)
    # An allow-list, never the server's environment (tokens, database URL, provider keys stay in
    # the server).
    env = child_env(
        ctx.env_pass,
        extra={"PAGER": "cat", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0", "DEVAGENT": "1", **guard},
    )
    if tty is not None:
        env["TERM"] = TERM
    limits = Limits(ctx.command_memory_mb, ctx.command_processes)
    try:
        return await sandbox.start(
            command,
            cwd=cwd,
            env=env,
            limits=limits,
            stdin="pipe" if background else "closed",
            tty=tty,
            lasting=background,
        )
    except SandboxError as e:
        raise ToolFailure(str(e), ToolErrorType.SANDBOX_UNAVAILABLE) from e


async def _follow_command(
    proc: asyncio.subprocess.Process,
    read_fd: int,
    time_limit: float,
    ctx: ToolContext,
    out: HeadTail,
    saving: OutputFileLike | None,
) -> str:
    """Reads the command's output into `out` (shown live) and `saving` until it ends, runs past
    `time_limit` seconds, is cancelled or leaves background processes holding the pipe; how it
    ended ("done", "timeout", "cancelled", "detached"). A timed out or cancelled command's group
    is killed."""
    loop = asyncio.get_running_loop()
    stdout = asyncio.StreamReader(loop=loop)
    try:
        pipe, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(stdout, loop=loop), os.fdopen(read_fd, "rb", buffering=0)
        )
    except BaseException:
        await asyncio.shield(kill_group(proc))
        raise

    async def read() -> None:
        while data := await stdout.read(READ_CHUNK):
            out.feed(data)
            if saving is not None:
                saving.write(data)
        out.feed(b"", final=True)

    reader = asyncio.create_task(read())
    cancel = asyncio.create_task(ctx.cancelled.wait())
    deadline = loop.time() + time_limit
    eof_deadline: float | None = None
    outcome = "done"
    try:
        while not (reader.done() and proc.returncode is not None):
            now = loop.time()
            if now >= deadline:
                outcome = "timeout"
                break
            if eof_deadline is not None and now >= eof_deadline:
                outcome = "detached"  # background processes still hold the pipe
                break
            pending = {t for t in (reader, cancel) if not t.done()}
            await asyncio.wait(pending, timeout=min(LIVE_INTERVAL, deadline - now))
            if out.changed:
                out.changed = False
                await ctx.live(out.render())
            if cancel.done():
                outcome = "cancelled"
                break
            if proc.returncode is not None and not reader.done() and eof_deadline is None:
                eof_deadline = loop.time() + EOF_GRACE
        if outcome in ("timeout", "cancelled"):
            await kill_group(proc)
        if outcome != "detached" and not reader.done():
            # The pipe closes once every process of the group is gone: collect the last output.
            await asyncio.wait({reader}, timeout=1.0)
    except BaseException:
        # The turn was cancelled (asyncio.CancelledError) or the live callback failed: leave
        # nothing running behind us.
        await asyncio.shield(kill_group(proc))
        raise
    finally:
        for task in (reader, cancel):
            if not task.done():
                task.cancel()
        pipe.close()
    if proc.returncode is None:  # pragma: no cover - the loop ends only after exit or a kill
        await wait_exit(proc, KILL_GRACE)
    return outcome


class RunShellCommand(Tool):
    name = "run_shell_command"
    description = (
        "Run a command with `bash -c` in the workspace (or in `directory`, relative to the workspace "
        "root) and return its combined stdout and stderr followed by `exit code N`. A non-zero exit "
        "code is reported, not treated as a failure. Standard input is closed, so interactive "
        "programs cannot prompt (pass flags such as `--yes`; avoid pagers and editors) unless the "
        f"call asks for a terminal (`tty`). The command is killed after `timeout` seconds (default "
        f"{SHELL_TIMEOUT:g}, at most {SHELL_TIMEOUT_MAX:g} unless the operator set other limits). Long "
        "output keeps its first and last lines and a line naming the file that holds it whole, "
        "which read_file pages through (offset and limit, in lines). For a server, a watcher or "
        "any long-running process pass `background: true`: the call returns its id at once, and "
        "background_process reads its output, writes its input, lists and stops it."
    )
    parameters = parameters_schema(
        ["command"],
        command=parameter("string", "The bash command line to run."),
        description=parameter(
            "string", "A short description of what the command does and why, shown to the user."
        ),
        directory=parameter(
            "string", "The directory to run in, relative to the workspace root. Default: the root."
        ),
        timeout=parameter(
            "number",
            f"Seconds before the command is killed: give more (up to {SHELL_TIMEOUT_MAX:g}) for a "
            f"long build or test run. Default {SHELL_TIMEOUT:g}; the server's operator may set other "
            "limits. Not for background processes.",
            exclusiveMinimum=0,
        ),
        background=parameter(
            "boolean",
            "Start the command in the background and return at once with its id (see "
            "background_process). Default: false.",
        ),
        tty=parameter(
            "boolean",
            "Run it in the background in a terminal (REPLs, `git add -p`, full-screen programs); "
            "implies `background`. Default: false.",
        ),
        rows=parameter(
            "integer",
            "`tty`: lines (default {}, {} to {}).".format(*TTY_ROWS),
        ),
        cols=parameter(
            "integer",
            "`tty`: columns (default {}, {} to {}).".format(*TTY_COLS),
        ),
    )
    kind = ToolKind.EXECUTE
    SANDBOX_NOTE = (
        " Commands run in a sandbox: only the workspace is writable, /tmp is private to each "
        "command, {network}. A job started with `&` ends when its command ends: use `background: "
        "true` for processes that must keep running."
    )
    NETWORK: ClassVar[dict[bool, str]] = {
        True: "the network (the host's, loopback included) is reachable",
        False: "there is no network, and each command has a loopback of its own (a background "
        "server can be reached only by its own command)",
    }

    def __init__(self, sandbox: Sandbox | None = None) -> None:
        # The session's sandbox, which its definition describes (None: commands run directly).
        self.sandbox = sandbox

    def definition(self) -> dict[str, Any]:
        sandbox = self.sandbox
        if sandbox is not None and (missing := sandbox.unavailable()) is not None:
            return {**super().definition(), "description": f"Unavailable: {missing}."}
        if sandbox is None or sandbox.kind == "none":
            return super().definition()
        return {
            **super().definition(),
            "description": self.description + self.SANDBOX_NOTE.format(network=self.NETWORK[sandbox.network]),
        }

    def describe(self, args: dict[str, Any]) -> str:
        command = args.get("command")
        if not isinstance(command, str):
            return "Run a shell command"
        if args.get("tty") is True:
            return f"{command} (in the background, in a terminal)"
        return f"{command} (in the background)" if args.get("background") is True else command

    def _cwd(self, args: dict[str, Any], ctx: ToolContext) -> str:
        directory = opt_str_arg(args, "directory", ".") or "."
        if (remote := remote_files(ctx)) is not None:  # a folder in the sandbox: it tells if missing
            return str(remote.resolve(directory))
        real = ctx.workspace.resolve(directory, must_exist=True)
        if not real.is_dir():
            raise ToolFailure(f"{directory!r} is not a directory", ToolErrorType.NOT_A_DIRECTORY)
        return str(real)

    async def confirmation(self, args: dict[str, Any], ctx: ToolContext) -> ConfirmationDetails:
        command = str_arg(args, "command")
        self._check_can_run(ctx)  # never ask for what cannot run
        return ExecuteDetails(
            command=command, working_directory=self._cwd(args, ctx), root_command=root_command(command)
        )

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        proposed = str_arg(args, "command")
        # "Edit first": the user may change the command when approving it (the decision's
        # new_content, as for an edit's content); the model is told what ran instead.
        edited = ctx.new_content is not None and ctx.new_content.strip() not in ("", proposed)
        command = ctx.new_content.strip() if edited and ctx.new_content is not None else proposed
        cwd = self._cwd(args, ctx)
        tty = _tty_size(args)
        background = bool_arg(args, "background") or tty is not None
        limit = TimeLimit.of(num_arg(args, "timeout"), ctx)
        if ctx.cancelled.is_set():
            raise ToolFailure("the command was cancelled before it started", ToolErrorType.CANCELLED)
        # Under a prefix grant, git starts no program its configuration names.
        guard = granted_env() if ctx.granted else {}
        if background:
            return await self._start_background(command, cwd, ctx, guard, edited, tty)
        if ctx.backends.commands is not None:  # the client's terminal (tools/backends.py)
            return await self._run_elsewhere(ctx.backends.commands, command, cwd, limit, ctx, guard)
        self._check_can_run(ctx)
        result = await self._run_here(command, cwd, limit, ctx, guard, edited)
        if result.data is not None and result.data.get("exit_code") == 0:
            await in_thread(shell_reads.note_shown, ctx, command, cwd)  # `sed -n`, `cat`: a read
        return result

    async def _run_here(
        self,
        command: str,
        cwd: str,
        limit: TimeLimit,
        ctx: ToolContext,
        guard: dict[str, str],
        edited: bool,
    ) -> ToolResult:
        """Runs the command as a process of this server, its whole output saved when long."""
        started = await start_command(command, cwd, ctx, guard)
        out = HeadTail(*ctx.output_caps)
        saved_outputs = ctx.saved_outputs
        saving = saved_outputs.open(ctx.session_id, ctx.call_id) if saved_outputs is not None else None
        try:
            outcome = await _follow_command(started.proc, started.output_fd, limit.seconds, ctx, out, saving)
        except BaseException:
            if saving is not None:
                saving.finish(keep=False)
            raise
        saved = saving.finish(keep=out.elided) if saving is not None else None
        if saved is not None and saved_outputs is not None:
            await asyncio.to_thread(saved_outputs.prune)
        text = out.render(str(saved) if saved is not None else "")
        await ctx.live(text)
        if outcome == "timeout":
            raise ToolFailure(
                f"the command {limit.timed_out()} and was killed. Output so far:\n{text}",
                ToolErrorType.TIMEOUT,
            )
        if outcome == "cancelled":
            raise ToolFailure(f"the command was cancelled. Output so far:\n{text}", ToolErrorType.CANCELLED)
        notes = limit.notes()
        if outcome == "detached":
            notes.append(
                "(background processes still hold the output; their further output is not captured: "
                "start such processes with `background: true`)"
            )
        notes += _edited(command) if edited else []
        code = started.proc.returncode if started.proc.returncode is not None else -9
        return ToolResult(
            text=_with_status(text, _exit_status(code), notes),
            data={
                "exit_code": code,
                "command": command,
                "user_modified": edited,
                "directory": ctx.workspace.display(Path(cwd)),
                "truncated": out.elided,
                "saved_output": None if saved is None else str(saved),
                "sandboxed": started.sandboxed,
            },
        )

    @staticmethod
    def _check_can_run(ctx: ToolContext) -> None:
        """Fails closed where the sandbox is on but cannot run; commands that
        run in the client's terminal are the client's."""
        missing = ctx.sandbox.unavailable()
        if missing is not None and ctx.backends.commands is None:
            raise ToolFailure(missing, ToolErrorType.SANDBOX_UNAVAILABLE)

    async def _start_background(
        self,
        command: str,
        cwd: str,
        ctx: ToolContext,
        guard: dict[str, str],
        edited: bool,
        tty: TtySize | None = None,
    ) -> ToolResult:
        if ctx.backends.commands is not None or ctx.processes is None:
            raise ToolFailure(
                "background processes are not available here (commands run in the client's terminal)"
                if ctx.backends.commands is not None
                else "background processes are not available here",
                ToolErrorType.UNSUPPORTED,
            )
        self._check_can_run(ctx)
        process = await ctx.processes.start(command, cwd, ctx, guard, tty)
        text = (
            f"Started in the background as {process.id}. Read its output with background_process "
            f"(action `output`, id `{process.id}`; `wait_for` waits for a line such as a server's "
            "'listening'), write to its input (action `input`), or stop it (action `stop`). It is "
            "stopped when the turn is cancelled, when the session ends or has been idle for long, "
            "and when the server stops."
        )
        if tty is not None:
            text += (
                f" It runs in a {tty.rows}x{tty.cols} terminal: `output` returns its screen, and "
                "`input` types keys (<Enter>, <Tab>, <C-c>, <Up>, <Esc>; other text as typed)."
            )
        return ToolResult(
            text="\n".join([text, *(_edited(command) if edited else [])]),
            data={
                "background_id": process.id,
                "command": command,
                "user_modified": edited,
                "directory": ctx.workspace.display(Path(cwd)),
                "sandboxed": process.sandboxed,
                **({"tty": {"rows": tty.rows, "cols": tty.cols}} if tty is not None else {}),
            },
        )

    async def _run_elsewhere(
        self,
        backend: CommandBackend,
        command: str,
        cwd: str,
        limit: TimeLimit,
        ctx: ToolContext,
        env: dict[str, str],
    ) -> ToolResult:
        result = await backend.run(command, cwd, limit.seconds, ctx, env)
        text = head_and_tail(result.output)
        if result.exit_code is not None:
            status = f"exit code {result.exit_code}"
        else:
            status = f"killed by signal {result.signal or '?'}"
        return ToolResult(
            text=_with_status(text, status, limit.notes()),
            data={
                "exit_code": result.exit_code,
                "command": command,
                "directory": ctx.workspace.display(Path(cwd)),
                "truncated": result.truncated or len(text) < len(result.output),
                "sandboxed": False,
            },
        )


@dataclass(frozen=True, slots=True)
class TimeLimit:
    """How long a command may run: what it asked for, within the server's maximum (never below
    the server's default), else the server's default."""

    seconds: float
    asked: float | None = None

    @classmethod
    def of(cls, asked: float | None, ctx: ToolContext) -> TimeLimit:
        if asked is None:
            return cls(ctx.shell_timeout)
        return cls(min(asked, max(ctx.shell_timeout_max, ctx.shell_timeout)), asked)

    @property
    def lowered(self) -> bool:
        return self.asked is not None and self.asked > self.seconds

    def notes(self) -> list[str]:
        if not self.lowered:
            return []
        return [
            f"(the timeout asked for, {self.asked:g} s, is more than the server allows: it had "
            f"{self.seconds:g} s)"
        ]

    def timed_out(self) -> str:
        more = f" (the server's maximum; {self.asked:g} s was asked for)" if self.lowered else ""
        return f"timed out after {self.seconds:g} s{more}"


def _tty_size(args: dict[str, Any]) -> TtySize | None:
    """The terminal asked for (`tty`, `rows`, `cols`), or None for none."""
    if not bool_arg(args, "tty"):
        for key in ("rows", "cols"):
            if args.get(key) is not None:
                raise ToolFailure(
                    f"{key!r} is the size of a terminal: pass `tty: true` too",
                    ToolErrorType.INVALID_ARGUMENTS,
                )
        return None
    rows = int_arg(args, "rows", TTY_ROWS[0], minimum=TTY_ROWS[1])
    cols = int_arg(args, "cols", TTY_COLS[0], minimum=TTY_COLS[1])
    if rows > TTY_ROWS[2] or cols > TTY_COLS[2]:
        raise ToolFailure(
            f"a terminal has at most {TTY_ROWS[2]} rows and {TTY_COLS[2]} columns here",
            ToolErrorType.INVALID_ARGUMENTS,
        )
    return TtySize(rows, cols)


def _edited(command: str) -> list[str]:
    return [f"(the user edited the command before approving it; what ran was: {command})"]


def _exit_status(code: int) -> str:
    return f"exit code {code}" if code >= 0 else f"exit code {128 - code} (killed by signal {-code})"


def _with_status(output: str, status: str, notes: Sequence[str]) -> str:
    """A command's result as the model reads it: its output, then how it ended, then notes."""
    body = output if output.strip() else "(no output)"
    if not body.endswith("\n"):
        body += "\n"
    return body + "\n".join([status, *notes])
