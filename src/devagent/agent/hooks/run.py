"""Running one hook command: `bash -c COMMAND` with the event as JSON on its standard input, as
the agent runs any command (the clean environment, the per-command limits, the sandbox when it
is on), killed with everything it started when its time is up."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devagent.agent.childenv import child_env
from devagent.agent.hooks.config import HookCommand
from devagent.agent.tools.shell import active_sandbox, kill_group, limited, sandbox_missing

OUTPUT_LIMIT = 256 * 1024  # characters of a hook's stdout or stderr kept


@dataclass(frozen=True, slots=True)
class HookLimits:
    """What every command the agent starts is held to (the operator's settings)."""

    env_pass: tuple[str, ...] = ()
    memory_mb: int = 0
    processes: int = 0


@dataclass(frozen=True, slots=True)
class HookRun:
    """How one hook ended: its exit code (None when it did not run to the end: `problem` says
    why) and its output."""

    command: str
    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    problem: str = ""


async def run_hook(
    hook: HookCommand,
    event: Mapping[str, Any],
    cwd: str,
    roots: Sequence[Path],
    limits: HookLimits,
) -> HookRun:
    """Run `hook` in `cwd` (a workspace root) with `event` on its standard input."""
    env = child_env(
        limits.env_pass,
        # Claude Code's name for the project folder, which users' hook commands use.
        extra={"CLAUDE_PROJECT_DIR": cwd, "DEVAGENT_PROJECT_DIR": cwd, "DEVAGENT": "1", "PAGER": "cat"},
    )
    argv = limited(hook.command, limits.memory_mb, limits.processes)
    sandbox = active_sandbox()
    if sandbox is not None:
        argv = sandbox.argv(roots, cwd, argv)
        env["TMPDIR"] = "/tmp"
    elif (missing := sandbox_missing()) is not None:
        return HookRun(hook.command, None, problem=missing.message())
    data = json.dumps(dict(event), ensure_ascii=False).encode("utf-8")
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            **(sandbox.run_as() if sandbox is not None else {}),
        )
    except OSError as e:
        return HookRun(hook.command, None, problem=f"it could not be started: {e.strerror or e}")
    try:
        out, err = await asyncio.wait_for(proc.communicate(data), hook.timeout)
    except TimeoutError:
        await kill_group(proc)
        return HookRun(
            hook.command, None, problem=f"it did not finish within {hook.timeout:g} s and was stopped"
        )
    except BaseException:
        await asyncio.shield(kill_group(proc))
        raise
    code = proc.returncode if proc.returncode is not None else -1
    return HookRun(hook.command, code, _text(out), _text(err))


def _text(data: bytes) -> str:
    return data[:OUTPUT_LIMIT].decode("utf-8", errors="replace")


def project_dir(roots: Sequence[str]) -> str:
    """The folder hooks run in: the session's first workspace root."""
    return roots[0] if roots else os.getcwd()
