"""Background processes: commands a session started with `run_shell_command` (`background:
true`) that keep running while the conversation goes on, a dev server or a watcher, say.

One registry per `AgentCore` (`ProcessRegistry`), by session. A process belongs to the server
process that started it: it is never stored, and after a restart the session's record of it
(`SessionState.background`, which names the registry that started it) lets the model be told
that it is gone.

A start takes its place first (`Slot`: its id, its session and its caller), before it awaits
anything: so the starts of one step, which run at once, get distinct ids and count against the
limits (`MAX_RUNNING` a session, the operator's `shell_background_per_caller` a caller across its
sessions) while they start. What stops a session's processes reaches those still starting too.

Each is started like any command (`shell.start_command`: the clean environment, the limits, the
sandbox) in its own process group, its input a pipe. Its output goes into a buffer that keeps the
newest `BUFFER_CHARS` characters; a read gives what arrived since the last read (its head and
tail when long) and says what the buffer dropped. It is stopped (SIGTERM to its group, SIGKILL
after a grace; sandboxed, its PID namespace ends with it) when the model stops it, when a turn of
its session is cancelled, when its session ends (`AgentCore.release`) or has been idle for
`shell_background_idle` seconds, and when the core closes. When the server dies without closing
(SIGKILL), the kernel ends it: the supervisor's parent-death signal kills its group, or bwrap's
`--die-with-parent` its sandbox.

Started with `tty: true`, its input and output are a pseudo-terminal (`shell.start_command`), its
output is drawn on a screen (`tty_screen.TtyScreen`) that a read returns instead of the text, its
input takes keys by name (`tty_keys`), and a stop also reaches the group in the terminal's
foreground, which left the process's group to own the terminal.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import signal
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devagent.agent.events import ToolErrorType
from devagent.agent.sandbox.base import Started
from devagent.agent.sandbox.groups import KILL_GRACE, kill_group, signal_group, wait_exit
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.output import head_and_tail
from devagent.agent.tools.shell import READ_CHUNK, start_command
from devagent.agent.tools.tty_keys import keys
from devagent.agent.tools.tty_screen import TtyScreen, TtySize, printed

if TYPE_CHECKING:
    from devagent.agent.tools.base import ToolContext

BUFFER_CHARS = 256 * 1024  # the newest output kept per process
MAX_RUNNING = 8  # running at once per session
KEPT_ENDED = 16  # ended processes remembered per session (their last output, how they ended)
RECORDS_KEPT = 64  # processes the session's state names (for "gone after a restart")
SESSIONS_KEPT = 256  # sessions whose ended processes are remembered (those with a running one: all)
IDLE_CHECK = 30.0  # seconds between two looks for idle sessions, at most
INPUT_TIMEOUT = 10.0  # seconds a write may wait for a process that does not read its input
END_GRACE = 1.0  # seconds to collect the last output once a process has ended
TTY_END_GRACE = 10.0  # for a pty process: to draw what it wrote before it ended (a bound, not a pace)


class NewestText:
    """Text as it arrives, keeping the newest `cap` characters, and how far a reader has read."""

    def __init__(self, cap: int = BUFFER_CHARS) -> None:
        self.cap = cap
        self.text = ""
        self.start = 0  # the position of text[0] in everything that arrived
        self.read_to = 0  # the position up to which a reader has read

    @property
    def total(self) -> int:
        return self.start + len(self.text)

    def add(self, text: str) -> None:
        self.text += text
        if len(self.text) > 2 * self.cap:
            self._trim()

    def _trim(self) -> None:
        cut = max(0, len(self.text) - self.cap)
        self.start += cut
        self.text = self.text[cut:]

    def unread(self) -> tuple[str, int]:
        """What arrived since the last `mark_read` that is still kept, and how many characters of
        it the buffer dropped."""
        self._trim()
        begin = max(self.read_to, self.start)
        return self.text[begin - self.start :], begin - self.read_to

    def mark_read(self) -> None:
        self.read_to = self.total


@dataclass(slots=True)
class Slot:
    """A background process's place, taken before its start awaits anything: its id, the session
    and the caller (`SessionState.identity`) it counts for; why it was stopped while it started."""

    session_id: str
    pid: str
    caller: str
    stopped_why: str = ""
    launch: asyncio.Task[BackgroundProcess] | None = None


class BackgroundProcess:
    """One background process of a session, from its start to some time after its end."""

    def __init__(self, pid: str, command: str, directory: str, started: Started, caller: str = "") -> None:
        self.id = pid
        self.caller = caller  # the identity whose limit it counts against
        self.command = command
        self.directory = directory
        self.proc = started.proc
        self.sandboxed = started.sandboxed
        self.supervised = started.supervised
        self.started_at = time.time()
        self.output = NewestText()
        self.exit_code: int | None = None
        self.stopped_why = ""  # who or what stopped it ("" while running, or when it ended by itself)
        self.ended = False
        self._input_fd = started.input_fd
        if self._input_fd >= 0:
            os.set_blocking(self._input_fd, False)
        self.tty = started.tty
        self.relayed = started.relayed
        self.screen = TtyScreen(started.tty, self._reply) if started.tty is not None else None
        self._output_fd = started.output_fd
        self._changed = asyncio.Event()
        self._watcher: asyncio.Task[None] | None = None

    async def begin(self) -> None:
        """Starts following its output and its end."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(loop=loop)
        try:
            pipe, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader, loop=loop),
                os.fdopen(self._output_fd, "rb", buffering=0),
            )
        except BaseException:
            await asyncio.shield(kill_group(self.proc))
            raise
        self._watcher = asyncio.create_task(self._follow(reader, pipe))

    def _signal(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def _follow(self, reader: asyncio.StreamReader, pipe: asyncio.BaseTransport) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

        async def add(text: str) -> None:
            if self.screen is not None:  # drawn first: what `wait_for` found is on the screen
                await self.screen.draw(text)
            self.output.add(text)
            self._signal()

        async def read() -> None:
            with contextlib.suppress(OSError):  # a pty's master reads EIO once its last user ended
                while data := await reader.read(READ_CHUNK):
                    await add(decoder.decode(data))
            await add(decoder.decode(b"", final=True))

        reading = asyncio.create_task(read())
        try:
            await self.proc.wait()
            # What it left running ended with it (its supervisor or its sandbox saw to that);
            # anything still in its group goes now.
            signal_group(self.proc.pid, signal.SIGKILL)
            await asyncio.wait({reading}, timeout=END_GRACE if self.screen is None else TTY_END_GRACE)
        finally:
            if not reading.done():
                reading.cancel()
            pipe.close()
            self._close_input()
            self.exit_code = self.proc.returncode
            self.ended = True
            self._signal()

    def _close_input(self) -> None:
        if self._input_fd >= 0:
            fd, self._input_fd = self._input_fd, -1
            os.close(fd)

    @property
    def state(self) -> str:
        """running, or how it ended."""
        if not self.ended:
            return "running" if not self.stopped_why else "stopping"
        if self.stopped_why:
            return f"stopped ({self.stopped_why})"
        return f"exited with code {self.exit_code}"

    def summary(self) -> str:
        unread, _ = self.output.unread()
        more = f", {len(unread):,} characters of output unread" if unread else ""
        age = _duration(time.time() - self.started_at)
        tty = f" in a {self.tty.rows}x{self.tty.cols} terminal" if self.tty is not None else ""
        return f"{self.id}: {self.state}, started {age} ago{tty} in {self.directory}{more}: {self.command}"

    def _reply(self, answer: str) -> None:
        """The terminal's answer to the program's question (where its cursor is), typed back."""
        if self._input_fd >= 0:
            with contextlib.suppress(OSError):
                os.write(self._input_fd, answer.encode("utf-8"))

    def take_output(self) -> str:
        """The output that arrived since the last read (its head and tail when long), with what
        the buffer dropped of it; it counts as read. A pty process's is its screen instead, with
        the lines that scrolled off it since the last read."""
        text, dropped = self.output.unread()
        self.output.mark_read()
        if self.screen is not None:
            return self.screen.read()
        note = ""
        if dropped:
            note = (
                f"[{dropped:,} earlier characters of output were dropped: only the newest "
                f"{self.output.cap:,} are kept between reads]\n"
            )
        return note + head_and_tail(text) if text else note + "(no new output)"

    async def wait(self, until: str | None, seconds: float, cancelled: asyncio.Event) -> bool:
        """Waits up to `seconds` until `until` appears in the unread output (with no `until`:
        until the process ends), the process ends, or the turn is cancelled. Whether `until`
        appeared (False with no `until`)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while True:
            if until is not None and until in self._new_text():
                return True
            left = deadline - loop.time()
            if self.ended or left <= 0 or cancelled.is_set():
                return False
            changed = asyncio.create_task(self._changed.wait())
            stop = asyncio.create_task(cancelled.wait())
            try:
                await asyncio.wait({changed, stop}, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            finally:
                changed.cancel()
                stop.cancel()

    def _new_text(self) -> str:
        """The output since the last read as `wait_for` looks in it: a pty process's as printed,
        without its escape sequences."""
        unread = self.output.unread()[0]
        return printed(unread) if self.screen is not None else unread

    async def write(self, text: str, close: bool) -> None:
        """Writes `text` to its input (then closes it, with `close`). To a pty process: its keys
        (`tty_keys`), and `close` types the end of file (Ctrl-D) rather than closing the terminal."""
        if self.ended:
            raise ToolFailure(
                f"{self.id} has ended ({self.state}): nothing reads its input", ToolErrorType.PROCESS_ENDED
            )
        if self._input_fd < 0:
            raise ToolFailure(f"the input of {self.id} was closed already", ToolErrorType.INPUT_CLOSED)
        data = text.encode("utf-8") if self.screen is None else keys(text) + (b"\x04" if close else b"")
        try:
            await _write_all(self._input_fd, data)
        except BrokenPipeError:
            self._close_input()
            raise ToolFailure(
                f"{self.id} closed its input: it reads no more", ToolErrorType.INPUT_CLOSED
            ) from None
        except TimeoutError:
            raise ToolFailure(
                f"{self.id} did not read its input within {INPUT_TIMEOUT:g} s; part of it may be unwritten",
                ToolErrorType.INPUT_BLOCKED,
            ) from None
        except OSError as e:  # EIO: the pty has no reader left
            raise ToolFailure(
                f"{self.id} has left its terminal: nothing reads its input ({e})", ToolErrorType.INPUT_CLOSED
            ) from None
        if close and self.screen is None:
            self._close_input()

    async def stop(self, why: str) -> None:
        """Stops it and everything it started (a no-op once it has ended)."""
        if self.ended:
            return
        self.stopped_why = self.stopped_why or why
        await self._end()
        if self._watcher is not None:
            await asyncio.wait({self._watcher})

    async def _end(self) -> None:
        """SIGTERM to its group; what outlives the grace is killed: first by its supervisor, which
        also kills what left the group, then SIGKILL to the group."""
        pgid = self.proc.pid  # it leads its own group
        for group in self._terminal_groups():
            signal_group(group, signal.SIGTERM)
        signal_group(pgid, signal.SIGTERM)
        await wait_exit(self.proc, KILL_GRACE)
        if self.proc.returncode is None and self.supervised:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pgid, signal.SIGUSR1)
            await wait_exit(self.proc, KILL_GRACE)
        signal_group(pgid, signal.SIGKILL)

    def _terminal_groups(self) -> set[int]:
        """The group in a pty process's terminal's foreground: it left the process's group to own
        the terminal (without job control, the command's own session is that group). None for a
        relayed command: there the foreground is the engine's client, which the relay's own
        signal ends with the command; signalled itself, the client left the engine's exec session
        behind, and Podman's next exec of that container could wait on it."""
        fd = self._input_fd
        if self.tty is None or fd < 0 or self.relayed:
            return set()
        try:
            group = os.tcgetpgrp(fd)
        except OSError:
            return set()
        return {group} if group > 1 and group != os.getpgrp() else set()


async def _write_all(fd: int, data: bytes) -> None:
    """Writes all of `data` to the non-blocking pipe `fd`, waiting while it is full (at most
    INPUT_TIMEOUT seconds at a time): TimeoutError, or BrokenPipeError when no one reads it."""
    loop = asyncio.get_running_loop()
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
            continue
        except BlockingIOError:
            pass
        ready: asyncio.Future[None] = loop.create_future()
        loop.add_writer(fd, _settle, ready)
        try:
            await asyncio.wait_for(ready, INPUT_TIMEOUT)
        finally:
            loop.remove_writer(fd)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _duration(seconds: float) -> str:
    s = int(seconds)
    if s < 120:
        return f"{round(seconds, 1):g} s"
    if s < 7200:
        return f"{s // 60} min"
    return f"{s // 3600} h"


class ProcessRegistry:
    """The background processes of one core, by session, with the starts under way (`Slot`); and
    the task that stops those of idle sessions. `busy(session_id)`: whether a turn of that session
    runs in this process now. `per_caller`: the most one caller may have running or starting
    across its sessions (0: no limit of its own)."""

    def __init__(self, idle_seconds: float, busy: Callable[[str], bool], per_caller: int = 0) -> None:
        self.instance = uuid.uuid4().hex[:12]  # this registry's name in the sessions' records
        self.idle_seconds = idle_seconds
        self.per_caller = per_caller
        self._busy = busy
        self._sessions: dict[str, dict[str, BackgroundProcess]] = {}
        self._starting: dict[str, dict[str, Slot]] = {}
        self._numbers: dict[str, int] = {}  # the highest id number each session was given
        self._last_use: dict[str, float] = {}
        self._idle_task: asyncio.Task[None] | None = None
        self._closed = False

    def of(self, session_id: str) -> SessionProcesses:
        return SessionProcesses(self, session_id)

    def processes(self, session_id: str) -> list[BackgroundProcess]:
        return list(self._sessions.get(session_id, {}).values())

    def running(self) -> list[BackgroundProcess]:
        return [p for procs in self._sessions.values() for p in procs.values() if not p.ended]

    def held(self, session_id: str | None = None, caller: str | None = None) -> int:
        """How many processes run or start, of a session or of a caller."""
        live = [
            (p.caller, sid) for sid, procs in self._sessions.items() for p in procs.values() if not p.ended
        ]
        live += [(s.caller, sid) for sid, slots in self._starting.items() for s in slots.values()]
        return sum(1 for who, sid in live if session_id in (None, sid) and caller in (None, who))

    def touch(self, session_id: str) -> None:
        """The session did something (a turn ran, a call used its processes): not idle now."""
        if session_id in self._sessions:
            self._last_use[session_id] = time.monotonic()

    def reserve(self, session_id: str, caller: str, records: list[dict[str, Any]]) -> Slot:
        """A place for one more process of the session, its id chosen, or ToolFailure when the
        server is stopping or the session or its caller has all it may have. Nothing is awaited:
        starts running at once each get their own place."""
        if self._closed:
            raise ToolFailure("the server is stopping: no process may start", ToolErrorType.UNSUPPORTED)
        mine = self.held(session_id)
        if mine >= MAX_RUNNING:
            raise ToolFailure(
                f"{mine} background processes of this session are running or starting, the most "
                "there may be: stop one first (background_process, action `stop`)",
                ToolErrorType.TOO_MANY_PROCESSES,
            )
        theirs = self.held(caller=caller) if self.per_caller > 0 else 0
        if self.per_caller > 0 and theirs >= self.per_caller:
            who = f"caller {caller!r}" if caller else "the local user"
            raise ToolFailure(
                f"{who} has {theirs} background processes running or starting across its sessions, "
                "the most one caller may have on this server: stop one first (background_process, "
                "action `stop`, in the session that started it)",
                ToolErrorType.TOO_MANY_PROCESSES,
            )
        numbers = [str(r.get("id", ""))[2:] for r in records if str(r.get("id", "")).startswith("bg")]
        number = 1 + max([int(n) for n in numbers if n.isdigit()] + [self._numbers.get(session_id, 0)])
        self._numbers[session_id] = number
        slot = Slot(session_id, f"bg{number}", caller)
        self._starting.setdefault(session_id, {})[slot.pid] = slot
        return slot

    def unreserve(self, slot: Slot) -> None:
        """Gives back the place of a start that failed."""
        slots = self._starting.get(slot.session_id, {})
        slots.pop(slot.pid, None)
        if not slots:
            self._starting.pop(slot.session_id, None)
            if slot.session_id not in self._sessions:  # nothing of it kept: its numbers neither
                self._numbers.pop(slot.session_id, None)

    def add(self, slot: Slot, process: BackgroundProcess) -> None:
        """The process of `slot` has started: it takes the slot's place."""
        self.unreserve(slot)
        procs = self._sessions.setdefault(slot.session_id, {})
        procs[process.id] = process
        ended = [p for p in procs.values() if p.ended]
        for old in ended[: max(0, len(ended) - KEPT_ENDED)]:
            del procs[old.id]
        self.touch(slot.session_id)
        self._forget_old_sessions()
        if self.idle_seconds > 0 and (self._idle_task is None or self._idle_task.done()):
            self._idle_task = asyncio.create_task(self._stop_idle())

    def _forget_old_sessions(self) -> None:
        """Beyond SESSIONS_KEPT sessions, those used longest ago with nothing running are forgotten
        (a later call naming one of their processes is told it ended)."""
        done = [
            sid
            for sid, procs in self._sessions.items()
            if sid not in self._starting and all(p.ended for p in procs.values())
        ]
        done.sort(key=lambda sid: self._last_use.get(sid, 0.0))
        for sid in done[: max(0, len(self._sessions) - SESSIONS_KEPT)]:
            self._forget(sid)

    def _forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
        self._last_use.pop(session_id, None)
        self._numbers.pop(session_id, None)

    async def stop_session(self, session_id: str, why: str, *, forget: bool = False) -> None:
        """Stops the session's processes, those still starting too (`forget`: and drops them all)."""
        starting = list(self._starting.get(session_id, {}).values())
        for slot in starting:
            slot.stopped_why = slot.stopped_why or why
        launches = [s.launch for s in starting if s.launch is not None]
        procs = self._sessions.get(session_id, {})
        await asyncio.gather(
            *(p.stop(why) for p in list(procs.values())),
            *(asyncio.wait({launch}) for launch in launches),  # each stops its own once started
        )
        if forget and session_id not in self._starting:
            self._forget(session_id)

    async def close(self) -> None:
        """Stops every process (the core is closing)."""
        self._closed = True
        if self._idle_task is not None:
            self._idle_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._idle_task
        sessions = set(self._sessions) | set(self._starting)
        await asyncio.gather(*(self.stop_session(sid, "the server stopped", forget=True) for sid in sessions))

    async def _stop_idle(self) -> None:
        """Stops the processes of sessions idle for `idle_seconds`, while any process runs."""
        while self.running():
            await asyncio.sleep(min(IDLE_CHECK, self.idle_seconds / 4))  # a periodic look, not a wait
            now = time.monotonic()
            for sid in list(self._sessions):
                if self._busy(sid) or sid in self._starting:
                    self.touch(sid)
                elif now - self._last_use.get(sid, now) >= self.idle_seconds:
                    await self.stop_session(sid, f"its session was idle for {_duration(self.idle_seconds)}")


@dataclass(frozen=True, slots=True)
class SessionProcesses:
    """One session's view of the registry, which its tools get (`ToolContext.processes`)."""

    registry: ProcessRegistry
    session_id: str

    def get(self, pid: str) -> BackgroundProcess | None:
        self.registry.touch(self.session_id)
        return self.registry._sessions.get(self.session_id, {}).get(pid)

    def all(self) -> list[BackgroundProcess]:
        self.registry.touch(self.session_id)
        return self.registry.processes(self.session_id)

    async def start(
        self, command: str, cwd: str, ctx: ToolContext, guard: dict[str, str], tty: TtySize | None = None
    ) -> BackgroundProcess:
        """Starts `command` in the background; it is recorded in the session's state. Its place is
        taken at once; the start itself runs on when the call is cancelled, and stops what it
        started (a cancel stops the session's processes, and waits for the starts under way)."""
        slot = self.registry.reserve(self.session_id, ctx.state.identity, ctx.state.background)
        launch = asyncio.create_task(self._launch(slot, command, cwd, ctx, guard, tty))
        slot.launch = launch
        launch.add_done_callback(_seen)
        return await asyncio.shield(launch)

    async def _launch(
        self, slot: Slot, command: str, cwd: str, ctx: ToolContext, guard: dict[str, str], tty: TtySize | None
    ) -> BackgroundProcess:
        try:
            started = await start_command(command, cwd, ctx, guard, background=True, tty=tty)
            process = BackgroundProcess(
                slot.pid, command, ctx.workspace.display(Path(cwd)), started, slot.caller
            )
            await process.begin()
        except BaseException:
            self.registry.unreserve(slot)
            raise
        self.registry.add(slot, process)
        records = ctx.state.background
        records.append({"id": slot.pid, "command": command, "started_by": self.registry.instance})
        del records[: max(0, len(records) - RECORDS_KEPT)]
        if slot.stopped_why:  # the session's processes were stopped while this one started
            await process.stop(slot.stopped_why)
            raise ToolFailure(
                f"{slot.pid} was stopped as it started: {slot.stopped_why}", ToolErrorType.CANCELLED
            )
        return process

    def gone(self, pid: str, records: list[dict[str, Any]]) -> str:
        """Why the session has no process `pid` here, for the model."""
        record = next((r for r in records if r.get("id") == pid), None)
        if record is None:
            return f"there is no background process {pid} (action `list` shows them)"
        if record.get("started_by") != self.registry.instance:
            return (
                f"{pid} (`{record.get('command', '')}`) is gone: it was started by a server process "
                "that has stopped since (or that another replica runs), and a background process "
                "ends with the server process that started it. Start it again if you need it"
            )
        return f"{pid} (`{record.get('command', '')}`) has ended and is no longer kept"


def _seen(task: asyncio.Task[BackgroundProcess]) -> None:
    """Retrieves a start's failure that no caller awaited (its call was cancelled)."""
    if not task.cancelled():
        task.exception()
