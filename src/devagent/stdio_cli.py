"""The command-line flags the stdio doors (`devagent wire`, `acp`, `mcp`) share, with argparse so
that their start-up stays fast (the client waits for `initialize`; Typer and Rich are not loaded).
Each door's own module adds the flags only it has."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from devagent.global_flags import GlobalFlags


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """A bad flag is one line (and exit code 2), not the usage block."""
        self.exit(2, f"{self.prog}: {message} (see '{self.prog} --help')\n")


def add_work_dir(p: argparse.ArgumentParser, help: str, default: str | None = None) -> None:
    p.add_argument("--work-dir", "-w", default=default, help=help)


def add_approval(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--approval", choices=("ask", "auto-edit", "yolo", "plan"), help=help)


def add_model(p: argparse.ArgumentParser) -> None:
    """--model, and --base-url / --api-key for its provider (`settings`)."""
    p.add_argument("--model", "-m", help="provider:model, scripted:FILE or demo (default: DEVAGENT_MODEL)")
    p.add_argument("--base-url", help="base URL of an OpenAI-compatible server (default: DEVAGENT_BASE_URL)")
    p.add_argument("--api-key", help="API key for the model provider (default: the provider's variable)")


def add_db(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", help="database URL (default: DEVAGENT_DB, else SQLite under ~/.devagent)")


def add_sandbox(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--sandbox",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run shell commands in the bubblewrap sandbox (default: the sandbox setting, else off)",
    )


def add_logging(p: argparse.ArgumentParser, *, log_file: bool = True) -> None:
    if log_file:
        p.add_argument("--log-file", help="write logs to this file instead of stderr")
    p.add_argument("--verbose", "--debug", dest="verbose", action="store_true", help="log more")


def parse(p: argparse.ArgumentParser, argv: list[str], door: str) -> argparse.Namespace:
    """The door's flags (`argv` may start with the door's own name)."""
    return p.parse_args(argv[1:] if argv[:1] == [door] else argv)


def settings(args: argparse.Namespace, flags: GlobalFlags) -> dict[str, Any]:
    """--base-url, --api-key and the global flags as `load_config` overrides (None: not given)."""
    given = {"model_base_url": args.base_url or None, "model_api_key": args.api_key or None}
    return {**flags.settings(), **given}


@dataclass(frozen=True, slots=True)
class DoorFlags:
    """What the command line asks of every stdio door: its workspace (None: the door's default),
    model, database URL ("": the setting's) and logging, the other flags as `load_config`
    overrides (`settings`), and --debug."""

    work_dir: str | None
    model: str | None
    db_url: str
    verbose: bool
    log_file: str | None
    settings: Mapping[str, Any]
    debug: bool


def door_flags(args: argparse.Namespace, flags: GlobalFlags) -> DoorFlags:
    """The flags every stdio door has (a door without --log-file logs to stderr)."""
    return DoorFlags(
        work_dir=args.work_dir,
        model=args.model,
        db_url=args.db or "",
        verbose=args.verbose,
        log_file=getattr(args, "log_file", None),
        settings=settings(args, flags),
        debug=flags.debug,
    )
