"""A worker's end of the worker backend: the sessions whose leases this worker holds, each a folder
under the worker's state directory and a sandbox of the worker's own backend (local bubblewrap,
or a container) over it. It runs the calls the server queued (a command, a file operation, a
signal or input for a running command) and tells, after each, whether the workspace changed (then
its snapshot goes back with the result). It knows nothing of HTTP (the worker's door,
devagent/worker/, carries the calls) and nothing of the server's secrets: a command's environment
is the worker's own clean one plus what the call names, never a secret's name.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devagent.agent.sandbox import snapshot
from devagent.agent.sandbox.base import Limits, SandboxError, SandboxProvider, Started
from devagent.agent.sandbox.childenv import child_env
from devagent.agent.sandbox.container import container_env
from devagent.agent.sandbox.files import HostFiles
from devagent.agent.sandbox.groups import kill_group, signal_group

Emit = Callable[[bytes], Awaitable[None]]
Fetch = Callable[[], Awaitable[bytes | None]]
ERRORS = (
    (FileNotFoundError, "ENOENT"),
    (IsADirectoryError, "EISDIR"),
    (NotADirectoryError, "ENOTDIR"),
    (FileExistsError, "EEXIST"),
)


@dataclass(frozen=True, slots=True)
class Size:
    rows: int
    cols: int

    def winsize(self) -> bytes:
        import struct

        return struct.pack("HHHH", self.rows, self.cols, 0, 0)


@dataclass(slots=True)
class Result:
    """A call's end as the worker reports it."""

    code: int = 0
    result: bytes | None = None
    error: str | None = None
    snapshot: bytes | None = None


@dataclass(slots=True)
class HostedSession:
    session_id: str
    epoch: int
    folder: Path
    sandbox: Any
    files: HostFiles
    seen: snapshot.Manifest
    running: dict[int, Started] = field(default_factory=dict)
    used: float = field(default_factory=time.monotonic)  # when a call last came for it
    # What came for a command, in order, before or while it runs: its input (None: closed) and
    # the signals and resizes sent before it started here (given to it once it has).
    inputs: dict[int, asyncio.Queue[bytes | None]] = field(default_factory=dict)
    early: dict[int, list[dict[str, Any]]] = field(default_factory=dict)


def _folder_name(session_id: str) -> str:
    cleaned = re.sub(r"[^a-zA-Z0-9_.-]", "-", session_id)[:40]
    return f"{cleaned}-{hashlib.sha256(session_id.encode()).hexdigest()[:12]}"


