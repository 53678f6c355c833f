"""What text that someone other than the user chose (the model's answer, a tool's output, a file, a
web page, a remote agent, a server) may put on the terminal: its characters, never the terminal's
controls.

`visible` is the one rule every terminal surface applies (answers, thoughts, tool call lines,
permission prompts, questions and their choices, command output, diffs, notices, the status
line): each control character is replaced by a printed escape, so a CSI (`ESC [`), an OSC (`ESC ]`,
the clipboard's OSC 52, a window title), a C1 byte (U+0080-U+009F, such as the one-byte CSI
U+009B), a bell, a backspace or a carriage return reaches the screen as text (`\\x1b`, `\\x9b`,
`\\x07`, `\\x08`, `\\r`), and the bidirectional overrides that reorder what a line shows as
`\\u202e` and the like. Line feeds and tabs stay the layout of a multi-line text (`layout=True`); on
one line (a prompt, a call's title) they are escaped too (`\\n`, `\\t`). A CR before a LF is the
end of a line (`\\r\\n` from a command's output) and is dropped.

`markup`, `styled` and `formatted` are that rule for the three ways the terminal writes text: Rich
markup strings, Rich `Text`, and prompt_toolkit's formatted text (never HTML built from such text:
an escape character there was not well-formed XML, and the prompt could not be drawn). The last
two show each escape in reverse video, so an escaped control is told from the same letters typed.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.text import Text

# C0 controls, DEL and C1 controls; the bidirectional embeddings, overrides, isolates and marks.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
ESCAPE_STYLE = "reverse"


def _escaped(ch: str) -> str:
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def parts(text: str, *, layout: bool = True) -> list[tuple[str, bool]]:
    """`text` as runs of (characters, whether the run is an escape standing for a control)."""
    if layout:
        text = text.replace("\r\n", "\n")
    out: list[tuple[str, bool]] = []
    at = 0
    for m in _CONTROL.finditer(text):
        ch = m.group()
        if layout and ch in "\n\t":
            continue
        if m.start() > at:
            out.append((text[at : m.start()], False))
        out.append((_escaped(ch), True))
        at = m.end()
    if at < len(text):
        out.append((text[at:], False))
    return out


def visible(text: str, *, layout: bool = True) -> str:
    """`text` with each control character shown as its escape (see the module's docstring)."""
    if _CONTROL.search(text) is None:
        return text
    return "".join(run for run, _ in parts(text, layout=layout))


def markup(text: str, *, layout: bool = True) -> str:
    """`text` to put inside a Rich markup string: controls escaped, then Rich's brackets."""
    from rich.markup import escape

    return escape(visible(text, layout=layout))


def styled(text: str, style: str = "", *, layout: bool = True) -> Text:
    """`text` as a Rich Text (never markup) in `style`, each escape in reverse video."""
    from rich.text import Text

    out = Text(style=style)
    for run, escape in parts(text, layout=layout):
        out.append(run, style=ESCAPE_STYLE if escape else None)
    return out


def formatted(text: str, style: str = "", *, layout: bool = False) -> list[tuple[str, str]]:
    """`text` as prompt_toolkit formatted text (style, text) pairs, each escape in reverse video."""
    return [
        (f"{style} {ESCAPE_STYLE}".strip() if escape else style, run)
        for run, escape in parts(text, layout=layout)
    ]
