"""The test balancer itself: one backend per request, SSE passed through event by event, headers
both ways, a refusing backend skipped. No database needed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.fakes.balancer import BACKEND_HEADER, Balancer
from tests.fakes.local_server import LocalServer


def backend(name: str, gate: asyncio.Event) -> Starlette:
    async def echo(request: Request) -> Response:
        body = await request.body()
        return JSONResponse(
            {
                "name": name,
                "auth": request.headers.get("authorization"),
                "ext": request.headers.get("x-a2a-extensions"),
                "body": body.decode(),
            },
            headers={"x-reply": name},
        )

    async def events(request: Request) -> Response:
        async def gen() -> AsyncIterator[str]:
            yield "data: one\n\n"
            await gate.wait()  # the client has the first event before the second exists
            yield "data: two\n\n"

        return StreamingResponse(gen(), media_type="text/event-stream")

    return Starlette(routes=[Route("/", echo, methods=["POST"]), Route("/sse", events, methods=["GET"])])


async def test_round_robin_per_request_headers_and_streaming() -> None:
    gate = asyncio.Event()
    servers = [LocalServer(), LocalServer()]
    ports = [await s.start(backend(f"b{i}", gate)) for i, s in enumerate(servers)]
    try:
        balancer = Balancer([f"http://127.0.0.1:{p}" for p in ports])
        async with balancer as url, httpx.AsyncClient(timeout=30) as c:
            names = []
            for i in range(4):  # one keep-alive connection, four requests
                r = await c.post(
                    url,
                    json={"jsonrpc": "2.0", "id": i, "method": "tasks/get"},
                    headers={"Authorization": "Bearer t", "X-A2A-Extensions": "uri"},
                )
                data = r.json()
                assert data["auth"] == "Bearer t" and data["ext"] == "uri"
                assert r.headers["x-reply"] == data["name"]
                assert r.headers[BACKEND_HEADER] == data["name"][1:]
                names.append(data["name"])
            assert names == ["b0", "b1", "b0", "b1"]
            assert balancer.counts == [2, 2]
            assert [s.rpc_method for s in balancer.served] == ["tasks/get"] * 4

            async with c.stream("GET", url + "sse") as r:
                lines = r.aiter_lines()
                first = await asyncio.wait_for(anext(lines), 30)
                assert first == "data: one"
                gate.set()
                rest = [line async for line in lines if line]
                assert rest == ["data: two"]

            await servers[1].stop()  # refuses connections now: skipped, marked down
            for _ in range(3):
                r = await c.post(url, json={})
                assert r.json()["name"] == "b0"
            assert balancer.down == {1}
    finally:
        for s in servers:
            await s.stop()  # (stopping one already stopped is harmless)
