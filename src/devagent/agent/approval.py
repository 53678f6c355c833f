"""Approval policy (G3): whether a tool call runs, asks, or is refused.

The decision depends on the session's approval mode (chosen within server policy when the session
was created), the tool's kind, and the "allow always" grants the user gave in this session. A
client never decides: it can only answer a permission request with one of the offered options.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any, Literal

from devagent.agent.events import PermissionOption, ToolKind
from devagent.agent.state import SessionState

Verdict = Literal["run", "ask", "deny", "client"]


@dataclass(slots=True)
class Decision:
    verdict: Verdict
    reason: str = ""


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


def command_roots(command: str) -> list[str] | None:
    """The first word of each simple command of a list or pipeline (`a && b | c; d`), or None
    when the command is not only that: a substitution (`$(...)`, backticks, `<(...)`), a
    redirection, a subshell, a background job, or a leading `VAR=value` (`PATH=...`,
    `LD_PRELOAD=...`). "Allow always" runs a command unasked only when every root is granted,
    so a grant for `git` never lets `git status && rm -rf ~` or `git log > ~/.bashrc` through."""
    if not command.strip() or any(s in command for s in _SUBSTITUTIONS):
        return None
    lex = shlex.shlex(command.replace("\r", "\n").replace("\n", ";"), posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    lex.commenters = ""  # `a#b; rm x`: the shell sees no comment there
    try:
        tokens = list(lex)
    except ValueError:  # unbalanced quotes
        return None
    roots: list[str] = []
    expect_root = True
    for tok in tokens:
        if tok in _SEPARATORS:
            if expect_root:
                return None
            expect_root = True
        elif tok and set(tok) <= _PUNCTUATION:
            return None
        elif expect_root:
            if _ASSIGNMENT.match(tok):
                return None
            roots.append(tok)
            expect_root = False
    return roots or None


def decide(kind: ToolKind, name: str, args: dict[str, Any], state: SessionState) -> Decision:
    if kind is ToolKind.CLIENT:
        return Decision("client")
    if kind in (ToolKind.READ, ToolKind.INTERNAL):
        return Decision("run")
    if refused := _refused(kind, name, args, state):
        return Decision("deny", refused)
    mode = state.approval_mode
    if mode == "plan":
        return Decision("deny", f"{name} is not available in plan mode: only read-only tools may run")
    if mode == "yolo":
        return Decision("run")
    if mode == "auto-edit" and kind is ToolKind.EDIT:
        return Decision("run")
    if name in state.grants_tools:
        return Decision("run")
    if kind is ToolKind.MCP and _mcp_server(name) in state.grants_mcp_servers:
        return Decision("run")
    if kind is ToolKind.EXECUTE:
        roots = command_roots(str(args.get("command", "")))
        if roots and all(r in state.grants_shell for r in roots):
            return Decision("run")
    return Decision("ask")


def _refused(kind: ToolKind, name: str, args: dict[str, Any], state: SessionState) -> str:
    """Why the user's "reject always" refuses this call, or "" (it does not)."""
    if name in state.refusals_tools:
        return f"the user refused {name} for the rest of this session"
    if kind is ToolKind.EXECUTE and state.refusals_shell:
        command = str(args.get("command", ""))
        roots = command_roots(command) or [shell_root(command)]
        hit = [r for r in roots if r in state.refusals_shell]
        if hit:
            return f"the user refused `{hit[0]}` commands for the rest of this session"
    return ""


def _grant_roots(command: str) -> list[str]:
    """What "allow always" on this command remembers: the root of each of its simple commands,
    or for a command that always asks (substitutions, redirections) its first word."""
    roots = command_roots(command)
    if roots is None:
        root = shell_root(command)
        roots = [root] if root else []
    return list(dict.fromkeys(roots))


def _mcp_server(name: str) -> str:
    from devagent.agent.mcp_names import server_of

    return server_of(name)


def _sandbox_note() -> str:
    """How a shell command will run when the process's sandbox is on (issue 12 item 7), else ""."""
    from devagent.agent.tools.shell import active_sandbox

    sandbox = active_sandbox()
    if sandbox is None:
        return ""
    network = "with network" if sandbox.network else "without network"
    return f"in the sandbox: writable workspace only, {network}"


def options_for(kind: ToolKind, name: str, args: dict[str, Any]) -> list[PermissionOption]:
    if kind is ToolKind.MCP:  # B8/B15: the RFC's options for an MCP call
        server = _mcp_server(name)
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
    if kind is ToolKind.EXECUTE:
        roots = ", ".join(f"`{r}`" for r in _grant_roots(str(args.get("command", ""))))
        always = f"Allow {roots} commands for the rest of this session"
        sandboxed = _sandbox_note()
        if sandboxed:
            once = f"Run this command {sandboxed}"
            always += f" (each {sandboxed})"
        never = f"Refuse {roots} commands for the rest of this session"
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
    if kind is ToolKind.EXECUTE:
        for root in _grant_roots(str(args.get("command", ""))):
            if root not in state.refusals_shell:
                state.refusals_shell.append(root)
    elif name not in state.refusals_tools:
        state.refusals_tools.append(name)


def grant(
    kind: ToolKind, name: str, args: dict[str, Any], state: SessionState, option: str = "proceed_always"
) -> None:
    """Remember "allow always" for the session: per command root for shell (each root of a list
    or pipeline), per server for an MCP
    call answered "always allow this server", per tool otherwise."""
    if kind is ToolKind.MCP and option == "proceed_always_server":
        server = _mcp_server(name)
        if server not in state.grants_mcp_servers:
            state.grants_mcp_servers.append(server)
    elif kind is ToolKind.EXECUTE:
        for root in _grant_roots(str(args.get("command", ""))):
            if root not in state.grants_shell:
                state.grants_shell.append(root)
    elif name not in state.grants_tools:
        state.grants_tools.append(name)
