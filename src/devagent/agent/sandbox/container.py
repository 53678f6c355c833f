"""The `container` sandbox backend: each session's commands and file operations run in a container
of its own (Podman or Docker, `podman.py`), its workspace a named volume that outlives the
container. An idle container is stopped and started again by the session's next command; a warm
pool (`pool.py`) hands new sessions a running container. The operator chooses the engine, the
templates (image and limits) and the pool's size in the settings; a caller never can.

Written against the core's sandbox interface (agent/sandbox/base.py: a `SandboxProvider` built as
`ContainerProvider(config)`, whose `for_session` gives each session its `Sandbox`). The sandbox
opens lazily: its container is found, claimed from the pool or created by its first command or
file operation (or `await provider.open(...)`)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal, Protocol, cast

from devagent.agent.sandbox import container_files as files
from devagent.agent.sandbox.accounts import give_tree
from devagent.agent.sandbox.base import PTY_TERM as TERM
from devagent.agent.sandbox.base import SandboxError, Started
from devagent.agent.sandbox.childenv import is_devagents
from devagent.agent.sandbox.container_files import OutsideWorkspace
from devagent.agent.sandbox.groups import kill_group
from devagent.agent.sandbox.podman import (
    CONTROL,
    LABEL,
    POOL_LABEL,
    SESSION_LABEL,
    TEMPLATE_LABEL,
    WORKSPACE,
    Engine,
    EngineError,
    Template,
)
from devagent.agent.sandbox.pool import WarmPool, provision

Stdin = Literal["closed", "pipe"]


class Winsize(Protocol):
    """A pseudo-terminal's size (as base.Winsize: `tools.tty_screen.TtySize` is one)."""

    @property
    def rows(self) -> int: ...

    @property
    def cols(self) -> int: ...

    def winsize(self) -> bytes: ...


RELAY = str(Path(__file__).with_name("relay.py"))
# Names a container never gets from the caller's environment: the host's own (its PATH, HOME and
# user mean nothing in the image) and, again here, whatever is devagent's or a provider's.
HOST_NAMES = frozenset({"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TMPDIR", "PWD"})
SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSW|CREDENTIAL|DATABASE_URL|_DB$)", re.IGNORECASE)
# Run first inside the container: record the command's process group (the exec'd process leads
# its own: the engine makes it a session leader) where the relay's kill finds it, run it, then end
# what it left running in its group (`cmd &`), as a local command's namespace ends with it: the
# container outlives the command and the engine leaves an exec's other processes running. SIGKILL,
# one process at a time, the wrapper sparing itself (bash blocks SIGTERM while it retries a fork),
# again while any is found (a fork bomb forks as it goes); builtins only, since where the leftovers
# took every process slot a fork fails, and that ends sh.
WRAPPER = (
    'mkdir -p "${0%/*}" 2>/dev/null; echo $$ > "$0"; "$@"; code=$?; n=0; while [ $n -lt 50 ]; do '
    "n=$((n + 1)); found=0; for p in /proc/[0-9]*; do p=${p#/proc/}; [ $p = $$ ] && continue; "
    "read -r s 2>/dev/null < /proc/$p/stat || continue; set -- ${s##*) }; "
    '[ "$3" = $$ ] && [ "$1" != Z ] || continue; kill -s KILL $p 2>/dev/null; found=1; done; '
    '[ $found = 0 ] && break; done; rm -f "$0"; exit $code'
)
# Where the engine passes the relay's descriptor in (Podman's --preserve-fds): a byte on it first
# says the command is starting, so a container found stopped before that can be started and the
# command run, never one that had begun.
STARTING = "{ printf s >&3; exec 3>&-; } 2>/dev/null; " + WRAPPER
# The relay's kill, inside the container: the signal to the recorded group, else to the process.
KILLER = 'g=$(cat "$1" 2>/dev/null) || exit 0; kill -s "$2" -- "-$g" 2>/dev/null || kill -s "$2" "$g"'


@dataclass(slots=True)
class Finished:
    code: int
    output: bytes
    outcome: str  # "done" | "timeout"


def templates_from(settings: Mapping[str, Mapping[str, Any]]) -> dict[str, Template]:
    """The operator's `sandbox_templates` (already checked by settings.parse_sandbox_templates)."""
    out: dict[str, Template] = {}
    for name, spec in settings.items():
        fields = {k: v for k, v in spec.items() if k in Template.__dataclass_fields__ and k != "name"}
        out[name] = Template(name=name, **fields)
    return out


