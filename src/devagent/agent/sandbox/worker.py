"""The `worker` sandbox backend: each session's commands and file operations run on a worker
(`devagent worker`, another machine's process that connects out to the servers). Nothing here
talks to a worker directly: a call is a row in the store (store/workers.py) queued for the worker
that holds the session's lease, which takes it through whichever replica it is connected to and
writes its output and result back as rows. So any replica routes any session's call.

A command is stood for here by a relay process (workrelay.py), as the container backend's
commands are (relay.py): the shell tool, the background-process table and the tty tool hold a
local process whose output is the command's, whose exit code is the command's, and whose process
group's signals reach the command. A pump task beside it moves rows to the relay and the relay's
input and signals to rows.

A worker that dies or loses the servers stops renewing its leases: once one expires, its open
calls end (a call it had taken is interrupted, never run again; one it never took is cancelled)
and the session's next call is granted to another worker, which starts from the workspace as of
the session's last finished call (the snapshot the worker sent with that call's result).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import signal
import socket
import struct
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from devagent.agent.sandbox.base import Limits, SandboxError, Started, Stdin, Streams, Winsize
from devagent.agent.sandbox.container import _Stdio, container_env
from devagent.agent.sandbox.workrelay import FORWARDED

if TYPE_CHECKING:
    from devagent.store.db import Store
    from devagent.store.workers import CallRow, Grant, WorkerQueue

RELAY = str(Path(__file__).with_name("workrelay.py"))
BLOCKED = (*FORWARDED, signal.SIGUSR1, signal.SIGWINCH)
INTERRUPTED = 254
LEASE_CHECK = 1.0  # seconds between a running command's looks at its worker's lease
ENDED = ("done", "interrupted", "cancelled")
NOTE = (
    "\n[devagent] the worker running this command was lost (killed, or cut off from the servers): "
    "the command was interrupted and is not run again\n"
)
ERRNOS = {"ENOENT": errno.ENOENT, "EISDIR": errno.EISDIR, "ENOTDIR": errno.ENOTDIR, "EEXIST": errno.EEXIST}


class WorkerProvider:
    """The core's sandboxes on workers of the operator's pool (`worker_pool`), through the store
    at `config.db_url` (its own connection to the server's database)."""

    kind = "worker"
    network = False  # the worker's own backend decides; the server does not promise any

    def __init__(self, config: Any) -> None:
        self.db_url = str(config.db_url)
        self.pool = str(getattr(config, "worker_pool", "default") or "default")
        self.template = str(getattr(config, "worker_template", "") or "")
        self.ttl = float(getattr(config, "worker_lease_seconds", 15.0))
        self.wait_seconds = float(getattr(config, "worker_wait_seconds", 120.0))
        self._store: Store | None = None
        self._opening: asyncio.Lock | None = None
        self._sessions: dict[str, WorkerSandbox] = {}
        self._pumps: set[asyncio.Task[None]] = set()  # held: the loop keeps only weak references
        self.loop: asyncio.AbstractEventLoop | None = None

    def describe(self) -> str:
        return f"on workers of the pool {self.pool!r} (devagent worker), one sandbox per session"

    def unavailable(self) -> str | None:
        return None

    def refuses(self, root: Path) -> str | None:
        return None

    def give(self, folder: Path) -> None:
        return None  # the workspace is the worker's

    def for_session(self, session_id: str, roots: Sequence[Path]) -> WorkerSandbox:
        sandbox = self._sessions.get(session_id)
        if sandbox is None:
            sandbox = self._sessions[session_id] = WorkerSandbox(self, session_id, roots)
        return sandbox

    def forget(self, sandbox: WorkerSandbox) -> None:
        """The session let its sandbox go: a later `for_session` makes a new one."""
        if self._sessions.get(sandbox.session_id) is sandbox:
            del self._sessions[sandbox.session_id]

    async def queue(self) -> WorkerQueue:
        """The store's workers' tables, opened on first need (in the server's event loop)."""
        if self._store is None:
            if self._opening is None:
                self._opening = asyncio.Lock()
            async with self._opening:
                if self._store is None:
                    from devagent.store.db import Store  # late: SQLAlchemy, once a session needs it

                    self.loop = asyncio.get_running_loop()
                    self._store = await Store.open(self.db_url)
        return self._store.workers

    def pumping(self, pump: _Pump) -> None:
        """Runs a command's pump until it ends, or until the provider closes."""
        task = asyncio.get_running_loop().create_task(pump.run())
        self._pumps.add(task)
        task.add_done_callback(self._pumps.discard)

    async def close(self) -> None:
        """Ends the pumps still running, then closes the store they use (closed under a pump
        that is still reading, a SQLite connection's close would wait for its thread forever)."""
        pumps = list(self._pumps)
        for task in pumps:
            task.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)
        store, self._store = self._store, None
        if store is not None:
            await store.close()


