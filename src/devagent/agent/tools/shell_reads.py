"""Files a shell command showed the model: models trained in Codex read with `sed -n '1,200p'
FILE`, `cat`, `head`, `nl` or `rg PATTERN FILE` in the shell rather than with `read_file`. After
such a command ran (and succeeded), the files it named count as seen as they are now
(`freshness`), so a change the model then makes to them is not refused as "not read", while a
change made behind its back after that still is.

Only a command that does nothing but show files counts: every part of it (parts joined by `|`,
`&&`, `||` or `;`, a `cd DIR` among them) a program of `_VALUED` that only reads, `sed` only with
`-n` and a script of line numbers and `p`, no redirection and no substitution. Anything else names
no file: a missed read costs the model a `read_file`, a wrong one would let it change a file it
has not seen.
"""

from __future__ import annotations

import posixpath
import re
import shlex
import stat
from pathlib import Path

from devagent.agent.tools import freshness
from devagent.agent.tools._util import file_status, read_text
from devagent.agent.tools.base import ToolContext
from devagent.agent.tools.failure import ToolFailure

# The programs that only show files, with their options that take a value (the next word).
_VALUED: dict[str, frozenset[str]] = {
    "cat": frozenset(),
    "nl": frozenset({"-b", "-d", "-f", "-h", "-i", "-l", "-n", "-s", "-v", "-w"}),
    "head": frozenset({"-n", "-c", "--lines", "--bytes"}),
    "tail": frozenset({"-n", "-c", "--lines", "--bytes"}),
    "sed": frozenset({"-e", "--expression", "-l", "--line-length"}),
    "grep": frozenset(
        {"-e", "-f", "-A", "-B", "-C", "-m", "-d", "-D", "--regexp", "--file", "--context"}
        | {"--after-context", "--before-context", "--max-count", "--include", "--exclude", "--label"}
    ),
    "rg": frozenset(
        {"-e", "-f", "-g", "-t", "-T", "-A", "-B", "-C", "-m", "-M", "-j", "-E", "--regexp", "--file"}
        | {"--glob", "--iglob", "--type", "--type-not", "--max-count", "--context", "--after-context"}
        | {"--before-context", "--max-columns", "--threads", "--sort", "--sortr", "--encoding"}
    ),
}
_JOINS = frozenset({"|", "&&", "||", ";"})
_SED_QUIET = frozenset({"-n", "--quiet", "--silent"})
_SED_PRINT = re.compile(r"[0-9,$;p\s]+")  # `1,200p`, `5p;9p`, `$p`
_MAX_BYTES = 8 << 20  # a bigger file is not hashed after a command


def files_shown(command: str) -> list[str]:
    """The files (as the command names them, after any `cd DIR` before them) a command that does
    nothing but show files showed; [] for any other command."""
    if "`" in command or "$(" in command or "\n" in command.strip():
        return []
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        return []
    parts: list[list[str]] = [[]]
    for token in tokens:
        if token in _JOINS:
            parts.append([])
        elif token and all(c in "();<>|&" for c in token):
            return []  # a redirection, a subshell, a background job
        else:
            parts[-1].append(token)
    base, shown = "", []
    for words in filter(None, parts):
        if words[0] == "cd" and len(words) == 2:
            base = posixpath.join(base, words[1])
            continue
        named = _named(words)
        if named is None:
            return []
        shown += [posixpath.join(base, name) for name in named]
    return shown


def _named(words: list[str]) -> list[str] | None:
    """The files one simple command shows; None when it is not one that only shows files."""
    program = posixpath.basename(words[0])
    valued = _VALUED.get(program)
    if valued is None:
        return None
    positional, given = [], set()
    skip, ended = False, False
    for word in words[1:]:
        if skip:
            skip = False
            continue
        if not ended and word == "--":
            ended = True
        elif not ended and word.startswith("-") and word != "-":
            given.add(word.split("=", 1)[0])
            skip = word in valued
        else:
            positional.append(word)
    if program == "sed":
        if not given & _SED_QUIET or given - _SED_QUIET or not positional:
            return None  # -i and -e and friends: not a plain read
        script, *files = positional
        return files if _SED_PRINT.fullmatch(script) else None
    if program in ("grep", "rg") and not given & {"-e", "-f", "--regexp", "--file"}:
        positional = positional[1:]  # the pattern
    return [p for p in positional if p != "-"]


def note_shown(ctx: ToolContext, command: str, cwd: str) -> None:
    """After `command` ran in `cwd` and succeeded: each regular file inside the workspace that it
    only showed is seen as it is now. Not where the workspace is in the sandbox rather than here
    (the model reads such a file with read_file before it changes it)."""
    if not ctx.sandbox.files_here:
        return
    for name in files_shown(command):
        try:
            real = ctx.workspace.resolve(str(Path(cwd, name)), must_exist=True)
            status = file_status(real, ctx.workspace)
            if status is None or not stat.S_ISREG(status.st_mode) or status.st_size > _MAX_BYTES:
                continue
            freshness.remember(ctx.state, real, freshness.mark_of(read_text(real, ctx.workspace)))
        except (ToolFailure, OSError):
            continue
