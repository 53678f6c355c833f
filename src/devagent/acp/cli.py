"""Command-line parsing for `devagent acp`, with argparse so that start-up stays fast (the editor
waits for `initialize`; see server.py)."""

from __future__ import annotations

import argparse
import os
from typing import NoReturn


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="devagent acp",
        description="Serve the Agent Client Protocol (ACP, protocol version 1) on stdin/stdout, for editors "
        "such as Zed, JetBrains IDEs, Neovim and Emacs.",
    )
    p.add_argument(
        "--work-dir",
        "-w",
        help="workspace root of every session (default: the cwd the editor sends with session/new)",
    )
    p.add_argument("--model", "-m", help="provider:model, scripted:FILE or demo (default: DEVAGENT_MODEL)")
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
    p.add_argument("--base-url", help="base URL of an OpenAI-compatible server (default: DEVAGENT_BASE_URL)")
    p.add_argument("--api-key", help="API key for the model provider (default: the provider's variable)")
    p.add_argument("--db", help="database URL (default: DEVAGENT_DB, else SQLite under ~/.devagent)")
    p.add_argument("--log-file", help="write logs to this file instead of stderr")
    p.add_argument("--verbose", "--debug", dest="verbose", action="store_true", help="log more")
    return p


def acp_from_argv(argv: list[str]) -> int:
    args_in = list(argv)
    if args_in[:1] == ["acp"]:
        args_in = args_in[1:]
    args = build_parser().parse_args(args_in)
    if args.base_url:
        os.environ["DEVAGENT_BASE_URL"] = args.base_url
    if args.api_key:
        os.environ["DEVAGENT_API_KEY"] = args.api_key
    from devagent.acp.server import run_acp

    return run_acp(
        args.work_dir,
        session_id=args.session,
        model=args.model,
        approval=args.approval,
        db_url=args.db or "",
        log_file=args.log_file,
        verbose=args.verbose,
    )
