"""The whole output of long commands, saved where the session can read it and nothing can write
it: `data_dir/outputs/<session>/<call>.txt`. The session's folder is a read-only root of its
workspace (`Workspace.read_only_roots`), so `read_file` pages through a saved output by lines;
commands never see it (the sandbox hides the data directory). Private to the server's user
(folders 0700, files 0600); each file capped (`FILE_MAX_BYTES`, with a note at its end saying
how much more there was), all of them together bounded by `shell_outputs_mb` (the oldest removed
first), and a session's removed when its conversation is cleared.

Saving is best effort: a file that cannot be written leaves the command's result as it would be
without it (head and tail), never a failed command."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import shutil
from pathlib import Path

from devagent.agent.tools._util import human_size

FILE_MAX_BYTES = 64 * 1024 * 1024
_SAFE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}")

log = logging.getLogger(__name__)


def file_name(text: str) -> str:
    """A session or call id as one file name: itself where it is a plain name, else a hash."""
    if _SAFE.fullmatch(text):
        return text
    return hashlib.sha256(text.encode("utf-8", errors="replace")).hexdigest()[:32]


class OutputFile:
    """One command's whole output as it arrives, up to `cap` bytes."""

    def __init__(self, path: Path, fd: int, cap: int) -> None:
        self.path = path
        self._fd = fd
        self.cap = cap
        self.written = 0
        self.dropped = 0

    def write(self, data: bytes) -> None:
        if self._fd < 0:
            return
        room = self.cap - self.written
        part, rest = data[:room], data[room:]
        self.dropped += len(rest)
        try:
            while part:
                n = os.write(self._fd, part)
                self.written += n
                part = part[n:]
        except OSError as e:  # a full disk: the result goes on without the saved copy
            log.warning("could not save a command's output to %s: %s", self.path, e)
            self.finish(keep=False)

    def finish(self, keep: bool) -> Path | None:
        """Closes the file; kept (its path returned) or removed."""
        if self._fd < 0:
            return None
        fd, self._fd = self._fd, -1
        try:
            if keep and self.dropped:
                note = (
                    f"\n[the output went on for {human_size(self.dropped)} more, not saved: a saved "
                    f"output keeps its first {human_size(self.cap)}]\n"
                )
                os.write(fd, note.encode())
        except OSError:
            pass
        finally:
            os.close(fd)
        if keep:
            return self.path
        with contextlib.suppress(OSError):
            self.path.unlink()
        return None


class SavedOutputs:
    """The folder of saved outputs (`data_dir/outputs`, a real path), one folder per session."""

    def __init__(self, data_dir: Path, total_bytes: int) -> None:
        self.root = Path(os.path.realpath(data_dir)) / "outputs"
        self.total_bytes = total_bytes
        self.file_bytes = min(FILE_MAX_BYTES, total_bytes)

    def folder(self, session_id: str) -> Path:
        return self.root / file_name(session_id)

    def open(self, session_id: str, call_id: str) -> OutputFile | None:
        """A new file for the output of a call, or None where it cannot be made."""
        folder = self.folder(session_id)
        path = folder / f"{file_name(call_id)}.txt"
        try:
            for f in (self.root.parent, self.root, folder):
                with contextlib.suppress(FileExistsError):
                    f.mkdir(mode=0o700)
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(path, flags, 0o600)
        except OSError as e:
            log.warning("could not save a command's output in %s: %s", folder, e)
            return None
        return OutputFile(path, fd, self.file_bytes)

    def prune(self) -> None:
        """Removes the oldest saved outputs until all of them fit in `total_bytes` (blocking IO:
        run it in a thread)."""
        files: list[tuple[float, int, Path]] = []
        with contextlib.suppress(OSError):
            for folder in self.root.iterdir():
                for f in folder.iterdir() if folder.is_dir() and not folder.is_symlink() else ():
                    with contextlib.suppress(OSError):
                        st = f.lstat()
                        files.append((st.st_mtime, st.st_size, f))
        total = sum(size for _, size, _ in files)
        for _mtime, size, f in sorted(files):
            if total <= self.total_bytes:
                break
            with contextlib.suppress(OSError):
                f.unlink()
                total -= size
                with contextlib.suppress(OSError):
                    f.parent.rmdir()  # only when it was the folder's last file

    def remove(self, session_id: str) -> None:
        """Removes a session's saved outputs (blocking IO: run it in a thread)."""
        shutil.rmtree(self.folder(session_id), ignore_errors=True)
