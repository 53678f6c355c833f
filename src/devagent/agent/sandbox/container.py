"""The `container` sandbox backend: each session's commands and file operations run in a container
of its own (Podman or Docker, `podman.py`), its workspace a named volume that outlives the
container. An idle container is stopped and started again by the session's next command; a warm
pool (`pool.py`) hands new sessions a running container. The operator chooses the engine, the
templates (image and limits) and the pool's size in the settings; a caller never can.

Written against the core's sandbox interface (agent/sandbox/base.py: `Sandbox`, a provider's
`for_session`); `SandboxLike` below is a local copy of the part used here, for typing only."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from devagent.agent.childenv import is_devagents
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
from devagent.agent.tools.shell import Started, kill_group
from devagent.agent.tools.tty_screen import TERM, TtySize

RELAY = str(Path(__file__).with_name("relay.py"))
# Names a container never gets from the caller's environment: the host's own (its PATH, HOME and
# user mean nothing in the image) and, again here, whatever is devagent's or a provider's.
HOST_NAMES = frozenset({"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TMPDIR", "PWD"})
SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSW|CREDENTIAL|DATABASE_URL|_DB$)", re.IGNORECASE)
# Run first inside the container: record the command's process group (the exec'd process leads
# its own: the engine makes it a session leader) where the relay's kill finds it, run it, forget it.
WRAPPER = 'mkdir -p "${0%/*}" 2>/dev/null; echo $$ > "$0"; "$@"; code=$?; rm -f "$0"; exit $code'
# The relay's kill, inside the container: the signal to the recorded group, else to the process.
KILLER = 'g=$(cat "$1" 2>/dev/null) || exit 0; kill -s "$2" -- "-$g" 2>/dev/null || kill -s "$2" "$g"'


class SandboxLike(Protocol):
    """What the core's `Sandbox` (agent/sandbox/base.py) asks of a backend, as far as used here."""

    kind: str

    def describe(self) -> str: ...

    def show_path(self, host_path: str | Path) -> str: ...

    async def release(self, keep: bool) -> None: ...


