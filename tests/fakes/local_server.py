"""Runs an ASGI app under uvicorn on 127.0.0.1 (a free port) inside the test's event loop."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, Generic, TypeVar

import uvicorn
from starlette.applications import Starlette
from starlette.responses import StreamingResponse
from starlette.routing import Route


class LocalServer:
    def __init__(self) -> None:
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self, app: Any) -> int:
        """Starts `app`; returns its port once it accepts connections."""
        # IPPROTO_TCP, not socket()'s protocol 0: asyncio sets TCP_NODELAY only on sockets whose
        # protocol says TCP. Without it Nagle held each streamed frame written after the headers
        # until the client's delayed ACK, about 40 ms per request on a kept-alive connection,
        # which real model servers (asyncio, Go, nginx: TCP_NODELAY on) do not do.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
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


async def request_body(receive: Any) -> bytes:
    """The whole body of the request an ASGI app is answering (its `receive` callable)."""
    body = b""
    while True:
        m = await receive()
        body += m.get("body", b"")
        if not m.get("more_body"):
            return body


@asynccontextmanager
async def serving_app(app: Any) -> AsyncIterator[str]:
    """`app` served on 127.0.0.1 for the block: its base URL (`http://127.0.0.1:PORT`)."""
    server = LocalServer()
    port = await server.start(app)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await server.stop()


class FakeHTTPServer:
    """Base of the fake provider servers: `async with fake as base_url`, the app's routes from
    `routes()`, the base URL as the client SDK wants it (`url_suffix`), SSE answers from frames."""

    url_suffix = ""

    def __init__(self) -> None:
        self._local = LocalServer()
        self.base_url = ""

    def routes(self) -> list[Route]:
        raise NotImplementedError

    @staticmethod
    def sse(frames: list[str]) -> StreamingResponse:
        async def stream() -> AsyncIterator[str]:
            for f in frames:
                yield f
                await asyncio.sleep(0)

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def __aenter__(self) -> str:
        port = await self._local.start(Starlette(routes=self.routes()))
        self.base_url = f"http://127.0.0.1:{port}{self.url_suffix}"
        return self.base_url

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._local.stop()


S = TypeVar("S")


class ScriptedServer(FakeHTTPServer, Generic[S]):
    """A fake model provider: `script` decides each answer from the request body; `requests`
    keeps the decoded request bodies, in order."""

    def __init__(self, script: S) -> None:
        super().__init__()
        self.script = script
        self.requests: list[dict[str, Any]] = []
