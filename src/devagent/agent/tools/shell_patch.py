"""A shell command that is an `apply_patch` invocation, as models trained in Codex write one, taken
for the `apply_patch` call it means.

Those models change files by running `apply_patch` (or `applypatch`) in their shell with the
patch as a heredoc or as one quoted argument, sometimes after `cd DIR &&`. No such program exists
here: run as a command it fails with "command not found", and the user is asked about a shell
command where a patch was meant. A `run_shell_command` call whose command is exactly that (nothing
else on the line) is therefore handled as an `apply_patch` call with the patch as its input: asked,
refused by policy, shown and run as a patch. The patch's paths are taken relative to the directory
the command would have run in (the call's `directory`, then `cd DIR`).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Collection
from typing import Any

SHELL = "run_shell_command"
PATCH = "apply_patch"

_PROGRAMS = ("apply_patch", "applypatch")
_CD = re.compile(r"\A\s*cd\s+(?P<dir>'[^']*'|\"[^\"]*\"|[^\s;&|<>'\"]+)\s*&&\s*")
_PROGRAM = re.compile(r"\A(?:apply_patch|applypatch)(?=\s|<<|$)")
_HEREDOC = re.compile(
    r"\A\s*<<(?P<dash>-?)\s*(?P<q>['\"]?)(?P<word>[A-Za-z_][A-Za-z0-9_]*)(?P=q)[ \t]*\n"
    r"(?P<body>.*?)\n[ \t]*(?P=word)[ \t]*\n?\s*\Z",
    re.DOTALL,
)
_HEADERS = ("*** Add File:", "*** Delete File:", "*** Update File:", "*** Move to:")
_BEGIN = "*** Begin Patch"


def routed(name: str, args: dict[str, Any], tools: Collection[str]) -> tuple[str, dict[str, Any]]:
    """The tool and arguments a call means: a shell command that is an apply_patch invocation is
    the `apply_patch` call it stands for (when the session offers that tool); any other call is
    itself."""
    if name != SHELL or PATCH not in tools or args.get("background"):
        return name, args
    command, directory = args.get("command"), args.get("directory")
    if not isinstance(command, str) or not (directory is None or isinstance(directory, str)):
        return name, args
    patch = patch_of(command, directory or "")
    return (PATCH, {"input": patch}) if patch is not None else (name, args)


def patch_of(command: str, directory: str = "") -> str | None:
    """The patch an `apply_patch <<'EOF' ... EOF` (or `apply_patch '*** Begin Patch ...'`)
    command gives, optionally after `cd DIR &&`, its paths joined to the directory it runs in;
    None for any other command."""
    rest = command.strip()
    base = directory
    cd = _CD.match(rest)
    if cd:
        folder = cd.group("dir")
        base = posixpath.join(base, folder[1:-1] if folder[0] in "'\"" else folder)
        rest = rest[cd.end() :]
    program = _PROGRAM.match(rest)
    if program is None:
        return None
    body = _argument(rest[program.end() :])
    if body is None or not body.strip().startswith(_BEGIN):
        return None
    return _rebased(body, base) if base not in ("", ".", "./") else body


def _argument(rest: str) -> str | None:
    """The patch after the program's name: a heredoc's body or the one quoted argument."""
    heredoc = _HEREDOC.match(rest)
    if heredoc:
        body = heredoc.group("body")
        if heredoc.group("dash"):  # <<- takes the leading tabs off every line
            body = "\n".join(line.lstrip("\t") for line in body.split("\n"))
        return body
    try:
        words = shlex.split(rest)
    except ValueError:
        return None
    return words[0] if len(words) == 1 else None


def _rebased(patch: str, base: str) -> str:
    """The patch with each file header's path taken relative to `base` (absolute paths kept)."""
    out = []
    for line in patch.split("\n"):
        stripped = line.strip()
        marker = next((m for m in _HEADERS if stripped.startswith(m)), None)
        if marker is not None:
            path = stripped[len(marker) :].strip()
            if path and not path.startswith("/"):
                line = f"{marker} {posixpath.normpath(posixpath.join(base, path))}"
        out.append(line)
    return "\n".join(out)
