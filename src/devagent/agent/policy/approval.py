"""Approval policy: whether a tool call runs, asks, or is refused.

The decision depends on the session's approval mode (chosen within server policy when the session
was created), the tool's kind, and the "allow always" grants the user gave in this session. A
client never decides: it can only answer a permission request with one of the offered options.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from devagent.agent.events import (
    ANSWER_OPTION,
    PermissionOption,
    QuestionDetails,
    ToolKind,
    choice_option,
)
from devagent.agent.naming.mcp import server_of
from devagent.agent.state import SessionState

if TYPE_CHECKING:
    from devagent.agent.sandbox.base import Sandbox

# The tool whose calls run shell commands: grants and refusals name those by what they run.
SHELL_TOOL = "run_shell_command"

Verdict = Literal["run", "ask", "deny", "client"]


@dataclass(slots=True)
class ApprovalDecision:
    verdict: Verdict
    reason: str = ""
    # Runs unasked because a prefix grant covers it ("git status"), not because of the mode or
    # an exact grant: it must start only what was shown (gitguard).
    granted: bool = False


def _command(kind: ToolKind, name: str) -> bool:
    """Whether a call runs a shell command, which grants and refusals name by what it runs (other
    calls that execute, such as writing to a background process's input, by their tool)."""
    return kind is ToolKind.EXECUTE and name == SHELL_TOOL


def shell_root(command: str) -> str:
    """The command's first word, which "allow always" for shell is remembered by."""
    for token in command.strip().split():
        if "=" in token and not token.startswith(("'", '"')):
            continue  # leading VAR=value assignments
        return token
    return ""


# Text that makes the shell run something other than the words it shows.
_SUBSTITUTIONS = ("$(", "`", "<(", ">(")
_SEPARATORS = frozenset((";", ";;", "&&", "||", "|"))
_PUNCTUATION = frozenset("();<>|&")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def simple_commands(command: str) -> list[list[str]] | None:
    """The words of each simple command of a list or pipeline (`a && b | c; d`), or None when the
    command is not only that: a substitution (`$(...)`, backticks, `<(...)`), a redirection, a
    subshell, a background job, or a leading `VAR=value` (`PATH=...`, `LD_PRELOAD=...`)."""
    if not command.strip() or any(s in command for s in _SUBSTITUTIONS):
        return None
    lex = shlex.shlex(command.replace("\r", "\n").replace("\n", ";"), posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    lex.commenters = ""  # `a#b; rm x`: the shell sees no comment there
    try:
        tokens = list(lex)
    except ValueError:  # unbalanced quotes
        return None
    out: list[list[str]] = []
    current: list[str] | None = None
    for tok in tokens:
        if tok in _SEPARATORS:
            if current is None:
                return None
            current = None
        elif tok and set(tok) <= _PUNCTUATION:
            return None
        elif current is None:
            if _ASSIGNMENT.match(tok):
                return None
            current = [tok]
            out.append(current)
        else:
            current.append(tok)
    return out or None


def command_roots(command: str) -> list[str] | None:
    """The first word of each simple command (`simple_commands`), or None."""
    commands = simple_commands(command)
    return None if commands is None else [words[0] for words in commands]


# --- what "allow always" grants for a shell command -----------------------------------------------
#
# A grant names what was shown, never a whole program: a program name alone would also allow
# `git -c core.fsmonitor=EVIL status`, `find . -exec sh -c ... \;` or an alias. It is either the
# exact command (stored with EXACT in front), or, where every simple command of it is a program
# that cannot start another one with the arguments given, those programs' prefixes ("ls",
# "git status"): later commands made only of granted prefixes run unasked, each argument checked
# again, and every path among them inside the workspace roots (`paths_inside`). Programs that run
# code (shells, interpreters, xargs, env, build tools, package scripts) are never prefixes:
# allowing `npm test` allows exactly `npm test`. What runs under a prefix grant runs with git's
# program-naming configuration turned off (`gitguard`).

EXACT = "= "  # a stored exact grant: EXACT + the command as it was shown

# Read-only programs that start no other program, whatever their arguments, except the ones
# listed for them (options that run a program, write a file, or change the system).
_PREFIX_PROGRAMS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(
        "cd ls cat head tail wc pwd echo printf grep egrep fgrep diff cmp stat du df which cut tr "
        "basename dirname realpath readlink nl od sha256sum sha1sum md5sum true false whoami id "
        "uname column comm paste rev".split(),
        (),
    ),
    # Options that follow symlinks while walking a directory, or read the names of the files to
    # open from a file, would reach paths no argument names.
    **dict.fromkeys(("grep", "egrep", "fgrep"), ("-R", "--dereference-recursive")),
    **dict.fromkeys(("ls", "du"), ("-L", "--dereference", "--files0-from")),
    **dict.fromkeys(("wc",), ("--files0-from",)),
    **dict.fromkeys(("sha256sum", "sha1sum", "md5sum"), ("-c", "--check")),
    "rg": ("--pre", "--pre-glob", "--hostname-bin", "-L", "--follow"),
    "sort": ("--compress-program", "-o", "--output", "--files0-from"),
    "tree": ("-o", "-l", "--fromfile"),
    "file": ("-C", "--compile", "-f", "--files-from"),
    "find": (
        "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls",
        "-L", "-follow", "-files0-from",
    ),
}  # fmt: skip
# Programs whose options are single words (`-name`), not clusters of letters (`-la`).
_WORD_OPTIONS = frozenset(("find",))
# git: `git SUBCOMMAND` for read-only subcommands, nothing before the subcommand (`-c`, `-C`,
# `--exec-path`, `--git-dir`...), and none of the options that run a program or write a file.
_GIT_READ = frozenset(
    ("status", "diff", "log", "show", "ls-files", "rev-parse", "blame", "branch", "shortlog")
)
_GIT_REFUSED = (
    "--ext-diff", "--textconv", "-O", "--open-files-in-pager", "--output", "--exec", "--upload-pack",
    "-c", "--config", "-D", "-d", "--delete", "-m", "-M", "--move", "--copy", "-C", "--set-upstream-to",
    "-u", "--unset-upstream", "--edit-description", "-f", "--force",
    "--ignore-submodules", "--recurse-submodules", "--submodule",
)  # fmt: skip


def _refused_option(word: str, refused: tuple[str, ...], clusters: bool = True) -> bool:
    """Whether `word` is one of `refused` (`--pre=cat` and `-Ofoo` included; with `clusters`, a
    refused letter anywhere in a cluster of short options too: `-rR`)."""
    short = word.startswith("-") and not word.startswith("--")
    for r in refused:
        if word == r or (r.startswith("--") and word.startswith(r + "=")):
            return True
        if len(r) == 2 and r.startswith("-") and short:
            if word.startswith(r) or (clusters and r[1] in word[1:]):
                return True  # a short option with its value attached, or within a cluster
    return False


def shell_prefix(words: list[str]) -> str | None:
    """The prefix an "allow always" of this simple command grants ("ls", "git status"), or None
    when only the exact command may be granted: a program not known to start no other program,
    or one of its options that would."""
    program, args = words[0], words[1:]
    if program == "git":
        if not args or args[0] not in _GIT_READ:
            return None  # a global option first, or a subcommand that writes (or an alias)
        if any(_refused_option(a, _GIT_REFUSED) for a in args[1:]):
            return None
        return f"git {args[0]}"
    refused = _PREFIX_PROGRAMS.get(program)
    clusters = program not in _WORD_OPTIONS
    if refused is None or any(_refused_option(a, refused, clusters) for a in args):
        return None
    return program


def _expands(command: str) -> bool:
    """Whether the shell would expand anything in `command` outside single quotes (variables,
    globs, braces, `~`, escapes): such words could become other arguments (`-exec` from a glob
    or a brace expansion), so a prefix grant never covers them."""
    quote = ""
    for ch in command:
        if quote == "'":
            quote = "" if ch == "'" else quote
        elif quote == '"':
            if ch == '"':
                quote = ""
            elif ch in "$`\\":
                return True
        elif ch in "'\"":
            quote = ch
        elif ch in "$`\\*?[]{}~":
            return True
    return False


def _prefixes(command: str) -> list[str] | None:
    """The prefixes "allow always" grants for `command` (one per simple command), or None when it
    grants only the exact command."""
    commands = simple_commands(command)
    if commands is None or _expands(command):
        return None
    prefixes = [shell_prefix(words) for words in commands]
    if any(p is None for p in prefixes):
        return None
    return list(dict.fromkeys(p for p in prefixes if p is not None))


def _shell_grant(args: dict[str, Any], state: SessionState) -> Literal["", "exact", "prefix"]:
    """Which grant covers the shell call: its exact command, or its prefixes with every path
    argument inside the workspace roots; "" for none."""
    command = str(args.get("command", ""))
    grants = state.grants_shell
    if EXACT + command.strip() in grants:
        return "exact"
    prefixes = _prefixes(command)
    if prefixes is None or not all(p in grants for p in prefixes):
        return ""
    commands = simple_commands(command) or []
    inside = paths_inside(commands, state.workspace_roots, str(args.get("directory") or "."))
    return "prefix" if inside else ""


# --- the paths a prefix grant may name ------------------------------------------
#
# A prefix grant reads or lists what is in the workspace; a path argument leading out (absolute,
# `..`, a symlink pointing out) is asked again. Checked conservatively: every word is taken as a
# path (a pattern `/api/` too), an option's attached value as well, and every directory a `cd`
# of the command may have moved to is a possible working directory of the words after it.


MAX_CWDS = 16  # possible working directories followed at most (each `cd` may double them)


def _path_words(word: str) -> list[str]:
    """What in one argument word could name a file: the word; after `=`, its value; for a short
    option with an attached value (`-f/etc/passwd`, `-rf../x`), each tail after the option letters."""
    candidates = [word]
    if "=" in word:
        candidates.append(word.split("=", 1)[1])
    if word.startswith("-") and not word.startswith("--"):
        candidates += [word[i:] for i in range(2, len(word))]
    return [c for c in candidates if c and c != "-"]


def _inside(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def paths_inside(commands: list[list[str]], workspace_roots: list[str], directory: str) -> bool:
    """Whether every word of these simple commands that could name a path stays inside the roots
    (symlinks resolved), from the working directory `directory` (relative to the first root)."""
    roots = [os.path.realpath(r) for r in workspace_roots]
    if not roots:
        return False
    cwds = [os.path.realpath(os.path.join(roots[0], directory))]
    if not _inside(cwds[0], roots):
        return False
    for words in commands:
        for word in words[1:]:
            for candidate in _path_words(word):
                if candidate.startswith("~"):
                    return False
                if not all(_inside(os.path.realpath(os.path.join(c, candidate)), roots) for c in cwds):
                    return False
        if words[0] == "cd":
            if len(words) != 2 or words[1].startswith("-"):
                return False  # `cd` alone goes home, `cd -` back to where it was
            cwds = list(dict.fromkeys([*cwds, *(os.path.realpath(os.path.join(c, words[1])) for c in cwds)]))
            if len(cwds) > MAX_CWDS:
                return False
    return True


def decide(kind: ToolKind, name: str, args: dict[str, Any], state: SessionState) -> ApprovalDecision:
    if kind is ToolKind.CLIENT:
        return ApprovalDecision("client")
    if kind is ToolKind.QUESTION:  # only the user answers a question: no mode or grant does
        return ApprovalDecision("ask")
    if kind in (ToolKind.READ, ToolKind.INTERNAL):
        return ApprovalDecision("run")
    if refused := _refused(kind, name, args, state):
        return ApprovalDecision("deny", refused)
    mode = state.approval_mode
    if mode == "plan":
        if kind is ToolKind.FETCH:
            return ApprovalDecision(
                "deny",
                f"{name} is not available in plan mode: it sends requests out, and only tools "
                "that read this machine may run",
            )
        return ApprovalDecision("deny", f"{name} is not available in plan mode: only read-only tools may run")
    if mode == "yolo":
        return ApprovalDecision("run")
    if mode == "auto-edit" and kind is ToolKind.EDIT:
        return ApprovalDecision("run")
    if name in state.grants_tools:
        return ApprovalDecision("run")
    if kind is ToolKind.MCP and server_of(name) in state.grants_mcp_servers:
        return ApprovalDecision("run")
    if _command(kind, name) and (covered := _shell_grant(args, state)):
        return ApprovalDecision("run", granted=covered == "prefix")
    if kind is ToolKind.FETCH and url_origin(str(args.get("url", ""))) in state.grants_web:
        return ApprovalDecision("run")
    return ApprovalDecision("ask")


def url_origin(url: str) -> str:
    """What "allow always" on a web fetch grants: the URL's scheme, host and port
    (`https://docs.python.org`), "" for what is not an http(s) URL."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return ""
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return ""
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    default = 443 if parts.scheme == "https" else 80
    return f"{parts.scheme}://{host}" + (f":{port}" if port and port != default else "")


def _refused(kind: ToolKind, name: str, args: dict[str, Any], state: SessionState) -> str:
    """Why the user's "reject always" refuses this call, or "" (it does not)."""
    if name in state.refusals_tools:
        return f"the user refused {name} for the rest of this session"
    if _command(kind, name) and state.refusals_shell:
        command = str(args.get("command", ""))
        roots = command_roots(command) or [shell_root(command)]
        hit = [r for r in roots if r in state.refusals_shell]
        if hit:
            return f"the user refused `{hit[0]}` commands for the rest of this session"
    return ""


def _refusal_roots(command: str) -> list[str]:
    """What "reject always" on this command refuses from now on: the root of each of its simple
    commands, or for a command that is not only that (substitutions, redirections) its first
    word. Broad on purpose: refusing more than was shown is safe."""
    roots = command_roots(command)
    if roots is None:
        root = shell_root(command)
        roots = [root] if root else []
    return list(dict.fromkeys(roots))


def _shell_grants(command: str) -> list[str]:
    """What "allow always" on this command stores: its prefixes, else the exact command."""
    prefixes = _prefixes(command)
    return prefixes if prefixes is not None else [EXACT + command.strip()]


def _sandbox_note(sandbox: Sandbox | None) -> str:
    """How a shell command will run in the session's sandbox when it is on, else ""."""
    if sandbox is None or sandbox.kind == "none" or sandbox.unavailable() is not None:
        return ""
    network = "with network" if sandbox.network else "without network"
    return f"in the sandbox: writable workspace only, {network}"


def question_options(question: QuestionDetails) -> list[PermissionOption]:
    """A question's options: each choice, the free answer where one is taken, and dismissing it."""
    options = [PermissionOption(choice_option(n), c, "") for n, c in enumerate(question.choices, start=1)]
    if question.allow_free_text:
        typed = "The answer's text is the decision's new content"
        options.append(PermissionOption(ANSWER_OPTION, "Answer in your own words", typed))
    options.append(PermissionOption("cancel", "Dismiss", "Do not answer the question"))
    return options


def options_for(
    kind: ToolKind, name: str, args: dict[str, Any], sandbox: Sandbox | None = None
) -> list[PermissionOption]:
    if kind is ToolKind.MCP:  # the RFC's options for an MCP call
        server = server_of(name)
        return [
            PermissionOption("proceed_once", "Allow once", "Run this call"),
            PermissionOption(
                "proceed_always_tool", "Always allow this tool", f"Allow {name} for the rest of this session"
            ),
            PermissionOption(
                "proceed_always_server",
                "Always allow this server",
                f"Allow every tool of the MCP server {server} for the rest of this session",
            ),
            PermissionOption("cancel", "Cancel", "Do not run this call"),
            PermissionOption("cancel_always", "Reject always", f"Refuse {name} for the rest of this session"),
        ]
    once = "Run this call"
    if _command(kind, name):
        command = str(args.get("command", ""))
        prefixes = _prefixes(command)
        if prefixes is None:
            always = "Allow exactly this command for the rest of this session"
        else:
            shown = " and ".join(f"`{p}`" for p in prefixes)
            always = (
                f"Allow {shown} commands for the rest of this session "
                "(with any arguments that cannot start another program, and paths inside the workspace)"
            )
        sandboxed = _sandbox_note(sandbox)
        if sandboxed:
            once = f"Run this command {sandboxed}"
            always += f" (each {sandboxed})"
        roots = ", ".join(f"`{r}`" for r in _refusal_roots(command))
        never = f"Refuse {roots} commands for the rest of this session"
    elif kind is ToolKind.FETCH:
        once = "Fetch this URL"
        always = (
            f"Allow fetching any URL of {url_origin(str(args.get('url', '')))} for the rest of this session"
        )
        never = f"Refuse {name} for the rest of this session"
    else:
        always = f"Allow {name} for the rest of this session"
        never = f"Refuse {name} for the rest of this session"
    return [
        PermissionOption("proceed_once", "Allow once", once),
        PermissionOption("proceed_always", "Allow always", always),
        PermissionOption("cancel", "Cancel", "Do not run this call"),
        PermissionOption("cancel_always", "Reject always", never),
    ]


def refuse(kind: ToolKind, name: str, args: dict[str, Any], state: SessionState) -> None:
    """Remember "reject always" for the session: per command root for shell (each root of the
    command), per tool otherwise. Later such calls are refused without asking, in every mode."""
    if _command(kind, name):
        _remember(_refusal_roots(str(args.get("command", ""))), state.refusals_shell)
    else:
        _remember([name], state.refusals_tools)


def grant(
    kind: ToolKind, name: str, args: dict[str, Any], state: SessionState, option: str = "proceed_always"
) -> None:
    """Remember "allow always" for the session: for shell what was shown (`_shell_grants`: the
    exact command, or prefixes that cannot start another program), per server for an MCP call
    answered "always allow this server", per origin for a web fetch, per tool otherwise."""
    if kind is ToolKind.MCP and option == "proceed_always_server":
        _remember([server_of(name)], state.grants_mcp_servers)
    elif _command(kind, name):
        _remember(_shell_grants(str(args.get("command", ""))), state.grants_shell)
    elif kind is ToolKind.FETCH:
        _remember([origin] if (origin := url_origin(str(args.get("url", "")))) else [], state.grants_web)
    else:
        _remember([name], state.grants_tools)


def _remember(items: Iterable[str], into: list[str]) -> None:
    """Adds to a session's grants or refusals each item it does not hold yet, in order."""
    for item in items:
        if item not in into:
            into.append(item)
