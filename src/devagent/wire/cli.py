"""Command-line parsing for wire mode, with argparse so that start-up stays fast.

Two spellings start the same server:

    devagent wire --work-dir DIR [--session ID] [--model M] [--yolo] [--no-thinking] ...
    devagent --wire --session ID --work-dir DIR [--no-thinking] [--model M] [--yolo]

The second is how existing wire clients (kimi-cli's SDKs) launch their agent; flags those clients
pass that devagent has no use for (`--thinking`, `--agent-file`, `--skills-dir`) are accepted and
ignored, so those clients run unchanged.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devagent import __version__, stdio_cli
from devagent.agent.api import SandboxError, setup_sandbox
from devagent.config import ConfigError, load_config
from devagent.global_flags import GlobalFlags
from devagent.wire.messages import WIRE_PROTOCOL_VERSION
from devagent.wire.server import run_wire

if TYPE_CHECKING:
    from devagent.agent.api import SandboxProvider


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be a positive number of seconds")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = stdio_cli.Parser(
        prog="devagent wire",
        description="Serve wire mode: JSON-RPC 2.0 over stdin/stdout, one JSON object per line "
        f"(kimi-cli wire protocol {WIRE_PROTOCOL_VERSION} with KLIP-12 initialize and external tools).",
    )
    p.add_argument("--wire", action="store_true", help=argparse.SUPPRESS)
    stdio_cli.add_work_dir(p, "workspace root (default: the current directory)", default=".")
    p.add_argument(
        "--session",
        "--resume",
        "-S",
        "-r",
        dest="session",
        help="session id: resumed if stored (pending requests are sent again), created if not",
    )
    p.add_argument(
        "--yolo",
        "--yes",
        "-y",
        "--auto-approve",
        dest="yolo",
        action="store_true",
        help="run every tool call without asking (approval mode yolo)",
    )
    stdio_cli.add_model(p)
    p.add_argument(
        "--thinking",
        dest="thinking",
        action="store_true",
        default=None,
        help="accepted for compatibility; thinking is shown when the model sends it",
    )
    p.add_argument(
        "--no-thinking", dest="thinking", action="store_false", help="accepted for compatibility; no effect"
    )
    stdio_cli.add_db(p)
    p.add_argument(
        "--approval-timeout",
        type=_positive_float,
        metavar="SECONDS",
        help="reject an approval request, or dismiss a question, the client has not answered in time "
        "(default: wait)",
    )
    p.add_argument(
        "--tool-call-timeout",
        type=_positive_float,
        metavar="SECONDS",
        help="fail an external tool call the client has not answered in time (default: wait)",
    )
    p.add_argument("--max-steps-per-turn", dest="max_steps", type=int, help="model steps per turn")
    stdio_cli.add_sandbox(p)
    stdio_cli.add_logging(p)
    # Flags of kimi-cli's launchers that have no meaning here.
    p.add_argument("--agent-file", help="accepted for compatibility with kimi-cli's launchers; ignored")
    p.add_argument("--skills-dir", action="append", help="accepted for compatibility; ignored")
    return p


def wire_from_argv(argv: list[str], flags: GlobalFlags) -> int:
    """Run wire mode from a command line (`devagent wire …` or `devagent --wire …`)."""
    args = stdio_cli.parse(build_parser(), argv, "wire")
    door = stdio_cli.door_flags(args, flags)
    work_dir = Path(door.work_dir or os.getcwd()).resolve()
    sandboxes = _setup_sandbox(args.sandbox, door.settings, work_dir)
    if isinstance(sandboxes, int):
        return sandboxes
    timeout_env = os.environ.get("DEVAGENT_WIRE_APPROVAL_TIMEOUT")
    tool_env = os.environ.get("DEVAGENT_WIRE_TOOL_CALL_TIMEOUT")
    return run_wire(
        door,
        session_id=args.session,
        yolo=args.yolo,
        thinking=args.thinking,
        approval_timeout=args.approval_timeout or (float(timeout_env) if timeout_env else None),
        tool_call_timeout=args.tool_call_timeout or (float(tool_env) if tool_env else None),
        max_steps=args.max_steps,
        sandboxes=sandboxes,
    )


def _setup_sandbox(
    flag: bool | None, settings: Mapping[str, Any], work_dir: Path
) -> SandboxProvider | int | None:
    """Chooses the shell sandbox for `work_dir` (off unless asked); an exit code when it cannot
    be had, None when the settings are wrong (run_wire reports them)."""
    try:
        config = load_config(settings)
    except ConfigError:
        return None  # run_wire reports it
    try:
        line = setup_sandbox(flag, config, "wire", owned_by=[work_dir])
    except SandboxError as e:
        print(f"devagent wire: {e}", file=sys.stderr)
        return 2
    if flag or config.sandbox:
        print(line, file=sys.stderr, flush=True)
    sandboxes: SandboxProvider = config.sandboxes  # set by setup_sandbox just above
    return sandboxes


def info() -> dict[str, object]:
    """What `devagent info --json` prints; wire clients read `wire_protocol_version`."""
    return {
        "devagent_version": __version__,
        "wire_protocol_version": WIRE_PROTOCOL_VERSION,
        "python_version": platform.python_version(),
    }