def container_env(env: Mapping[str, str], tty: bool) -> dict[str, str]:
    """What of `env` enters the container: never the host's own names nor anything named like a
    secret (the caller's env is an allow-list already; this holds even if it were not)."""
    out = {
        k: v
        for k, v in env.items()
        if k not in HOST_NAMES and not SECRET_NAME.search(k) and (k == "DEVAGENT" or not is_devagents(k))
    }
    if tty:
        out["TERM"] = TERM
    return out


def _safe(session_id: str) -> str:
    """A session id as engines accept it in a name ([a-zA-Z0-9_.-], at most 64)."""
    cleaned = re.sub(r"[^a-zA-Z0-9_.-]", "-", session_id).strip("-.") or "session"
    if len(cleaned) > 48 or cleaned != session_id:
        import hashlib

        cleaned = f"{cleaned[:36]}-{hashlib.sha256(session_id.encode()).hexdigest()[:10]}"
    return cleaned


class ContainerSandbox:
    """One session's container."""

    kind = "container"

    def __init__(
        self,
        provider: ContainerProvider,
        session_id: str,
        name: str,
        template: Template,
        roots: Sequence[Path],
    ) -> None:
        self.provider = provider
        self.session_id = session_id
        self.name = name
        self.template = template
        self.roots = tuple(Path(r) for r in roots)
        self.engine = provider.engine
        self.running_commands = 0
        # Each running command's bookkeeping (its count, a stopped container noticed), by pid:
        # held so the task is not collected, and awaited by `run` so the count is right when it
        # returns.
        self._reaping: dict[int, asyncio.Task[None]] = {}
        self.last_used = time.monotonic()
        self._up: bool | None = None  # None: not known; checked before the next command
        self._lock = asyncio.Lock()
        self.volume = ""
        # The host folder that is its /workspace (the first workspace root, bind-mounted), where
        # the provider maps the session's own folder; else "" and /workspace is a named volume.
        self.bound = str(self.roots[0]) if provider.host_workspace and self.roots else ""
        self._opened = False

    # --- what the session is told ------------------------------------------------------------------

    @property
    def network(self) -> bool:
        return self.template.network not in ("", "none")

    def describe(self) -> str:
        where = (
            f"the workspace root {self.bound} is {WORKSPACE} in it (the file tools take relative "
            f"paths or paths under {self.bound})"
            if self.bound
            else f"the workspace is {WORKSPACE}"
        )
        return f"in a {self.engine.program} container of its own ({self.template.summary()}); {where}"

    @property
    def files_here(self) -> bool:
        return bool(self.bound)  # else the workspace is the container's own volume

    def show_path(self, host_path: str | Path) -> str:
        """The path inside the container for a path the tools name (a path under the session's
        root folder, or already one under /workspace, or relative to it)."""
        return str(self.inside(host_path))

    def unavailable(self) -> str | None:
        return self.provider.unavailable()

    def refuses(self, cwd: str) -> str | None:
        """Why a command cannot run in `cwd`: only a folder of the workspace is one."""
        where = str(self.inside(cwd))
        if not (where == WORKSPACE or where.startswith(WORKSPACE + "/")):
            return f"{cwd} is not in the session's workspace ({WORKSPACE} in its container)"
        if self.bound and (exposed := self.provider.exposes(Path(self.bound))) is not None:
            return exposed
        if not self.bound or (ids := self.provider.known_ids(self.template)) is None:
            return None  # not yet known: asked of the container when it opens, checked again then
        return self.provider.unwritable(Path(self.bound), self.template, ids)

    def owner(self) -> tuple[int, int] | None:
        """None: the server writes nothing its commands read outside the container."""
        return None

    def inside(self, path: str | Path) -> PurePosixPath:
        text = str(path)
        for root in self.roots[:1]:
            with contextlib.suppress(ValueError):
                rel = Path(text).relative_to(root)
                return (
                    PurePosixPath(WORKSPACE, rel.as_posix()) if str(rel) != "." else PurePosixPath(WORKSPACE)
                )
        p = PurePosixPath(text)
        if p.is_absolute():
            return p
        return PurePosixPath(WORKSPACE, p)

    # --- the container's life ------------------------------------------------------------------------

    async def open(self) -> None:
        """Finds the session's container (an earlier turn's, or another replica's), else makes
        one around its volume if only that is left, else claims one from the warm pool, else
        creates one. Two opens at once make one container."""
        if self._opened:
            return
        await self.provider.start()  # the pool's refills and the idle reaper, once, on first need
        async with self.provider.lock_for(self.session_id):
            if not self._opened:
                await self._open_here()

    async def _open_here(self) -> None:
        if self.bound:
            await self._open_bound()
        else:
            await self._open_volume()
        self._opened = True

    async def _open_bound(self) -> None:
        """The container whose /workspace is the session's host folder: an earlier turn's when it
        has that folder, else a new one (a pooled container has a volume of its own, so the warm
        pool is not used here; a container of this name around anything else is replaced)."""
        engine, t = self.engine, self.template
        state = await engine.running(self.name)
        if state is not None and await engine.bound_folder(self.name) == self.bound:
            self._up = state or None  # a stopped one is started by ensure_running
            return
        if state is not None:
            await engine.remove(self.name)
        labels = self.provider.labels_for(self.session_id, t)
        await provision(engine, self.name, "", t, labels, bind=self.bound)
        self._up = True

    async def _open_volume(self) -> None:
        engine, t = self.engine, self.template
        labels = self.provider.labels_for(self.session_id, t)
        own = f"devagent-ws-{_safe(self.session_id)}"
        volume = await engine.volume_of(self.name)
        if volume is None and await engine.volume_exists(own):
            await provision(engine, self.name, own, t, labels, volume_exists=True)
            volume, self._up = own, True  # a new container around the workspace left behind
        if volume is None and (gone := await self.provider.gone(self.session_id)) is not None:
            raise SandboxError(gone)  # never a new, empty workspace in place of the one removed
        if volume is None and self.provider.warm > 0:
            volume = await self.provider.pool(t).claim(self.name)  # checked running there
            self._up = True if volume is not None else self._up
        if volume is None:
            await provision(engine, self.name, own, t, labels)
            volume, self._up = own, True
        self.volume = volume

    async def ensure_running(self) -> None:
        """Opens the sandbox; starts its container when it was stopped (idle, or killed), makes it
        again around the same volume when it is gone."""
        await self.open()
        async with self._lock:
            if self._up:
                return
            state = await self.engine.running(self.name)
            if state is None and not self.bound and not await self.engine.volume_exists(self.volume):
                # removed since it opened (the sweep, or by hand): the engine would make it anew, empty
                raise SandboxError(await self.provider.gone(self.session_id, lost=self.volume) or "")
            if state is None:
                labels = self.provider.labels_for(self.session_id)
                await provision(
                    self.engine,
                    self.name,
                    self.volume,
                    self.template,
                    labels,
                    volume_exists=True,
                    bind=self.bound,
                )
            elif not state:
                await self.engine.start(self.name)
            self._up = True
            self.last_used = time.monotonic()

    def mark_running(self) -> None:
        """Just started or claimed running: the first command need not ask the engine."""
        self._up = True

    def lost(self) -> None:
        """The container stopped under a command: check before the next one."""
        self._up = None

    async def stop_if_idle(self, idle_seconds: float) -> bool:
        async with self._lock:
            if self.running_commands or not self._up or time.monotonic() - self.last_used < idle_seconds:
                return False
            await self.engine.stop(self.name)
            self._up = False
            return True

    async def release(self, keep: bool) -> None:
        """keep: the volume (and the stopped container) stay for a later turn; else both go.
        Kept while a command still runs (a background process, or a relay not yet reaped), the
        sandbox stays known to the provider so the idle reaper stops it once that ends: forgotten
        now, its container would run until the sweep's keep period."""
        if keep:
            async with self._lock:
                if self.running_commands == 0:
                    self.provider.forget(self)
                    await self.engine.stop(self.name)
                    self._up = False
            return
        self.provider.forget(self)
        await self.engine.remove(self.name)
        self._up = None
        if self.bound:  # the workspace is the host's folder, which outlives the container
            return
        if not self.volume:  # never opened here: what an earlier server left, if anything
            self.volume = await self.engine.volume_of(self.name) or f"devagent-ws-{_safe(self.session_id)}"
        await self.engine.remove_volume(self.volume)

    # --- commands --------------------------------------------------------------------------------

    async def start(
        self,
        command: str,
        *,
        cwd: str | Path = WORKSPACE,
        env: Mapping[str, str] | None = None,
        limits: Any = None,
        stdin: Stdin | bool = "closed",
        tty: Winsize | None = None,
        streams: Any = None,
        lasting: bool = False,
        shown: Sequence[Path] = (),
    ) -> Started:
        """Starts `bash -c command` in the container as its user, in the shape of the interface's
        `Started`: the host process is the relay (relay.py), leading its own group, which forwards
        signals to the command's group inside, kills it when the server dies, and says when the
        container died under it. `stdin`: "pipe" (or True) gives the caller its input; `tty`: a
        pseudo-terminal of that size; `streams`: asyncio streams rather than descriptors (its
        error a stream of its own when `streams.errors`, else dropped). Of `limits` only the
        timeout applies here: memory and processes are the template's, for the whole container
        (per-command ulimits would count other sessions' processes too, every session's user being
        the same host uid). `shown` folders are the server's, which a container never sees."""
        del shown
        piped = stdin is True or stdin == "pipe"
        if (problem := self.refuses(str(cwd))) is not None:
            raise SandboxError(problem)
        try:
            await self.ensure_running()
        except EngineError as e:
            raise SandboxError(f"the session's container cannot start: {e}") from None
        if self.bound:  # who runs the commands, to say why the folder is not theirs to write
            await self.provider.learn_ids(self)
            if (problem := self.refuses(str(cwd))) is not None:
                raise SandboxError(problem)
        spec = self._relay_spec(command, str(self.inside(cwd)), env or {}, piped, tty)
        timeout = getattr(limits, "timeout", None)
        if timeout:
            spec["timeout"] = float(timeout)
        if streams is not None:
            proc = await self._spawn(
                spec,
                stdin=asyncio.subprocess.PIPE if piped else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE if streams.errors else asyncio.subprocess.DEVNULL,
                limit=streams.limit,
            )
            return Started(proc, -1, -1, sandboxed=True, supervised=piped or lasting, relayed=True)
        stdio = _Stdio.make(piped, tty)
        try:
            proc = await self._spawn(spec, stdin=stdio.stdin, stdout=stdio.stdout, stderr=stdio.stdout)
        except BaseException:
            stdio.close_ours()
            raise
        finally:
            stdio.close_theirs()
        read_fd, input_fd = stdio.ours
        return Started(
            proc,
            read_fd,
            input_fd,
            sandboxed=True,
            supervised=piped or lasting,
            tty=cast(Any, tty),
            relayed=True,
        )

    def _relay_spec(
        self, command: str, cwd: str, env: Mapping[str, str], piped: bool, tty: Winsize | None
    ) -> dict[str, Any]:
        """What the relay runs (the engine's exec of the command behind WRAPPER), how it kills the
        command inside, and how it asks whether the container still runs."""
        pidfile = f"{CONTROL}/{os.urandom(8).hex()}"
        user = self.template.user
        marked = self.engine.is_podman
        inner = ["/bin/sh", "-c", STARTING if marked else WRAPPER, pidfile, "bash", "-c", command]
        run = self.engine.exec_argv(
            self.name,
            inner,
            cwd=cwd,
            env=container_env(env, tty is not None),
            user=user,
            stdin=piped,
            tty=tty is not None,
            preserve_fds=1 if marked else 0,
        )
        killer = ["/bin/sh", "-c", KILLER, "sh", pidfile]
        kill = self.engine.exec_argv(self.name, killer, cwd="/", env={}, user=user, stdin=False, tty=False)
        return {
            "server": os.getpid(),
            "exec": run,
            "pidfile": pidfile,
            "kill": kill,
            "tty": tty is not None,
            **self.engine.relay_checks(self.name),
        }

    async def _spawn(self, spec: Mapping[str, Any], **stdio: Any) -> asyncio.subprocess.Process:
        proc = await asyncio.create_subprocess_exec(
            os.path.realpath(sys.executable),
            "-I",
            "-S",
            RELAY,
            json.dumps(spec),
            start_new_session=True,
            **self.engine.client(),
            **stdio,
        )
        self.running_commands += 1
        task = asyncio.get_running_loop().create_task(self._after(proc))
        self._reaping[proc.pid] = task
        task.add_done_callback(functools.partial(self._reaped, proc.pid))
        return proc

    def _reaped(self, pid: int, _task: asyncio.Task[None]) -> None:
        self._reaping.pop(pid, None)

    async def _after(self, proc: asyncio.subprocess.Process) -> None:
        from devagent.agent.sandbox.relay import INTERRUPTED

        try:
            code = await proc.wait()
            if code == INTERRUPTED:
                self.lost()
        finally:
            self.running_commands -= 1
            self.last_used = time.monotonic()

    async def run(
        self,
        command: str,
        *,
        cwd: str | Path = WORKSPACE,
        env: Mapping[str, str] | None = None,
        time_limit: float = 120.0,
        input: bytes | None = None,
    ) -> Finished:
        """Runs `command` to its end (or `time_limit` seconds, then its group is killed): its exit code and
        its output (stdout and stderr together)."""
        started = await self.start(command, cwd=cwd, env=env, stdin=input is not None)
        if input is not None:
            os.write(started.input_fd, input)
        if started.input_fd >= 0:
            os.close(started.input_fd)
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(started.output_fd, "rb", buffering=0)
        )
        outcome = "done"
        try:
            output = await asyncio.wait_for(reader.read(), time_limit)
        except TimeoutError:
            outcome = "timeout"
            await kill_group(started.proc)
            output = b""
        finally:
            transport.close()
        code = await started.proc.wait()
        if (reaping := self._reaping.get(started.proc.pid)) is not None:
            await reaping  # its count is down when the caller next asks
        return Finished(code, output, outcome)

    # --- files, inside the workspace (container_files.py) -------------------------------------------

    def read_bytes(self, path: str | Path) -> bytes:
        """The interface's blocking form (`read_bytes_async` does not hold up the event loop)."""
        return self._file_op_blocking("read", path)

    def write_atomic(self, path: str | Path, data: bytes) -> None:
        self._file_op_blocking("write", path, data)

    def list_dir(self, path: str | Path = WORKSPACE) -> list[str]:
        return files.names(self._file_op_blocking("list", path))

    def stat(self, path: str | Path) -> os.stat_result | None:
        try:
            return files.stat_result(self._file_op_blocking("stat", path))
        except FileNotFoundError:
            return None

    def delete(self, path: str | Path) -> None:
        self._file_op_blocking("delete", path)

    async def read_bytes_async(self, path: str | Path) -> bytes:
        return await self._file_op("read", path)

    async def write_atomic_async(self, path: str | Path, data: bytes) -> None:
        """Writes through a temporary file beside the target, renamed over it."""
        await self._file_op("write", path, data)

    async def list_dir_async(self, path: str | Path = WORKSPACE) -> list[str]:
        return files.names(await self._file_op("list", path))

    async def stat_async(self, path: str | Path) -> os.stat_result | None:
        try:
            return files.stat_result(await self._file_op("stat", path))
        except FileNotFoundError:
            return None

    async def delete_async(self, path: str | Path) -> None:
        await self._file_op("delete", path)

    async def _file_op(self, op: str, path: str | Path, data: bytes | None = None) -> bytes:
        where = str(self.inside(path))
        await self.ensure_running()
        self.last_used = time.monotonic()
        code, out, err = await _raw(self.engine, self._file_argv(op, where, data), data)
        if code != 0:
            raise files.failure(op, where, code, err)
        return out

    def _file_op_blocking(self, op: str, path: str | Path, data: bytes | None = None) -> bytes:
        """A file operation for a caller that cannot await: an unopened sandbox is opened in a
        thread of its own; a container found stopped is started and the operation run again."""
        where = str(self.inside(path))
        if not self._opened:
            with concurrent.futures.ThreadPoolExecutor(1) as thread:
                thread.submit(asyncio.run, self._open_here()).result()
        self.last_used = time.monotonic()
        for attempt in (1, 2):
            done = subprocess.run(
                self._file_argv(op, where, data),
                input=data,
                capture_output=True,
                **self.engine.client(),
            )
            if self.engine.refused(done.returncode) and attempt == 1:  # the engine's own failure
                subprocess.run(
                    self.engine.argv("start", self.name),
                    capture_output=True,
                    **self.engine.client(),
                )
                continue
            break
        if done.returncode != 0:
            raise files.failure(op, where, done.returncode, done.stderr)
        return done.stdout

    def _file_argv(self, op: str, where: str, data: bytes | None) -> list[str]:
        return self.engine.exec_argv(
            self.name,
            files.argv(op, where),
            cwd=WORKSPACE,
            env={},
            user=self.template.user,
            stdin=data is not None,
            tty=False,
        )


