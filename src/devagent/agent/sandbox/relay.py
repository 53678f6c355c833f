"""The host-side process that stands for one command running in a session's container.

Run as `python -I -S relay.py SPEC_JSON` by the container backend: it starts the engine's `exec`
client in a process group of its own (with the relay's standard input, output and error) and
leads its own group, so that whoever holds the command (the shell tool, the background-process
table) signals it as it signals a local command: a signal to the relay's group is forwarded to the
command's process group inside the container (the engine's client would not forward it, and
killing the client alone leaves the command running). SIGUSR1 means "kill it all" (SIGKILL inside).
When the server that started it dies, the command is killed too. When the engine's client ends
because the container itself stopped (killed, out of memory, stopped by an operator), the relay says
so in the command's output and exits with INTERRUPTED: the command was interrupted, and nothing
runs it again. A container found stopped before the command began (stopped from outside between
commands) is started and the command run, once. Whether it began: where the engine passes a
descriptor in (Podman), the command's wrapper first writes a byte on it; where it cannot
(Docker), the container's last stop as the engine recorded it came before the relay asked for the
exec (the engine runs on this machine, whose clock both read; a stop recorded late errs towards
"interrupted", never towards running a command twice).

SPEC_JSON: {"server": pid, "exec": argv, "pidfile": the command's file inside (its wrapper's
argument), "kill": argv (the signal name is appended),
"state": argv (prints "true" while the container runs), "tty": bool, "timeout": seconds (optional:
then SIGTERM, and SIGKILL after KILL_AFTER), "start": argv starting the container, "marker": bool
(the client is given descriptor 3 for the wrapper's byte), "stopped_at": argv printing when the
container last stopped (RFC 3339; optional, used without a marker)}. Without either, a command
whose container stopped is always taken to have begun. Only the standard library: it runs
isolated (-I -S), outside the virtual environment's packages."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

INTERRUPTED = 254  # the exit code when the container stopped under the command
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR2)
KILL_AFTER = 1.5  # seconds after a forwarded SIGTERM before SIGKILL follows inside
CLIENT_AFTER_KILL = 10.0  # seconds the engine's client may outlive that SIGKILL (then killed)
NOTE = (
    "\n[devagent] the sandbox container stopped while this command ran: the command was "
    "interrupted and is not run again\n"
)


def main(spec: dict[str, object]) -> int:
    pending: list[int] = []
    for forwarded in (*FORWARDED, signal.SIGUSR1):
        signal.signal(forwarded, lambda signum, _frame: pending.append(signum))
    timeout = spec.get("timeout")
    ends_at = time.monotonic() + float(timeout) if isinstance(timeout, int | float) else None
    retried = False
    while True:
        asked_at = time.time()
        child, marker = _exec(spec)
        code, signalled = _supervise(spec, child, pending, ends_at)
        began = _began(marker) if marker >= 0 else None
        if code != 0 and not _still_running(spec, code):
            # Found stopped before the command began (the marker never came, or the container
            # stopped before the exec was asked for): the container is started and the command
            # run, once. One that had begun, or may have, is never run again.
            if began is None:
                began = not _stopped_before(spec, asked_at)
            if not (began or signalled or retried) and _start(spec):
                retried = True
                continue
            os.write(2, NOTE.encode())
            return INTERRUPTED
        return 128 - code if code < 0 else code


def _exec(spec: dict[str, object]) -> tuple[subprocess.Popen[bytes], int]:
    """The engine's client running the command; with "marker" in the spec, the read end of the
    pipe on whose descriptor 3 the command's wrapper writes a byte as it begins (else -1)."""
    tty = bool(spec.get("tty"))
    if not spec.get("marker") or not spec.get("start"):
        child = subprocess.Popen(
            list(spec["exec"]),  # type: ignore[call-overload]
            start_new_session=True,
            preexec_fn=_take_terminal if tty else None,
        )
        return child, -1
    read_end, write_end = os.pipe()

    def prepare() -> None:
        os.dup2(write_end, 3)  # closed here after: pass_fds keeps only 3
        if tty:
            _take_terminal()

    try:
        child = subprocess.Popen(
            list(spec["exec"]),  # type: ignore[call-overload]
            start_new_session=True,
            preexec_fn=prepare,
            pass_fds=(3,),
        )
    finally:
        os.close(write_end)
    return child, read_end


def _supervise(
    spec: dict[str, object], child: subprocess.Popen[bytes], pending: list[int], ends_at: float | None
) -> tuple[int, bool]:
    """Waits for the client, forwarding signals and the time limit inside, killing the command
    when the server dies; its exit code, and whether any signal was forwarded."""
    server = int(spec["server"])  # type: ignore[call-overload]
    kill_at: float | None = None
    termed: int | None = None  # the host's process group a forwarded TERM was sent to
    client_dead_by: float | None = None
    signalled = False
    while True:
        try:
            code = child.wait(timeout=0.1)
            break
        except subprocess.TimeoutExpired:
            pass
        if ends_at is not None and time.monotonic() >= ends_at:  # the command's own time limit
            pending.append(signal.SIGTERM)
            ends_at = None
        if pending:
            signalled = True
            kill_at, termed = _forward_pending(spec, pending, kill_at, termed)
        if kill_at is not None and time.monotonic() >= kill_at:
            _forward(spec, "KILL")
            kill_at = float("inf")
            client_dead_by = time.monotonic() + CLIENT_AFTER_KILL
        if client_dead_by is not None and time.monotonic() >= client_dead_by:
            # the command was killed inside, yet the engine's client still runs (an exec
            # session the engine never ended): the client goes too, or this relay waits forever
            child.kill()
            client_dead_by = None
        if os.getppid() != server:  # the server died: nothing may outlive it here
            _forward(spec, "KILL")
            server = os.getppid()
            signalled = True
    # Signals that came as the client ended still reach the command; a client killed from
    # outside takes the command with it.
    if pending:
        signalled = True
        kill_at, termed = _forward_pending(spec, pending, kill_at, termed)
    if code < 0:
        _forward(spec, "KILL")
    elif kill_at is not None and kill_at != float("inf"):
        _kill_left_after_term(spec, termed, kill_at)
    return code, signalled


