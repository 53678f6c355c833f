"""`devagent worker --server URL` and `devagent workers token add|revoke|list`."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import signal
import socket
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

BACKENDS = ("local", "container")
TOKEN_ENV = "DEVAGENT_WORKER_TOKEN"


@dataclass(slots=True)
class WorkerFlags:
    server: str
    pool: str = "default"
    capacity: int = 4
    backend: str = "local"
    templates: list[str] = field(default_factory=list)
    state_dir: Path | None = None
    name: str = ""
    idle_seconds: float = 300.0
    token_file: Path | None = None  # a one-session pod's token, there once the pod is claimed


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(base) / "devagent" / "worker"


def worker_command(flags: WorkerFlags) -> int:
    """The worker until it is stopped (SIGTERM, SIGINT) or its token is refused; the exit code."""
    from devagent.worker.secrecy import make_undumpable, take_secret

    token = take_secret(TOKEN_ENV)  # never in a command's environment, nor in /proc/PID/environ
    undumpable = make_undumpable()  # other processes of this user cannot read or trace ours
    if undumpable is not None:
        print(f"devagent worker: {undumpable}", file=sys.stderr)
    if flags.token_file is not None:
        token = _await_token(flags.token_file)
        if not token:
            return 0  # a warm pod stopped before any session claimed it
    if not token:
        print(f"devagent worker: the worker's token is read from {TOKEN_ENV}", file=sys.stderr)
        return 2
    if flags.backend not in BACKENDS or flags.capacity < 1:
        print("devagent worker: --backend is local or container, --capacity 1 or more", file=sys.stderr)
        return 2
    if not flags.server.startswith(("http://", "https://")):
        print("devagent worker: --server is the server's http(s) URL", file=sys.stderr)
        return 2
    from devagent.agent.api import SandboxError
    from devagent.config import ConfigError, load_config

    state_dir = (flags.state_dir or default_state_dir()).resolve()
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        config = load_config({})
        hosted = _hosted(config, flags.backend, state_dir)
    except (ConfigError, SandboxError, ValueError) as e:
        print(f"devagent worker: {e}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    name = flags.name or f"{socket.gethostname()[:40]}-{uuid.uuid4().hex[:10]}"
    return asyncio.run(_serve(flags, token, name, hosted))


def _await_token(path: Path) -> str:
    """The token in `path` once it is there (a warm pod waits for its claim: the kubelet writes
    the claim's annotation into the file); "" when stopped first."""
    import time

    stop: list[int] = []
    old = signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    print(f"devagent worker: waiting for a session's token in {path}", file=sys.stderr, flush=True)
    try:
        while not stop:
            try:
                token = path.read_text().strip()
            except OSError:
                token = ""
            if token:
                return token
            time.sleep(0.5)
        return ""
    finally:
        signal.signal(signal.SIGTERM, old)


def _hosted(config: object, backend: str, state_dir: Path) -> object:
    from devagent.agent.api import Hosted, hosted_provider

    provider, line = hosted_provider(config, backend, state_dir)
    print(line, file=sys.stderr, flush=True)
    return Hosted(provider, state_dir)


async def _serve(flags: WorkerFlags, token: str, name: str, hosted: object) -> int:
    from devagent.worker.client import ServerClient
    from devagent.worker.runner import Runner, Stopped

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    client = ServerClient(flags.server, token, name, stop)
    templates = flags.templates or ["default"]
    runner = Runner(client, hosted, flags.pool, templates, flags.capacity, flags.backend)
    runner.idle_seconds = flags.idle_seconds
    print(f"devagent worker {name}: connecting to {flags.server}", file=sys.stderr, flush=True)
    try:
        await runner.run(stop)
    except Stopped as e:
        await runner.leave()
        if flags.token_file is not None:  # a one-session pod: its session let its sandbox go
            print(f"devagent worker: this pod's session is over ({e}): idle until stopped", file=sys.stderr)
            await stop.wait()  # its claim is deleted next, and the pod with it (no restart loop)
            return 0
        print(f"devagent worker: the server refused this worker: {e}", file=sys.stderr)
        return 1
    finally:
        await client.close()
    return 0


# --- `devagent workers token ...`: tokens kept hashed in the store --------------------------------


def token_command(action: str, name: str, pool: str, db: str | None) -> int:
    """add (prints the new token once), revoke, or list the workers' stored tokens."""
    from devagent.config import ConfigError, load_config

    try:
        config = load_config({"db_url": db})
    except ConfigError as e:
        print(f"devagent: {e}", file=sys.stderr)
        return 2
    return asyncio.run(_tokens(action, name, pool, str(config.db_url)))


async def _tokens(action: str, name: str, pool: str, db_url: str) -> int:
    from devagent.store.db import Store

    store = await Store.open(db_url)
    try:
        q = store.workers
        if action in ("add", "add-dispatcher"):
            role = "dispatcher" if action == "add-dispatcher" else "worker"
            if role == "dispatcher" and not pool:
                print("devagent: a dispatcher's token names its pool (--pool)", file=sys.stderr)
                return 2
            token = secrets.token_urlsafe(32)
            await q.add_token(name, token, pool, role)
            print(token)
            return 0
        if action == "revoke":
            if not await q.revoke_token(name):
                print(f"devagent: no live worker token named {name!r}", file=sys.stderr)
                return 1
            print(f"revoked {name}")
            return 0
        for row in await q.tokens():
            state = "revoked" if row["revoked_at"] else "live"
            print(f"{row['name']}\tpool={row['pool'] or '*'}\t{state}\t{row['role']}")
        return 0
    finally:
        await store.close()