async def _raw(engine: Engine, argv: Sequence[str], data: bytes | None) -> tuple[int, bytes, bytes]:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE if data is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        **engine.client(),
    )
    out, err = await proc.communicate(data)
    return proc.returncode or 0, out, err


@dataclass(slots=True)
class _Stdio:
    """A command's standard input and output (its error goes with its output): our ends, and the
    ends only the relay keeps (closed here once it has started). As shell.py's, for the relay."""

    stdin: int
    stdout: int
    ours: tuple[int, int]
    theirs: tuple[int, ...]

    @classmethod
    def make(cls, background: bool, tty: Winsize | None) -> _Stdio:
        import fcntl
        import subprocess
        import termios

        if tty is not None:
            master, slave = os.openpty()
            fcntl.ioctl(slave, termios.TIOCSWINSZ, tty.winsize())
            return cls(slave, slave, (master, os.dup(master)), (slave,))
        read_fd, write_fd = os.pipe()
        if not background:
            return cls(subprocess.DEVNULL, write_fd, (read_fd, -1), (write_fd,))
        stdin_r, stdin_w = os.pipe()
        return cls(stdin_r, write_fd, (read_fd, stdin_w), (write_fd, stdin_r))

    def close_theirs(self) -> None:
        for fd in self.theirs:
            os.close(fd)

    def close_ours(self) -> None:
        for fd in self.ours:
            if fd >= 0:
                os.close(fd)


