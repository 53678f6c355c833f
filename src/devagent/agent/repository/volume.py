"""A repository session whose workspace is in its sandbox, not on this host (`Sandbox.files_here`
False: the container backend's volume). The clone is still made here, by the server, with the
operator's credentials (which never enter the sandbox); its files are then copied into the
sandbox's workspace as one tar stream and the host folder emptied (it stays, as the session's name
for its workspace). For the result, the work tree is copied out the same way, without its `.git`
(which the model may have rewritten and is never read), into a private folder of the server, and
the patch and the commit are made from there with the server's own git directory, as for a
workspace on this host.

A worker's sandbox (`KeptWorkspace`) needs no command for either: the clone becomes the session's
first snapshot, which the first worker granted the session restores (its setup script then runs
there, and its changes come back with that call's snapshot); the result is unpacked from the last
snapshot the server keeps, the workspace as of the last finished call, so it needs no worker."""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import tarfile
from pathlib import Path

from devagent.agent.repository.git import GitFailed
from devagent.agent.sandbox import snapshot
from devagent.agent.sandbox.base import KeptWorkspace, Sandbox, SandboxError
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.remote_files import SandboxFiles
from devagent.agent.tools.workspace import Workspace

# Into the workspace `$1`: the tar stream on the input, as the sandbox's own user.
UNPACK = 'cd -- "$1" && exec tar -xf - --no-same-owner'
# Out of the workspace `$1`: its files as a tar stream, its `.git` left out.
PACK = 'cd -- "$1" && exec tar -cf - --exclude=./.git .'


async def copy_in(sandbox: Sandbox, folder: Path) -> None:
    """The clone in `folder` (its `.git` too: the model works with git there) into the sandbox's
    workspace, then `folder` emptied."""
    if isinstance(sandbox, KeptWorkspace):
        try:
            await sandbox.seed(folder)
        except SandboxError as e:
            raise GitFailed(f"the clone could not be given to the session's sandbox: {e}") from e
        await asyncio.to_thread(_empty, folder)
        return
    files = SandboxFiles(sandbox, Workspace([folder]))
    data = await asyncio.to_thread(_pack, folder)
    try:
        code, _, err = await files.run(UNPACK, [str(files.inside_root)], data)
    except ToolFailure as e:
        raise GitFailed(f"the clone could not be copied into the session's sandbox: {e.message}") from e
    if code != 0:
        said = err.decode(errors="replace").strip()[-300:]
        raise GitFailed(f"the clone could not be copied into the session's sandbox: {said}")
    await asyncio.to_thread(_empty, folder)


async def copy_out(sandbox: Sandbox, workspace: Path, into: Path) -> None:
    """The sandbox's work tree (without `.git`) into the private folder `into`: regular files,
    folders and links inside it only (tarfile's `data` filter refuses anything else)."""
    if isinstance(sandbox, KeptWorkspace):
        kept = await sandbox.last_snapshot()
        if kept is None:
            raise GitFailed("the server keeps no snapshot of the session's workspace")
        await asyncio.to_thread(snapshot.unpack, kept, into, skip=(".git",))
        return
    files = SandboxFiles(sandbox, Workspace([workspace]))
    try:
        code, out, err = await files.run(PACK, [str(files.inside_root)])
    except ToolFailure as e:
        raise GitFailed(f"the workspace could not be read from the session's sandbox: {e.message}") from e
    if code != 0:
        said = err.decode(errors="replace").strip()[-300:]
        raise GitFailed(f"the workspace could not be read from the session's sandbox: {said}")
    await asyncio.to_thread(_unpack, out, into)


def _pack(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name in sorted(os.listdir(folder)):
            archive.add(folder / name, arcname=name)
    return buffer.getvalue()


def _unpack(data: bytes, into: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
        archive.extractall(into, filter="data")


def _empty(folder: Path) -> None:
    for name in os.listdir(folder):
        path = folder / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