class WorkerSandbox:
    """One session's sandbox on whichever worker holds its lease."""

    kind = "worker"
    network = False

    def __init__(self, provider: WorkerProvider, session_id: str, roots: Sequence[Path]) -> None:
        self.provider = provider
        self.session_id = session_id
        self.roots = tuple(Path(r) for r in roots)

    @property
    def files_here(self) -> bool:
        return False

    def describe(self) -> str:
        return (
            f"{self.provider.describe()}; the workspace is on the worker (the file tools take paths "
            "relative to the workspace root)"
        )

    def show_path(self, host_path: str | Path) -> str:
        return str(host_path)

    def unavailable(self) -> str | None:
        return None

    def refuses(self, cwd: str) -> str | None:
        try:
            self.relative(cwd)
        except SandboxError as e:
            return str(e)
        return None

    def owner(self) -> tuple[int, int] | None:
        return None

    def relative(self, path: str | Path) -> str:
        """A path the tools name, as the worker's workspace knows it: relative to its root."""
        p = Path(path)
        if p.is_absolute():
            root = next((r for r in self.roots if p == r or p.is_relative_to(r)), None)
            if root is None:
                raise SandboxError(f"path {str(path)!r} is outside the workspace")
            p = p.relative_to(root)
        rel = PurePosixPath(p.as_posix())
        if ".." in rel.parts:
            raise SandboxError(f"path {str(path)!r} leaves the workspace")
        return str(rel)

    # --- calls ------------------------------------------------------------------------------------

    async def grant(self) -> tuple[WorkerQueue, Grant]:
        """The session's lease: held, or granted to a worker that can take it (waiting up to
        `worker_wait_seconds` for one to connect or have room)."""
        q = await self.provider.queue()
        deadline = time.monotonic() + self.provider.wait_seconds
        while True:
            found = await q.grant(
                self.session_id, self.provider.pool, self.provider.template, self.provider.ttl
            )
            if found is not None:
                return q, found
            if time.monotonic() > deadline:
                raise SandboxError(
                    f"no worker of the pool {self.provider.pool!r} is connected with room for this "
                    "session (devagent worker --server URL --pool NAME)"
                )
            await asyncio.sleep(0.25)

    async def call(self, kind: str, spec: dict[str, Any], data: bytes | None = None) -> CallRow:
        """A file operation (or a release) on the worker, to its end."""
        q, grant = await self.grant()
        call_id = await q.submit(self.session_id, grant, kind, spec, data)
        with q.listening(f"c:{call_id}") as bell:
            while True:
                row = await q.call(call_id)
                if row is None or row.state in ENDED:
                    break
                await q.end_if_lost(self.session_id, grant)
                await q.doze(bell, 1.0)
        if row is None or row.state != "done":
            raise SandboxError(f"the worker holding this session was lost during a {kind}: try again")
        return row

    async def _file(self, op: str, path: str | Path, data: bytes | None = None) -> bytes:
        row = await self.call(op, {"path": self.relative(path)}, data)
        if row.error:
            name, _, message = row.error.partition(":")
            if name in ERRNOS:
                raise OSError(ERRNOS[name], message.strip(), str(path))
            if name == "OUTSIDE":
                raise SandboxError(f"path {str(path)!r} is outside the workspace")
            raise OSError(errno.EIO, message.strip() or row.error, str(path))
        return row.result or b""

    async def read_bytes_async(self, path: str | Path) -> bytes:
        return await self._file("read", path)

    async def write_atomic_async(self, path: str | Path, data: bytes) -> None:
        await self._file("write", path, data)

    async def list_dir_async(self, path: str | Path) -> list[str]:
        return list(json.loads(await self._file("list", path)))

    async def stat_async(self, path: str | Path) -> os.stat_result | None:
        found = json.loads(await self._file("stat", path))
        return os.stat_result(found) if found is not None else None

    async def delete_async(self, path: str | Path) -> None:
        await self._file("delete", path)

    # The blocking forms are for callers outside the server's event loop (a tool's thread):
    # the operation runs on that loop, where the store's connections live.
    def _blocking(self, coro: Any) -> Any:
        loop = self.provider.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop or not loop.is_running():
            coro.close()
            raise SandboxError("a worker's files are reached with the awaitable file operations only")
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def read_bytes(self, path: str | Path) -> bytes:
        return bytes(self._blocking(self.read_bytes_async(path)))

    def write_atomic(self, path: str | Path, data: bytes) -> None:
        self._blocking(self.write_atomic_async(path, data))

    def list_dir(self, path: str | Path) -> list[str]:
        return list(self._blocking(self.list_dir_async(path)))

    def stat(self, path: str | Path) -> os.stat_result | None:
        found: os.stat_result | None = self._blocking(self.stat_async(path))
        return found

    def delete(self, path: str | Path) -> None:
        self._blocking(self.delete_async(path))

    # --- the workspace the server keeps -------------------------------------------------------

    async def seed(self, folder: Path) -> None:
        """`folder` (a clone the server made) becomes the session's first snapshot, which the
        first worker granted the session restores; SandboxError when a worker was already granted
        it or the snapshot is larger than the server keeps."""
        from devagent.agent.sandbox import snapshot  # late: tarfile, only such sessions

        data = await asyncio.to_thread(snapshot.pack, folder)
        if len(data) > snapshot.LARGEST_SNAPSHOT:
            raise SandboxError(
                f"the workspace is {len(data) // 2**20} MiB compressed: more than the "
                f"{snapshot.LARGEST_SNAPSHOT // 2**20} MiB a worker's session may have"
            )
        q = await self.provider.queue()
        if not await q.seed_snapshot(self.session_id, data):
            raise SandboxError("the session already has a worker: its workspace cannot be replaced")

    async def last_snapshot(self) -> bytes | None:
        """The workspace as of the session's last finished call on a worker (or as seeded), as
        the server keeps it: no worker is asked."""
        q = await self.provider.queue()
        return await q.stored_snapshot(self.session_id)

    async def release(self, keep: bool) -> None:
        """The worker lets the session go (its workspace is in the last snapshot); for good, the
        store forgets it too."""
        q = await self.provider.queue()
        found = await q.lease_of(self.session_id)
        if found is not None:
            with contextlib.suppress(SandboxError):
                await asyncio.wait_for(self.call("release", {"keep": keep}), self.provider.ttl)
        if not keep:
            await q.forget(self.session_id)
        self.provider.forget(self)

    # --- commands ---------------------------------------------------------------------------------

    async def start(
        self,
        command: str,
        *,
        cwd: str,
        env: Mapping[str, str],
        limits: Limits,
        stdin: Stdin = "closed",
        tty: Winsize | None = None,
        streams: Streams | None = None,
        lasting: bool = False,
        shown: Sequence[Path] = (),
    ) -> Started:
        """Queues `bash -c command` for the session's worker and starts its relay here (see the
        module's doc); `shown` folders are the server's, which a worker never sees."""
        del shown
        piped = stdin == "pipe"
        spec = {
            "command": command,
            "cwd": self.relative(cwd),
            "env": container_env(env, tty is not None),
            "input": piped,
            "tty": [tty.rows, tty.cols] if tty is not None else None,
            "timeout": limits.timeout,
            "memory_mb": limits.memory_mb,
            "processes": limits.processes,
        }
        q, grant = await self.grant()
        call_id = await q.submit(self.session_id, grant, "exec", spec, watch=self.provider.ttl)
        ours, theirs = socket.socketpair()
        try:
            proc, read_fd, input_fd = await self._spawn_relay(theirs, piped, tty, streams)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        pump = _Pump(q, grant, self.session_id, call_id, ours, self.provider.ttl)
        self.provider.pumping(pump)
        supervised = piped or lasting
        return Started(proc, read_fd, input_fd, sandboxed=True, supervised=supervised, tty=tty, relayed=True)

    async def _spawn_relay(
        self, theirs: socket.socket, piped: bool, tty: Winsize | None, streams: Streams | None
    ) -> tuple[asyncio.subprocess.Process, int, int]:
        relay_spec = {"fd": theirs.fileno(), "server": os.getpid(), "input": piped, "tty": tty is not None}
        argv = [os.path.realpath(sys.executable), "-I", "-S", RELAY, json.dumps(relay_spec)]
        common: dict[str, Any] = {
            "start_new_session": True,
            "pass_fds": (theirs.fileno(),),
            "env": {},
        }
        if streams is not None:
            with _forwarded_blocked():
                proc = await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=asyncio.subprocess.PIPE if piped else asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE if streams.errors else asyncio.subprocess.DEVNULL,
                    limit=streams.limit,
                    **common,
                )
            return proc, -1, -1
        stdio = _Stdio.make(piped, tty)
        try:
            with _forwarded_blocked():
                proc = await asyncio.create_subprocess_exec(
                    *argv, stdin=stdio.stdin, stdout=stdio.stdout, stderr=stdio.stdout, **common
                )
        except BaseException:
            stdio.close_ours()
            raise
        finally:
            stdio.close_theirs()
        read_fd, input_fd = stdio.ours
        return proc, read_fd, input_fd


