"""Running one hook command: `bash -c COMMAND` with the event as JSON on its standard input, as
the agent runs any command (the clean environment, the per-command limits, the sandbox when it
is on, where the hook also sees its own folders read-only), killed with everything it started when
its time is up or when it prints more than a hook may."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devagent.agent.hooks.config import HookCommand
from devagent.agent.sandbox.base import Limits, Sandbox, SandboxError, Streams
from devagent.agent.sandbox.childenv import child_env
from devagent.agent.sandbox.groups import kill_group
from devagent.common.errors import DevagentError

OUTPUT_LIMIT = 256 * 1024  # bytes a hook may print on its stdout, and on its stderr
READ_CHUNK = 65536
_SAID = 300  # characters of a failing hook's stderr quoted


@dataclass(frozen=True, slots=True)
class HookLimits:
    """What every command the agent starts is held to (the operator's settings)."""

    env_pass: tuple[str, ...] = ()
    memory_mb: int = 0
    processes: int = 0


@dataclass(frozen=True, slots=True)
class HookRun:
    """How one hook ended: its exit code (None when it did not run to the end: `problem` says
    why) and its output; `advisory` as the hook's settings say."""

    command: str
    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    problem: str = ""
    advisory: bool = False

    def failure(self) -> str:
        """Why the hook gave no answer of its own: it could not start (a spawn error, exit 126 or
        127 from the shell), was killed by a signal, ran past its time or printed past the cap;
        "" when it ran and chose its exit code."""
        said = self.stderr.strip()[:_SAID]
        said = f": {said}" if said else ""
        code = self.exit_code
        if code is None:
            return self.problem
        if code in (126, 127):
            return f"it could not start (exit {code}{said})"
        number = -code if code < 0 else code - 128 if 128 < code <= 128 + 64 else 0
        if number:
            return f"it was killed by {_signal_name(number)}{said}"
        return ""


def _signal_name(number: int) -> str:
    try:
        return f"{signal.Signals(number).name} (signal {number})"
    except ValueError:
        return f"signal {number}"


class _TooMuch(DevagentError):
    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.stream = stream


async def run_hook(
    hook: HookCommand,
    event: Mapping[str, Any],
    cwd: str,
    sandbox: Sandbox,
    limits: HookLimits,
    shown: Sequence[Path] = (),
) -> HookRun:
    """Run `hook` in `cwd` (a workspace root) with `event` on its standard input, in the
    session's `sandbox`, where it also sees its own folders and `shown` (the session's transcript
    folder) read-only."""
    # Claude Code's names for the project folder and a plugin's, which users' hook commands use.
    extra = {"CLAUDE_PROJECT_DIR": cwd, "DEVAGENT_PROJECT_DIR": cwd, "DEVAGENT": "1", "PAGER": "cat"}
    if hook.plugin_root is not None:
        extra["CLAUDE_PLUGIN_ROOT"] = str(hook.plugin_root)
    env = child_env(limits.env_pass, extra=extra)
    if (missing := sandbox.unavailable()) is not None:
        return HookRun(hook.command, None, problem=missing, advisory=hook.advisory)
    data = json.dumps(dict(event), ensure_ascii=False).encode("utf-8")
    try:
        started = await sandbox.start(
            hook.command,
            cwd=cwd,
            env=env,
            limits=Limits(limits.memory_mb, limits.processes),
            stdin="pipe",
            streams=Streams(errors=True),
            shown=[*hook.folders, *shown],
        )
    except (OSError, SandboxError) as e:
        why = e.strerror or e if isinstance(e, OSError) else e
        return HookRun(hook.command, None, problem=f"it could not be started: {why}", advisory=hook.advisory)
    proc = started.proc
    problem = ""
    try:
        out, err = await asyncio.wait_for(_talk(proc, data), hook.timeout)
    except TimeoutError:
        problem = f"it did not finish within {hook.timeout:g} s and was stopped"
    except _TooMuch as e:
        problem = f"it printed more than {OUTPUT_LIMIT // 1024} KiB on its {e.stream} and was stopped"
    except BaseException:
        await asyncio.shield(kill_group(proc))
        raise
    if problem:
        await kill_group(proc)
        return HookRun(hook.command, None, problem=problem, advisory=hook.advisory)
    code = proc.returncode if proc.returncode is not None else -1
    return HookRun(hook.command, code, _text(out), _text(err), advisory=hook.advisory)


async def _talk(proc: asyncio.subprocess.Process, data: bytes) -> tuple[bytes, bytes]:
    """Give `proc` the event, read what it prints until it closes both outputs and exits.
    _TooMuch as soon as one output passes OUTPUT_LIMIT: nothing more is read."""
    assert proc.stdin is not None
    feed = asyncio.ensure_future(_feed(proc.stdin, data))
    reads = [asyncio.ensure_future(_read(stream, name)) for stream, name in _outputs(proc)]
    try:
        out, err = await asyncio.gather(*reads)
        await feed
        await proc.wait()
    finally:
        for task in (feed, *reads):
            task.cancel()
        await asyncio.gather(feed, *reads, return_exceptions=True)
    return out, err


def _outputs(proc: asyncio.subprocess.Process) -> list[tuple[asyncio.StreamReader, str]]:
    assert proc.stdout is not None and proc.stderr is not None
    return [(proc.stdout, "stdout"), (proc.stderr, "stderr")]


async def _feed(stdin: asyncio.StreamWriter, data: bytes) -> None:
    """The event on the hook's standard input; a hook that does not read it is not a failure."""
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stdin.write(data)
        await stdin.drain()
    stdin.close()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        await stdin.wait_closed()


async def _read(stream: asyncio.StreamReader, name: str) -> bytes:
    kept = bytearray()
    while chunk := await stream.read(READ_CHUNK):
        kept += chunk
        if len(kept) > OUTPUT_LIMIT:
            raise _TooMuch(name)
    return bytes(kept)


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def project_dir(roots: Sequence[str]) -> str:
    """The folder hooks run in: the session's first workspace root."""
    return roots[0] if roots else os.getcwd()
