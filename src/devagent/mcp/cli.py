"""Command-line parsing for `devagent mcp`, with argparse so that start-up stays fast (a host
waits for `initialize`)."""

from __future__ import annotations

import argparse
import os
from typing import NoReturn


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="devagent mcp",
        description="Serve devagent as an MCP server on stdin/stdout: an MCP host hands it coding tasks.",
    )
    p.add_argument(
        "--work-dir",
        "-w",
        help="the workspace root: tasks run in it or in a folder under it (default: the current directory)",
    )
    p.add_argument("--model", "-m", help="provider:model, scripted:FILE or demo (default: DEVAGENT_MODEL)")
    p.add_argument(
        "--approval",
        choices=("ask", "auto-edit", "yolo", "plan"),
        help="approval mode of new sessions, and the most permissive a host may ask for (default: ask)",
    )
    p.add_argument("--db", help="database URL (default: DEVAGENT_DB, else SQLite under ~/.devagent)")
    p.add_argument(
        "--sandbox",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run shell commands in the bubblewrap sandbox (default: the sandbox setting, else off)",
    )
    p.add_argument("--base-url", help="base URL of an OpenAI-compatible server (default: DEVAGENT_BASE_URL)")
    p.add_argument("--api-key", help="API key for the model provider (default: the provider's variable)")
    p.add_argument("--verbose", "--debug", dest="verbose", action="store_true", help="log more (on stderr)")
    return p


def mcp_from_argv(argv: list[str]) -> int:
    args_in = list(argv)
    if args_in[:1] == ["mcp"]:
        args_in = args_in[1:]
    args = build_parser().parse_args(args_in)
    if args.base_url:
        os.environ["DEVAGENT_BASE_URL"] = args.base_url
    if args.api_key:
        os.environ["DEVAGENT_API_KEY"] = args.api_key
    from devagent.mcp.fast import run_mcp

    return run_mcp(
        args.work_dir,
        model=args.model,
        approval=args.approval,
        db_url=args.db or "",
        sandbox=args.sandbox,
        verbose=args.verbose,
    )
