"""A hook's `if`: Claude Code's permission-rule syntax, tested on a tool call before the hook is
started. `Tool` matches every call of the tool (devagent's name or Claude Code's); `Tool(spec)`
narrows it by the call's input as Claude Code reads it:

- `Bash(git *)`: a command, `*` standing for anything (a trailing ` *` also lets the bare word
  match); `Bash(npm run test:*)`, the older prefix form. Each part of a compound command (split at
  `&&`, `||`, `;`, `|`, `&`, new lines), its leading `NAME=value` words left out, is tried.
- `Read(...)`, `Edit(...)`, `Write(...)` and the other file tools: a path in gitignore's style
  (`*` within a folder, `**` across folders; a pattern without `/` matches at any depth), `//x`
  absolute, `~/x` in the home folder, `/x` and `x` from the project folder.
- `WebFetch(domain:example.com)`: the URL's host.
- any other tool: the pattern against each of the call's text arguments."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

_RULE = re.compile(r"([A-Za-z0-9_.*-]+)(?:\((.*)\))?", re.DOTALL)
_FILE_TOOLS = ("Read", "Edit", "MultiEdit", "Write", "Glob", "Grep", "LS", "NotebookEdit", "NotebookRead")
_SEPARATORS = re.compile(r"&&|\|\||[;|&\n]")
_ASSIGNMENTS = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)+")


def check_rule(rule: str) -> None:
    """ValueError for an `if` that is not a permission rule (`Tool` or `Tool(pattern)`)."""
    if not _RULE.fullmatch(rule.strip()):
        raise ValueError(f'{rule!r} is not a permission rule like "Bash(git *)" or "Edit(src/**)"')


def rule_matches(rule: str, names: Sequence[str], tool_input: Mapping[str, Any], cwd: str) -> bool:
    """Whether the call of the tool named `names` (devagent's, then Claude Code's) with
    `tool_input` matches `rule`, for a hook run in `cwd`."""
    found = _RULE.fullmatch(rule.strip())
    if found is None or found.group(1) not in names:
        return False
    spec = found.group(2)
    if spec is None or spec.strip() in ("", "*"):
        return True
    if "Bash" in names:
        return _command_matches(spec, str(tool_input.get("command", "")))
    if any(n in _FILE_TOOLS for n in names):
        path = tool_input.get("file_path") or tool_input.get("path") or cwd
        return isinstance(path, str) and _path_matches(spec, path, cwd)
    if "WebFetch" in names and spec.startswith("domain:"):
        host = urlsplit(str(tool_input.get("url", ""))).hostname or ""
        return host == spec[len("domain:") :].strip().lower()
    pattern = _wildcards(spec)
    return any(isinstance(v, str) and pattern.fullmatch(v) for v in tool_input.values())


def _wildcards(spec: str) -> re.Pattern[str]:
    """A command pattern: `*` is anything; a trailing ` *` may also be nothing."""
    if spec.endswith(":*"):  # the older prefix form
        return re.compile(re.escape(spec[:-2]) + r"(?:\s.*)?", re.DOTALL)
    bare = spec.endswith(" *")
    body = spec[:-2] if bare else spec
    text = ".*".join(re.escape(piece) for piece in body.split("*"))
    return re.compile(text + (r"(?:\s.*)?" if bare else ""), re.DOTALL)


def _command_matches(spec: str, command: str) -> bool:
    pattern = _wildcards(spec.strip())
    parts = [command.strip(), *(p.strip() for p in _SEPARATORS.split(command))]
    for part in parts:
        bare = _ASSIGNMENTS.sub("", part, count=1) if _ASSIGNMENTS.match(part) else part
        if part and (pattern.fullmatch(part) or pattern.fullmatch(bare)):
            return True
    return False


def _path_matches(spec: str, path: str, cwd: str) -> bool:
    spec = spec.strip()
    if spec.startswith("//"):
        base, pattern = "/", spec[2:]
    elif spec.startswith("~/"):
        base, pattern = os.path.expanduser("~"), spec[2:]
    else:
        base, pattern = cwd, spec.removeprefix("./").removeprefix("/")
    anywhere = "/" not in pattern.rstrip("/")
    full = os.path.normpath(path if os.path.isabs(path) else os.path.join(cwd, path))
    rel = os.path.relpath(full, base) if full.startswith(base.rstrip("/") + "/") or full == base else None
    if rel is None:
        return False
    regex = _glob(pattern.rstrip("/"))
    lead = r"(?:.*/)?" if anywhere else ""
    return re.fullmatch(lead + regex + r"(?:/.*)?", rel, re.DOTALL) is not None


def _glob(pattern: str) -> str:
    """gitignore's wildcards as a regular expression: `**` across folders, `*` and `?` within one."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append(r"(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return "".join(out)
