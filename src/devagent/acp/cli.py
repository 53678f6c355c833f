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
    p.add_argument(
        "--work-dir",
        "-w",
        help="workspace root of every session (default: the cwd the editor sends with session/new)",
    )
    p.add_argument(
        "--approval",
        choices=("ask", "auto-edit", "yolo", "plan"),
        help="approval mode of new sessions, and the most permissive mode the editor may switch to "
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
    return run_acp(
        args.work_dir,
        session_id=args.session,
        model=args.model,
        approval=args.approval,
        db_url=args.db or "",
        log_file=args.log_file,
        verbose=args.verbose,
        settings=stdio_cli.settings(args, flags),
        debug=flags.debug,
    )
