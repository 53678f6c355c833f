"""Which addresses the server may call on a client's say-so (webhooks A4, client-named MCP servers
B15): loopback, private, link-local, multicast, reserved and unspecified addresses are refused
unless the operator allows them, so a client cannot aim the server at its own network (SSRF)."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit, urlunsplit


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
    reason, _ip = await resolve_outbound_url(url, allow_private=allow_private, what=what, hint=hint)
    return reason


async def resolve_outbound_url(
    url: str, *, allow_private: bool, what: str, hint: str
) -> tuple[str | None, str | None]:
    """(why the server may not call `url`, or None; the address that was checked, to connect to).
    Connecting to the checked address, not resolving the name again, is what keeps a DNS answer
    that changes between the check and the call (DNS rebinding) from reaching a private address.
    The address is None when private addresses are allowed (nothing to pin)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "not a URL", None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{what} must be http(s)://host/...", None
    if allow_private:
        return None, None
    host = parts.hostname
    try:
        addrs = [ipaddress.ip_address(host)]
    except ValueError:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, parts.port or (443 if parts.scheme == "https" else 80), type=socket.SOCK_STREAM
            )
        except OSError:
            return f"cannot resolve {host}", None
        addrs = [ipaddress.ip_address(str(i[4][0]).split("%")[0]) for i in infos]
    for a in addrs:
        if not address_allowed(a):
            return f"{host} resolves to {a}, a loopback/private address ({hint})", None
    return None, str(addrs[0])


def pinned_request(url: str, ip: str) -> tuple[str, dict[str, str], dict[str, str]]:
    """The URL to connect to `ip` instead of the name, with the Host header and (for https) the
    TLS server name that keep the request and the certificate check about the original host."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"[{ip}]" if ":" in ip else ip
    if parts.port:
        netloc += f":{parts.port}"
    target = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    host_header = f"[{host}]" if ":" in host else host
    if parts.port:
        host_header += f":{parts.port}"
    extensions = {"sni_hostname": host} if parts.scheme == "https" else {}
    return target, {"Host": host_header}, extensions
