"""A program in a pseudo-terminal read as a terminal shows it: every byte it writes goes to a pyte
screen (a VT emulator), which also answers the program's cursor-position requests as a terminal
does; the raw bytes are kept too, to check what never reached the terminal. Waits are for what
the screen shows (a bound only stops a hang), never for time."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pexpect
import pyte

HANG = 90.0  # seconds: only bounds a hang (2 shared cores, cold imports)
ROWS, COLUMNS = 50, 250


class _Screen(pyte.Screen):
    """A screen that sends its replies (cursor position, status) back to the program."""

    def __init__(self, columns: int, lines: int, reply: Callable[[str], None]) -> None:
        super().__init__(columns, lines)
        self._reply = reply

    def write_process_input(self, data: str) -> None:
        self._reply(data)


class PtyScreen:
    """`argv` in a pty of ROWS x COLUMNS, its output on a pyte screen (history kept as it scrolls)."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        e = {**os.environ, "TERM": "xterm", "COLUMNS": str(COLUMNS), "LINES": str(ROWS), **env}
        for k in ("DEVAGENT_MODEL", "DEVAGENT_DB", "DEVAGENT_APPROVAL", "DEVAGENT_TOKEN"):
            if k not in env:
                e.pop(k, None)
        self.p = pexpect.spawn(argv[0], argv[1:], env=e, cwd=str(cwd), dimensions=(ROWS, COLUMNS))
        self.screen = _Screen(COLUMNS, ROWS, lambda data: self.p.send(data.encode()))
        self.stream = pyte.ByteStream(self.screen)
        self.raw = b""  # every byte the program wrote
        self.scrolled: list[str] = []  # lines that left the top of the screen, oldest first
        self.screen.index = self._index  # type: ignore[method-assign]

    def _index(self) -> None:
        """A line feed at the bottom scrolls the top line away: kept in `scrolled`."""
        if self.screen.cursor.y == self.screen.lines - 1:
            self.scrolled.append(self.screen.display[0].rstrip())
        pyte.Screen.index(self.screen)

    def lines(self) -> list[str]:
        """What the terminal showed: the lines scrolled away, then the screen's."""
        return [*self.scrolled, *(line.rstrip() for line in self.screen.display)]

    def text(self) -> str:
        return "\n".join(self.lines())

    def _read(self) -> bool:
        """Feeds what the program wrote to the screen; False once it has ended."""
        try:
            data = self.p.read_nonblocking(65536, timeout=0.2)
        except pexpect.TIMEOUT:
            return True
        except pexpect.EOF:
            return False
        self.raw += data
        self.stream.feed(data)
        return True

    def wait_for(self, what: str | Callable[[str], bool]) -> str:
        """Reads until the terminal shows `what` (a text on it, or a test of its text); the text."""
        test = what if callable(what) else (lambda text: what in text)
        deadline = time.monotonic() + HANG
        while not test(self.text()):
            if not self._read() or time.monotonic() > deadline:
                raise AssertionError(f"the terminal never showed {what!r}; it shows:\n{self.text()}")
        return self.text()

    def wait_for_line(self, start: str) -> str:
        """Reads until a line of the terminal starts with `start` (spaces before it ignored); that line."""

        def found(text: str) -> bool:
            return any(line.lstrip().startswith(start) for line in text.splitlines())

        self.wait_for(found)
        return next(line.strip() for line in self.lines() if line.lstrip().startswith(start))

    def send(self, keys: str) -> None:
        self.p.send(keys.encode())

    def exit_status(self) -> int:
        """Reads to the end; the program's exit status (-1 when a signal ended it)."""
        deadline = time.monotonic() + HANG
        while self._read():
            if time.monotonic() > deadline:
                raise AssertionError(f"the program did not end; the terminal shows:\n{self.text()}")
        self.p.close()
        return int(self.p.exitstatus if self.p.exitstatus is not None else -1)

    def close(self) -> None:
        if self.p.isalive():
            self.p.terminate(force=True)


def devagent(*args: str) -> list[str]:
    return [sys.executable, "-m", "devagent", *args]
