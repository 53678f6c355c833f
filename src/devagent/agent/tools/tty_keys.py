"""Keys typed into a background process's pseudo-terminal: the `input` of `background_process`
for a `tty: true` process is literal text in which a key's name in angle brackets stands for the
key (`<Enter>`, `<C-c>`, `<Up>`), as a terminal would send it.

Names are case-insensitive: `<Enter>` (carriage return, as the Enter key sends), `<Tab>`,
`<S-Tab>`, `<Esc>`, `<BS>` (Backspace), `<Del>`, `<Space>`, `<Up>`, `<Down>`, `<Left>`,
`<Right>`, `<Home>`, `<End>`, `<PageUp>`, `<PageDown>`, `<Insert>`, `<F1>` to `<F12>`, and a
control key `<C-x>` for a letter or one of `@[\\]^_?` (`<C-c>` interrupts, `<C-d>` is end of file
at the start of a line, `<C-z>` suspends). `<lt>` is a literal `<`. Anything else between angle
brackets (`<div>`) is literal text."""

from __future__ import annotations

import re

NAMED: dict[str, str] = {
    "enter": "\r",
    "cr": "\r",
    "return": "\r",
    "tab": "\t",
    "s-tab": "\x1b[Z",
    "esc": "\x1b",
    "bs": "\x7f",
    "backspace": "\x7f",
    "del": "\x1b[3~",
    "delete": "\x1b[3~",
    "space": " ",
    "lt": "<",
    "up": "\x1b[A",
    "down": "\x1b[B",
    "right": "\x1b[C",
    "left": "\x1b[D",
    "home": "\x1b[H",
    "end": "\x1b[F",
    "pageup": "\x1b[5~",
    "pagedown": "\x1b[6~",
    "insert": "\x1b[2~",
    "f1": "\x1bOP",
    "f2": "\x1bOQ",
    "f3": "\x1bOR",
    "f4": "\x1bOS",
    "f5": "\x1b[15~",
    "f6": "\x1b[17~",
    "f7": "\x1b[18~",
    "f8": "\x1b[19~",
    "f9": "\x1b[20~",
    "f10": "\x1b[21~",
    "f11": "\x1b[23~",
    "f12": "\x1b[24~",
}
_KEY = re.compile(r"<([A-Za-z][A-Za-z0-9-]*|C-[@\[\\\]^_?])>", re.IGNORECASE)


def _control(char: str) -> str | None:
    """What Ctrl with `char` sends (`a` to `z`, `@[\\]^_`; `?` is DEL), or None."""
    if char == "?":
        return "\x7f"
    code = ord(char.upper())
    return chr(code - 64) if 64 <= code <= 95 else None


def key(name: str) -> str | None:
    """What the key `name` (without its angle brackets) sends, or None when it names no key."""
    lowered = name.lower()
    if lowered in NAMED:
        return NAMED[lowered]
    if lowered.startswith("c-") and len(name) == 3:
        return _control(name[2])
    return None


def keys(text: str) -> bytes:
    """`text` with every key name replaced by what the key sends, encoded as the terminal's UTF-8."""

    def replace(match: re.Match[str]) -> str:
        sent = key(match.group(1))
        return match.group(0) if sent is None else sent

    return _KEY.sub(replace, text).encode("utf-8")
