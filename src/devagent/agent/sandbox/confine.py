"""Workspace confinement by construction.

Checking a path and opening it later is a race: a directory inside the workspace exchanged with a
symlink to outside (`renameat2(RENAME_EXCHANGE)`) between the check and the open redirects the
open. So nothing here checks a path string and opens it afterwards. `locate` walks a path from an
open directory descriptor of a workspace root and returns an open descriptor of the final
component's parent directory plus the final name; the caller then does its one operation relative
to that descriptor (`os.open(name, ... | O_NOFOLLOW, dir_fd=...)`, `os.replace(...,
src_dir_fd=, dst_dir_fd=)`, `os.unlink(name, dir_fd=)`). A directory held open stays the same
directory whatever is renamed afterwards, and the final open does not follow a symlink put there
since, so a swap at any moment can make an operation fail, never reach outside.

How the parent is reached:

- Fast path: `openat2(root_fd, parent, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
  RESOLVE_NO_MAGICLINKS)` where the kernel has it (Linux 5.6+). Python has no binding for openat2,
  so it is called through `ctypes` and `syscall(2)`. The kernel refuses any symlink and any `..`
  that would leave the root, atomically. A path with a symlink in it (or a kernel, a seccomp filter
  or a platform without openat2) takes the slow path.
- Slow path: component by component, `os.open(name, O_DIRECTORY | O_NOFOLLOW, dir_fd=current)`.
  A symlink met on the way is read (`readlinkat`) and its target walked the same way: a relative
  target from the directory holding the link, an absolute one from the root it names. `..` never
  goes above a root (above one root it may come down into another root, lexically, like a symlink
  from one root into another). So symlinks that stay inside the workspace keep working, and one
  that leads out is refused without anything outside being opened.

Hard links: a hard link inside the workspace to a file outside it is indistinguishable from any
other file (both names are the same inode), so a read through it reads that file's content. Writes
never modify it: they write a new file and rename it over the name (`atomic_write`), which replaces
the workspace's directory entry and leaves the other link alone.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import posixpath
import secrets
import stat
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devagent.common.errors import DevagentError
from devagent.common.faults import crash_point

# Opening a directory only to walk through it: O_PATH (Linux) needs no read permission.
_O_PATH = getattr(os, "O_PATH", 0)
DIR_WALK_FLAGS = (_O_PATH or os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# Opening a directory to list it.
DIR_READ_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# Opening a file to read it: never through a symlink, never blocking on a FIFO.
FILE_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
MAX_SYMLINKS = 40

# openat2(2): the syscall number is 437 on every Linux architecture that has it (alpha excepted).
_SYS_OPENAT2 = 437
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08

# Set to False to always take the component-by-component path (tests run both).
USE_OPENAT2 = True


class Outside(DevagentError, OSError):
    """The path leaves the workspace roots (directly, by `..` or through a symlink)."""


@dataclass(slots=True)
class Located:
    """An open parent directory, the final name in it (not a symlink when it was looked at, and
    opened without following one) and the real path (for display: never reopened by string).
    The name is "." when the path is a directory reached by `.`/`..` or a root itself."""

    dir_fd: int
    name: str
    path: Path

    def close(self) -> None:
        if self.dir_fd >= 0:
            os.close(self.dir_fd)
            self.dir_fd = -1

    def __enter__(self) -> Located:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def lstat(self) -> os.stat_result | None:
        """The final component's status without following a symlink, None when it is missing."""
        if self.dir_fd < 0:
            return None
        try:
            return os.stat(self.name, dir_fd=self.dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def open_file(self, flags: int = FILE_READ_FLAGS) -> int:
        """The final component opened (O_NOFOLLOW) as a regular file; IsADirectoryError for a
        directory, OSError(EINVAL) for anything else that is not a regular file."""
        fd = os.open(self.name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self.dir_fd)
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                raise IsADirectoryError(errno.EISDIR, "is a directory", str(self.path))
            if not stat.S_ISREG(mode):
                raise OSError(errno.EINVAL, "not a regular file", str(self.path))
        except BaseException:
            os.close(fd)
            raise
        return fd

    def open_dir(self) -> int:
        """The final component opened (O_NOFOLLOW) as a directory to list."""
        return os.open(self.name, DIR_READ_FLAGS, dir_fd=self.dir_fd)


# --- openat2 -------------------------------------------------------------------------------------


class _OpenHow(ctypes.Structure):
    _fields_ = (("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64))


_syscall: Any = None
_openat2_works: bool | None = None  # unknown until first tried


def _openat2(dir_fd: int, path: str, flags: int, resolve: int) -> int:
    """openat2(2) through ctypes (Python has no binding). Raises OSError with the errno."""
    global _syscall
    if _syscall is None:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.syscall
        fn.restype = ctypes.c_long
        _syscall = fn
    how = _OpenHow(flags, 0, resolve)
    fd = int(
        _syscall(
            ctypes.c_long(_SYS_OPENAT2),
            ctypes.c_int(dir_fd),
            ctypes.c_char_p(os.fsencode(path)),
            ctypes.byref(how),
            ctypes.c_size_t(ctypes.sizeof(how)),
        )
    )
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)
    return fd


def openat2_available() -> bool:
    """Whether this process can use openat2 (Linux 5.6+, not blocked by a seccomp filter)."""
    global _openat2_works
    if _openat2_works is None:
        if not hasattr(os, "O_PATH") or not sys.platform.startswith("linux"):
            _openat2_works = False
        else:
            try:
                os.close(_openat2(-100, "/", DIR_WALK_FLAGS, RESOLVE_NO_MAGICLINKS))  # AT_FDCWD
                _openat2_works = True
            except (OSError, AttributeError):
                _openat2_works = False
    return _openat2_works


# --- the walk ------------------------------------------------------------------------------------


def _root_of(roots: Sequence[Path], parts: Sequence[str]) -> tuple[int, list[str]]:
    """The root an absolute path (as parts) is lexically under (the longest), and the rest."""
    best = -1
    for i, root in enumerate(roots):
        rp = root.parts
        if tuple(parts[: len(rp)]) == rp and (best < 0 or len(rp) > len(roots[best].parts)):
            best = i
    if best < 0:
        raise Outside(errno.EXDEV, "outside the workspace roots", str(Path(*parts)))
    return best, list(parts[len(roots[best].parts) :])


def _open_root(root: Path) -> int:
    # The root itself was made real when the workspace was created; its parents are not the
    # workspace's, and a root that became a symlink is refused (O_NOFOLLOW).
    return os.open(root, DIR_WALK_FLAGS)


def folder_owner(dir_fd: int) -> tuple[int, int] | None:
    """Where the server runs as root, the owner (uid, gid) a file or folder it creates in the open
    folder `dir_fd` is given: the folder's own, so that a workspace belonging to the user
    sandboxed commands run as stays that user's. None: keep the creator's."""
    if os.geteuid() != 0:
        return None
    st = os.fstat(dir_fd)
    return None if st.st_uid == 0 and st.st_gid == 0 else (st.st_uid, st.st_gid)


def _readlink(dir_fd: int, name: str) -> str | None:
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except OSError as e:
        if e.errno in (errno.EINVAL, errno.ENOENT):
            return None
        raise


def _is_dir_now(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def locate(
    roots: Sequence[Path],
    path: Path,
    *,
    follow: bool = True,
    create_dirs: bool = False,
    missing_ok: bool = False,
) -> Located:
    """Opens the parent directory of the absolute `path` beneath one of `roots` (see the module's
    docstring). `follow`: symlinks inside the workspace are followed (else any symlink on the way,
    the final name included, is refused with ELOOP). `create_dirs`: missing parent directories are
    created (relative to their open parent). `missing_ok`: a missing parent gives a `Located` with
    no directory open (`dir_fd` -1) and the lexical path, to name a file yet to be created.
    Raises `Outside`, or OSError (FileNotFoundError for a missing parent, NotADirectoryError,
    ELOOP for too many symlinks...)."""
    if not path.is_absolute():
        raise ValueError(f"not an absolute path: {path}")
    index, rest = _root_of(roots, path.parts)
    if USE_OPENAT2 and ".." not in rest and openat2_available():
        fast = _locate_openat2(roots[index], rest, follow=follow)
        if fast is not None:
            return fast
    return _locate_walk(roots, index, rest, follow=follow, create_dirs=create_dirs, missing_ok=missing_ok)


def _locate_openat2(root: Path, rest: list[str], *, follow: bool) -> Located | None:
    """The fast path, or None to take the walk (a symlink, a missing directory to create, or
    openat2 refused for a reason the walk decides on)."""
    names = [p for p in rest if p not in ("", ".")]
    if not names:
        return None
    parent = "/".join(names[:-1]) or "."
    root_fd = _open_root(root)
    try:
        fd = _openat2(
            root_fd, parent, DIR_WALK_FLAGS, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS
        )
    except OSError:
        return None  # ELOOP (a symlink), EXDEV, ENOENT (maybe created by the walk), ENOSYS, EPERM...
    finally:
        os.close(root_fd)
    name = names[-1]
    try:
        if _readlink(fd, name) is not None:
            os.close(fd)
            return None  # the final name is a symlink: the walk decides (follows it, beneath the root)
    except BaseException:
        os.close(fd)
        raise
    return Located(fd, name, root.joinpath(*names))


def _locate_walk(
    roots: Sequence[Path], index: int, rest: list[str], *, follow: bool, create_dirs: bool, missing_ok: bool
) -> Located:
    pending = [p for p in rest if p not in ("", ".")]  # the components still to walk, in order
    fds: list[int] = []  # the open directories below the root, one per name in `names`
    names: list[str] = []
    root_fd = _open_root(roots[index])
    links = 0
    try:
        while pending:
            name = pending.pop(0)
            cur = fds[-1] if fds else root_fd
            if name == "..":
                if fds:
                    os.close(fds.pop())
                    names.pop()
                elif roots[index].parent != roots[index]:  # `..` of "/" is "/"
                    # Above this root: only down into another root, lexically.
                    index, pending = _root_of(roots, [*roots[index].parent.parts, *pending])
                    os.close(root_fd)
                    root_fd = -1
                    root_fd = _open_root(roots[index])
                continue
            if pending:  # a directory on the way
                try:
                    fds.append(os.open(name, DIR_WALK_FLAGS, dir_fd=cur))
                    names.append(name)
                    continue
                except FileNotFoundError:
                    if missing_ok:
                        return _missing(roots, roots[index].joinpath(*names, name, *pending))
                    if not create_dirs:
                        raise
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(name, 0o777, dir_fd=cur)
                        if (owner := folder_owner(cur)) is not None:
                            os.chown(name, *owner, dir_fd=cur, follow_symlinks=False)
                    pending.insert(0, name)  # and open it, by the same rule
                    continue
                except OSError as e:
                    if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise
                    target = _readlink(cur, name)
                    if target is None:
                        links += 1  # it was a symlink a moment ago? look again, a bounded number of times
                        if e.errno == errno.ENOTDIR and _is_dir_now(cur, name) and links <= MAX_SYMLINKS:
                            pending.insert(0, name)
                            continue
                        raise  # not a directory, and not a symlink
            else:  # the final name: its parent is open
                target = _readlink(cur, name)
                if target is None:
                    return Located(os.dup(cur), name, roots[index].joinpath(*names, name))
            # A symlink: walk its target instead, by the same rule.
            if not follow:
                raise OSError(errno.ELOOP, "a symlink where none may be", name)
            links += 1
            if links > MAX_SYMLINKS:
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), name)
            parts = [p for p in target.split("/") if p not in ("", ".")]
            if target.startswith("/"):
                index, pending = _root_of(roots, ["/", *parts, *pending])
                for fd in fds:
                    os.close(fd)
                fds.clear()
                names.clear()
                os.close(root_fd)
                root_fd = -1
                root_fd = _open_root(roots[index])
            else:
                pending = parts + pending
        # Nothing left after a `..`, or no component at all: the directory reached itself.
        return Located(os.dup(fds[-1] if fds else root_fd), ".", roots[index].joinpath(*names))
    finally:
        for fd in fds:
            os.close(fd)
        if root_fd >= 0:
            os.close(root_fd)


def _missing(roots: Sequence[Path], lexical: Path) -> Located:
    """A path under a directory that does not exist: where it would be (checked lexically against
    the roots), with no directory open. Only for naming a file that is yet to be created."""
    real = Path(posixpath.normpath(lexical))
    _root_of(roots, real.parts)
    return Located(-1, real.name, real)


TEMP_PREFIX = ".devagent-tmp-"  # atomic writes' temporary files (tools/_util.is_temp_name)


def replace_in(loc: Located, data: bytes, shown: Path) -> None:
    """Replaces (or creates) the file `loc` names with `data` so that a crash at any moment leaves
    the old content or the new one (`tools/_util.atomic_write` says how): a new temporary file in
    the open parent directory, flushed and fsynced, renamed over the name, the directory fsynced.
    `shown`: the path named in errors."""
    path = shown
    old = loc.lstat()
    if loc.name == "." or (old is not None and stat.S_ISDIR(old.st_mode)):
        raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
    tmp, fd = _create_temp(loc.dir_fd, path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            if old is not None and stat.S_ISREG(old.st_mode):
                _copy_permissions(f.fileno(), old)
            elif (owner := folder_owner(loc.dir_fd)) is not None:
                os.fchown(f.fileno(), *owner)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        crash_point("atomic_write.before_rename")
        os.replace(tmp, loc.name, src_dir_fd=loc.dir_fd, dst_dir_fd=loc.dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=loc.dir_fd)
        raise
    _fsync_directory(loc.dir_fd)


def _create_temp(dir_fd: int, shown: Path) -> tuple[str, int]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
    for _ in range(100):
        tmp = f"{TEMP_PREFIX}{secrets.token_hex(8)}"
        try:
            # 0o666 minus the umask: the default permissions of a new file
            return tmp, os.open(tmp, flags, 0o666, dir_fd=dir_fd)
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a temporary file in {shown}")  # pragma: no cover


def _copy_permissions(fd: int, old: os.stat_result) -> None:
    """The replaced file's mode, and its owner and group where this process may set them."""
    mode = stat.S_IMODE(old.st_mode)
    os.fchmod(fd, mode)
    new = os.fstat(fd)
    if (new.st_uid, new.st_gid) != (old.st_uid, old.st_gid):
        with contextlib.suppress(OSError):  # only root may give a file away; a group may be kept
            os.fchown(fd, old.st_uid, old.st_gid)
        if stat.S_IMODE(os.fstat(fd).st_mode) != mode:  # chown clears setuid/setgid bits
            os.fchmod(fd, mode)


def _fsync_directory(dir_fd: int) -> None:
    """Makes a rename in the directory durable. The file is already in place when this runs, so a
    file system that cannot fsync a directory (some network ones) is not an error."""
    try:
        fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
