"""What a background process started with `tty: true` shows: its output goes through a terminal
emulator (pyte, imported when the first such process starts) into a screen of the process's
size, and a read returns that screen's text, with the lines that scrolled off its top since the
last read; never the raw bytes. The text returned holds no control characters (the program's
output is untrusted). The screen answers the program's questions as a terminal does (where is
the cursor, what terminal is this), through `reply`."""

from __future__ import annotations

import asyncio
import re
import struct
import unicodedata
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from devagent.agent.sandbox.base import PTY_TERM
from devagent.agent.tools.output import head_and_tail

if TYPE_CHECKING:
    import pyte

    from devagent.agent.sandbox.base import Winsize

DRAW_SLICE = 4096  # characters drawn between two turns of the event loop
SCROLLBACK_LINES = 2000  # lines that scrolled off the screen kept between two reads
TERM = PTY_TERM  # what the process is told its terminal is (pyte follows xterm's sequences)


ROWS = (24, 2, 200)  # a terminal's lines: by default, at least, at most
COLS = (80, 20, 400)  # its columns


@dataclass(frozen=True, slots=True)
class TtySize:
    """A pseudo-terminal's size in character cells."""

    rows: int = ROWS[0]
    cols: int = COLS[0]

    def winsize(self) -> bytes:
        """The size as TIOCSWINSZ takes it."""
        return struct.pack("HHHH", self.rows, self.cols, 0, 0)


_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: cursor, colours, modes
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: titles, links
    r"|\x1b[P^_X][^\x1b]*(?:\x1b\\)?"  # DCS, PM, APC, SOS strings
    r"|\x1b[ -/]*[0-~]"  # the other escapes (charsets, keypad modes)
)


def printable(text: str, keep: str = "\n") -> str:
    """`text` without control characters (those in `keep` stay) and without unpaired surrogates."""
    return "".join(c for c in text if c in keep or unicodedata.category(c) not in ("Cc", "Cs"))


def printed(raw: str) -> str:
    """What raw terminal output prints, roughly: its escape sequences and control characters
    taken out, line ends kept (what `wait_for` is looked for in)."""
    return printable(_SEQUENCE.sub("", raw))


def _text(line: dict[int, Any], columns: int) -> str:
    """The text of a line of the screen's buffer: its cells by column, those never written blank
    (a wide character's second cell holds "")."""
    cells = [" "] * columns
    for x, char in line.items():
        if 0 <= x < columns:
            cells[x] = char.data
    return "".join(cells).rstrip()


def _new_screen(
    size: Winsize, scrolled: Callable[[dict[int, Any]], None], reply: Callable[[str], None]
) -> pyte.Screen:
    import pyte

    class Screen(pyte.Screen):
        def index(self) -> None:
            top, bottom = self.margins or pyte.screens.Margins(0, self.lines - 1)
            if top == 0 and bottom == self.lines - 1 and self.cursor.y == bottom:
                scrolled(self.buffer[0])  # the whole screen scrolls: its top line leaves it as it is
            super().index()

        def write_process_input(self, data: str) -> None:
            reply(data)

    return Screen(size.cols, size.rows)


class TtyScreen:
    """The screen of one pty process, fed with its output as it arrives."""

    def __init__(self, size: Winsize, reply: Callable[[str], None]) -> None:
        import pyte

        self.size = size
        self.scrolled: deque[dict[int, Any]] = deque(maxlen=SCROLLBACK_LINES)  # as they left
        self.scrolled_count = 0  # lines scrolled off since the last read (kept or not)
        self._screen = _new_screen(size, self._scroll, reply)
        self._stream = pyte.Stream(self._screen)

    def _scroll(self, line: dict[int, Any]) -> None:
        self.scrolled.append(line)
        self.scrolled_count += 1

    async def draw(self, text: str) -> None:
        """Draws `text` on the screen a slice at a time, letting the event loop run between two
        (the emulator is pure Python: a few hundred thousand characters a second). Output that
        arrives faster waits in the pty: the program writes only as fast as its terminal draws."""
        for start in range(0, len(text), DRAW_SLICE):
            self._stream.feed(text[start : start + DRAW_SLICE])
            await asyncio.sleep(0)

    def lines(self) -> list[str]:
        """The screen's lines, trailing blank ones left out."""
        rows = [_text(self._screen.buffer[y], self._screen.columns) for y in range(self._screen.lines)]
        while rows and not rows[-1]:
            rows.pop()
        return rows

    def read(self) -> str:
        """The lines that scrolled off since the last read (head and tail when many), then the
        screen, without control characters; the scrolled lines count as read."""
        parts: list[str] = []
        if self.scrolled_count:
            lost = self.scrolled_count - len(self.scrolled)
            parts.append(f"--- {self.scrolled_count:,} lines scrolled off the screen since the last read ---")
            if lost:
                parts.append(f"[the first {lost:,} of them are not kept: only the last {SCROLLBACK_LINES:,}]")
            left = (printable(_text(line, self.size.cols), "") for line in self.scrolled)
            parts.append(head_and_tail("\n".join(left)))
            self.scrolled.clear()
            self.scrolled_count = 0
        cursor = self._screen.cursor
        parts.append(
            f"--- the screen ({self.size.rows}x{self.size.cols}), cursor at line {cursor.y + 1}, "
            f"column {cursor.x + 1} ---"
        )
        shown = [printable(line, "") for line in self.lines()]
        parts.append("\n".join(shown) if shown else "(blank)")
        return "\n".join(parts)