def _forward_pending(
    spec: dict[str, object], pending: list[int], kill_at: float | None, termed: int | None
) -> tuple[float | None, int | None]:
    """Each signal in `pending` forwarded (and taken out), SIGUSR1 as KILL; the first TERM sets
    when its KILL follows and names the host group it went to: (that moment, that group)."""
    while pending:
        sig = pending.pop(0)
        group = _forward(spec, "KILL" if sig == signal.SIGUSR1 else signal.Signals(sig).name[3:])
        if sig == signal.SIGTERM and kill_at is None:
            kill_at, termed = time.monotonic() + KILL_AFTER, group
    return kill_at, termed


def _kill_left_after_term(spec: dict[str, object], group: int | None, kill_at: float) -> None:
    """A TERM was forwarded and the client ended before its KILL followed: what is left of the
    command's group (a process that ignores TERM; the wrapper that would have ended it died of the
    TERM) is killed all the same at `kill_at`. Where the TERM went from here (to the host's process
    group `group`), so does the KILL, without an engine call (a loaded engine can hold one for
    many seconds, and the wrapper the group was found by is gone); where it went through the
    engine (the command's processes not this machine's to see), so does the KILL."""
    time.sleep(max(0.0, kill_at - time.monotonic()))
    if group is None:
        _forward(spec, "KILL")
        return
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:  # gone already
        pass


def _began(marker: int) -> bool:
    """Whether the command's wrapper wrote its byte (read without waiting: a byte written is in
    the pipe; the wrapper closed its copy before the command ran). Closes `marker`."""
    os.set_blocking(marker, False)
    try:
        return bool(os.read(marker, 1))
    except BlockingIOError:
        return False
    finally:
        os.close(marker)


def _stopped_before(spec: dict[str, object], moment: float) -> bool:
    """Whether the container last stopped, by the engine's record, before `moment` (this
    machine's clock); False when that cannot be told."""
    if not spec.get("stopped_at"):
        return False
    from datetime import datetime

    try:
        done = subprocess.run(
            list(spec["stopped_at"]),  # type: ignore[call-overload]
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
        )
        stopped = datetime.fromisoformat(done.stdout.decode().strip()).timestamp()
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return False
    return done.returncode == 0 and 0 < stopped < moment  # never stopped: year 1, negative


def _start(spec: dict[str, object]) -> bool:
    """Starts the stopped container; whether it runs now."""
    try:
        subprocess.run(
            list(spec["start"]),  # type: ignore[call-overload]
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return _running(spec)


def _take_terminal() -> None:
    """In the engine's client, before its exec: its own session (start_new_session) whose
    controlling terminal is the pty the relay was given, so that resizes reach it."""
    import fcntl
    import termios

    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _forward(spec: dict[str, object], name: str) -> int | None:
    """The signal `name` to the command's group: from here when its processes are this machine's
    and ours to signal (found by the wrapper's argument, the command's own random file name), else
    by an `exec` of `kill` inside. Here first: a container whose pids limit is exhausted (a fork
    bomb) cannot start the `kill`. The group signalled from here, if it was."""
    group = _host_group(str(spec.get("pidfile", "")))
    if group is not None:
        try:
            os.killpg(group, getattr(signal, f"SIG{name}"))
            return group
        except OSError:
            pass
    try:
        subprocess.run(
            [*spec["kill"], name],  # type: ignore[misc]
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        pass
    return None


def _host_group(pidfile: str) -> int | None:
    """The process group, as this machine numbers it, of the command's wrapper (`/bin/sh -c
    WRAPPER PIDFILE ...`, the leader of the command's group), when it is visible here."""
    if not pidfile:
        return None
    wanted = pidfile.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if len(argv) > 3 and argv[0] == b"/bin/sh" and argv[3] == wanted:
                return os.getpgid(int(entry))
        except OSError:
            continue
    return None


# A client that ended as if killed (128 + SIGKILL or SIGTERM) while the container still reads
# "running": Docker's daemon records a killed container's end a moment after its exec's client
# has ended, so the state is asked again, this many times a fifth of a second apart.
KILLED_CODES = (137, 143)
SETTLE_LOOKS = 25


def _still_running(spec: dict[str, object], code: int) -> bool:
    """Whether the container runs, once the engine has caught up with a kill that ended `code`."""
    if not _running(spec):
        return False
    if code not in KILLED_CODES:
        return True
    for _ in range(SETTLE_LOOKS):
        time.sleep(0.2)
        if not _running(spec):
            return False
    return True


def _running(spec: dict[str, object]) -> bool:
    try:
        done = subprocess.run(
            list(spec["state"]),  # type: ignore[call-overload]
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.stdout.strip() == b"true"


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