class _Pump:
    """Moves one command's rows to its relay and the relay's input and signals to rows, until the
    call ends (its exit code to the relay) or the relay does (the command killed on the worker)."""

    def __init__(
        self, q: WorkerQueue, grant: Grant, session_id: str, call_id: int, sock: socket.socket, ttl: float
    ) -> None:
        self.q, self.grant, self.session_id, self.call_id = q, grant, session_id, call_id
        self.sock = sock
        self.ttl = ttl
        self.watched = time.monotonic()
        self.checked = time.monotonic()
        self.seq = 0
        self.relay_gone = False
        self.ended = False  # the exit code is on its way: the relay's end is no kill

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        self.sock.setblocking(False)
        listening = loop.create_task(self._from_relay())
        try:
            code = await self._to_relay()
            self.ended = True
            if code is not None and not self.relay_gone:
                with contextlib.suppress(OSError):
                    await loop.sock_sendall(self.sock, b"X" + struct.pack(">i", code))
            await self.q.prune(self.call_id)
        finally:
            listening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listening
            self.sock.close()

    async def _to_relay(self) -> int | None:
        """Woken by the call's bell (its output or end stored), else looks every few seconds;
        whether its worker's lease expired is asked at most once a second."""
        with self.q.listening(f"c:{self.call_id}") as bell:
            while True:
                row, chunks = await self.q.progress(self.call_id, self.seq)
                await self._output(chunks)
                if row is None or row.state in ENDED:
                    return await self._ended(row)
                if time.monotonic() - self.checked >= LEASE_CHECK:
                    self.checked = time.monotonic()
                    await self.q.end_if_lost(self.session_id, self.grant)
                if not self.relay_gone and time.monotonic() - self.watched > self.ttl / 3:
                    self.watched = time.monotonic()
                    await self.q.watch(self.call_id, self.ttl)  # followed: its worker lets it run
                await self.q.doze(bell, 2 * LEASE_CHECK)

    async def _output(self, chunks: list[tuple[int, bytes]]) -> None:
        loop = asyncio.get_running_loop()
        for seq, data in chunks:
            self.seq = seq
            if not self.relay_gone:
                with contextlib.suppress(OSError):
                    await loop.sock_sendall(self.sock, b"O" + struct.pack(">I", len(data)) + data)

    async def _ended(self, row: CallRow | None) -> int:
        """The command's exit code for the relay: its own, or INTERRUPTED (said in its output)."""
        if row is not None and row.state == "done" and row.code is not None:
            return 128 - row.code if row.code < 0 else row.code
        if not self.relay_gone:
            note = NOTE.encode()
            with contextlib.suppress(OSError):
                await asyncio.get_running_loop().sock_sendall(
                    self.sock, b"O" + struct.pack(">I", len(note)) + note
                )
        return INTERRUPTED

    async def _from_relay(self) -> None:
        """The relay's frames become calls for the worker: a signal or input for this command."""
        loop = asyncio.get_running_loop()
        buffer = b""
        while True:
            try:
                chunk = await loop.sock_recv(self.sock, 65536)
            except OSError:
                chunk = b""
            if not chunk:  # the relay was killed: so is the command
                self.relay_gone = True
                if self.ended:  # no: it exited with the command's code
                    return
                await self._send("signal", {"call": self.call_id, "signal": "KILL"})
                return
            buffer += chunk
            while (frame := _frame(buffer)) is not None:
                kind, body, buffer = frame
                await self._relay_frame(kind, body)

    async def _relay_frame(self, kind: bytes, body: bytes) -> None:
        if kind == b"S":
            await self._send("signal", {"call": self.call_id, "signal": body.decode()})
        elif kind == b"I":
            await self._send("input", {"call": self.call_id}, body)
        elif kind == b"E":
            await self._send("input", {"call": self.call_id, "close": True})
        elif kind == b"W":
            rows, cols = struct.unpack(">HH", body)
            await self._send("resize", {"call": self.call_id, "rows": rows, "cols": cols})

    async def _send(self, kind: str, spec: dict[str, Any], data: bytes | None = None) -> None:
        with contextlib.suppress(Exception):  # a lost worker: the call ends as interrupted anyway
            if await self.q.held(self.session_id, self.grant):
                await self.q.submit(self.session_id, self.grant, kind, spec, data)


