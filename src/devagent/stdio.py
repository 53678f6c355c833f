"""The plumbing the stdio doors (wire, ACP, MCP) share: stdout kept for the protocol alone
(`guard_stdout`), logs to stderr or a file (`setup_logging`), the line limits a client is held to
(`line_limits`), input lines read by a thread (`start_reader`) and protocol lines written by one
(`Output`, with back-pressure); a door's --work-dir checked (`work_folder`), and the start the
line-based doors (wire, ACP) share (`serve_lines`).

Light on purpose (nothing of devagent's above `common`): every door loads it on its fast start."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import errno
import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from devagent.common.jsonlimits import DEFAULT_MAX_LINE_BYTES, positive_int_from_env

log = logging.getLogger(__name__)


def guard_stdout() -> int:
    """Keeps stdout for the protocol: returns a private handle on it and points file descriptor
    1 at stderr, so that nothing else (a stray print, a library) writes into the protocol."""
    sys.stdout.flush()
    proto_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return proto_fd


def setup_logging(verbose: bool, log_file: str | None = None) -> None:
    """The process's log lines to stderr (or `log_file`): warnings, and with `verbose` what the
    server does."""
    handler: logging.Handler = (
        logging.FileHandler(log_file) if log_file else logging.StreamHandler(sys.stderr)
    )
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO if verbose else logging.WARNING)


def line_limits() -> dict[str, int]:
    """The limits on a client's lines given in the environment (as for `devagent serve`), by
    option name; ValueError names a bad one."""
    limits: dict[str, int] = {}
    for name, var in (
        ("max_json_depth", "DEVAGENT_MAX_JSON_DEPTH"),
        ("max_line_bytes", "DEVAGENT_MAX_LINE_BYTES"),
    ):
        value = positive_int_from_env(var)
        if value is not None:
            limits[name] = value
    return limits


def work_folder(prog: str, given: str) -> Path | None:
    """A door's --work-dir as an absolute path; None after one line on stderr when it is not a
    folder."""
    path = Path(given).expanduser().resolve()
    if not path.is_dir():
        print(f"{prog}: --work-dir {given} is not a directory", file=sys.stderr)
        return None
    return path


def serve_lines(
    prog: str,
    verbose: bool,
    log_file: str | None,
    serve: Callable[[dict[str, int], int], Coroutine[Any, Any, int]],
) -> int:
    """Run a line-based door (wire, ACP) once its settings are checked: the line limits read from
    the environment, stdout kept for the protocol, logging set up, then `serve(limits, proto_fd)`
    until it returns the exit code (130 after Ctrl-C)."""
    try:
        limits = line_limits()
    except ValueError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    proto_fd = guard_stdout()
    setup_logging(verbose, log_file)
    try:
        return asyncio.run(serve(limits, proto_fd))
    except KeyboardInterrupt:
        return 130


def json_line(msg: Any) -> bytes:
    """One protocol line: compact JSON, non-ASCII kept, newline-terminated."""
    return (json.dumps(msg, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


class Output:
    """Protocol lines to a file descriptor, written by a thread of their own.

    `send` queues one whole line (lines never interleave) and returns at once, so the event loop
    never blocks on a client that does not read. `drain()` is the back-pressure: it waits while
    more than `high_water` bytes are queued. The turn awaits it between events, so a client that
    stops reading pauses its own turn while the loop goes on (stdin is read, `cancel` is taken,
    timers fire); input waits only past `hard_limit` queued bytes (a client that sends requests
    and never reads their answers). A thread rather than an asyncio pipe transport because stdout
    may be a pipe, a tty or a regular file alike (the reader is a thread for the same reason)."""

    def __init__(self, fd: int, high_water: int = 1 << 20, hard_limit: int = 64 << 20) -> None:
        self.fd = fd
        self.high_water = high_water
        self.hard_limit = hard_limit
        self.closed = False
        self._lines: collections.deque[bytes] = collections.deque()
        self._queued = 0  # bytes queued and not yet written
        self._lock = threading.Condition()
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def queued(self) -> int:
        return self._queued

    def send(self, msg: Any) -> None:
        if self.closed:
            return
        data = json_line(msg)
        if self._thread is None:
            with contextlib.suppress(RuntimeError):
                self._loop = asyncio.get_running_loop()
            self._thread = threading.Thread(target=self._write_loop, name="stdio-out", daemon=True)
            self._thread.start()
        with self._lock:
            self._lines.append(data)
            self._queued += len(data)
            self._lock.notify()

    async def drain(self, limit: int | None = None) -> None:
        """Waits until at most `limit` (default `high_water`) bytes are queued, or the output is
        closed."""
        limit = self.high_water if limit is None else limit
        while True:
            with self._lock:
                if self.closed or self._queued <= limit:
                    return
                fut = asyncio.get_running_loop().create_future()
                self._waiters.append((limit, fut))
            await fut

    async def flush(self, within: float) -> None:
        """Waits (at most `within` seconds) until everything queued is written."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.drain(0), within)

    def _wake(self) -> None:
        with self._lock:
            due = [f for limit, f in self._waiters if self.closed or self._queued <= limit]
            self._waiters = [(limit, f) for limit, f in self._waiters if f not in due]
        for f in due:
            if not f.done():
                f.set_result(None)

    def _write_loop(self) -> None:
        while True:
            with self._lock:
                while not self._lines:
                    self._lock.wait()
                data = self._lines.popleft()
            ok = self._write(data)
            with self._lock:
                self._queued -= len(data)
                if not ok:
                    self.closed = True
                    self._lines.clear()
                    self._queued = 0
                wake = any(self.closed or self._queued <= limit for limit, _ in self._waiters)
            if wake and self._loop is not None:
                with contextlib.suppress(RuntimeError):  # the loop is gone
                    self._loop.call_soon_threadsafe(self._wake)
            if not ok:
                return

    def _write(self, data: bytes) -> bool:
        view = memoryview(data)
        while view:
            try:
                n = os.write(self.fd, view)
            except InterruptedError:
                continue
            except BlockingIOError:
                import select

                select.select([], [self.fd], [])
                continue
            except OSError as e:
                if e.errno not in (errno.EPIPE, errno.EBADF):
                    log.exception("writing to stdout failed")
                log.warning("the client closed stdout; no more output")
                return False
            view = view[n:]
        return True


class OverlongLine(bytes):
    """Stands in for an input line longer than the limit, which was read and dropped in pieces
    (never held whole): the server answers it with an error."""


def start_reader(
    fd: int,
    loop: asyncio.AbstractEventLoop,
    queue: asyncio.Queue[bytes | None],
    max_line: int = DEFAULT_MAX_LINE_BYTES,
) -> None:
    """Read lines from `fd` in a daemon thread (works for pipes, ttys and files alike) and hand
    them to the loop; None marks the end of input. A line longer than `max_line` bytes (its
    final newline not counted) becomes an `OverlongLine`."""

    def put(item: bytes | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is gone
            loop.call_soon_threadsafe(queue.put_nowait, item)

    def run() -> None:
        try:
            with open(fd, "rb", closefd=False) as f:
                while line := f.readline(max_line + 1):
                    if line.endswith(b"\n") or len(line) <= max_line:  # at most max_line + newline
                        put(line)
                        continue
                    while not line.endswith(b"\n"):  # drop the rest of it
                        line = f.readline(1 << 20)
                        if not line:
                            break
                    put(OverlongLine())
        except Exception:
            log.exception("reading stdin failed")
        put(None)

    threading.Thread(target=run, name="stdio-in", daemon=True).start()
