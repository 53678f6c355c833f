"""Limits on JSON a client sends, checked before the JSON is parsed.

`json.loads` recurses once per level of nesting: a document nested deeper than the interpreter's
recursion limit raises RecursionError (and a deep one costs a frame per level before that).
`too_deep` reads the raw bytes instead, in one linear pass done by C code: strings are removed
(their brackets do not count), the structural brackets that remain become +1/-1 and the deepest
running sum is the nesting depth. Used by the A2A endpoint and by wire mode's line reader.
"""

from __future__ import annotations

import json
import os
import re
from array import array
from collections.abc import Mapping
from itertools import accumulate

DEFAULT_MAX_DEPTH = 64
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024

# A JSON string, escapes honoured; the closing quote is optional so that an unterminated string
# runs to the end (json.loads then reports it).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
# Opening brackets to 0x01, closing ones to 0xff (-1 as a signed byte); everything else deleted.
_SIGNS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def nesting_depth(data: bytes) -> int:
    """The deepest nesting of arrays and objects in `data` (0 for a scalar). Brackets inside
    strings do not count. UTF-16 and UTF-32 documents (which json.loads accepts) are read as such."""
    if data[:4].count(0):
        try:
            enc = json.detect_encoding(data)
            if enc != "utf-8":
                data = data.decode(enc).encode()
        except (UnicodeError, LookupError):
            return 0  # not JSON: the parser says so
    if data.count(b"[") + data.count(b"{") == 0:
        return 0
    if b'"' in data:
        data = _STRING.sub(b"", data)
    signs = array("b", data.translate(_SIGNS, _NOT_BRACKETS))
    return max(accumulate(signs, initial=0))  # a stray closing bracket ends the parse anyway


def too_deep(data: bytes, limit: int) -> bool:
    """Whether `data` nests arrays and objects deeper than `limit` levels."""
    if data.count(b"[") + data.count(b"{") <= limit:  # the common case: no scan needed
        return False
    return nesting_depth(data) > limit


def depth_message(limit: int) -> str:
    return f"JSON nested deeper than {limit} levels"


def positive_int_from_env(
    var: str, environ: Mapping[str, str] | None = None, *, zero: bool = False
) -> int | None:
    """A positive whole number (or 0, with `zero`) from the environment variable `var`, None
    when unset; ValueError names the variable when its value is not one."""
    env = os.environ if environ is None else environ
    raw = env.get(var, "").strip().replace("_", "")
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{var} must be a whole number, not {env.get(var)!r}") from None
    if value < 0 or (value == 0 and not zero):
        raise ValueError(f"{var} must be {'0 or more' if zero else 'positive'}")
    return value
