"""A round-robin HTTP reverse proxy for tests and benchmarks: no stickiness, one backend per request.

    balancer = Balancer(["http://127.0.0.1:8001", "http://127.0.0.1:8002"])
    async with balancer as url:          # "http://127.0.0.1:PORT/", inside the test's event loop
        ...
    balancer.counts                      # requests sent to each backend, by index
    balancer.served                      # one `Served` per request: backend, HTTP and JSON-RPC method

    python -m tests.fakes.balancer [--port 0] URL [URL ...]     # as a process (benchmarks)
    # prints "balancer listening on http://127.0.0.1:PORT/"; GET /__balancer__ answers the counts

Every HTTP request (not every connection: a client's keep-alive connection is spread too) goes to
the next backend in turn. Responses stream through as they arrive, chunk by chunk, so SSE events
are not held back. Headers pass both ways (Authorization, A2A-Version, X-A2A-Extensions, ...),
except the hop-by-hop ones; every response carries `X-Balancer-Backend: INDEX`. A backend that
refuses the connection (a killed replica) is marked down and the request goes to the next one, as
a load balancer's health checks would arrange; nothing is retried once a request was sent.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import anyio
import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = ["BACKEND_HEADER", "Balancer", "Served"]

BACKEND_HEADER = "x-balancer-backend"
STATS_PATH = "/__balancer__"
# RFC 9110 7.6.1, plus the headers the proxy sets itself
_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)


@dataclass(frozen=True, slots=True)
class Served:
    backend: int
    http_method: str
    path: str
    rpc_method: str | None  # the JSON-RPC `method` of a POST body, when there is one
    status: int


def _rpc_method(body: bytes) -> str | None:
    if not body or body[:1] not in (b"{", b" ", b"\n"):
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    method = data.get("method") if isinstance(data, dict) else None
    return method if isinstance(method, str) else None


class Balancer:
    def __init__(self, backends: list[str]) -> None:
        if not backends:
            raise ValueError("a balancer needs at least one backend")
        self.backends = [b.rstrip("/") for b in backends]
        self.counts = [0] * len(self.backends)
        self.served: list[Served] = []
        self.down: set[int] = set()
        self.url = ""
        self._next = 0
        self._client: httpx.AsyncClient | None = None
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    # --- routing ---

    def _pick(self) -> int | None:
        for _ in range(len(self.backends)):
            i = self._next
            self._next = (self._next + 1) % len(self.backends)
            if i not in self.down:
                return i
        return None

    def mark_down(self, index: int) -> None:
        """Takes a backend out of the rotation (as a failed health check would)."""
        self.down.add(index)

    def mark_up(self, index: int) -> None:
        self.down.discard(index)

    def stats(self) -> dict[str, Any]:
        return {"backends": self.backends, "counts": self.counts, "down": sorted(self.down)}

    async def _stats(self, request: Request) -> Response:
        return JSONResponse(self.stats())

    async def _proxy(self, request: Request) -> Response:
        assert self._client is not None
        body = await request.body()
        headers = [(k, v) for k, v in request.headers.raw if k.decode("latin-1").lower() not in _HOP]
        if request.client is not None:
            headers.append((b"x-forwarded-for", request.client.host.encode()))
        headers.append((b"x-forwarded-host", request.headers.get("host", "").encode("latin-1")))
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        rpc_method = _rpc_method(body) if request.method == "POST" else None
        while (index := self._pick()) is not None:
            upstream = self._client.build_request(
                request.method, self.backends[index] + target, headers=headers, content=body
            )
            try:
                resp = await self._client.send(upstream, stream=True)
            except httpx.ConnectError:
                self.mark_down(index)  # refused: nothing was sent, the next backend may take it
                continue
            self.counts[index] += 1
            self.served.append(Served(index, request.method, request.url.path, rpc_method, resp.status_code))
            out_headers = {k: v for k, v in resp.headers.items() if k.lower() not in _HOP}
            if "content-length" in resp.headers:
                out_headers["content-length"] = resp.headers["content-length"]
            out_headers[BACKEND_HEADER] = str(index)
            return StreamingResponse(self._relay(resp), status_code=resp.status_code, headers=out_headers)
        return JSONResponse({"error": "no backend available"}, status_code=502)

    @staticmethod
    async def _relay(resp: httpx.Response) -> AsyncIterator[bytes]:
        try:
            async for chunk in resp.aiter_raw():
                yield chunk
        finally:
            with anyio.CancelScope(shield=True):  # a client that went away closes the upstream too
                await resp.aclose()

    def app(self) -> Starlette:
        methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
        return Starlette(
            routes=[
                Route(STATS_PATH, self._stats, methods=["GET"]),
                Route("/{path:path}", self._proxy, methods=methods),
            ]
        )

    # --- running ---

    async def start(self, port: int = 0, host: str = "127.0.0.1") -> str:
        """Listens on host:port (0: a free port); returns the URL once it accepts connections."""
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=1000)
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(None, connect=5.0), limits=limits)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
        bound = sock.getsockname()[1]
        config = uvicorn.Config(self.app(), log_level="warning", lifespan="off", access_log=False)
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:
            if self._task.done():
                self._task.result()
                raise RuntimeError("the balancer stopped before starting")
            await asyncio.sleep(0.005)
        self.url = f"http://{host}:{bound}/"
        return self.url

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            try:
                await asyncio.wait_for(self._task, 10)
            except TimeoutError:
                self._server.force_exit = True
                await self._task
        if self._client is not None:
            await self._client.aclose()

    async def serve_forever(self) -> None:
        assert self._task is not None
        await self._task

    async def __aenter__(self) -> str:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


async def _main(args: argparse.Namespace) -> None:
    balancer = Balancer(args.backends)
    url = await balancer.start(args.port, args.host)
    print(f"balancer listening on {url}", flush=True)
    try:
        await balancer.serve_forever()  # uvicorn ends it on SIGINT / SIGTERM
    finally:
        await balancer.stop()
        print(json.dumps(balancer.stats()), file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Round-robin HTTP reverse proxy (one backend per request)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("backends", nargs="+", help="backend base URLs, e.g. http://127.0.0.1:8001")
    asyncio.run(_main(ap.parse_args(argv)))


if __name__ == "__main__":
    main()
