"""What a command's output becomes for the model: all of it when it is short; when it is long, its
first and last lines with the middle left out and a line saying how many lines and characters
were left out (and where the whole output was saved, when it was: `saved_outputs.py`)."""

from __future__ import annotations

import codecs

HEAD_CHARS = 10_000  # the start of a long output the model gets
TAIL_CHARS = 20_000  # and its end (errors and summaries are usually there)
OUTPUT_MAX_CHARS = HEAD_CHARS + TAIL_CHARS
# How far a cut may move back (head) or on (tail) to fall between two lines.
LINE_SLACK = 2_000


class HeadTail:
    """Output as it arrives (bytes, decoded as UTF-8 with replacement): the first `head`
    characters, the last `tail`, and counts of everything, so that any amount of output costs
    at most `head + 2 * tail` characters of memory."""

    def __init__(self, head: int = HEAD_CHARS, tail: int = TAIL_CHARS) -> None:
        self.head_cap = head
        self.tail_cap = tail
        self.head = ""
        self.tail = ""
        self.chars = 0  # characters received
        self.lines = 0  # newlines received
        self.changed = False  # since the last time a reader cleared it
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes, final: bool = False) -> None:
        self.add(self._decoder.decode(data, final))

    def add(self, text: str) -> None:
        if not text:
            return
        self.chars += len(text)
        self.lines += text.count("\n")
        self.changed = True
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += text[:room]
            text = text[room:]
        self.tail += text
        if len(self.tail) > 2 * self.tail_cap:
            self.tail = self.tail[-self.tail_cap :]

    @property
    def elided(self) -> bool:
        """Whether some of the output is left out of what `render` shows."""
        return self.chars > len(self.head) + min(len(self.tail), self.tail_cap)

    def render(self, saved: str = "") -> str:
        """The output, or its head and tail around a line saying what was left out (`saved`: where
        the whole of it is, for that line)."""
        if not self.elided:
            return self.head + self.tail
        head, tail = _line_cut_head(self.head), _line_cut_tail(self.tail[-self.tail_cap :])
        omitted = self.chars - len(head) - len(tail)
        lines = self.lines - head.count("\n") - tail.count("\n")
        first = head.count("\n") + 1
        total = self.lines + (0 if tail.endswith("\n") else 1)
        where = f"; the whole output ({total} lines) is in {saved}" if saved else ""
        gap = f"[… lines {first} to {first + lines - 1} ({omitted:,} characters) left out here{where} …]\n"
        if head and not head.endswith("\n"):
            gap = "\n" + gap
        return head + gap + tail


def _line_cut_head(head: str) -> str:
    """The head up to the end of its last whole line, unless that is too far back."""
    end = head.rfind("\n")
    return head[: end + 1] if end >= len(head) - LINE_SLACK else head


def _line_cut_tail(tail: str) -> str:
    """The tail from the start of its first whole line, unless that is too far on."""
    start = tail.find("\n")
    return tail[start + 1 :] if 0 <= start < LINE_SLACK else tail


def head_and_tail(text: str, saved: str = "") -> str:
    """`text` as the model gets it: whole, or its head and tail (see `HeadTail.render`)."""
    out = HeadTail()
    out.add(text)
    return out.render(saved)
