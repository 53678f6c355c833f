"""Command-line parsing for `devagent mcp`, with argparse so that start-up stays fast (a host
waits for `initialize`)."""

from __future__ import annotations

import argparse

from devagent import stdio_cli
from devagent.global_flags import GlobalFlags
from devagent.mcp.fast import run_mcp


def build_parser() -> argparse.ArgumentParser:
    p = stdio_cli.Parser(
        prog="devagent mcp",
        description="Serve devagent as an MCP server on stdin/stdout: an MCP host hands it coding tasks.",
    )
    stdio_cli.add_work_dir(
        p, "the workspace root: tasks run in it or in a folder under it (default: the current directory)"
    )
    stdio_cli.add_approval(
        p, "approval mode of new sessions, and the most permissive a host may ask for (default: ask)"
    )
    stdio_cli.add_model(p)
    stdio_cli.add_db(p)
    stdio_cli.add_sandbox(p)
    stdio_cli.add_logging(p, log_file=False)  # logs go to stderr, which hosts keep
    return p


def mcp_from_argv(argv: list[str], flags: GlobalFlags) -> int:
    args = stdio_cli.parse(build_parser(), argv, "mcp")
    return run_mcp(stdio_cli.door_flags(args, flags), approval=args.approval, sandbox=args.sandbox)
