"""FIFOs the tests control, in a folder the workers' sandboxes see: a counter of a command's
starts (its side effect, counted outside the worker) and a gate a command blocks on."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

from tests.workers.conftest import WITHIN


class FifoCounter:
    """A FIFO in a folder the workers' sandboxes see (read-only: a FIFO still opens for
    writing there): every line a command writes into it is counted here, by a reader that
    holds it open from the start (so a writer never waits)."""

    def __init__(self, path: Path) -> None:
        os.mkfifo(path, 0o666)
        os.chmod(path, 0o666)
        self.path = path
        self.lines: list[str] = []
        self._closing = False
        self._fd = os.open(path, os.O_RDWR)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = os.read(self._fd, 4096)
            except OSError:
                return
            if not chunk or self._closing:
                return
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                self.lines.append(line.decode())

    async def first_line(self) -> str:
        for _ in range(int(WITHIN / 0.05)):  # a hang guard only: the line comes when it comes
            if self.lines:
                return self.lines[0]
            await asyncio.sleep(0.05)
        raise AssertionError(f"nothing was written into {self.path}")

    def close(self) -> None:
        """Ends the reader, then closes the FIFO: closed under a reader still blocked in `read`,
        its descriptor's number could be another file's by the time the read runs."""
        self._closing = True
        os.write(self._fd, b"\n")  # wakes the reader (this descriptor writes too)
        self._thread.join(WITHIN)
        os.close(self._fd)


def release_blocked(fifo: Path) -> None:
    """Lets a command still blocked reading `fifo` go (a cleanup; a kill leaves none)."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return  # no reader left
    os.close(fd)
