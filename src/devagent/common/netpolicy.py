"""Which addresses the server may call on a client's say-so: push webhooks and client-named MCP
servers share this one policy. An address is callable when it is global in the standard
library's sense (`ipaddress`'s `is_global`: not loopback, private, link-local, shared 100.64/10,
documentation, reserved...), is not multicast, and every IPv4 address it embeds (IPv4-mapped,
6to4, NAT64) is callable too; or when it lies in one of the operator's networks
(`outbound_allow`). So a client cannot aim the server at the server's own network (SSRF)."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # RFC 6052: the last 32 bits are an IPv4 address
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")  # RFC 8215: local-use, never global


def parse_networks(values: Iterable[str]) -> tuple[IPNetwork, ...]:
    """The operator's networks ("10.0.0.0/8", "fd00::/8", a bare address); ValueError names a bad one."""
    out: list[IPNetwork] = []
    for v in values:
        v = v.strip()
        if not v:
            continue
        try:
            out.append(ipaddress.ip_network(v, strict=False))
        except ValueError:
            raise ValueError(f"{v!r} is not an IP network (like 10.0.0.0/8 or fd00::/8)") from None
    return tuple(out)


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    out: list[ipaddress.IPv4Address] = []
    if ip.sixtofour is not None:
        out.append(ip.sixtofour)
    if ip.teredo is not None:
        out.extend(ip.teredo)
    return out


def address_allowed(ip: IPAddress, allow: Iterable[IPNetwork] = ()) -> bool:
    allow = tuple(allow)
    if isinstance(ip, ipaddress.IPv6Address):  # the same host as an IPv4 address: judged as that
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        elif ip in _NAT64:  # (in ::/8, which the library calls reserved)
            ip = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if any(ip.version == net.version and ip in net for net in allow):
        return True
    if (
        not ip.is_global
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or ip.is_loopback
        or ip.is_link_local
        or (isinstance(ip, ipaddress.IPv6Address) and (ip.is_site_local or ip in _NAT64_LOCAL))
    ):
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        return all(address_allowed(v4, allow) for v4 in _embedded_ipv4(ip))
    return True


async def lookup(host: str, port: int) -> list[IPAddress]:
    """The addresses of `host` (the resolver's answer; tests replace it to play a DNS server)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [ipaddress.ip_address(str(i[4][0]).split("%")[0]) for i in infos]


async def check_outbound_url(
    url: str, *, allow_private: bool, what: str, hint: str, allow: tuple[IPNetwork, ...] = ()
) -> str | None:
    """None if the server may call `url`, else why not. `what` names the URL ("webhook URL") and
    `hint` says how the operator allows private addresses (`outbound_allow` among them)."""
    reason, _ip = await resolve_outbound_url(
        url, allow_private=allow_private, what=what, hint=hint, allow=allow
    )
    return reason


async def resolve_outbound_url(
    url: str, *, allow_private: bool, what: str, hint: str, allow: tuple[IPNetwork, ...] = ()
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
            addrs = await lookup(host, parts.port or (443 if parts.scheme == "https" else 80))
        except OSError:
            return f"cannot resolve {host}", None
    for a in addrs:
        if not address_allowed(a, allow):
            return (f"{host} resolves to {a}, a loopback/private address ({hint})"), None
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
