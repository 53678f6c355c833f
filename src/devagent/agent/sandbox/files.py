"""A session's files on this host, as the local backends give them: every operation reaches its
file through the confined walk of the file tools (`tools/_confine.py`: from an open descriptor of
a workspace root, no symlink out, the final step relative to the open parent), so it never
leaves the workspace roots whatever is swapped meanwhile. A path outside is a SandboxError."""

from __future__ import annotations

import asyncio
import os
import stat as stat_mode
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from devagent.agent.sandbox.base import SandboxError

if TYPE_CHECKING:
    from devagent.agent.sandbox.confine import Located


class HostFiles:
    """The file operations of a sandbox whose workspace is a folder of this host."""

    def __init__(self, roots: Sequence[Path]) -> None:
        self.roots = tuple(Path(os.path.realpath(r)) for r in roots)

    def show_path(self, host_path: str | Path) -> str:
        return str(host_path)  # the command sees the host's own paths

    @property
    def files_here(self) -> bool:
        return True

    def _locate(self, path: str | Path, *, create_dirs: bool = False, missing_ok: bool = False) -> Located:
        # late: the confined walk (`confine.py`), loaded with the first file
        from devagent.agent.sandbox.confine import Outside, locate

        where = Path(path)
        if not where.is_absolute():
            if not self.roots:
                raise SandboxError(f"{str(path)!r}: this sandbox has no workspace")
            where = self.roots[0] / where
        try:
            return locate(list(self.roots), where, create_dirs=create_dirs, missing_ok=missing_ok)
        except Outside as e:
            raise SandboxError(f"path {str(path)!r} is outside the workspace roots") from e

    def read_bytes(self, path: str | Path) -> bytes:
        with self._locate(path) as loc:
            fd = loc.open_file()
        with os.fdopen(fd, "rb") as f:
            return f.read()

    def write_atomic(self, path: str | Path, data: bytes) -> None:
        # late: as `_locate`; the write tools' own rename-over (`confine.replace_in`)
        from devagent.agent.sandbox.confine import replace_in

        with self._locate(path, create_dirs=True) as loc:
            replace_in(loc, data, Path(path))

    def list_dir(self, path: str | Path) -> list[str]:
        with self._locate(path) as loc:
            fd = loc.open_dir()
        try:
            return sorted(os.listdir(fd))
        finally:
            os.close(fd)

    def stat(self, path: str | Path) -> os.stat_result | None:
        with self._locate(path, missing_ok=True) as loc:
            if loc.name == ".":
                return os.stat(loc.dir_fd)
            return loc.lstat()

    def delete(self, path: str | Path) -> None:
        with self._locate(path) as loc:
            if loc.name == ".":
                raise SandboxError(f"{str(path)!r} is a workspace root: it is never deleted")
            found = loc.lstat()
            if found is not None and stat_mode.S_ISDIR(found.st_mode):
                os.rmdir(loc.name, dir_fd=loc.dir_fd)
            else:
                os.unlink(loc.name, dir_fd=loc.dir_fd)

    # The awaitable forms run the same confined operation in a worker thread: a file on a slow
    # or busy disk must not hold up the event loop.
    async def read_bytes_async(self, path: str | Path) -> bytes:
        return await asyncio.to_thread(self.read_bytes, path)

    async def write_atomic_async(self, path: str | Path, data: bytes) -> None:
        await asyncio.to_thread(self.write_atomic, path, data)

    async def list_dir_async(self, path: str | Path) -> list[str]:
        return await asyncio.to_thread(self.list_dir, path)

    async def stat_async(self, path: str | Path) -> os.stat_result | None:
        return await asyncio.to_thread(self.stat, path)

    async def delete_async(self, path: str | Path) -> None:
        await asyncio.to_thread(self.delete, path)
