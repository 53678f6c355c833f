"""A network namespace of its own for a process (a `devagent worker`), reaching only one TCP port
of one address on the host: a veth pair (the host's end 10.R.N.1, the namespace's 10.R.N.2), its
own loopback, and in the namespace an nftables output policy that drops everything but that
port (so neither the host's database nor another namespace is reachable, whatever listens
where). Root only. Always removed afterwards, whatever the test did.

    with isolated(port=server_port) as ns:
        subprocess.Popen(ns.argv(["python", "-m", "devagent", "worker", ...]))
        ns.host  # the address the namespace reaches the host's server at
"""

from __future__ import annotations

import itertools
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

_counter = itertools.count(1)


@dataclass(frozen=True)
class Netns:
    name: str
    host: str  # the host's address, as the namespace reaches it
    inside: str  # the namespace's own address
    port: int

    def argv(self, command: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.name, *command]

    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def available() -> str | None:
    """Why namespaces cannot be made here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "nft"):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            return f"{tool} is not installed"
    return None


def _rules(host: str, port: int) -> str:
    return f"""
table inet worker {{
    chain out {{
        type filter hook output priority 0; policy drop;
        oif "lo" accept
        ct state established,related accept
        ip daddr {host} tcp dport {port} accept
    }}
}}
"""


@contextmanager
def isolated(port: int) -> Iterator[Netns]:
    """A namespace reaching the host's `port` at its veth address only (see the module's doc)."""
    why = available()
    if why is not None:
        pytest.skip(why)
    n = next(_counter)
    tag = f"{os.getpid() % 100000}x{n}"
    name, host_end, ns_end = f"dawk{tag}", f"dah{tag}", f"dan{tag}"
    octet = 100 + (os.getpid() + n) % 150
    host, inside = f"10.{octet}.{n % 250}.1", f"10.{octet}.{n % 250}.2"
    try:
        _ip("netns", "add", name)
        _ip("link", "add", host_end, "type", "veth", "peer", "name", ns_end)
        _ip("link", "set", ns_end, "netns", name)
        _ip("addr", "add", f"{host}/30", "dev", host_end)
        _ip("link", "set", host_end, "up")
        _ip("-n", name, "addr", "add", f"{inside}/30", "dev", ns_end)
        _ip("-n", name, "link", "set", ns_end, "up")
        _ip("-n", name, "link", "set", "lo", "up")
        subprocess.run(
            ["ip", "netns", "exec", name, "nft", "-f", "-"],
            input=_rules(host, port),
            text=True,
            check=True,
            capture_output=True,
            timeout=30,
        )
        yield Netns(name, host, inside, port)
    finally:
        _ip("link", "del", host_end, check=False)
        _ip("netns", "del", name, check=False)


def exists(name: str) -> bool:
    return name in _ip("netns", "list", check=False).stdout.split()
