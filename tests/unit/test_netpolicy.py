"""The outbound-address guard (A4 webhooks, B15 client-named MCP servers): private addresses are
refused, and the checked address is the one connected to (no second DNS answer)."""

from __future__ import annotations

from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from devagent.netpolicy import pinned_request, resolve_outbound_url
from tests.fakes.local_server import LocalServer


async def resolve(url: str, allow_private: bool = False) -> tuple[str | None, str | None]:
    return await resolve_outbound_url(url, allow_private=allow_private, what="webhook URL", hint="allow it")


async def test_a4_private_addresses_refused_public_ones_pinned() -> None:
    for url in (
        "http://127.0.0.1/hook",
        "http://localhost:8080/hook",
        "http://10.1.2.3/",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
    ):
        reason, ip = await resolve(url)
        assert reason is not None and "loopback/private" in reason and ip is None, url
    assert await resolve("http://93.184.216.34:8080/hook") == (None, "93.184.216.34")
    assert (await resolve("ftp://example.com/"))[0] == "webhook URL must be http(s)://host/..."
    assert await resolve("http://127.0.0.1/hook", allow_private=True) == (None, None)


def test_a4_pinned_request_keeps_host_and_tls_name() -> None:
    target, headers, ext = pinned_request("https://hooks.example.com/a2a?x=1", "93.184.216.34")
    assert target == "https://93.184.216.34/a2a?x=1"
    assert headers == {"Host": "hooks.example.com"} and ext == {"sni_hostname": "hooks.example.com"}
    target, headers, ext = pinned_request("http://hooks.example.com:8080/a2a", "2606:2800:220:1::1")
    assert target == "http://[2606:2800:220:1::1]:8080/a2a"
    assert headers == {"Host": "hooks.example.com:8080"} and ext == {}


async def test_a4_a_pinned_request_reaches_the_checked_address_with_the_original_host() -> None:
    seen: dict[str, Any] = {}

    async def hook(request: Request) -> JSONResponse:
        seen["host"] = request.headers.get("host")
        seen["body"] = await request.json()
        return JSONResponse({"ok": True})

    server = LocalServer()
    port = await server.start(Starlette(routes=[Route("/hook", hook, methods=["POST"])]))
    try:
        # a name that does not resolve at all: only the pinned address can be reached
        target, headers, ext = pinned_request(f"http://webhook.invalid:{port}/hook", "127.0.0.1")
        async with httpx.AsyncClient() as client:
            resp = await client.post(target, json={"n": 1}, headers=headers, extensions=ext)
        assert resp.status_code == 200
        assert seen == {"host": f"webhook.invalid:{port}", "body": {"n": 1}}
    finally:
        await server.stop()
