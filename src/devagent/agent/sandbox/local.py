"""The local backend: commands run in bubblewrap on the server's own host.

Bubblewrap shows the workspace roots read-write, the rest of the filesystem read-only, a private
/tmp and /run, no network unless the operator allows it, no capabilities, and its own PID
namespace, so every process a command started ends with it, with the turn, or with the server
(`--die-with-parent`). `Bubblewrap` is the operator's set-up (chosen once per process:
`choose.py`), `LocalSandbox` one session's use of it over the session's roots, `LocalProvider`
the core's.

Where the server runs as root, a sandboxed command never does: it runs as an
unprivileged user (`sandbox_user`, default nobody), becoming it inside a sandbox root made, or,
where root may not make namespaces (a container without CAP_SYS_ADMIN), in one bwrap made as
that user. A user namespace mapping root to another uid would not do: its processes are still
root to every file outside. Files that hold secrets are hidden whoever runs: /etc/shadow and its
kin, /root, devagent's own files and the operator's `sandbox_hide`.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from devagent.agent.sandbox.accounts import give_tree
from devagent.agent.sandbox.base import Limits, Started, Stdin, Streams, Winsize
from devagent.agent.sandbox.files import HostFiles
from devagent.agent.sandbox.shown import not_holding
from devagent.agent.sandbox.spawn import command_line, spawn, started

# Empty in the sandbox: never shown whole to a command that asks to see more (a hook's folders).
_PRIVATE = (Path("/tmp"), Path("/run"))


@dataclass(frozen=True, slots=True)
class Bubblewrap:
    """How sandboxed commands are started: bubblewrap at `bwrap`."""

    bwrap: str
    version: str = ""  # "bubblewrap 0.8.0"
    network: bool = False
    # Directories shown empty inside: the server's home and data directory, the
    # user's config folder, /root, the operator's `sandbox_hide` folders, and on a server every
    # workspace root (a session sees its own only).
    hidden: tuple[Path, ...] = ()
    # Directories inside hidden ones shown again, read-only: toolchains on PATH under the homes,
    # the user's skill folders (their scripts are run as commands).
    readable: tuple[Path, ...] = ()
    # Files shown empty and read-only: the settings file and a SQLite database wherever they are,
    # /etc/shadow and its kin, the operator's `sandbox_hide` files.
    masked: tuple[Path, ...] = ()
    # The unprivileged user commands run as (uid, gid, name) where the server runs as root; None:
    # the server's own user, never root (`choose.choose_sandbox`).
    user: tuple[int, int, str] | None = None
    # How a root server's commands become `user`: False, bwrap runs as root (no user namespace:
    # root in one is still root to every file) and the command's first process becomes the user;
    # True, where root may not make namespaces without a user namespace (a container without
    # CAP_SYS_ADMIN), bwrap itself is started as the user, in a user namespace of its own.
    as_user: bool = False
    # Whether the operator named `user` (sandbox_user), rather than devagent taking the
    # workspace's owner or nobody (`choose.root_sandbox_user`).
    user_named: bool = False

    def argv(self, roots: Sequence[Path], cwd: str, command: Sequence[str]) -> list[str]:
        """The bwrap command line running `command` in `cwd` with `roots` writable."""
        args = [self.bwrap, *self._isolation(), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        for _depth, _order, mount in sorted(self._mounts(roots), key=lambda m: (m[0], m[1], m[2])):
            args += mount
        if self.user is None or self.as_user:
            return [*args, "--chdir", cwd, *command]
        return [*args, *self._drop(cwd, command)]

    def _mounts(self, roots: Sequence[Path]) -> list[tuple[int, int, list[str]]]:
        """The mounts over the read-only root, each with its depth and its order among mounts
        of equal depth. Later mounts cover earlier ones: parents first, so a root inside /tmp
        stays writable and a hidden directory inside a root stays hidden. At equal depth: hide,
        then show again read-only, then the roots (a root wins over a hide), then the masks (a
        masked file is never a root)."""
        tmpfs = [Path("/tmp")]
        if os.path.isdir("/run"):  # sockets there (docker, dbus) ignore read-only mounts
            tmpfs.append(Path("/run"))
        for h in sorted((h for h in self.hidden if h.is_dir()), key=lambda h: len(h.parts)):
            if self._reaches(h, tmpfs):
                tmpfs.append(h)
        dropping = self.user is not None and not self.as_user
        # bwrap's tmpfs are the user's who runs it: where that is root, the sandbox user needs
        # them open (sticky, as /tmp is), or /tmp and $HOME would be read-only to it.
        perms = ["--perms", "1777"] if dropping else []
        mounts = [(len(h.parts), 0, [*perms, "--tmpfs", str(h)]) for h in tmpfs]
        resolv = Path(os.path.realpath("/etc/resolv.conf"))
        if self.network and resolv.is_relative_to("/run") and resolv.is_file():
            mounts.append((len(resolv.parts), 1, ["--ro-bind", str(resolv), str(resolv)]))
        shown = [r for r in self.readable if r.is_dir() and self._reaches(r, tmpfs, whole=True)]
        mounts += [(len(r.parts), 1, ["--ro-bind", str(r), str(r)]) for r in shown]
        mounts += [(len(r.parts), 2, ["--bind", str(r), str(r)]) for r in roots]
        masked = [f for f in self.masked if f.is_file() and self._reaches(f, tmpfs)]
        mounts += [(len(f.parts), 3, ["--ro-bind", "/dev/null", str(f)]) for f in masked]
        if dropping:
            # The folders bwrap (root) makes on the way to a root or a toolchain inside an empty
            # tmpfs are root's and closed: the sandbox user must pass through them.
            binds = [*shown, *roots]
            ways = {a for r in binds for a in r.parents if _made_by_bwrap(a, tmpfs, binds)}
            mounts += [(len(a.parts), -1, ["--perms", "0711", "--dir", str(a)]) for a in ways]
        return mounts

    def _reaches(self, path: Path, tmpfs: Sequence[Path], whole: bool = False) -> bool:
        """Whether bwrap, started as the sandbox user, can reach `path` to mount on it (inside an
        empty tmpfs it makes the way itself) and, `whole`, read it as a source. What that user
        cannot reach needs no mask, and a toolchain it cannot read is left out rather than
        failing every command. Always, where bwrap runs as root or as the server's user."""
        if not self.as_user or self.user is None:
            return True
        uid, gid, _name = self.user
        for folder in [*reversed(path.parents), *([path] if whole else [])]:
            if folder in tmpfs and not whole:
                return True
            if not _may(folder, uid, gid, 0o1):
                return False
        return True

    def _isolation(self) -> list[str]:
        """The namespaces and capabilities. In a user namespace (bwrap run by the server's user or
        by the sandbox user): every namespace, no capabilities. Run by root for the sandbox user:
        no user namespace, and only the capabilities to become that user, which it loses by
        becoming it (`_drop`)."""
        if self.user is None or self.as_user:
            args = ["--unshare-all"]  # user (when possible), ipc, pid, net, uts, cgroup
            if self.network:
                args.append("--share-net")
            return [*args, "--die-with-parent", "--cap-drop", "ALL"]
        args = ["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
        if not self.network:
            args.append("--unshare-net")
        become = ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        return [*args, "--die-with-parent", "--cap-drop", "ALL", *become]

    def _drop(self, cwd: str, command: Sequence[str]) -> list[str]:
        """`command` run in `cwd` as the sandbox user: the Python devagent runs on (always there)
        takes the user's uid and gid and no other group, so no capability is left, then enters
        `cwd` as that user and starts the command (its program found here: Python has no search
        path there)."""
        assert self.user is not None
        uid, gid, _name = self.user
        program = shutil.which(command[0]) or command[0]
        python = os.path.realpath(sys.executable)
        return [python, "-I", "-S", "-c", _DROP, str(uid), str(gid), cwd, program, *command]

    def run_as(self) -> dict[str, Any]:
        """The subprocess arguments starting bwrap as the sandbox user, where it is (`as_user`)."""
        if self.user is None or not self.as_user:
            return {}
        uid, gid, _name = self.user
        return {"user": uid, "group": gid, "extra_groups": []}

    def unwritable(self, roots: Sequence[Path], cwd: str) -> str | None:
        """Why the sandbox user cannot work in the workspace root holding `cwd`, or None when it
        can (by owners, groups and modes: os.access would answer for root)."""
        if self.user is None:
            return None
        uid, gid, name = self.user
        here = Path(cwd)
        root = max((r for r in roots if here.is_relative_to(r)), key=lambda r: len(r.parts), default=here)
        if not root.is_dir():
            return None  # the command fails on its own
        closed = [f for f in root.parents if not _may(f, uid, gid, 0o1)] if self.as_user else []
        if not closed and _may(root, uid, gid, 0o3):
            return None
        if not closed and not self.user_named and root.stat().st_uid == 0:
            return (
                f"sandboxed commands never run as root, and the workspace {root} is root's: give it "
                f"to a user (chown -R USER {root}) and start devagent again, which then runs them as "
                "that user, or set sandbox_user"
            )
        why = f"cannot reach it ({closed[-1]} is closed to it)" if closed else "cannot write in it"
        return (
            f"sandboxed commands run as {name} (uid {uid}), never as root, and {name} {why}: the "
            f"workspace {root}. The operator must give it to that user (chown -R {uid}:{gid} "
            f"{root}) or set sandbox_user to the user who owns it"
        )

    def summary(self) -> str:
        network = "network allowed" if self.network else "no network"
        who = "" if self.user is None else f", commands run as {self.user[2]} (uid {self.user[0]})"
        return f"{self.version or 'bubblewrap'}, {network}{who}"


def _may(folder: Path, uid: int, gid: int, want: int) -> bool:
    """Whether the user `uid`:`gid` (no other group) has the permission bits `want` (0o1 search,
    0o3 write and search) on `folder`, by its owner, group and mode."""
    try:
        st = folder.stat()
    except OSError:
        return False
    shift = 6 if st.st_uid == uid else 3 if st.st_gid == gid else 0
    return (st.st_mode >> shift) & want == want


# Run by the sandbox's first process as root: become uid argv[1], gid argv[2] (every uid: root
# keeps no capability), enter the folder argv[3], then start the program argv[4] with the
# arguments argv[5:].
_DROP = (
    "import os, sys; os.setgroups([]); os.setgid(int(sys.argv[2])); os.setuid(int(sys.argv[1])); "
    "os.chdir(sys.argv[3]); os.execv(sys.argv[4], sys.argv[5:])"
)


def _made_by_bwrap(folder: Path, tmpfs: Sequence[Path], binds: Sequence[Path]) -> bool:
    """Whether `folder` is made by bwrap on the way to a mount: not a mount itself, and the
    nearest mount above it is an empty tmpfs (not a folder shown from the host)."""
    if folder in tmpfs or folder in binds:
        return False
    above = [m for m in [*tmpfs, *binds] if m != folder and folder.is_relative_to(m)]
    return bool(above) and max(above, key=lambda m: len(m.parts)) in tmpfs


class LocalSandbox(HostFiles):
    """One session's commands in bubblewrap, over its workspace roots."""

    kind = "local"

    def __init__(self, bwrap: Bubblewrap, roots: Sequence[Path]) -> None:
        super().__init__(roots)
        self.bwrap = bwrap

    @property
    def network(self) -> bool:
        return self.bwrap.network

    def describe(self) -> str:
        return self.bwrap.summary()

    def unavailable(self) -> str | None:
        return None

    def refuses(self, cwd: str) -> str | None:
        return self.bwrap.unwritable(self.roots, cwd)

    def owner(self) -> tuple[int, int] | None:
        user = self.bwrap.user
        return None if user is None else (user[0], user[1])

    def showing(self, folders: Sequence[Path]) -> Bubblewrap:
        """The set-up showing `folders` read-only too: those outside the workspace (seen anyway)
        that hold nothing the sandbox hides (the home folder, devagent's own folders) and are not
        a folder it keeps private whole (/tmp, /run)."""
        bwrap = self.bwrap
        shown = [
            f
            for f in not_holding(folders, bwrap.hidden)
            if f not in _PRIVATE and not any(f.is_relative_to(r) for r in self.roots)
        ]
        return replace(bwrap, readable=(*bwrap.readable, *shown)) if shown else bwrap

    async def start(
        self,
        command: str,
        *,
        cwd: str,
        env: Mapping[str, str],
        limits: Limits,
        stdin: Stdin = "closed",
        tty: Winsize | None = None,
        streams: Streams | None = None,
        lasting: bool = False,
        shown: Sequence[Path] = (),
    ) -> Started:
        bwrap = self.showing(shown) if shown else self.bwrap
        argv = bwrap.argv(self.roots, cwd, command_line(command, limits, tty))
        env = {**env, "TMPDIR": "/tmp"}  # the private one; elsewhere is read-only
        spawned = await spawn(argv, cwd=cwd, env=env, stdin=stdin, tty=tty, streams=streams, **bwrap.run_as())
        return started(spawned, sandboxed=True, supervised=False, tty=tty)

    async def release(self, keep: bool) -> None:
        return None  # the workspace is the host's folder; bwrap ends with each command


class LocalProvider:
    """The core's bubblewrap: one set-up for every session of the process."""

    kind = "local"

    def __init__(self, bwrap: Bubblewrap) -> None:
        self.bwrap = bwrap

    @property
    def network(self) -> bool:
        return self.bwrap.network

    def describe(self) -> str:
        return self.bwrap.summary()

    def unavailable(self) -> str | None:
        return None

    def refuses(self, root: Path) -> str | None:
        return self.bwrap.unwritable([root], str(root))

    def give(self, folder: Path) -> None:
        if self.bwrap.user is not None:
            give_tree(folder, self.bwrap.user[0], self.bwrap.user[1])

    def for_session(self, session_id: str, roots: Sequence[Path]) -> LocalSandbox:
        return LocalSandbox(self.bwrap, roots)

    async def close(self) -> None:
        return None
