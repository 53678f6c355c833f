"""The host-side process that stands for one command running on a worker (`devagent worker`).

Run as `python -I -S workrelay.py SPEC_JSON` by the worker backend (worker.py), with one end of a
socket pair: the server's side of the pair carries the command's output to this process, which
writes it to its standard output (a pipe or a pseudo-terminal the shell tool, the
background-process table or the tty tool reads as it reads a local command's), and its exit code,
with which it exits. Its standard input and the signals sent to its process group go the other
way: the server queues them for the worker, which gives them to the command. SIGUSR1 means "kill
it all". When the server's side ends without an exit code (the server died), or the server
reports the worker lost, it exits with INTERRUPTED: the command was interrupted and is not run
again.

Frames, server to relay: b"O" + 4-byte length + output bytes; b"X" + 4-byte signed exit code.
Relay to server: b"S" + 1-byte length + a signal's name; b"I" + 4-byte length + input bytes;
b"E" (input closed); b"W" + rows and columns as 2-byte numbers (the terminal was resized).
SPEC_JSON: {"fd": the socket's descriptor, "server": pid, "input": bool, "tty": bool}. Only the
standard library: it runs isolated (-I -S), outside the virtual environment's packages."""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import struct
import sys

INTERRUPTED = 254  # as relay.py's: the sandbox went away under the command
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR2)
NOTE = (
    b"\n[devagent] the server stopped following this command on its worker: the command was "
    b"interrupted and is not run again\n"
)


def main(spec: dict[str, object]) -> int:
    sock = socket.socket(fileno=int(spec["fd"]))  # type: ignore[call-overload]
    server = int(spec["server"])  # type: ignore[call-overload]
    tty = bool(spec.get("tty"))
    pending: list[int] = []
    watched = (*FORWARDED, signal.SIGUSR1, *((signal.SIGWINCH,) if tty else ()))
    for sig in watched:
        signal.signal(sig, lambda signum, _frame: pending.append(signum))
    # Started with these blocked (the command may start on the worker before this process is
    # ready): one sent meanwhile is taken now, by the handlers.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, (*FORWARDED, signal.SIGUSR1, signal.SIGWINCH))
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ)
    sel.register(wake_r, selectors.EVENT_READ)
    if spec.get("input") or tty:
        if tty:
            _raw(0)
            pending.append(signal.SIGWINCH)  # the size it starts with
        sel.register(0, selectors.EVENT_READ)
    buffer = b""
    while True:
        for key, _ in sel.select(0.5):
            if key.fd == wake_r:
                os.read(wake_r, 512)
            elif key.fd == 0:
                data = os.read(0, 65536)
                sock.sendall(b"I" + struct.pack(">I", len(data)) + data if data else b"E")
                if not data:
                    sel.unregister(0)
            else:
                chunk = sock.recv(65536)
                if not chunk:
                    os.write(1, NOTE)
                    return INTERRUPTED
                buffer, code = _frames(buffer + chunk)
                if code is not None:
                    return code
        while pending:
            _send_signal(sock, pending.pop(0))
        if os.getppid() != server:  # the server died: nobody follows the command any more
            return INTERRUPTED


def _frames(buffer: bytes) -> tuple[bytes, int | None]:
    """Writes the complete output frames out; what is left, and the exit code once it came."""
    while buffer:
        kind = buffer[:1]
        if kind == b"X":
            if len(buffer) < 5:
                return buffer, None
            return b"", struct.unpack(">i", buffer[1:5])[0]
        if len(buffer) < 5:
            return buffer, None
        (size,) = struct.unpack(">I", buffer[1:5])
        if len(buffer) < 5 + size:
            return buffer, None
        data, buffer = buffer[5 : 5 + size], buffer[5 + size :]
        view = memoryview(data)
        while view:
            view = view[os.write(1, view) :]
    return buffer, None


def _send_signal(sock: socket.socket, sig: int) -> None:
    if sig == signal.SIGWINCH:
        import fcntl
        import termios

        try:
            packed = fcntl.ioctl(0, termios.TIOCGWINSZ, b"\0" * 8)
        except OSError:
            return
        rows, cols = struct.unpack("HHHH", packed)[:2]
        sock.sendall(b"W" + struct.pack(">HH", rows, cols))
        return
    name = b"KILL" if sig == signal.SIGUSR1 else signal.Signals(sig).name[3:].encode()
    sock.sendall(b"S" + bytes([len(name)]) + name)


def _raw(fd: int) -> None:
    """The pseudo-terminal this relay was given passes bytes through untouched: the worker's own
    terminal echoes and translates once."""
    import fcntl
    import termios
    import tty

    try:
        fcntl.ioctl(fd, termios.TIOCSCTTY, 0)  # its controlling terminal: resizes signal it
        tty.setraw(fd)
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