class OutsideWorkspace(PermissionError):
    """A file operation named a path outside the session's workspace."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One file or folder of the workspace: its name, kind ("f" file, "d" folder, "l" link, or
    find's other letters), size in bytes and modification time."""

    name: str
    kind: str
    size: int
    mtime: float


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
        self.last_used = time.monotonic()
        self._up: bool | None = None  # None: not known; checked before the next command
        self._lock = asyncio.Lock()
        self.volume = ""

    # --- what the session is told ------------------------------------------------------------------

    def describe(self) -> str:
        t = self.template
        network = "no network" if t.network in ("", "none") else f"network {t.network}"
        return (
            f"a {self.engine.program} container of its own (template {t.name}: {t.memory_mb} MB memory, "
            f"{t.pids} processes, {network}); the workspace is {WORKSPACE}"
        )

    def show_path(self, host_path: str | Path) -> str:
        """The path inside the container for a path the tools name (a path under the session's
        root folder, or already one under /workspace, or relative to it)."""
        return str(self.inside(host_path))

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

    async def ensure_running(self) -> None:
        """Starts the container when it was stopped (idle, or killed), creates it again around the
        same volume when it is gone."""
        async with self._lock:
            if self._up:
                return
            state = await self.engine.running(self.name)
            if state is None:
                await provision(
                    self.engine,
                    self.name,
                    self.volume,
                    self.template,
                    self.provider.labels_for(self.session_id),
                    volume_exists=True,
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
        """keep: the volume (and the stopped container) stay for a later turn; else both go."""
        self.provider.forget(self)
        if keep:
            async with self._lock:
                if self.running_commands == 0:
                    await self.engine.stop(self.name)
                    self._up = False
            return
        await self.engine.remove(self.name)
        if self.volume:
            await self.engine.remove_volume(self.volume)
        self._up = None

    # --- commands --------------------------------------------------------------------------------

    async def start(
        self,
        command: str,
        *,
        cwd: str | Path = WORKSPACE,
        env: Mapping[str, str] | None = None,
        limits: Any = None,
        stdin: bool = False,
        tty: TtySize | None = None,
    ) -> Started:
        """Starts `command` (`bash -c`) in the container as its user, in the shape shell.py's
        `start_command` returns: the host process is the relay (relay.py), leading its own group,
        which forwards signals to the command's group inside. `stdin`: its input is a pipe for the
        caller (a background command); `tty`: a pseudo-terminal of that size. `limits` are the
        template's, enforced by the engine for the whole container (per-command ulimits would
        count other sessions' processes too: every session's user is the same host uid)."""
        del limits
        await self.ensure_running()
        token = os.urandom(8).hex()
        pidfile = f"{CONTROL}/{token}"
        inner = ["/bin/sh", "-c", WRAPPER, pidfile, "bash", "-c", command]
        exec_argv = self.engine.exec_argv(
            self.name,
            inner,
            cwd=str(self.inside(cwd)),
            env=container_env(env or {}, tty is not None),
            user=self.template.user,
            stdin=stdin,
            tty=tty is not None,
        )
        kill = self.engine.exec_argv(
            self.name,
            ["/bin/sh", "-c", KILLER, "sh", pidfile],
            cwd="/",
            env={},
            user=self.template.user,
            stdin=False,
            tty=False,
        )
        state = self.engine.argv("container", "inspect", "--format", "{{.State.Running}}", self.name)
        spec = {
            "server": os.getpid(),
            "exec": exec_argv,
            "pidfile": pidfile,
            "kill": kill,
            "state": state,
            "tty": tty is not None,
        }
        stdio = _Stdio.make(stdin, tty)
        try:
            proc = await asyncio.create_subprocess_exec(
                os.path.realpath(sys.executable),
                "-I",
                "-S",
                RELAY,
                json.dumps(spec),
                stdin=stdio.stdin,
                stdout=stdio.stdout,
                stderr=stdio.stdout,
                start_new_session=True,
                env=self.engine.client_env(),
            )
        except BaseException:
            stdio.close_ours()
            raise
        finally:
            stdio.close_theirs()
        self.running_commands += 1
        asyncio.get_running_loop().create_task(self._after(proc))
        read_fd, input_fd = stdio.ours
        return Started(proc, read_fd, input_fd, sandboxed=True, supervised=stdin, tty=tty)

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
        return Finished(code, output, outcome)

    # --- files, inside the workspace ------------------------------------------------------------------

    async def read_bytes(self, path: str | Path) -> bytes:
        return await self._file_op("read", path)

    async def write_atomic(self, path: str | Path, data: bytes) -> None:
        """Writes through a temporary file beside the target, renamed over it."""
        await self._file_op("write", path, data)

    async def list_dir(self, path: str | Path = WORKSPACE) -> list[Entry]:
        return _entries(await self._file_op("list", path))

    async def stat(self, path: str | Path) -> Entry | None:
        try:
            found = _entries(await self._file_op("stat", path))
        except FileNotFoundError:
            return None
        return found[0] if found else None

    async def delete(self, path: str | Path) -> None:
        await self._file_op("delete", path)

    async def _file_op(self, op: str, path: str | Path, data: bytes | None = None) -> bytes:
        where = self.inside(path)
        await self.ensure_running()
        self.last_used = time.monotonic()
        argv = ["/bin/sh", "-c", FILE_OPS, "sh", op, str(where)]
        args = self.engine.exec_argv(
            self.name, argv, cwd=WORKSPACE, env={}, user=self.template.user, stdin=data is not None, tty=False
        )
        result = await _raw(self.engine, args, data)
        code, out, err = result
        if code == 0:
            return out
        message = f"{where}: {err.decode(errors='replace').strip() or op + ' failed'}"
        raise {2: FileNotFoundError, 3: OutsideWorkspace, 4: IsADirectoryError, 6: NotADirectoryError}.get(
            code, OSError
        )(message)


# The file operations, run by the session's user inside the container. A path is resolved there
# (symbolic links included: a link cannot lead out of /workspace) before it is checked; stat and
# delete look at a link itself, so only its folder is resolved. Exit codes: 2 not found, 3
# outside the workspace, 4 a folder where a file was meant, 5 not written, 6 not a folder.
FILE_OPS = r"""
op=$1
case "$op" in
stat|delete) d=$(realpath -m -- "$(dirname -- "$2")") || exit 3; p="${d%/}/$(basename -- "$2")";;
*) p=$(realpath -m -- "$2") || exit 3;;
esac
case "$p" in /workspace|/workspace/*) ;; *) echo "outside the workspace" >&2; exit 3;; esac
case "$op" in
read) [ -e "$p" ] || exit 2; [ -d "$p" ] && exit 4; exec cat -- "$p";;
write) [ -d "$p" ] && exit 4; d=$(dirname -- "$p"); mkdir -p -- "$d" || exit 5
  t=$(mktemp -p "$d" .devagent-write.XXXXXX) || exit 5
  if [ -e "$p" ]; then chmod --reference="$p" "$t"; else chmod 644 "$t"; fi
  cat > "$t" && mv -f -- "$t" "$p" || { rm -f -- "$t"; exit 5; };;
list) [ -d "$p" ] || { [ -e "$p" ] && exit 6; exit 2; }
  exec find "$p" -mindepth 1 -maxdepth 1 -printf '%y %s %T@ %f\0';;
stat) [ -e "$p" ] || [ -L "$p" ] || exit 2; exec find "$p" -maxdepth 0 -printf '%y %s %T@ %f\0';;
delete) [ -e "$p" ] || [ -L "$p" ] || exit 2; [ "$p" = /workspace ] && exit 3
  if [ -d "$p" ] && [ ! -L "$p" ]; then exec rmdir -- "$p"; else exec rm -f -- "$p"; fi;;
*) exit 5;;
esac
"""


def _entries(raw: bytes) -> list[Entry]:
    out: list[Entry] = []
    for record in raw.split(b"\0"):
        if not record:
            continue
        kind, size, mtime, name = record.decode(errors="surrogateescape").split(" ", 3)
        out.append(Entry(name, kind, int(size), float(mtime)))
    return sorted(out, key=lambda e: e.name)


async def _raw(engine: Engine, argv: Sequence[str], data: bytes | None) -> tuple[int, bytes, bytes]:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE if data is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=engine.client_env(),
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
    def make(cls, background: bool, tty: TtySize | None) -> _Stdio:
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


@dataclass
class ContainerProvider:
    """The container backend for a server: one sandbox per session, made from the operator's
    template, from the warm pool when one is ready. `labels` go on everything it creates (a test
    run's or a server's own, for its sweep)."""

    engine: Engine
    templates: Mapping[str, Template]
    default_template: str = ""
    warm: int = 0
    idle_seconds: float = 300.0
    labels: Mapping[str, str] = field(default_factory=dict)
    _sessions: dict[str, ContainerSandbox] = field(default_factory=dict)
    _pools: dict[str, WarmPool] = field(default_factory=dict)
    _reaper: asyncio.Task[None] | None = None
    _opening: dict[str, asyncio.Lock] = field(default_factory=dict)

    kind = "container"

    @classmethod
    def from_config(cls, config: Any, labels: Mapping[str, str] | None = None) -> ContainerProvider:
        """From CoreConfig's sandbox_engine, sandbox_templates, sandbox_warm, sandbox_idle_seconds."""
        templates = templates_from(config.sandbox_templates)
        if not templates:
            raise ValueError(
                "the container sandbox needs at least one template: sandbox_templates = "
                '{"default": {"image": "..."}} (DEVAGENT_SANDBOX_TEMPLATES)'
            )
        return cls(
            Engine(config.sandbox_engine or "podman"),
            templates,
            warm=config.sandbox_warm,
            idle_seconds=config.sandbox_idle_seconds,
            labels=dict(labels or {}),
        )

    def template(self, name: str | None = None) -> Template:
        chosen = (
            name
            or self.default_template
            or ("default" if "default" in self.templates else next(iter(self.templates)))
        )
        try:
            return self.templates[chosen]
        except KeyError:
            raise ValueError(f"no sandbox template {chosen!r} in the settings") from None

    def labels_for(self, session_id: str, template: Template | None = None) -> dict[str, str]:
        t = template or self.template()
        return {**self.labels, SESSION_LABEL: session_id, TEMPLATE_LABEL: t.name}

    def pool(self, template: Template) -> WarmPool:
        if template.name not in self._pools:
            self._pools[template.name] = WarmPool(self.engine, template, self.warm, dict(self.labels))
        return self._pools[template.name]

    async def start(self) -> None:
        """Fills the warm pools and starts stopping idle containers (a server's start)."""
        if self.warm > 0:
            for template in self.templates.values():
                self.pool(template).start_filling()
        if self._reaper is None and self.idle_seconds > 0:
            self._reaper = asyncio.get_running_loop().create_task(self._reap())

    async def for_session(
        self, session_id: str, roots: Sequence[Path] = (), *, template: str | None = None
    ) -> ContainerSandbox:
        """The session's sandbox: the one this server holds, else its container (left by an
        earlier turn, or by another replica), else one claimed from the warm pool, else a new one.
        `template` is the operator's choice for the session (never a caller's). Two calls for one
        session at once make one container."""
        async with self._opening.setdefault(session_id, asyncio.Lock()):
            return await self._open(session_id, roots, template)

    async def _open(self, session_id: str, roots: Sequence[Path], template: str | None) -> ContainerSandbox:
        if session_id in self._sessions:
            return self._sessions[session_id]
        t = self.template(template)
        name = f"devagent-s-{_safe(session_id)}"
        sandbox = ContainerSandbox(self, session_id, name, t, roots)
        volume = await self.engine.volume_of(name)
        own = f"devagent-ws-{_safe(session_id)}"
        if volume is None and await self.engine.volume_exists(own):
            volume = own  # the container is gone, its workspace is not: a new container around it
            await provision(self.engine, name, volume, t, self.labels_for(session_id, t), volume_exists=True)
            sandbox.mark_running()
        if volume is None and self.warm > 0:
            volume = await self.pool(t).claim(name)  # checked running there
            if volume is not None:
                sandbox.mark_running()
        if volume is None:
            volume = own
            await provision(self.engine, name, volume, t, self.labels_for(session_id, t))
            sandbox.mark_running()
        sandbox.volume = volume
        self._sessions[session_id] = sandbox
        return sandbox

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


__all__ = ["POOL_LABEL", "ContainerProvider", "ContainerSandbox", "Entry", "Finished", "OutsideWorkspace"]