class ContainerProvider:
    """The container backend for a server: one sandbox per session, made from the operator's
    template, from the warm pool when one is ready. Built from the settings (`config`: CoreConfig's
    sandbox_engine, sandbox_templates, sandbox_warm, sandbox_idle_seconds), or, for tests and the
    bench, from an engine and templates given here. `labels` go on everything it creates (a test
    run's or a server's own, for its sweep). `host_workspace`: a session's /workspace is its first
    workspace root on this host, bind-mounted (what the file tools work on, so the shell and the
    tools see the same files); the default for a provider built from the settings, which is a
    server's, unless its `sandbox_workspace` is "volume". Else each session's workspace is a named
    volume of its own, which the file tools reach through the container (`files_here` False)."""

    kind = "container"

    def __init__(
        self,
        config: Any = None,
        *,
        engine: Engine | None = None,
        templates: Mapping[str, Template] | None = None,
        default_template: str = "",
        warm: int | None = None,
        idle_seconds: float | None = None,
        labels: Mapping[str, str] | None = None,
        host_workspace: bool | None = None,
    ) -> None:
        self.engine = engine or Engine(getattr(config, "sandbox_engine", "") or "podman")
        if host_workspace is None:  # a server's provider follows its operator's setting
            host_workspace = config is not None and getattr(config, "sandbox_workspace", "host") != "volume"
        self.host_workspace = host_workspace
        self._user_ids: dict[str, tuple[int, int] | None] = {}
        self.templates = dict(templates if templates is not None else _templates(config))
        self.default_template = default_template
        self.warm = warm if warm is not None else int(getattr(config, "sandbox_warm", 0))
        self.idle_seconds = float(
            idle_seconds if idle_seconds is not None else getattr(config, "sandbox_idle_seconds", 300.0)
        )
        self.labels = dict(labels or {})
        # devagent's own files (settings, database, data folder): never in a bind-mounted folder
        self.own_files = _own_files(config)
        self._sessions: dict[str, ContainerSandbox] = {}
        self._pools: dict[str, WarmPool] = {}
        self._reaper: asyncio.Task[None] | None = None
        self._opening: dict[str, asyncio.Lock] = {}
        self._started = False
        # Why a session's workspace volume is no more, from the store (set by sandbox/sweep.py).
        self.removed_workspace: Callable[[str], Awaitable[str | None]] | None = None

    @classmethod
    def from_config(cls, config: Any, labels: Mapping[str, str] | None = None) -> ContainerProvider:
        """As `ContainerProvider(config)`, refusing settings with no template (ValueError)."""
        provider = cls(config, labels=labels)
        if not provider.templates:
            raise ValueError(NO_TEMPLATE)
        return provider

    # --- what the core asks of a provider --------------------------------------------------------------

    @property
    def network(self) -> bool:
        return self.template().network not in ("", "none") if self.templates else False

    def describe(self) -> str:
        if not self.templates:
            return f"containers ({self.engine.program}): no template"
        return f"containers ({self.engine.program}), one per session: {self.template().summary()}"

    def unavailable(self) -> str | None:
        """Why no session's container can start: no engine on PATH, or no template."""
        if not self.templates:
            return NO_TEMPLATE
        if shutil.which(self.engine.program) is None:
            return f"the container engine {self.engine.program!r} is not installed (sandbox_engine)"
        return None

    def refuses(self, root: Path) -> str | None:
        """Why commands in the workspace root `root` would be refused: where it is bind-mounted
        as /workspace, it holds devagent's own files (`exposes`), or a root server's image user
        cannot write it (as the local backend's check: by owner, group and mode, root being
        anyone to os.access). None with volumes, which are the container's own, or where that
        user's ids cannot be told."""
        if (exposed := self.exposes(root)) is not None:
            return exposed
        if not self.host_workspace or os.geteuid() != 0 or not self.templates or not root.is_dir():
            return None
        ids = self.user_ids(self.template())
        return None if ids is None else self.unwritable(root, self.template(), ids)

    def exposes(self, root: Path) -> str | None:
        """Why the folder `root` cannot be a container's /workspace: it holds devagent's own files
        (its settings file, its database, its data folder) or lies in them. The local backend
        hides those from a command inside its workspace; a bind mount would hand them to the
        container to rewrite or delete, so its commands are refused instead."""
        if not self.host_workspace:
            return None
        real = Path(os.path.realpath(root))
        for own in self.own_files:
            if own.is_relative_to(real) or real.is_relative_to(own):
                return (
                    f"the workspace {root} holds devagent's own {own} (its settings, database or "
                    "data), which the container backend cannot hide from the session's container: "
                    "the operator must keep them outside the workspace roots"
                )
        return None

    def unwritable(self, root: Path, template: Template, ids: tuple[int, int]) -> str | None:
        """Why the template's user (`ids`) cannot work in the bind-mounted `root`, or None."""
        if os.geteuid() != 0 or not root.is_dir() or _writable_by(root, *ids):
            return None
        uid, gid = ids
        return (
            f"the session's container runs its commands as {template.user} (uid {uid}), "
            f"never as root, and that user cannot write the workspace {root}, its /workspace. The "
            f"operator must give it to that user (chown -R {uid}:{gid} {root})"
        )

    def give(self, folder: Path) -> None:
        """A folder the server made for a caller (and what it holds) becomes the template user's
        (by its uid inside the image, which a rootful engine keeps on the host) where that folder
        is bind-mounted as /workspace and the server runs as root; volumes need nothing."""
        if not self.host_workspace or os.geteuid() != 0 or not self.templates:
            return
        ids = self.user_ids(self.template())
        if ids is None:
            return
        give_tree(folder, *ids)  # what is in it the server just made too (a repository's clone)

    def known_ids(self, template: Template) -> tuple[int, int] | None:
        """The template user's ids where already known (`user_ids`, `learn_ids`)."""
        return self._user_ids.get(template.name)

    async def learn_ids(self, sandbox: ContainerSandbox) -> None:
        """The template user's ids asked of a session's running container (once a template)."""
        t = sandbox.template
        if t.name in self._user_ids:
            return
        argv = ["exec", "--user", t.user, sandbox.name, "/bin/sh", "-c", "id -u; id -g"]
        numbers = (await self.engine.run(*argv, check=False)).out.split()
        if len(numbers) == 2 and all(n.isdigit() for n in numbers):
            self._user_ids[t.name] = (int(numbers[0]), int(numbers[1]))

    def user_ids(self, template: Template) -> tuple[int, int] | None:
        """The uid and gid the template's user has in its image (asked of the image once: a
        throwaway container with no network runs `id`), None when it cannot be told."""
        if template.name not in self._user_ids:
            found = re.fullmatch(r"(\d+)(?::(\d+))?", template.user)
            if found:
                uid = int(found.group(1))
                self._user_ids[template.name] = (uid, int(found.group(2) or uid))
            else:
                self._user_ids[template.name] = self._ask_ids(template)
        return self._user_ids[template.name]

    def _ask_ids(self, template: Template) -> tuple[int, int] | None:
        # the session container's own flags (`create --name N ... IMAGE sleep infinity`), made a
        # throwaway `run --rm` with no workspace
        flags = self.engine.create_args("ids", "", template, self.labels)[3:-3]
        at = flags.index("--mount")
        del flags[at : at + 2]
        argv = self.engine.argv("run", "--rm", *flags, template.image, "/bin/sh", "-c", "id -u; id -g")
        done = subprocess.run(argv, capture_output=True, text=True, **self.engine.client())
        numbers = done.stdout.split()
        if done.returncode != 0 or len(numbers) != 2 or not all(n.isdigit() for n in numbers):
            return None
        return int(numbers[0]), int(numbers[1])

    def template(self, name: str | None = None) -> Template:
        chosen = name or self.default_template or ("default" if "default" in self.templates else "")
        chosen = chosen or next(iter(self.templates), "")
        try:
            return self.templates[chosen]
        except KeyError:
            raise SandboxError(
                NO_TEMPLATE if not self.templates else f"no sandbox template {chosen!r}"
            ) from None

    def labels_for(self, session_id: str, template: Template | None = None) -> dict[str, str]:
        t = template or self.template()
        return {**self.labels, SESSION_LABEL: session_id, TEMPLATE_LABEL: t.name}

    def pool(self, template: Template) -> WarmPool:
        if template.name not in self._pools:
            self._pools[template.name] = WarmPool(self.engine, template, self.warm, dict(self.labels))
        return self._pools[template.name]

    async def start(self) -> None:
        """Fills the warm pools and starts stopping idle containers: at a server's start, or
        else when the first session opens (the core's interface has no start). Once."""
        if self._started:
            return
        self._started = True
        if self.warm > 0:
            for template in self.templates.values():
                self.pool(template).start_filling()
        if self._reaper is None and self.idle_seconds > 0:
            self._reaper = asyncio.get_running_loop().create_task(self._reap())

    def for_session(
        self, session_id: str, roots: Sequence[Path] = (), *, template: str | None = None
    ) -> ContainerSandbox:
        """The session's sandbox, not yet opened (its first use opens it). `template` is the
        operator's choice for the session (never a caller's)."""
        sandbox = self._sessions.get(session_id)
        if sandbox is None:
            t = self.template(template)
            sandbox = ContainerSandbox(self, session_id, f"devagent-s-{_safe(session_id)}", t, roots)
            self._sessions[session_id] = sandbox
        return sandbox

    async def open(
        self, session_id: str, roots: Sequence[Path] = (), *, template: str | None = None
    ) -> ContainerSandbox:
        """The session's sandbox, opened: its container running."""
        sandbox = self.for_session(session_id, roots, template=template)
        await sandbox.open()
        return sandbox

    def sandbox_of(self, session_id: str) -> ContainerSandbox | None:
        """The session's sandbox where this process has it."""
        return self._sessions.get(session_id)

    async def gone(self, session_id: str, lost: str = "") -> str | None:
        """Why the session's workspace volume is no more (the sweep removed it), or None; with
        `lost` (the volume's name, found missing) a reason in any case."""
        why = await self.removed_workspace(session_id) if self.removed_workspace is not None else None
        return why or (lost_workspace(lost) if lost else None)

    def lock_for(self, session_id: str) -> asyncio.Lock:
        return self._opening.setdefault(session_id, asyncio.Lock())

    def forget(self, sandbox: ContainerSandbox) -> None:
        if self._sessions.get(sandbox.session_id) is sandbox:
            del self._sessions[sandbox.session_id]
            self._opening.pop(sandbox.session_id, None)

    async def stop_idle(self) -> list[str]:
        """Stops the containers idle for idle_seconds; their names."""
        stopped = []
        for sandbox in list(self._sessions.values()):
            if await sandbox.stop_if_idle(self.idle_seconds):
                stopped.append(sandbox.name)
        return stopped

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(max(1.0, min(self.idle_seconds / 4, 30.0)))
            with contextlib.suppress(EngineError, OSError):
                await self.stop_idle()

    async def close(self, drain: bool = True) -> None:
        """A server's end: stops the reaper and the pool's refills (`drain`: removes the pooled
        containers nobody claimed). Sessions' containers and volumes stay for the next server."""
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None
        for pool in self._pools.values():
            await pool.close(drain)
        self._started = False

    async def sweep(self) -> int:
        """Removes every container and volume carrying this provider's labels (a test's or a
        server's cleanup of what a crash left); how many things went."""
        labels = {LABEL: "1", **self.labels}
        count = 0
        for name in await self.engine.labelled(labels):
            await self.engine.remove(name)
            count += 1
        for name in await self.engine.labelled(labels, kind="volume"):
            await self.engine.remove_volume(name)
            count += 1
        self._sessions.clear()
        return count


def _writable_by(folder: Path, uid: int, gid: int) -> bool:
    """Whether `uid`:`gid` (no other group) may write and search `folder` by its owner, group
    and mode."""
    st = folder.stat()
    shift = 6 if st.st_uid == uid else 3 if st.st_gid == gid else 0
    return (st.st_mode >> shift) & 0o3 == 0o3


NO_TEMPLATE = (
    "the container sandbox needs at least one template: sandbox_templates = "
    '{"default": {"image": "..."}} (DEVAGENT_SANDBOX_TEMPLATES)'
)


def _own_files(config: Any) -> tuple[Path, ...]:
    """The settings' own files and folders (CoreConfig's protected_files and protected_dirs)."""
    if config is None or not hasattr(config, "protected_files"):
        return ()
    return (*config.protected_files(), *config.protected_dirs())


def _templates(config: Any) -> dict[str, Template]:
    return templates_from(getattr(config, "sandbox_templates", None) or {})


__all__ = ["POOL_LABEL", "ContainerProvider", "ContainerSandbox", "Finished", "OutsideWorkspace"]


def lost_workspace(volume: str) -> str:
    return (
        f"this session's workspace volume {volume} is gone (removed outside this server): its "
        "files are lost. Start a new session to work on files again"
    )
