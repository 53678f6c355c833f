"""What the session last saw of each file, so that an edit is made only on content the model
knows: a file it never read, or one that changed since it read or wrote it (a command, the user,
another program), is refused with a message telling the model to read it first. A patch whose
chunks are all found by the file's own lines shows the model read it, however it did
(`seen_in_patch`).

The session keeps, per real path, a short hash of the text it last read whole or wrote
(`SessionState.file_marks`), stored with the rest of its state, so a restarted process knows what
was read before. A file that does not exist yet needs no read (creating it is always allowed), nor
does a binary one, which read_file cannot show as text.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from devagent.agent.events import ToolErrorType
from devagent.agent.tools._util import BINARY_SNIFF_BYTES
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.workspace import Workspace

if TYPE_CHECKING:
    from devagent.agent.state import SessionState

# How many files a session remembers (the oldest mark goes first); each costs about a hundred
# bytes of the stored state.
MAX_MARKS = 256


class TextHash:
    """The mark of a text, fed piece by piece (a file read line by line)."""

    def __init__(self) -> None:
        self._h = hashlib.sha256()

    def update(self, piece: str) -> None:
        self._h.update(piece.encode("utf-8", errors="surrogatepass"))

    def mark(self) -> str:
        return self._h.hexdigest()[:16]


def mark_of(text: str) -> str:
    h = TextHash()
    h.update(text)
    return h.mark()


def remember(state: SessionState, real: Path, mark: str) -> None:
    """The session has seen the file at `real` with this content (read whole, or written)."""
    key = str(real)
    marks = state.file_marks
    marks.pop(key, None)  # a use moves it to the end
    marks[key] = mark
    while len(marks) > MAX_MARKS:
        del marks[next(iter(marks))]


def seen_in_patch(state: SessionState, real: Path, current: str) -> None:
    """A patch found every one of its chunks by lines of the file at `real` (now `current`): the
    model knows the file as it is, however it read it (`sed -n`, `cat`, `rg` in the shell), and
    this counts as its view when the session has none. A view it has is kept: a file that changed
    since is still refused."""
    if str(real) not in state.file_marks:
        remember(state, real, mark_of(current))


def forget(state: SessionState, real: Path) -> None:
    """What the session saw of this file is no longer what the model knows (the user changed
    the content that was written)."""
    state.file_marks.pop(str(real), None)


def check_before_write(state: SessionState, workspace: Workspace, real: Path, current: str | None) -> None:
    """A ToolFailure when the model may not replace the file at `real`, whose text is now
    `current` (None: it does not exist, and creating it needs no read): the session never read
    it, or it changed since the session last read or wrote it."""
    if current is None or "\x00" in current[:BINARY_SNIFF_BYTES]:
        return  # a new file, or a binary one, which read_file cannot show as text
    shown = workspace.display(real)
    seen = state.file_marks.get(str(real))
    if seen is None:
        raise ToolFailure(
            f"{shown} has not been read in this session, so it was not changed: read it first "
            "(read_file), then make the change on what it holds now.",
            ToolErrorType.FILE_NOT_READ,
        )
    if seen != mark_of(current):
        raise ToolFailure(
            f"{shown} changed since this session last read or wrote it (a command, the user or "
            "another program changed it), so it was not changed: read it again (read_file), then "
            "make the change on what it holds now.",
            ToolErrorType.FILE_CHANGED,
        )
