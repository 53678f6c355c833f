"""The shell tool (G2): runs `bash -c` in the workspace, streams its output live, and never leaves
processes behind when it times out or is cancelled (the whole process group is killed).

With the sandbox on (issue 12 item 7) the command runs inside bubblewrap: the workspace roots
read-write, the rest of the filesystem read-only, a private /tmp and /run, no network unless the
operator allows it, no capabilities, and its own PID namespace, so every process it started ends
with it, with the turn, or with the server (`--die-with-parent`). The sandbox is a setting of the
process (`use_sandbox`), chosen at start-up by `devagent serve|run|wire` (`setup_sandbox`).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import functools
import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devagent.agent.childenv import child_env
from devagent.agent.events import ConfirmationDetails, ExecuteDetails, ToolKind
from devagent.agent.gitguard import granted_env
from devagent.agent.tools._util import num_arg, opt_str_arg, str_arg
from devagent.agent.tools.base import Tool, ToolContext, ToolFailure, ToolResult

if TYPE_CHECKING:
    from devagent.agent.core import CoreConfig
    from devagent.agent.tools.backends import CommandBackend

OUTPUT_MAX_CHARS = 30_000  # what the model gets: the tail of the output
LIVE_INTERVAL = 0.05  # seconds between live updates at most
KILL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL
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


class _Output:
    """Combined output, keeping only the tail beyond a cap."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.text = ""
        self.dropped = 0
        self.changed = False
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes, final: bool = False) -> None:
        chunk = self._decoder.decode(data, final)
        if not chunk:
            return
        self.text += chunk
        self.changed = True
        if len(self.text) > 2 * self.cap:
            self._trim()

    def _trim(self) -> None:
        if len(self.text) > self.cap:
            cut = len(self.text) - self.cap
            self.dropped += cut
            self.text = self.text[cut:]

    def render(self) -> str:
        self._trim()
        if self.dropped:
            return f"[… {self.dropped} earlier characters of output omitted …]\n{self.text}"
        return self.text


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - a pid reused by another user
        return False
    return True


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _wait_exit(proc: asyncio.subprocess.Process, seconds: float) -> None:
    """Waits until the process has exited (not for its pipes, which others may hold open)."""
    deadline = time.monotonic() + seconds
    while proc.returncode is None and time.monotonic() < deadline:  # noqa: ASYNC110 - no exit event
        await asyncio.sleep(0.02)


async def kill_group(proc: asyncio.subprocess.Process, grace: float | None = None) -> None:
    """SIGTERM to the whole process group, SIGKILL after `grace` for whatever is left."""
    grace = KILL_GRACE if grace is None else grace
    pgid = proc.pid  # start_new_session: the shell leads its own group
    _signal_group(pgid, signal.SIGTERM)
    try:
        deadline = time.monotonic() + grace
        await _wait_exit(proc, grace)
        while _group_alive(pgid) and time.monotonic() < deadline:  # noqa: ASYNC110 - polling a pgid
            await asyncio.sleep(0.02)
    finally:
        # Reaped zombies of other parents may still answer signal 0 for a moment; SIGKILL is
        # harmless to them and final for anything that ignored SIGTERM.
        _signal_group(pgid, signal.SIGKILL)
        await _wait_exit(proc, 1.0)


# --- the sandbox (bubblewrap) ----------------------------------------------------------------------

SANDBOX_SETTINGS = ("auto", "on", "off")  # "" (unset): auto for serve, off for run and wire
INSTALL_HINT = "apt-get install bubblewrap"
USERNS_HINT = (
    "allow user namespaces (sysctl kernel.unprivileged_userns_clone=1; in Docker "
    "--security-opt seccomp=unconfined --security-opt apparmor=unconfined) or start with --no-sandbox"
)
PROBE_TIMEOUT = 30.0


class SandboxError(Exception):
    """The sandbox was asked for but cannot run here; the message names the fix."""


