"""Which addresses the server may call on a client's say-so (webhooks A4, client-named MCP servers
B15): loopback, private, link-local, multicast, reserved and unspecified addresses are refused
unless the operator allows them, so a client cannot aim the server at its own network (SSRF)."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit


def address_allowed(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not (
        ip.is_loopback
        or ip.is_private
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
    )


async def check_outbound_url(url: str, *, allow_private: bool, what: str, hint: str) -> str | None:
    """None if the server may call `url`, else why not. `what` names the URL ("webhook URL") and
    `hint` says how the operator allows private addresses."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "not a URL"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{what} must be http(s)://host/..."
    if allow_private:
        return None
    host = parts.hostname
    try:
        addrs = [ipaddress.ip_address(host)]
    except ValueError:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, parts.port or (443 if parts.scheme == "https" else 80), type=socket.SOCK_STREAM
            )
        except OSError:
            return f"cannot resolve {host}"
        addrs = [ipaddress.ip_address(str(i[4][0]).split("%")[0]) for i in infos]
    for a in addrs:
        if not address_allowed(a):
            return f"{host} resolves to {a}, a loopback/private address ({hint})"
    return None