class Hosted:
    """This worker's sessions over `provider` (its backend), their folders under `state_dir`."""

    def __init__(self, provider: SandboxProvider, state_dir: Path) -> None:
        self.provider = provider
        self.root = state_dir / "workspaces"
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o711)  # a session's command reaches its own folder, lists none
        self.sessions: dict[str, HostedSession] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        # controls for a session not opened here yet (its first command's call is being taken)
        self._waiting: dict[tuple[str, int], list[dict[str, Any]]] = {}

    async def ensure(self, session_id: str, epoch: int, fetch: Fetch) -> HostedSession:
        """The session as of grant `epoch`: a new grant (this worker's first, or again after it
        lost it) starts from the server's snapshot, the workspace as of the last finished call."""
        async with self._locks.setdefault(session_id, asyncio.Lock()):
            held = self.sessions.get(session_id)
            if held is not None and held.epoch == epoch:
                held.used = time.monotonic()
                return held
            if held is not None:
                await self.drop(session_id)
            folder = self.root / _folder_name(session_id)
            data = await fetch()
            await asyncio.to_thread(snapshot.restore, folder, data)
            self.provider.give(folder)
            sandbox = self.provider.for_session(session_id, [folder])
            seen = await asyncio.to_thread(snapshot.manifest, folder)
            held = HostedSession(session_id, epoch, folder, sandbox, HostFiles([folder]), seen)
            self.sessions[session_id] = held
            for spec in self._waiting.pop((session_id, epoch), []):
                self.control(held, spec)
            return held

    def idle(self, seconds: float) -> list[str]:
        """The sessions held here that ran nothing for `seconds` (none of their commands runs)."""
        now = time.monotonic()
        return [sid for sid, h in self.sessions.items() if not h.running and now - h.used >= seconds]

    async def drop(self, session_id: str) -> None:
        """The session is no longer this worker's: its commands killed, its folder removed."""
        held = self.sessions.pop(session_id, None)
        if held is None:
            return
        for started in list(held.running.values()):
            signal_group(started.proc.pid, signal.SIGKILL)
        with contextlib.suppress(SandboxError, OSError):
            await held.sandbox.release(keep=False)
        await asyncio.to_thread(shutil.rmtree, held.folder, True)

    async def changed(self, held: HostedSession) -> bytes | None:
        """The workspace's snapshot when it changed since the last one taken, else None."""
        now = await asyncio.to_thread(snapshot.manifest, held.folder)
        if now == held.seen:
            return None
        held.seen = now
        return await asyncio.to_thread(snapshot.pack, held.folder)

    # --- commands ---------------------------------------------------------------------------------

    async def exec(self, held: HostedSession, call_id: int, spec: dict[str, Any], emit: Emit) -> Result:
        """Runs the call's command to its end, its output given to `emit` as it comes."""
        cwd = held.folder / spec.get("cwd", ".")
        tty = Size(*spec["tty"]) if spec.get("tty") else None
        env = {**child_env(), **container_env(spec.get("env") or {}, tty is not None)}
        limits = Limits(int(spec.get("memory_mb") or 0), int(spec.get("processes") or 0))
        try:
            if not cwd.resolve().is_relative_to(held.folder.resolve()):
                raise SandboxError(f"{spec.get('cwd')!r} is outside the workspace")
            started = await held.sandbox.start(
                str(spec["command"]),
                cwd=str(cwd),
                env=env,
                limits=limits,
                stdin="pipe" if spec.get("input") else "closed",
                tty=tty,
            )
        except (SandboxError, OSError) as e:
            await emit(f"{e}\n".encode())
            return Result(code=126, snapshot=await self.changed(held))
        held.running[call_id] = started
        writing = asyncio.get_running_loop().create_task(self._feed(held, call_id, started))
        for early in held.early.pop(call_id, []):
            self.control(held, early)
        try:
            code = await self._follow(started, spec.get("timeout"), emit)
        finally:
            held.running.pop(call_id, None)
            held.inputs.pop(call_id, None)
            writing.cancel()
        return Result(code=code, snapshot=await self.changed(held))

    async def _follow(self, started: Started, seconds: float | None, emit: Emit) -> int:
        reading = asyncio.get_running_loop().create_task(_read_all(started.output_fd, emit))
        try:
            await asyncio.wait_for(asyncio.shield(reading), seconds)
        except TimeoutError:
            await kill_group(started.proc)
            await reading
        if started.input_fd >= 0 and started.input_fd != started.output_fd:
            with contextlib.suppress(OSError):
                os.close(started.input_fd)
        return await started.proc.wait()

    def kill_call(self, call_id: int) -> None:
        """A running command nobody follows any more (its replica died) is killed."""
        for held in self.sessions.values():
            started = held.running.get(call_id)
            if started is not None:
                signal_group(started.proc.pid, signal.SIGKILL)

    def control_for(self, session_id: str, epoch: int, spec: dict[str, Any]) -> None:
        """`control` on the session under grant `epoch`, kept until it opens here if it has not."""
        held = self.sessions.get(session_id)
        if held is not None and held.epoch == epoch:
            self.control(held, spec)
        elif held is None or held.epoch < epoch:
            self._waiting.setdefault((session_id, epoch), []).append(spec)

    def control(self, held: HostedSession, spec: dict[str, Any]) -> None:
        """A signal, input or resize for a command, in the order they were sent: given now when
        the command runs here, else kept for when it starts (its call may be taken later)."""
        call_id = int(spec["call"])
        if spec["kind"] == "input":
            queue = held.inputs.setdefault(call_id, asyncio.Queue())
            queue.put_nowait(None if spec.get("close") else spec.get("bytes", b""))
            return
        started = held.running.get(call_id)
        if started is None:
            held.early.setdefault(call_id, []).append(spec)
        elif spec["kind"] == "signal":
            signal_group(started.proc.pid, getattr(signal, f"SIG{spec['signal']}", signal.SIGKILL))
        elif spec["kind"] == "resize" and started.tty is not None:
            import fcntl
            import termios

            with contextlib.suppress(OSError):
                size = Size(int(spec["rows"]), int(spec["cols"])).winsize()
                fcntl.ioctl(started.output_fd, termios.TIOCSWINSZ, size)

    async def _feed(self, held: HostedSession, call_id: int, started: Started) -> None:
        """The command's input, written in order as it comes; None closes it."""
        if started.input_fd < 0:
            return
        queue = held.inputs.setdefault(call_id, asyncio.Queue())
        while True:
            data = await queue.get()
            with contextlib.suppress(OSError):
                if data is None:
                    if started.input_fd != started.output_fd:
                        os.close(started.input_fd)
                    return
                await asyncio.to_thread(_write_all, started.input_fd, data)

    # --- files ------------------------------------------------------------------------------------

    async def file(self, held: HostedSession, kind: str, spec: dict[str, Any], data: bytes | None) -> Result:
        """A file operation inside the workspace (the confined walk of the local backends)."""
        path = str(spec.get("path") or ".")
        try:
            result = await asyncio.to_thread(self._file_op, held, kind, path, data)
        except SandboxError as e:
            return Result(code=1, error=f"OUTSIDE: {e}")
        except OSError as e:
            name = next((n for t, n in ERRORS if isinstance(e, t)), "EIO")
            return Result(code=1, error=f"{name}: {e.strerror or e}")
        if kind in ("write", "delete"):
            return Result(result=result, snapshot=await self.changed(held))
        return Result(result=result)

    def _file_op(self, held: HostedSession, kind: str, path: str, data: bytes | None) -> bytes:
        files = held.files
        if kind == "read":
            return files.read_bytes(path)
        if kind == "write":
            files.write_atomic(path, data or b"")
            self._give(held, path)
            return b""
        if kind == "list":
            return json.dumps(files.list_dir(path)).encode()
        if kind == "stat":
            st = files.stat(path)
            return json.dumps(list(st)[:10] if st is not None else None).encode()
        if kind == "delete":
            files.delete(path)
            return b""
        raise SandboxError(f"no file operation {kind!r}")

    def _give(self, held: HostedSession, path: str) -> None:
        """What the worker wrote (as its own user) becomes the commands' user's, as the folder is."""
        owner = getattr(held.sandbox, "owner", lambda: None)()
        if owner is None:
            return
        target = held.folder / path
        for p in [target, *target.parents]:
            if p == held.folder or not p.is_relative_to(held.folder):
                break
            with contextlib.suppress(OSError):
                os.chown(p, owner[0], owner[1], follow_symlinks=False)


