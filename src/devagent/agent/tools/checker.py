"""Starting the project's own checkers (a linter run, a language server) as the agent starts any
command: the clean environment (`childenv`), the per-command limits, in the session's sandbox
(`ctx.sandbox`), in a process group of its own that never outlives the server."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from devagent.agent.sandbox.base import Limits, SandboxError, Streams
from devagent.agent.sandbox.childenv import child_env
from devagent.agent.sandbox.groups import kill_group
from devagent.agent.tools.base import ToolContext
from devagent.common.errors import DevagentError

OUTPUT_LIMIT = 8 * 1024 * 1024  # bytes of a checker's report read at most


class CheckerUnavailable(DevagentError):
    """The checker cannot be started here (the sandbox it must run in is missing, a spawn error)."""


def checker_env(ctx: ToolContext) -> dict[str, str]:
    return child_env(ctx.env_pass, extra={"DEVAGENT": "1", "NO_COLOR": "1"})


def checker_path(ctx: ToolContext) -> str:
    """The PATH the session's commands get (where their checkers are looked up)."""
    return checker_env(ctx)["PATH"]


async def start_checker(
    ctx: ToolContext, command: str, cwd: str, *, errors: bool = False
) -> asyncio.subprocess.Process:
    """Starts `command` (`bash -c`) with pipes for its input and output, and for its errors when
    `errors` (else dropped: a long-running checker must not fill a pipe nobody reads)."""
    sandbox = ctx.sandbox
    if (why := sandbox.unavailable() or sandbox.refuses(cwd)) is not None:
        raise CheckerUnavailable(why)
    try:
        started = await sandbox.start(
            command,
            cwd=cwd,
            env=checker_env(ctx),
            limits=Limits(ctx.command_memory_mb, ctx.command_processes),
            stdin="pipe",
            streams=Streams(errors=errors, limit=OUTPUT_LIMIT),
            lasting=True,
        )
    except SandboxError as e:
        raise CheckerUnavailable(str(e)) from e
    except OSError as e:
        raise CheckerUnavailable(f"it could not be started: {e.strerror or e}") from e
    return started.proc


@dataclass(frozen=True, slots=True)
class Checked:
    """How one checker run ended: its exit code (None: it did not finish, `problem` says why)."""

    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    problem: str = ""


async def run_checker(ctx: ToolContext, command: str, cwd: str, text: str, seconds: float) -> Checked:
    """Runs `command` with `text` on its standard input; killed with all it started when its time
    is up."""
    try:
        proc = await start_checker(ctx, command, cwd, errors=True)
    except CheckerUnavailable as e:
        return Checked(None, problem=str(e))
    try:
        data = text.encode("utf-8", "surrogatepass")
        out, err = await asyncio.wait_for(proc.communicate(data), seconds)
    except TimeoutError:
        await kill_group(proc)
        return Checked(None, problem=f"it did not finish within {seconds:g} s")
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            await asyncio.shield(kill_group(proc))
        raise
    code = proc.returncode if proc.returncode is not None else -1
    said = (err or b"").decode("utf-8", "replace")
    return Checked(code, out[:OUTPUT_LIMIT].decode("utf-8", "replace"), said)
