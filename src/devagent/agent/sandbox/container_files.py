"""A container session's file operations, run inside its container by its own user (an `exec` of
a small POSIX shell script): read, atomic write, list, stat and delete, confined to /workspace.

A path is resolved inside the container (symbolic links included, so a link cannot lead out of
/workspace) before it is checked; stat and delete look at a link itself, so only its folder is
resolved. Running there rather than on the volume's folder on the host keeps the resolution in the
container's own view (an absolute link means the container's path, never the host's) and works for
engines whose volumes the server cannot reach."""

from __future__ import annotations

import os
import stat as stat_module
from collections.abc import Sequence

from devagent.agent.sandbox.podman import WORKSPACE
from devagent.common.errors import DevagentError

# Exit codes: 2 not found, 3 outside the workspace, 4 a folder where a file was meant, 5 not
# written, 6 not a folder.
SCRIPT = r"""
op=$1
case "$op" in
stat|delete) d=$(realpath -m -- "$(dirname -- "$2")") || exit 3; p="${d%/}/$(basename -- "$2")";;
*) p=$(realpath -m -- "$2") || exit 3;;
esac
case "$p" in /workspace|/workspace/*) ;; *) echo "outside the workspace" >&2; exit 3;; esac
case "$op" in
read) [ -e "$p" ] || exit 2; [ -d "$p" ] && exit 4; exec cat -- "$p";;
write) [ -d "$p" ] && exit 4; d=$(dirname -- "$p"); mkdir -p -- "$d" || exit 5
  t=$(mktemp -p "$d" .devagent-write.XXXXXX) || exit 5
  if [ -e "$p" ]; then chmod --reference="$p" "$t"; else chmod 644 "$t"; fi
  cat > "$t" && mv -f -- "$t" "$p" || { rm -f -- "$t"; exit 5; };;
list) [ -d "$p" ] || { [ -e "$p" ] && exit 6; exit 2; }
  exec find "$p" -mindepth 1 -maxdepth 1 -printf '%f\0';;
stat) [ -e "$p" ] || [ -L "$p" ] || exit 2
  exec find "$p" -maxdepth 0 -printf '%y %m %i %D %n %U %G %s %A@ %T@ %C@\0';;
delete) [ -e "$p" ] || [ -L "$p" ] || exit 2; [ "$p" = /workspace ] && exit 3
  if [ -d "$p" ] && [ ! -L "$p" ]; then exec rmdir -- "$p"; else exec rm -f -- "$p"; fi;;
*) exit 5;;
esac
"""

_KINDS = {
    "f": stat_module.S_IFREG,
    "d": stat_module.S_IFDIR,
    "l": stat_module.S_IFLNK,
    "p": stat_module.S_IFIFO,
    "s": stat_module.S_IFSOCK,
    "c": stat_module.S_IFCHR,
    "b": stat_module.S_IFBLK,
}


class OutsideWorkspace(DevagentError, PermissionError):
    """A file operation named a path outside the session's workspace."""


def argv(op: str, where: str) -> list[str]:
    """The command inside the container for operation `op` on the container path `where`."""
    return ["/bin/sh", "-c", SCRIPT, "sh", op, where]


def failure(op: str, where: str, code: int, err: bytes) -> OSError:
    """The exception for the script's exit `code`."""
    message = f"{where}: {err.decode(errors='replace').strip() or op + ' failed'}"
    kind = {2: FileNotFoundError, 3: OutsideWorkspace, 4: IsADirectoryError, 6: NotADirectoryError}
    return kind.get(code, OSError)(message)


def names(raw: bytes) -> list[str]:
    """`list`'s output: the folder's names, sorted."""
    return sorted(n.decode(errors="surrogateescape") for n in raw.split(b"\0") if n)


def stat_result(raw: bytes) -> os.stat_result | None:
    """`stat`'s output as an lstat result (ids as the container numbers them)."""
    record = raw.split(b"\0")[0].decode()
    if not record:
        return None
    kind, mode, ino, dev, nlink, uid, gid, size, atime, mtime, ctime = record.split(" ")
    fields: Sequence[float | int] = (
        _KINDS.get(kind, 0) | int(mode, 8),
        int(ino),
        int(dev),
        int(nlink),
        int(uid),
        int(gid),
        int(size),
        float(atime),
        float(mtime),
        float(ctime),
    )
    return os.stat_result(fields)


__all__ = ["WORKSPACE", "OutsideWorkspace", "argv", "failure", "names", "stat_result"]
