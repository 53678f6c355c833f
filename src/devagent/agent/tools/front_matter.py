"""Markdown files with YAML front matter (subagent types, custom slash commands, skills): the
front matter split from the body, and a small file read through the workspace's confined walk
when it is a workspace's. The front matter is data: it is parsed with `yaml.safe_load`, never run.

Files written for Claude Code are often not strict YAML (an unquoted `: ` in a description, a
description running over lines of examples). Given the keys its kind of file has, `split` reads
such front matter leniently, as `key: value` lines: a line that starts with one of those keys
starts a value, any other line continues the value before it. A key named on a line that could
not be read as one is `UNREADABLE`, which callers take as the narrowest meaning (no tools), never
as the key being absent."""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path
from typing import Any

from devagent.agent.tools.workspace import Workspace


class Unreadable:
    """The value of a key the lenient reading found named but could not read."""

    def __repr__(self) -> str:
        return "UNREADABLE"


UNREADABLE = Unreadable()
_KEY_LINE = re.compile(r"^([A-Za-z][A-Za-z0-9_-]*)[ \t]*:(?:[ \t]+(.*)|[ \t]*)$")
_ITEM = re.compile(r"^-[ \t]+(.*)$")


def split(text: str, *, required: bool, keys: Collection[str] = ()) -> tuple[dict[str, Any], str]:
    """The front matter (a mapping) and the body. Without a first line `---` the whole text is
    the body (or, when `required`, an error). Front matter that is not strict YAML is read
    leniently when `keys` (the kind's keys) are given. ValueError says what is wrong."""
    import yaml  # late: only read when such a file exists

    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        if required:
            raise ValueError("the file starts with a line `---` and YAML front matter")
        return {}, text.lstrip("\ufeff")
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        raise ValueError("the front matter has no closing `---` line")
    try:
        meta = yaml.safe_load("".join(lines[1:end])) or {}
    except yaml.YAMLError as e:
        if not keys:
            raise ValueError(f"the front matter is not valid YAML: {e}") from None
        meta = lenient(lines[1:end], keys)
    except RecursionError:  # a repository's file nested deep enough to exhaust the stack
        raise ValueError("the front matter is nested too deeply") from None
    if not isinstance(meta, dict):
        raise ValueError("the front matter must be a mapping (key: value lines)")
    return meta, "".join(lines[end + 1 :])


def lenient(lines: list[str], keys: Collection[str]) -> dict[str, Any]:
    """`key: value` lines, for front matter that is not strict YAML: a line at the margin that
    starts with one of `keys` starts a value; other lines continue it. A value is a string (its
    lines joined, quotes around it taken off) or, when it is only `- item` lines, a list. A key of
    `keys` named anywhere but never read as one is UNREADABLE; lines before the first key are
    left out (keys of no interest)."""
    parts: dict[str, list[str]] = {}
    current: list[str] | None = None
    for raw in lines:
        line = raw.rstrip("\r\n")
        m = _KEY_LINE.match(line)
        if m is not None and m.group(1) in keys:
            current = parts[m.group(1)] = [m.group(2) or ""]
        elif current is not None:
            current.append(line.strip())
    meta: dict[str, Any] = {k: _value(v) for k, v in parts.items()}
    text = "".join(lines)
    for key in keys:
        if key not in meta and re.search(rf"(?m)^\s*[\"']?{re.escape(key)}[\"']?\s*:", text):
            meta[key] = UNREADABLE
    return meta


def _value(parts: list[str]) -> str | list[str]:
    first, rest = parts[0].strip(), [p for p in parts[1:] if p]
    if not first and rest and all(_ITEM.match(p) for p in rest):
        return [_unquote(_ITEM.sub(r"\1", p)) for p in rest]
    if first in ("|", ">", "|-", ">-", "|+", ">+"):
        first = ""
    return _unquote("\n".join([first, *rest]).strip())


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def read_small(path: Path, workspace: Workspace | None, max_bytes: int) -> str:
    """A UTF-8 file of at most `max_bytes`; a workspace's through its confined walk."""
    # late: the file helpers (tools/_util) are only needed when such a folder exists
    from devagent.agent.tools._util import read_bytes

    data = read_bytes(path, workspace)
    if len(data) > max_bytes:
        raise ValueError(f"larger than {max_bytes} bytes")
    return data.decode("utf-8")
