"""What the front doors check before they start, and how a failure is told: one line naming the
bad value and the fix, exit code 2 for a usage error (a value the user gave is wrong) or 1 for a
runtime one (something the user named cannot be reached). `--debug` (or `DEVAGENT_DEBUG=1`) also
prints the traceback.

Cheap on purpose: nothing here imports SQLAlchemy or a model provider at module level.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from devagent.common.errors import DevagentError
from devagent.global_flags import lent

if TYPE_CHECKING:
    from devagent.agent.api import AgentCore, CoreConfig
    from devagent.stdio_cli import DoorFlags

DB_HELP = "use sqlite+aiosqlite:///PATH or postgresql+asyncpg://USER:PASSWORD@HOST/DB (--db or DEVAGENT_DB)"


class StartError(DevagentError):
    """A failure the user can fix: `message` is the one line to print, `code` the exit code,
    `session_id` the stored session it happened in (a resumed one), if any."""

    def __init__(self, message: str, code: int = 1, session_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.session_id = session_id


def debug_enabled(flag: bool = False) -> bool:
    """Whether an error's traceback is printed: the `--debug` flag, else `DEVAGENT_DEBUG`."""
    if flag or lent().debug:
        return True
    return os.environ.get("DEVAGENT_DEBUG", "").strip().lower() in ("1", "true", "yes", "on")


def report(prog: str, e: BaseException, debug: bool = False) -> int:
    """Print `e` as one line on stderr (and its traceback with `debug`, the --debug flag, or
    DEVAGENT_DEBUG=1); returns the exit code."""
    if debug_enabled(debug):
        traceback.print_exception(e, file=sys.stderr)
    if isinstance(e, StartError):
        print(f"{prog}: {e.message}", file=sys.stderr, flush=True)
        return e.code
    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
    print(
        f"{prog}: internal error ({type(e).__name__}: {first}); run with --debug for the details",
        file=sys.stderr,
        flush=True,
    )
    return 1


def safe_url(url: str) -> str:
    """The URL without its password, to show."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    creds, at, host = rest.rpartition("@")
    if not at or ":" not in creds:
        return url
    return f"{scheme}://{creds.split(':', 1)[0]}:***@{host}"


def check_model(config: CoreConfig, environ: Mapping[str, str] | None = None) -> None:
    """The configured model's provider is known and its credentials and base URL are given (no
    provider is imported). Raises StartError (usage) saying what to set."""
    # late: the model table stays off the stdio doors' start and `devagent --help`
    from devagent.agent.api import ModelConfigError, check_model_spec, default_model_spec

    env = os.environ if environ is None else environ
    spec = config.default_model or default_model_spec(env)[0]
    try:
        check_model_spec(spec, base_url=config.model_base_url, api_key=config.model_api_key, environ=env)
    except ModelConfigError as e:
        raise StartError(str(e), 2) from e


def check_db_url(url: str) -> None:
    """What can be told about a database URL without connecting: a SQLite file's folder exists."""
    if not url:
        return
    if "://" not in url:
        raise StartError(f"database URL {url!r} is not a URL: {DB_HELP}", 2)
    if url.startswith("sqlite"):
        path = url.partition(":///")[2].split("?", 1)[0]
        if path and path != ":memory:" and not path.startswith("file:"):
            folder = Path(path).expanduser().parent
            if not folder.is_dir():
                raise StartError(
                    f"cannot create the SQLite database {path}: the folder {folder} does not exist "
                    "(create it, or choose another --db / DEVAGENT_DB)",
                    2,
                )


def db_error(url: str, e: BaseException) -> StartError:
    """A failure to open the database as one line (usage for a bad URL, runtime otherwise)."""
    shown = safe_url(url) if url else "the default SQLite database"
    name = type(e).__name__
    text = (str(e).strip().splitlines() or [name])[0]
    if text.startswith("("):  # SQLAlchemy's "(driver.Error) message"
        text = text.partition(") ")[2] or text
    if name == "ArgumentError":
        return StartError(f"database URL {shown!r} cannot be parsed: {DB_HELP}", 2)
    if name in ("NoSuchModuleError", "ModuleNotFoundError", "ImportError"):
        return StartError(f"database URL {shown!r} names a driver devagent cannot use ({text}): {DB_HELP}", 2)
    if isinstance(e, OSError) or name in ("InterfaceError", "ConnectionDoesNotExistError", "TimeoutError"):
        return StartError(
            f"cannot reach the database at {shown} ({text}): is it running? Check --db / DEVAGENT_DB.", 1
        )
    if url.startswith("sqlite") and "unable to open database file" in text:
        return StartError(
            f"cannot open the SQLite database {shown}: {text} (check the path and its folder)", 2
        )
    return StartError(f"the database at {shown} refused to start ({text}); check --db / DEVAGENT_DB", 1)


async def open_core(config: CoreConfig) -> AgentCore:
    """AgentCore.open with the database's failures told as one line (StartError)."""
    from devagent.agent.api import AgentCore  # late: the core stays off `devagent --help`

    check_db_url(config.db_url)
    try:
        return await AgentCore.open(config)
    except Exception as e:
        raise db_error(config.db_url, e) from e


def stdio_door_config(prog: str, flags: DoorFlags, approval: str | None) -> CoreConfig | int:
    """The settings of a stdio door (`devagent acp`, `devagent mcp`), checked before it serves:
    the flags (the door's and `flags.settings`, the other flags of its command line) over the
    settings, `approval` the default and the ceiling of its sessions, the model and the database
    URL checked. An exit code (after one line on stderr, the traceback too with --debug) when
    they are wrong."""
    # late: the settings (and the tools they read) stay off `devagent --help`
    from devagent.agent.api import APPROVAL_MODES
    from devagent.config import ConfigError, load_config

    try:
        config = load_config({**flags.settings, "db_url": flags.db_url or None, "default_model": flags.model})
    except ConfigError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    if approval is not None:
        if approval not in APPROVAL_MODES:
            print(f"{prog}: --approval must be one of {', '.join(APPROVAL_MODES)}", file=sys.stderr)
            return 2
        config.approval_mode = approval  # the operator's choice: the default and the ceiling
    try:
        if flags.model:
            check_model(config)
        check_db_url(config.db_url)
    except StartError as e:
        return report(prog, e, flags.debug)
    return config
