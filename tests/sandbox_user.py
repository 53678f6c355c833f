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
    from devagent.agent.tools.shell import sandbox_account

    uid, gid, _name = sandbox_account("")
    for path in [folder, *folder.rglob("*")]:
        os.chown(path, uid, gid, follow_symlinks=False)
    return folder
