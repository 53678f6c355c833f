"""A workspace's snapshot, as a worker sends it to the server after a call that changed it and as
the next worker of the session restores it: a gzipped tar of the whole folder (symbolic links
kept as links, never followed). Whether a call changed the workspace is told by a manifest (each
entry's type and mode, size and modification time), walked after every call.

What it costs: a walk of the workspace per call (stat of every entry); per call that changed
something, the whole workspace compressed and stored in one database row (replaced each time),
so a large workspace costs its compressed size per changing call in traffic and write load. A git
bundle of only the new commits, or an operator's object store, would cost less and is not built.

A session cloned from a repository starts from a snapshot too: the server packs its clone and
keeps it as the session's first (worker.py `seed`), and the session's result is made from the
last one kept (repository/volume.py), never from a worker's folder."""

from __future__ import annotations

import io
import os
import shutil
import tarfile
from pathlib import Path, PurePosixPath

Manifest = dict[str, tuple[int, int, int]]
LARGEST_SNAPSHOT = 256 * 2**20  # a snapshot's compressed size the server keeps, at most


def manifest(folder: Path) -> Manifest:
    """Every entry under `folder` (relative path -> mode, size, mtime in ns), links not followed."""
    found: Manifest = {}
    for top, dirs, files in os.walk(folder):
        for name in (*dirs, *files):
            path = os.path.join(top, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            found[os.path.relpath(path, folder)] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return found


def pack(folder: Path) -> bytes:
    """The folder's contents as a gzipped tar (paths relative to it)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz", compresslevel=6) as tar:
        for name in sorted(os.listdir(folder)):
            tar.add(folder / name, arcname=name, recursive=True)
    return out.getvalue()


def _safe(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """tarfile's "data" filter (nothing outside the folder, no devices, no absolute or escaping
    links), skipping what it refuses rather than failing the whole restore."""
    try:
        return tarfile.data_filter(member, dest)
    except tarfile.FilterError:
        return None


def unpack(data: bytes, into: Path, *, skip: tuple[str, ...] = ()) -> None:
    """The snapshot's contents into the existing folder `into` (the "data" filter's refusals
    skipped), leaving out the top-level entries named in `skip` and everything under them."""

    def kept(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
        parts = [p for p in PurePosixPath(member.name).parts if p != "/"]
        return None if parts and parts[0] in skip else _safe(member, dest)

    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(into, filter=kept)


def restore(folder: Path, data: bytes | None) -> None:
    """`folder` emptied, then holding the snapshot's contents (empty for None)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in os.listdir(folder):
        path = folder / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    if data:
        unpack(data, folder)
