"""Running the A2A server: `devagent serve`."""

from __future__ import annotations

import asyncio
import socket
import sys
from typing import TYPE_CHECKING

from devagent.a2a.settings import A2ASettings

if TYPE_CHECKING:
    from devagent.agent.core import CoreConfig


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.setblocking(False)
    return sock


async def serve(core_config: CoreConfig, settings: A2ASettings, *, log_level: str = "warning") -> None:
    """Opens the core, binds, prints the URL (and a generated token), and serves until stopped."""
    settings.check_bind()
    generated = settings.ensure_token()
    sock = _bind(settings.host, settings.port)
    settings.port = sock.getsockname()[1]  # --port 0 picks a free port; the card names the real one

    import uvicorn

    from devagent.a2a.app import create_app
    from devagent.agent.core import AgentCore

    core = await AgentCore.open(core_config)
    try:
        app = create_app(core, settings)
        config = uvicorn.Config(app, log_level=log_level, lifespan="on", timeout_graceful_shutdown=5)
        server = uvicorn.Server(config)

        async def announce() -> None:
            while not server.started:  # noqa: ASYNC110 - uvicorn offers no event to wait on
                await asyncio.sleep(0.005)
            print(f"devagent A2A server listening on {settings.base_url}/", file=sys.stderr, flush=True)
            if generated:
                print(f"token: {generated}", file=sys.stderr, flush=True)

        announcer = asyncio.create_task(announce())
        try:
            await server.serve(sockets=[sock])
        finally:
            announcer.cancel()
    finally:
        await core.close()


def run_server(core_config: CoreConfig, settings: A2ASettings, *, log_level: str = "warning") -> None:
    asyncio.run(serve(core_config, settings, log_level=log_level))