@contextlib.contextmanager
def _forwarded_blocked() -> Iterator[None]:
    """The signals a relay forwards blocked in this thread while it is started: it inherits the
    mask and unblocks them once it handles them. (Not a preexec_fn: without one the child is
    started by vfork, not by a fork copying the server's memory map, some 4 ms of the server's
    CPU and 8 ms of its event loop a command.) A signal sent to the server meanwhile waits
    those few milliseconds."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, BLOCKED)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _frame(buffer: bytes) -> tuple[bytes, bytes, bytes] | None:
    """The first complete frame of the relay's (kind, body, the rest), or None."""
    if not buffer:
        return None
    kind = buffer[:1]
    if kind == b"E":
        return kind, b"", buffer[1:]
    if kind == b"W":
        return (kind, buffer[1:5], buffer[5:]) if len(buffer) >= 5 else None
    if kind == b"S":
        if len(buffer) < 2 or len(buffer) < 2 + buffer[1]:
            return None
        return kind, buffer[2 : 2 + buffer[1]], buffer[2 + buffer[1] :]
    if len(buffer) < 5:
        return None
    (size,) = struct.unpack(">I", buffer[1:5])
    return (kind, buffer[5 : 5 + size], buffer[5 + size :]) if len(buffer) >= 5 + size else None
