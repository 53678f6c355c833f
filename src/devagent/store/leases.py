"""Who may change a session now: the lease vocabulary of the store, without SQLAlchemy (so the
core can name these before the store is opened)."""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from typing import Any

from devagent.common.errors import DevagentError


class SessionExists(DevagentError):
    """A session with this id is stored already."""


class StaleSession(DevagentError):
    """A write was based on a revision of the session that is no longer the stored one, or its
    process no longer holds the session's lease: another process changed the session."""


@dataclass(slots=True)
class Lease:
    """What `claim` found: the stored revision, and the stored state and status when the caller's
    revision was not the stored one (None: the caller's view is current)."""

    revision: int
    state: dict[str, Any] | None


@dataclass(slots=True)
class Holder:
    """Who holds a session's lease when `claim` could not take it."""

    owner: str
    until: float


@dataclass(slots=True)
class SessionRow:
    revision: int
    state: dict[str, Any]
    lease_owner: str | None
    lease_live: bool  # held by a process that is alive (by expiry and, on this host, by pid)
    updated_at: float  # when the state was last stored (seconds since the epoch)


def new_owner() -> str:
    """A lease owner's name: host, pid and a random part (a pid is reused; one process may open
    several stores, each its own owner). Registered as live until `retire`."""
    owner = f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"
    _LIVE.add(owner)
    return owner


def retire(owner: str) -> None:
    """The store of `owner` was closed: its leases are void."""
    _LIVE.discard(owner)


def owner_is_dead(owner: str) -> bool:
    """True if `owner` names a process of this host that no longer runs, or a store of this
    process that was closed (its lease is void)."""
    host, _, rest = owner.partition("/")
    pid_text, _, _ = rest.partition("/")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return owner not in _LIVE  # closed, or an earlier process with our pid
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:  # a killed child its parent has not reaped yet still answers signal 0
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False


_LIVE: set[str] = set()
