"""Runs an ASGI app under uvicorn on 127.0.0.1 (a free port) inside the test's event loop."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import uvicorn


class LocalServer:
    def __init__(self) -> None:
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self, app: Any) -> int:
        """Starts `app`; returns its port once it accepts connections."""
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:
            if self._task.done():
                self._task.result()  # raises what went wrong
                raise RuntimeError("the local server stopped before starting")
            await asyncio.sleep(0.005)
        return port

    async def stop(self) -> None:
        assert self._server is not None and self._task is not None
        self._server.should_exit = True
        await self._task
