"""The outbound-address guard (A4 webhooks, B15 client-named MCP servers): private addresses are
refused, and the checked address is the one connected to (no second DNS answer)."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from devagent.common.netpolicy import address_allowed, parse_networks, pinned_request, resolve_outbound_url
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


async def test_issue12_item4_global_addresses_only_embedded_ipv4_judged_operator_networks() -> None:
    """One policy for webhooks and MCP (issue 12 item 4): the standard library's global-address
    semantics, IPv4 embedded in IPv6 judged as IPv4, and the operator's networks let in."""
    refused = [
        "100.64.0.1",  # shared address space (RFC 6598), where some cloud metadata services live
        "100.127.255.254",
        "192.0.2.1",  # documentation
        "198.18.0.1",  # benchmarking
        "240.0.0.1",  # reserved
        "224.0.0.1",  # multicast
        "0.0.0.0",
        "2002:a00:1::1",  # 6to4 embedding 10.0.0.1
        "2002:7f00:1::",  # 6to4 embedding 127.0.0.1
        "2002:a9fe:a9fe::",  # 6to4 embedding 169.254.169.254
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
        "64:ff9b:1::1",  # local-use NAT64
        "::127.0.0.1",  # IPv4-compatible
        "::ffff:100.64.0.1",  # IPv4-mapped shared space
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
        "fc00::1",
        "fd12:3456::1",
        "fe80::1",
        "fec0::1",  # site-local
        "ff02::1",
        "2001:db8::1",
    ]
    for a in refused:
        reason, ip = await resolve(f"http://[{a}]/hook" if ":" in a else f"http://{a}/hook")
        assert reason is not None and "loopback/private" in reason and ip is None, a
    allowed = ["8.8.8.8", "2606:4700::1111", "2002:808:808::1", "64:ff9b::808:808", "::ffff:8.8.8.8"]
    for a in allowed:
        reason, ip = await resolve(f"http://[{a}]/hook" if ":" in a else f"http://{a}/hook")
        assert reason is None and ip is not None, a

    nets = parse_networks(["100.64.0.0/10", "10.20.0.0/16", " fd00::/8 ", ""])
    for a in ("100.64.0.1", "10.20.3.4", "fd00::5", "::ffff:10.20.0.1", "2002:a14:1::1"):
        assert address_allowed(ipaddress.ip_address(a), nets), a
    for a in ("10.21.0.1", "127.0.0.1", "fc00::1", "169.254.169.254"):
        assert not address_allowed(ipaddress.ip_address(a), nets), a
    reason, ip = await resolve_outbound_url(
        "http://10.20.0.7:9000/hook", allow_private=False, what="webhook URL", hint="h", allow=nets
    )
    assert (reason, ip) == (None, "10.20.0.7")
    with pytest.raises(ValueError, match="not an IP network"):
        parse_networks(["10.0.0.0/33"])


def test_issue12_item4_outbound_allow_setting(tmp_path: Path) -> None:
    from devagent.config import ConfigError, load_config

    cfg = load_config(environ={"DEVAGENT_OUTBOUND_ALLOW": "10.0.0.0/8, fd00::/8"})
    assert [str(n) for n in cfg.outbound_networks()] == ["10.0.0.0/8", "fd00::/8"]
    with pytest.raises(ConfigError, match=r"DEVAGENT_OUTBOUND_ALLOW.*'nonsense' is not an IP network"):
        load_config(environ={"DEVAGENT_OUTBOUND_ALLOW": "nonsense"})
    toml = tmp_path / "devagent.toml"
    toml.write_text('outbound_allow = ["192.168.1.0/24"]\n')
    cfg = load_config(environ={"DEVAGENT_CONFIG": str(toml)})
    assert cfg.outbound_allow == ("192.168.1.0/24",)