async def _read_all(fd: int, emit: Emit) -> None:
    """Everything the command writes, until its end (a pipe's EOF, a pty's EIO). The descriptor
    is watched only while this waits for it: watched while `emit` sends a chunk on, a pipe at
    its end (readable for good) would wake the event loop at every turn, spinning it."""
    loop = asyncio.get_running_loop()
    os.set_blocking(fd, False)
    ready = asyncio.Event()
    try:
        while True:
            ready.clear()
            loop.add_reader(fd, ready.set)
            try:
                await ready.wait()
            finally:
                loop.remove_reader(fd)
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                continue
            except OSError:  # a pty whose other end closed
                break
            if not data:
                break
            await emit(data)
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    import select

    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:  # a pty's master, shared with the reader, is non-blocking
            select.select([], [fd], [], 1.0)


def hosted_provider(config: Any, backend: str, state_dir: Path) -> tuple[SandboxProvider, str]:
    """A worker's own backend and the line saying which: bubblewrap here (on, failing where it
    cannot run: a worker never runs a session's commands unsandboxed), every session's folder
    hidden from the others' commands; or a container per session."""
    if backend == "container":
        from devagent.agent.sandbox.container import ContainerProvider

        provider = ContainerProvider(config)
        return provider, f"Sandbox: {provider.describe()}"
    from devagent.agent.sandbox.choose import choose_sandbox, provider_of

    choice, line = choose_sandbox(True, config, "worker", hide=[state_dir])
    return provider_of(choice), line