@dataclass(frozen=True, slots=True)
class Sandbox:
    """How sandboxed commands are started: bubblewrap at `bwrap`."""

    bwrap: str
    version: str = ""  # "bubblewrap 0.8.0"
    network: bool = False
    # Directories shown empty inside (issue 20 item 3): the server's home and data directory, the
    # user's config folder, and on a server every workspace root (a session sees its own only).
    hidden: tuple[Path, ...] = ()
    # Directories inside hidden ones shown again, read-only: toolchains on PATH under the home.
    readable: tuple[Path, ...] = ()
    # Files shown empty and read-only: the settings file and a SQLite database wherever they are.
    masked: tuple[Path, ...] = ()

    def argv(self, roots: Sequence[Path], cwd: str, command: Sequence[str]) -> list[str]:
        """The bwrap command line running `command` in `cwd` with `roots` writable."""
        args = [self.bwrap, "--unshare-all"]  # user (when possible), ipc, pid, net, uts, cgroup
        if self.network:
            args.append("--share-net")
        args += ["--die-with-parent", "--cap-drop", "ALL"]
        args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        # Later mounts cover earlier ones: parents first, so a root inside /tmp stays writable and
        # a hidden directory inside a root stays hidden. At equal depth: hide, then show again
        # read-only, then the roots (a root wins over a hide), then the masks (a masked file is
        # never a root).
        mounts: list[tuple[int, int, list[str]]] = [(2, 0, ["--tmpfs", "/tmp"])]
        if os.path.isdir("/run"):  # sockets there (docker, dbus) ignore read-only mounts
            mounts.append((2, 0, ["--tmpfs", "/run"]))
            resolv = Path(os.path.realpath("/etc/resolv.conf"))
            if self.network and resolv.is_relative_to("/run") and resolv.is_file():
                mounts.append((len(resolv.parts), 1, ["--ro-bind", str(resolv), str(resolv)]))
        mounts += [(len(h.parts), 0, ["--tmpfs", str(h)]) for h in self.hidden if h.is_dir()]
        mounts += [(len(r.parts), 1, ["--ro-bind", str(r), str(r)]) for r in self.readable if r.is_dir()]
        mounts += [(len(r.parts), 2, ["--bind", str(r), str(r)]) for r in roots]
        mounts += [(len(f.parts), 3, ["--ro-bind", "/dev/null", str(f)]) for f in self.masked if f.is_file()]
        for _depth, _order, mount in sorted(mounts, key=lambda m: m[:2]):
            args += mount
        return [*args, "--chdir", cwd, *command]

    def summary(self) -> str:
        network = "network allowed" if self.network else "no network"
        return f"{self.version or 'bubblewrap'}, {network}"


