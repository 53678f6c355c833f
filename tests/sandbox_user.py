"""Where the tests run as root, sandboxed commands run as an unprivileged user (`sandbox_user`,
nobody by default; issue 28 item 3), who must be able to write the workspaces the tests make."""

from __future__ import annotations

import os
from pathlib import Path


def for_sandbox_user(folder: Path) -> Path:
    """Gives `folder` and what is in it to the user root's sandboxed commands run as. Nothing
    changes where the tests do not run as root: commands run as the tests' own user then."""
    if os.geteuid() != 0:
        return folder
    uid, gid = nobody()
    for path in [folder, *folder.rglob("*")]:
        os.chown(path, uid, gid, follow_symlinks=False)
    return folder


def nobody() -> tuple[int, int]:
    """The uid and gid of the default sandbox user, nobody (its usual ids where /etc/passwd has
    none)."""
    import pwd

    try:
        entry = pwd.getpwnam("nobody")
    except KeyError:
        return 65534, 65534
    return entry.pw_uid, entry.pw_gid
