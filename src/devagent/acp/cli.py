"""Command-line parsing for `devagent acp`, with argparse so that start-up stays fast (the editor
waits for `initialize`; see server.py)."""

from __future__ import annotations

import argparse

from devagent import stdio_cli
from devagent.acp.server import run_acp
from devagent.global_flags import GlobalFlags


def build_parser() -> argparse.ArgumentParser:
    p = stdio_cli.Parser(
        prog="devagent acp",
        description="Serve the Agent Client Protocol (ACP, protocol version 1) on stdin/stdout, for editors "
        "such as Zed, JetBrains IDEs, Neovim and Emacs.",
    )
    stdio_cli.add_work_dir(
        p, "workspace root of every session (default: the cwd the editor sends with session/new)"
    )
    stdio_cli.add_approval(
        p,
        "approval mode of new sessions, and the most permissive mode the editor may switch to "
        "(default: the server's approval_mode, ask)",
    )
    p.add_argument(
        "--session",
        help="continue this stored session: the editor's first session/new opens it (a pending permission "
        "request is asked again)",
    )
    stdio_cli.add_model(p)
    stdio_cli.add_db(p)
    stdio_cli.add_logging(p)
    return p


def acp_from_argv(argv: list[str], flags: GlobalFlags) -> int:
    args = stdio_cli.parse(build_parser(), argv, "acp")
    return run_acp(stdio_cli.door_flags(args, flags), session_id=args.session, approval=args.approval)