@functools.cache
def probe_bwrap() -> Sandbox | str:
    """Whether bubblewrap works on this machine (it needs namespaces, which containers may
    refuse): a Sandbox, or why not with the fix. Runs `bwrap … true` once per process."""
    path = shutil.which("bwrap")
    if path is None:
        return f"bwrap not installed: {INSTALL_HINT}"
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=PROBE_TIMEOUT, check=False
        )
        sandbox = Sandbox(path, out.stdout.strip())
        run = subprocess.run(
            sandbox.argv([], "/", ["true"]),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as e:
        return f"bwrap does not run here ({e}): {USERNS_HINT}"
    if run.returncode != 0:
        lines = run.stderr.strip().splitlines()
        why = lines[-1] if lines else f"exit code {run.returncode}"
        return f"bwrap cannot create its sandbox here ({why}): {USERNS_HINT}"
    return sandbox


def sandbox_setting(value: str) -> str:
    """The `sandbox` setting normalized: "", auto, on or off (true/false and yes/no accepted)."""
    v = value.strip().lower()
    v = {"true": "on", "yes": "on", "1": "on", "false": "off", "no": "off", "0": "off"}.get(v, v)
    if v and v not in SANDBOX_SETTINGS:
        raise ValueError(f"sandbox must be one of {', '.join(SANDBOX_SETTINGS)}, not {value!r}")
    return v


@dataclass(frozen=True, slots=True)
class SandboxMissing:
    """The sandbox is on but cannot run here (issue 20 item 3): shell commands fail closed with
    `why`, never run unsandboxed."""

    why: str

    def message(self) -> str:
        return (
            f"shell commands cannot run on this server: its sandbox is on but {self.why}. "
            "The operator must install bubblewrap, or turn the sandbox off explicitly (--no-sandbox)"
        )


_process_sandbox: Sandbox | SandboxMissing | None = None


def use_sandbox(sandbox: Sandbox | SandboxMissing | None) -> None:
    """Sets how this process runs shell commands (None: directly, unsandboxed; SandboxMissing:
    not at all)."""
    global _process_sandbox
    _process_sandbox = sandbox


def active_sandbox() -> Sandbox | None:
    return _process_sandbox if isinstance(_process_sandbox, Sandbox) else None


def sandbox_missing() -> SandboxMissing | None:
    return _process_sandbox if isinstance(_process_sandbox, SandboxMissing) else None


def _toolchains(home: Path, extra: Sequence[str]) -> tuple[Path, ...]:
    """What stays readable in the hidden home: each PATH entry under it (with its parent for a
    `bin` or `shims` folder of a toolchain, e.g. ~/.pyenv, never the home itself or ~/.local),
    the Python devagent runs on, and the operator's `sandbox_read`."""
    import sys

    found: list[Path] = []
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if not entry or not os.path.isabs(entry):
            continue
        p = Path(os.path.realpath(entry))
        if not p.is_relative_to(home) or p == home:
            continue
        found.append(p)
        if p.name in ("bin", "shims") and p.parent not in (home, home / ".local"):
            found.append(p.parent)
    for prefix in (sys.base_prefix, sys.prefix):
        p = Path(os.path.realpath(prefix))
        if p.is_relative_to(home) and p != home:
            found.append(p)
    found += [Path(os.path.realpath(os.path.expanduser(e))) for e in extra]
    return tuple(dict.fromkeys(found))


def choose_sandbox(
    flag: bool | None, config: CoreConfig, command: str, hide: Sequence[Path] = ()
) -> tuple[Sandbox | SandboxMissing | None, str]:
    """The sandbox for `devagent COMMAND`: the flag (--sandbox/--no-sandbox) over the `sandbox`
    setting over the command's default (on for serve, off for run and wire). Returns it with the
    line saying whether it is on and why. Where bwrap does not work: SandboxError when it was
    asked for (the flag or the setting "on"); SandboxMissing for serve's default, so that the
    server starts and its commands fail closed (issue 20 item 3); off only for the operator's
    explicit "auto". `hide`: more directories no command may see (a server's workspace roots)."""
    if flag is not None:
        mode, source = ("on", "--sandbox") if flag else ("off", "--no-sandbox")
    elif config.sandbox:
        mode = sandbox_setting(config.sandbox)
        source = f"sandbox = {mode} in the settings"
    elif command == "serve":
        mode, source = "default", "the default of devagent serve"
    else:
        mode, source = "off", f"the default of devagent {command}; --sandbox turns it on"
    if mode == "off":
        return None, f"Shell sandbox: off ({source})"
    probed = probe_bwrap()
    if isinstance(probed, str):
        if mode == "on":
            raise SandboxError(f"the shell sandbox is on ({source}) but {probed}")
        if mode == "auto":
            return None, f"Shell sandbox: off (sandbox = auto and {probed})"
        missing = SandboxMissing(probed)
        return missing, (
            f"Shell sandbox: UNAVAILABLE ({probed}). Shell commands will fail until bubblewrap "
            "runs here or the sandbox is turned off explicitly (--no-sandbox, sandbox = off)"
        )
    home = Path(os.path.realpath(Path.home()))
    hidden = list(config.protected_dirs())
    if home != Path("/"):
        hidden.append(home)
    hidden += [Path(os.path.realpath(h)) for h in hide]
    sandbox = replace(
        probed,
        network=config.sandbox_network,
        hidden=tuple(dict.fromkeys(hidden)),
        readable=_toolchains(home, config.sandbox_read) if home != Path("/") else (),
        masked=config.protected_files(),  # those that exist when a command starts
    )
    return sandbox, f"Shell sandbox: on ({sandbox.summary()})"


def setup_sandbox(flag: bool | None, config: CoreConfig, command: str, hide: Sequence[Path] = ()) -> str:
    """Chooses the sandbox for this process (`choose_sandbox`), uses it, returns the line to print."""
    sandbox, line = choose_sandbox(flag, config, command, hide)
    use_sandbox(sandbox)
    return line


def limited(command: str, memory_mb: int, processes: int) -> list[str]:
    """`bash -c command` under the per-command limits (issue 20 item 3): data memory in MiB and
    processes, each capped at what this process may give (a hard limit cannot be raised), 0 for
    none. `ulimit` sets soft and hard limits, so the command cannot raise them again."""
    import resource

    steps: list[str] = []
    for flag, rlimit, value, unit in (
        ("-d", resource.RLIMIT_DATA, memory_mb * 1024, 1024),
        ("-u", resource.RLIMIT_NPROC, processes, 1),
    ):
        if value <= 0:
            continue
        hard = resource.getrlimit(rlimit)[1]
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard // unit)
        steps.append(f"ulimit {flag} {value}")
    if not steps:
        return ["bash", "-c", command]
    return ["bash", "-c", " && ".join([*steps, 'exec bash -c "$1"']), "bash", command]


class RunShellCommand(Tool):
    name = "run_shell_command"
    description = (
        "Run a command with `bash -c` in the workspace (or in `directory`, relative to the workspace "
        "root) and return its combined stdout and stderr followed by `exit code N`. A non-zero exit "
        "code is reported, not treated as a failure. Standard input is closed, so interactive "
        "programs cannot prompt: pass flags such as `--yes`, and avoid pagers and editors. The "
        "command is killed after `timeout` seconds (capped by the server). Long output keeps only its "
        f"last {OUTPUT_MAX_CHARS} characters. To start a server or other long-running process, run it "
        "in the background with its output redirected, e.g. `npm start > server.log 2>&1 &`."
    )
    parameters = {  # noqa: RUF012 - a read-only schema shared by all instances
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The bash command line to run."},
            "description": {
                "type": "string",
                "description": "A short description of what the command does and why, shown to the user.",
            },
            "directory": {
                "type": "string",
                "description": "The directory to run in, relative to the workspace root. Default: the root.",
            },
            "timeout": {
                "type": "number",
                "exclusiveMinimum": 0,
                "description": "Seconds before the command is killed. The server's limit applies if lower.",
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    }
    kind = ToolKind.EXECUTE
    SANDBOX_NOTE = (
        " Commands run in a sandbox: only the workspace is writable, /tmp is private to each "
        "command, {network}, and background processes end when the command ends (start a server "
        "and use it in the same command)."
    )

    def definition(self) -> dict[str, Any]:
        if (missing := sandbox_missing()) is not None:
            return {**super().definition(), "description": f"Unavailable: {missing.message()}."}
        sandbox = active_sandbox()
        if sandbox is None:
            return super().definition()
        network = "the network is reachable" if sandbox.network else "there is no network"
        return {
            **super().definition(),
            "description": self.description + self.SANDBOX_NOTE.format(network=network),
        }

    def describe(self, args: dict[str, Any]) -> str:
        command = args.get("command")
        return command if isinstance(command, str) else "Run a shell command"

    def _cwd(self, args: dict[str, Any], ctx: ToolContext) -> str:
        directory = opt_str_arg(args, "directory", ".") or "."
        real = ctx.workspace.resolve(directory, must_exist=True)
        if not real.is_dir():
            raise ToolFailure(f"{directory!r} is not a directory", "not_a_directory")
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
        requested = num_arg(args, "timeout")
        timeout = min(requested, ctx.shell_timeout) if requested else ctx.shell_timeout
        if ctx.cancelled.is_set():
            raise ToolFailure("the command was cancelled before it started", "cancelled")
        # Under a prefix grant, git starts no program its configuration names (issue 28 item 1).
        guard = granted_env() if ctx.granted else {}
        if ctx.backends.commands is not None:  # the client's terminal (tools/backends.py)
            return await self._run_elsewhere(ctx.backends.commands, command, cwd, timeout, ctx, guard)
        self._check_can_run(ctx)

        # An allow-list, never the server's environment (issue 20 item 1: tokens, database URL,
        # provider keys stay in the server).
        env = child_env(
            ctx.env_pass,
            extra={"PAGER": "cat", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0", "DEVAGENT": "1", **guard},
        )
        argv = limited(command, ctx.command_memory_mb, ctx.command_processes)
        sandbox = active_sandbox()
        if sandbox is not None:
            argv = sandbox.argv(ctx.workspace.roots, cwd, argv)
            env["TMPDIR"] = "/tmp"  # the private one; elsewhere is read-only
        # Our own pipe rather than asyncio's: we can close our end when background jobs keep the
        # write end open after the shell exited, and the process transport holds no pipes.
        read_fd, write_fd = os.pipe()
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=cwd,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=write_fd,
                stderr=write_fd,
                start_new_session=True,
            )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        loop = asyncio.get_running_loop()
        stdout = asyncio.StreamReader(loop=loop)
        try:
            pipe, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(stdout, loop=loop), os.fdopen(read_fd, "rb", buffering=0)
            )
        except BaseException:
            await asyncio.shield(kill_group(proc))
            raise
        out = _Output(OUTPUT_MAX_CHARS)

        async def read() -> None:
            while data := await stdout.read(READ_CHUNK):
                out.feed(data)
            out.feed(b"", final=True)

        reader = asyncio.create_task(read())
        cancel = asyncio.create_task(ctx.cancelled.wait())
        deadline = loop.time() + timeout
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
            await _wait_exit(proc, KILL_GRACE)
        code = proc.returncode if proc.returncode is not None else -9
        await ctx.live(out.render())
        text = out.render()

        if outcome == "timeout":
            raise ToolFailure(
                f"the command timed out after {timeout:g} s and was killed. Output so far:\n{text}",
                "timeout",
            )
        if outcome == "cancelled":
            raise ToolFailure(f"the command was cancelled. Output so far:\n{text}", "cancelled")

        body = text if text.strip() else "(no output)"
        if not body.endswith("\n"):
            body += "\n"
        status = f"exit code {code}" if code >= 0 else f"exit code {128 - code} (killed by signal {-code})"
        if outcome == "detached":
            status += (
                "\n(background processes still hold the output; their further output is not captured "
                "— redirect it to a file)"
            )
        if edited:
            status += f"\n(the user edited the command before approving it; what ran was: {command})"
        return ToolResult(
            text=body + status,
            data={
                "exit_code": code,
                "command": command,
                "user_modified": edited,
                "directory": ctx.workspace.display(Path(cwd)),
                "truncated": out.dropped > 0,
                "sandboxed": sandbox is not None,
            },
        )

    @staticmethod
    def _check_can_run(ctx: ToolContext) -> None:
        """Fails closed where the sandbox is on but cannot run (issue 20 item 3); commands that
        run in the client's terminal are the client's."""
        missing = sandbox_missing()
        if missing is not None and ctx.backends.commands is None:
            raise ToolFailure(missing.message(), "sandbox_unavailable")

    async def _run_elsewhere(
        self,
        backend: CommandBackend,
        command: str,
        cwd: str,
        time_limit: float,
        ctx: ToolContext,
        env: dict[str, str],
    ) -> ToolResult:
        result = await backend.run(command, cwd, time_limit, ctx, env)
        body = result.output if result.output.strip() else "(no output)"
        if not body.endswith("\n"):
            body += "\n"
        if result.exit_code is not None:
            status = f"exit code {result.exit_code}"
        else:
            status = f"killed by signal {result.signal or '?'}"
        return ToolResult(
            text=body + status,
            data={
                "exit_code": result.exit_code,
                "command": command,
                "directory": ctx.workspace.display(Path(cwd)),
                "truncated": result.truncated,
                "sandboxed": False,
            },
        )
