"""`devagent dispatcher --server URL`: its flags, its credentials, its loop until SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

TOKEN_ENV = "DEVAGENT_DISPATCHER_TOKEN"


@dataclass(slots=True)
class DispatcherFlags:
    server: str
    namespace: str = ""
    warm_pool: str = "devagent-worker"
    kubeconfig: Path | None = None
    interval: float = 1.0


def dispatcher_command(flags: DispatcherFlags) -> int:
    """The dispatcher until SIGTERM or SIGINT (0), or until its token is refused (1)."""
    from devagent.common.errors import DevagentError
    from devagent.dispatcher.kube import Claims, from_kubeconfig, in_cluster
    from devagent.dispatcher.loop import Dispatcher, Refused, Server

    token = os.environ.pop(TOKEN_ENV, "").strip()
    if not token:
        print(f"devagent dispatcher: its token is read from {TOKEN_ENV}", file=sys.stderr)
        return 2
    if not flags.server.startswith(("http://", "https://")) or flags.interval <= 0:
        print("devagent dispatcher: --server is the server's http(s) URL, --interval > 0", file=sys.stderr)
        return 2
    try:
        access = from_kubeconfig(flags.kubeconfig) if flags.kubeconfig is not None else in_cluster()
    except (DevagentError, OSError, ValueError) as e:
        print(f"devagent dispatcher: {e}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")

    async def serve() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        server = Server(flags.server, token)
        claims = Claims(access, flags.namespace or access.namespace)
        try:
            await Dispatcher(server, claims, flags.warm_pool).run(stop, flags.interval)
        except Refused as e:
            print(f"devagent dispatcher: the server refused its token ({e})", file=sys.stderr)
            return 1
        finally:
            await server.close()
            await claims.close()
        return 0

    return asyncio.run(serve())
