"""The user a root server's sandboxed commands run as: never root."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

from devagent.agent.sandbox.base import SandboxError


def sandbox_account(spec: str) -> tuple[int, int, str]:
    """(uid, gid, name) of `sandbox_user` (a name, a uid, either with `:group`; "" is nobody),
    the user sandboxed commands run as where the server runs as root. SandboxError for root or
    a name this machine does not know."""
    import grp
    import pwd

    text = spec.strip() or "nobody"
    name, _, group = text.partition(":")
    try:
        if name.isdigit():
            uid, gid, shown = int(name), int(name), name
            with contextlib.suppress(KeyError):
                entry = pwd.getpwuid(uid)
                gid, shown = entry.pw_gid, entry.pw_name
        else:
            entry = pwd.getpwnam(name)
            uid, gid, shown = entry.pw_uid, entry.pw_gid, entry.pw_name
        if group:
            gid = int(group) if group.isdigit() else grp.getgrnam(group).gr_gid
    except KeyError:
        if not spec.strip():  # no nobody in /etc/passwd (a minimal image): its usual ids
            return 65534, 65534, "nobody"
        raise SandboxError(
            f"sandbox_user {spec!r} is not a user (and group) of this machine: give a name, a uid "
            "or uid:gid (DEVAGENT_SANDBOX_USER)"
        ) from None
    if uid == 0 or gid == 0:
        raise SandboxError(f"sandbox_user {spec!r} is root: sandboxed commands never run as root")
    return uid, gid, shown


def root_sandbox_user(spec: str, owned_by: Sequence[Path]) -> tuple[int, int, str]:
    """The user a root server's sandboxed commands run as: `sandbox_user` (`spec`) where the
    operator set it; else the one owner of the workspace roots `owned_by` where that is not root
    (a checkout or volume of the user's); else nobody. Never root (`sandbox_account`)."""
    if spec.strip():
        return sandbox_account(spec)
    owners = set()
    for root in owned_by:
        with contextlib.suppress(OSError):
            owners.add(root.stat().st_uid)
    if len(owners) == 1 and (uid := owners.pop()) != 0:
        with contextlib.suppress(SandboxError):  # (an account whose group is root's: nobody)
            return sandbox_account(str(uid))
    return sandbox_account("")


def give_tree(folder: Path, uid: int, gid: int) -> None:
    """`folder` and all it holds (a new workspace, a repository's clone the server just made)
    become the user's: links themselves, never what they point to."""
    os.chown(folder, uid, gid, follow_symlinks=False)
    for top, dirs, names in os.walk(folder):
        for name in (*dirs, *names):
            os.chown(os.path.join(top, name), uid, gid, follow_symlinks=False)
