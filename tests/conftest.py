"""Shared fixtures: scripts for the scripted model, a core on SQLite or PostgreSQL."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

# Tests never reach a network model, and never pick up the developer's own keys or devagent
# settings (nor send traces to the developer's collector: tests/a2a/test_traces.py runs its own).
for _var in [v for v in os.environ if v.startswith("DEVAGENT_") and not v.startswith("DEVAGENT_TEST_")]:
    os.environ.pop(_var)
for _var in (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
):
    os.environ.pop(_var, None)


def _hermetic_home() -> Path:
    """A home of the run's own, set before any test module loads: HOME and the XDG folders point
    into it, so neither a test nor a devagent process it starts reads the user's own settings,
    skills, commands, agents or data (~/.config/devagent, ~/.devagent). The tools the tests drive
    from the real home keep theirs: npm's cache and settings, pyenv's Pythons."""
    real = Path.home()
    home = Path(tempfile.mkdtemp(prefix="devagent-tests-home-"))
    atexit.register(shutil.rmtree, home, True)  # gone with the run (each xdist worker has its own)
    kept = {"npm_config_cache": ".npm", "npm_config_userconfig": ".npmrc", "PYENV_ROOT": ".pyenv"}
    for var, name in kept.items():
        path = real / name
        if var not in os.environ and path.exists():
            os.environ[var] = str(path)
    for var, sub in (
        ("XDG_CONFIG_HOME", ".config"),
        ("XDG_DATA_HOME", ".local/share"),
        ("XDG_CACHE_HOME", ".cache"),
        ("XDG_STATE_HOME", ".local/state"),
    ):
        (home / sub).mkdir(parents=True)
        os.environ[var] = str(home / sub)
    # git commits made by tests have an author whatever the user's own ~/.gitconfig says
    (home / ".gitconfig").write_text("[user]\n\tname = devagent tests\n\temail = tests@devagent.invalid\n")
    os.environ["HOME"] = str(home)
    return home


TEST_HOME = _hermetic_home()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    from tests import parallel

    parallel.engines_first(items)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """scripts/test's `--dist loadfile`, with the engines' tests together (tests/parallel.py)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from tests import parallel

    return parallel.make_scheduler(config, log)


@pytest.fixture(scope="session", autouse=True)
def hermetic_home() -> Iterator[Path]:
    """The run's own home (`_hermetic_home`), removed when the run ends."""
    yield TEST_HOME
    shutil.rmtree(TEST_HOME, ignore_errors=True)


# The gRPC tests run servers and clients in this process; the pty tests then fork it. gRPC's fork
# handlers (on by default in its C core) would run in the forked child before its exec and may
# log into the child's terminal (an `epoll_wait error` line seen once in a pty test). Nothing here
# forks to run gRPC in a child, so they are off (read when grpc is imported).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

PG_URL = os.environ.get("DEVAGENT_TEST_PG", "postgresql+asyncpg://postgres@127.0.0.1:5432/test")


def pg_available() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=0.5):
            return True
    except OSError:
        return False


@asynccontextmanager
async def fresh_pg_database(prefix: str = "devagent_t") -> AsyncIterator[str]:
    """A new, empty PostgreSQL database of the caller's own (CREATE DATABASE through the
    `postgres` database); its SQLAlchemy URL. Dropped on exit, whatever still holds it."""
    import asyncpg  # type: ignore[import-untyped]
    from sqlalchemy.engine import make_url

    base = make_url(PG_URL)
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(
        host=base.host or "127.0.0.1",
        port=base.port or 5432,
        user=base.username or "postgres",
        password=base.password,
        database="postgres",
    )
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
        try:
            yield base.set(database=name).render_as_string(hide_password=False)
        finally:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


Script = Callable[[list[Any]], str]
"""The `script` fixture: the scripted model's steps in, its `scripted:FILE` spec out."""
ScriptFile = Callable[[list[Any]], Path]
"""The `script_file` fixture: the scripted model's steps in, the file holding them out."""


def folder_with(path: Path, files: dict[str, str]) -> Path:
    """Makes the folder `path` holding `files` (name: text); the folder."""
    path.mkdir()
    for name, text in files.items():
        (path / name).write_text(text)
    return path


def child_env(tmp_path: Path, db_file: str) -> dict[str, str]:
    """The environment of a devagent child process: this one's without devagent's settings and
    the model providers' keys, its data folder and SQLite database (`db_file`) under `tmp_path`,
    its output unbuffered."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVAGENT_")}
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        env.pop(var, None)
    env["DEVAGENT_DATA_DIR"] = str(tmp_path / "data")
    env["DEVAGENT_DB"] = f"sqlite+aiosqlite:///{tmp_path / db_file}"
    env["PYTHONUNBUFFERED"] = "1"
    return env


# A suite started in the background of a script (`... &`) inherits SIGINT ignored, and so would
# every process a test starts; the tests that press Ctrl-C need it delivered, as at a terminal.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return folder_with(tmp_path / "ws", {"README.md": "# Demo project\nHello.\n"})


@pytest.fixture
def script_file(tmp_path: Path) -> ScriptFile:
    """Writes a scripted-model file (its steps) and returns its path."""
    counter = iter(range(1000))

    def write(steps: list[Any]) -> Path:
        path = tmp_path / f"script{next(counter)}.json"
        path.write_text(json.dumps({"steps": steps}))
        return path

    return write


@pytest.fixture
def script(script_file: ScriptFile) -> Script:
    """Writes a scripted-model file and returns the `scripted:FILE` spec."""
    return lambda steps: f"scripted:{script_file(steps)}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A database of the test's own: a SQLite file, or a fresh PostgreSQL database (dropped
    afterwards), so tests running in parallel processes never share one."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'devagent.db'}"
        return
    if not pg_available():
        pytest.skip("PostgreSQL is not running on 127.0.0.1:5432")
    async with fresh_pg_database() as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def shared_db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A database of the test's own, for processes that share it: a SQLite file, or a fresh
    PostgreSQL database (dropped afterwards)."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'shared.db'}"
        return
    if not pg_available():
        pytest.skip("PostgreSQL is not running on 127.0.0.1:5432")
    async with fresh_pg_database() as url:
        yield url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'devagent.db'}"


@pytest.fixture
async def core_factory(sqlite_url: str) -> AsyncIterator[Callable[..., Any]]:
    from devagent.agent.core import AgentCore
    from devagent.agent.settings import CoreConfig

    opened: list[AgentCore] = []

    async def make(model: str = "demo", db: str | None = None, **kw: Any) -> AgentCore:
        core = await AgentCore.open(CoreConfig(db_url=db or sqlite_url, default_model=model, **kw))
        opened.append(core)
        return core

    yield make
    for c in opened:
        await c.close()


def process_ended(pid: int) -> bool:
    """Whether a process has ended (gone, or a zombie its parent has not reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def new_id() -> str:
    return str(uuid.uuid4())
