"""A repository session's setup script, run as a command of the session: in its workspace, through
the shell sandbox the session's other commands run in, with the agent's clean environment and the
per-command limits (never the server's keys, tokens or git credentials). The script is one the
operator allows (`repository_setup`): the operator's own file (its text is the command, so the
sandbox need not see the file) or a file of the repository the operator names."""

from __future__ import annotations

import asyncio
import os
import shlex
from pathlib import Path
from typing import Any

from devagent.agent.events import InputError
from devagent.agent.sandbox.base import Limits, Sandbox, SandboxError, Streams
from devagent.agent.sandbox.childenv import child_env
from devagent.agent.sandbox.groups import kill_group
from devagent.agent.settings import CoreConfig

OUTPUT_TAIL = 4000  # characters of the script's output the session's record keeps


def setup_command(folder: Path, script: str) -> str:
    """The script's command, read while the clone is in `folder` (before it is handed to a
    sandbox whose workspace is not on this host); InputError for a file the repository lacks."""
    if not script.startswith("repo:"):
        return Path(script).read_text()
    rel = script.removeprefix("repo:")
    path = (folder / rel).resolve()
    if not path.is_relative_to(folder.resolve()) or not path.is_file():
        raise InputError(f"the setup script {rel} is not a file of the repository", "repository_failed")
    return "bash -- " + shlex.quote(rel)


async def run_setup(
    config: CoreConfig, sandbox: Sandbox, folder: Path, script: str, command: str
) -> dict[str, Any]:
    """Runs the setup's `command` (`setup_command`) in the session's sandbox; its exit code and
    the tail of its output. InputError when it fails, so the session is not started on a
    half-set-up workspace."""
    env = child_env(config.env_pass, extra={"PAGER": "cat", "GIT_TERMINAL_PROMPT": "0", "DEVAGENT": "1"})
    if (why := sandbox.unavailable() or sandbox.refuses(str(folder))) is not None:
        raise InputError(why, "repository_failed")
    limits = Limits(config.command_memory_mb, config.command_processes)
    try:
        started = await sandbox.start(
            command, cwd=str(folder), env=env, limits=limits, streams=Streams(errors=True)
        )
    except SandboxError as e:
        raise InputError(str(e), "repository_failed") from None
    proc = started.proc
    try:
        out, err = await asyncio.wait_for(proc.communicate(), config.shell_timeout_max)
    except TimeoutError:
        await kill_group(proc)
        raise InputError(
            f"the setup script ran past {config.shell_timeout_max:g} seconds and was stopped",
            "repository_failed",
        ) from None
    except BaseException:
        await asyncio.shield(kill_group(proc))
        raise
    text = (out + err).decode(errors="replace")[-OUTPUT_TAIL:]
    code = proc.returncode or 0
    if code != 0:
        tail = os.linesep.join(text.strip().splitlines()[-5:])
        raise InputError(f"the setup script failed (exit code {code}): {tail}", "repository_failed")
    return {"script": script if script.startswith("repo:") else "operator", "exit_code": code, "output": text}
