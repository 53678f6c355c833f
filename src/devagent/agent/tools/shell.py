"""The shell tool: runs `bash -c` in the workspace, streams its output live, and never leaves
processes behind when it times out or is cancelled (the whole process group is killed).

With the sandbox on, the command runs inside bubblewrap: the workspace roots
read-write, the rest of the filesystem read-only, a private /tmp and /run, no network unless the
operator allows it, no capabilities, and its own PID namespace, so every process it started ends
with it, with the turn, or with the server (`--die-with-parent`). The sandbox is a setting of the
process (`use_sandbox`), chosen at start-up by `devagent serve|run|wire` (`setup_sandbox`).

Where the server runs as root, a sandboxed command never does: it runs as an
unprivileged user (`sandbox_user`, default nobody), becoming it inside a sandbox root made, or,
where root may not make namespaces (a container without CAP_SYS_ADMIN), in one bwrap made as
that user. A user namespace mapping root to another uid would not do: its processes are still
root to every file outside. Files that hold secrets are hidden whoever runs: /etc/shadow and its
kin, /root, devagent's own files and the operator's `sandbox_hide`.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import os
import shlex
import shutil
import signal
import subprocess
import sys
import termios
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from devagent.agent.events import ConfirmationDetails, ExecuteDetails, ToolErrorType, ToolKind
from devagent.agent.sandbox.childenv import child_env
from devagent.agent.sandbox.gitguard import granted_env
from devagent.agent.settings import SHELL_TIMEOUT, SHELL_TIMEOUT_MAX, user_config_dir
from devagent.agent.tools import shell_reads
from devagent.agent.tools._util import (
    bool_arg,
    in_thread,
    int_arg,
    num_arg,
    opt_str_arg,
    parameter,
    parameters_schema,
    str_arg,
)
from devagent.agent.tools.base import OutputFileLike, Tool, ToolContext, ToolFailure, ToolResult
from devagent.agent.tools.output import HeadTail, head_and_tail
from devagent.agent.tools.skill_catalog import not_holding, user_folders
from devagent.agent.tools.tty_screen import COLS as TTY_COLS
from devagent.agent.tools.tty_screen import ROWS as TTY_ROWS
from devagent.agent.tools.tty_screen import TERM, TtySize
from devagent.common.errors import DevagentError

if TYPE_CHECKING:
    from devagent.agent.settings import CoreConfig
    from devagent.agent.tools.backends import CommandBackend

LIVE_INTERVAL = 0.05  # seconds between live updates at most
KILL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL
EOF_GRACE = 0.5  # seconds to wait for output after bash exited (background jobs may hold the pipe)
READ_CHUNK = 65536


def root_command(command: str) -> str:
    """The program a command line starts with ("git" for `GIT_PAGER=cat git log`)."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        words = command.split()
    for word in words:
        name, eq, _value = word.partition("=")
        if eq and name.isidentifier():
            continue  # a leading VAR=value assignment
        return word
    return ""


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - a pid reused by another user
        return False
    return True


def signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def wait_exit(proc: asyncio.subprocess.Process, seconds: float) -> None:
    """Waits until the process has exited (not for its pipes, which others may hold open)."""
    deadline = time.monotonic() + seconds
    while proc.returncode is None and time.monotonic() < deadline:  # noqa: ASYNC110 - no exit event
        await asyncio.sleep(0.02)


async def kill_group(proc: asyncio.subprocess.Process, grace: float | None = None) -> None:
    """SIGTERM to the whole process group, SIGKILL after `grace` for whatever is left."""
    grace = KILL_GRACE if grace is None else grace
    pgid = proc.pid  # start_new_session: the shell leads its own group
    signal_group(pgid, signal.SIGTERM)
    try:
        deadline = time.monotonic() + grace
        await wait_exit(proc, grace)
        while _group_alive(pgid) and time.monotonic() < deadline:  # noqa: ASYNC110 - polling a pgid
            await asyncio.sleep(0.02)
    finally:
        # Reaped zombies of other parents may still answer signal 0 for a moment; SIGKILL is
        # harmless to them and final for anything that ignored SIGTERM.
        signal_group(pgid, signal.SIGKILL)
        await wait_exit(proc, 1.0)


# --- the sandbox (bubblewrap) ----------------------------------------------------------------------

SANDBOX_SETTINGS = ("auto", "on", "off")  # "" (unset): auto for serve, off for run and wire
INSTALL_HINT = "apt-get install bubblewrap"
USERNS_HINT = (
    "allow user namespaces (sysctl kernel.unprivileged_userns_clone=1; in Docker "
    "--security-opt seccomp=unconfined --security-opt apparmor=unconfined) or start with --no-sandbox"
)
PROBE_TIMEOUT = 30.0


class SandboxError(DevagentError):
    """The sandbox was asked for but cannot run here; the message names the fix."""


@dataclass(frozen=True, slots=True)
class Sandbox:
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
    # the server's own user, never root (`choose_sandbox`).
    user: tuple[int, int, str] | None = None
    # How a root server's commands become `user`: False, bwrap runs as root (no user namespace:
    # root in one is still root to every file) and the command's first process becomes the user;
    # True, where root may not make namespaces without a user namespace (a container without
    # CAP_SYS_ADMIN), bwrap itself is started as the user, in a user namespace of its own.
    as_user: bool = False
    # Whether the operator named `user` (sandbox_user), rather than devagent taking the
    # workspace's owner or nobody (`root_sandbox_user`).
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


@functools.cache
def probe_bwrap(user: tuple[int, int, str] | None = None) -> Sandbox | str:
    """Whether bubblewrap works on this machine (it needs namespaces, which containers may
    refuse): a Sandbox, or why not with the fix. Runs `true` in it, once per process and user:
    as this process's user, or for a root server as `user` (bwrap run by root, else, where root
    cannot make namespaces, by `user` itself)."""
    path = shutil.which("bwrap")
    if path is None:
        return f"bwrap not installed: {INSTALL_HINT}"
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=PROBE_TIMEOUT, check=False
        )
    except (OSError, subprocess.SubprocessError) as e:
        return f"bwrap does not run here ({e}): {USERNS_HINT}"
    failed: list[str] = []
    for as_user in (False, True) if user is not None else (False,):
        sandbox = Sandbox(path, out.stdout.strip(), user=user, as_user=as_user)
        why = _try(sandbox)
        if why is None:
            return sandbox
        failed.append(f"as {user[2]}: {why}" if as_user and user is not None else why)
    return f"bwrap cannot create its sandbox here ({'; '.join(failed)}): {USERNS_HINT}"


def _try(sandbox: Sandbox) -> str | None:
    """Why `sandbox` cannot run `true`, or None when it can."""
    try:
        run = subprocess.run(
            sandbox.argv([], "/", ["true"]),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
            check=False,
            cwd="/",
            **sandbox.run_as(),
        )
    except (OSError, subprocess.SubprocessError) as e:
        return str(e)
    if run.returncode == 0:
        return None
    lines = run.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit code {run.returncode}"


# Never readable by a sandboxed command, whoever the server runs as.
SECRET_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-")
SECRET_DIRS = ("/root",)


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


def _root_note() -> str:
    """What the start-up line says where the server runs as root and commands run unsandboxed."""
    if os.geteuid() != 0:
        return ""
    return ". The server runs as root: so do its commands, with root's access to every file"


def sandbox_setting(value: str) -> str:
    """The `sandbox` setting normalized: "", auto, on or off (true/false and yes/no accepted)."""
    v = value.strip().lower()
    v = {"true": "on", "yes": "on", "1": "on", "false": "off", "no": "off", "0": "off"}.get(v, v)
    if v and v not in SANDBOX_SETTINGS:
        raise ValueError(f"sandbox must be one of {', '.join(SANDBOX_SETTINGS)}, not {value!r}")
    return v


@dataclass(frozen=True, slots=True)
class SandboxMissing:
    """The sandbox is on but cannot run here: shell commands fail closed with
    `why`, never run unsandboxed."""

    why: str

    def message(self) -> str:
        return (
            f"shell commands cannot run on this server: its sandbox is on but {self.why}. "
            "The operator must install bubblewrap, or turn the sandbox off explicitly (--no-sandbox)"
        )


_process_sandbox: Sandbox | SandboxMissing | None = None


def use_sandbox(sandbox: Sandbox | SandboxMissing | None) -> None:
    """Sets how this process runs shell commands (None: directly, unsandboxed; SandboxMissing:
    not at all)."""
    global _process_sandbox
    _process_sandbox = sandbox


def active_sandbox() -> Sandbox | None:
    return _process_sandbox if isinstance(_process_sandbox, Sandbox) else None


def sandbox_missing() -> SandboxMissing | None:
    return _process_sandbox if isinstance(_process_sandbox, SandboxMissing) else None


def give_to_sandbox_user(folder: Path) -> None:
    """A workspace folder the server makes (a caller's own) belongs to the user its sandboxed
    commands run as, where that is not the server's user."""
    sandbox = active_sandbox()
    if sandbox is not None and sandbox.user is not None:
        os.chown(folder, sandbox.user[0], sandbox.user[1], follow_symlinks=False)


def _toolchains(homes: Sequence[Path], extra: Sequence[str]) -> tuple[Path, ...]:
    """What stays readable in the hidden homes (the server's, root's): each PATH entry in one
    (with its parent for a `bin` or `shims` folder of a toolchain, e.g. ~/.pyenv, never the home
    itself or ~/.local), the Python devagent runs on, and the operator's `sandbox_read`."""

    def home_of(p: Path) -> Path | None:
        return next((h for h in homes if p.is_relative_to(h) and p != h), None)

    found: list[Path] = []
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if not entry or not os.path.isabs(entry):
            continue
        p = Path(os.path.realpath(entry))
        if (home := home_of(p)) is None:
            continue
        found.append(p)
        if p.name in ("bin", "shims") and p.parent not in (home, home / ".local"):
            found.append(p.parent)
    for prefix in (sys.base_prefix, sys.prefix):
        p = Path(os.path.realpath(prefix))
        if home_of(p) is not None:
            found.append(p)
    found += [Path(os.path.realpath(os.path.expanduser(e))) for e in extra]
    return tuple(dict.fromkeys(found))


def choose_sandbox(
    flag: bool | None,
    config: CoreConfig,
    command: str,
    hide: Sequence[Path] = (),
    owned_by: Sequence[Path] = (),
) -> tuple[Sandbox | SandboxMissing | None, str]:
    """The sandbox for `devagent COMMAND`: the flag (--sandbox/--no-sandbox) over the `sandbox`
    setting over the command's default (on for serve, off for run and wire). Returns it with the
    line saying whether it is on and why. Where bwrap does not work: SandboxError when it was
    asked for (the flag or the setting "on"); SandboxMissing for serve's default, so that the
    server starts and its commands fail closed; off only for the operator's
    explicit "auto". `hide`: more directories no command may see (a server's workspace roots).
    `owned_by`: the workspace roots whose owner a root server's commands run as
    (`root_sandbox_user`)."""
    if flag is not None:
        mode, source = ("on", "--sandbox") if flag else ("off", "--no-sandbox")
    elif config.sandbox:
        mode = sandbox_setting(config.sandbox)
        source = f"sandbox = {mode} in the settings"
    elif command == "serve":
        mode, source = "default", "the default of devagent serve"
    else:
        mode, source = "off", f"the default of devagent {command}; --sandbox turns it on"
    if mode == "off":
        return None, f"Shell sandbox: off ({source}){_root_note()}"
    # Root inside a user namespace is still root to every file outside it: a root server's
    # commands run as another user.
    as_root = os.geteuid() == 0
    probed = probe_bwrap(root_sandbox_user(config.sandbox_user, owned_by) if as_root else None)
    if isinstance(probed, str):
        if mode == "on":
            raise SandboxError(f"the shell sandbox is on ({source}) but {probed}")
        if mode == "auto":
            return None, f"Shell sandbox: off (sandbox = auto and {probed}){_root_note()}"
        missing = SandboxMissing(probed)
        return missing, (
            f"Shell sandbox: UNAVAILABLE ({probed}). Shell commands will fail until bubblewrap "
            "runs here or the sandbox is turned off explicitly (--no-sandbox, sandbox = off)"
        )
    home = Path(os.path.realpath(Path.home()))
    # The operator's `sandbox_hide`: a folder is shown empty, a file empty (whichever it is when
    # a command starts).
    named = [Path(os.path.realpath(os.path.expanduser(h))) for h in config.sandbox_hide]
    hidden = [*config.protected_dirs(), *map(Path, SECRET_DIRS), *named]
    if home != Path("/"):
        hidden.append(home)
    hidden += [Path(os.path.realpath(h)) for h in hide]
    masked = [*config.protected_files(), *map(Path, SECRET_FILES), *named]
    sandbox = replace(
        probed,
        user_named=as_root and bool(config.sandbox_user.strip()),
        network=config.sandbox_network,
        hidden=tuple(dict.fromkeys(hidden)),
        readable=_toolchains(
            [h for h in (home, *map(Path, SECRET_DIRS)) if h != Path("/")], config.sandbox_read
        )
        + not_holding(user_folders(user_config_dir()), hidden),
        masked=tuple(dict.fromkeys(masked)),  # those that exist when a command starts
    )
    return sandbox, f"Shell sandbox: on ({sandbox.summary()})"


def setup_sandbox(
    flag: bool | None,
    config: CoreConfig,
    command: str,
    hide: Sequence[Path] = (),
    owned_by: Sequence[Path] = (),
) -> str:
    """Chooses the sandbox for this process (`choose_sandbox`), uses it, returns the line to print."""
    sandbox, line = choose_sandbox(flag, config, command, hide, owned_by)
    use_sandbox(sandbox)
    return line


def limited(command: str, memory_mb: int, processes: int) -> list[str]:
    """`bash -c command` under the per-command limits: data memory in MiB and
    processes, each capped at what this process may give (a hard limit cannot be raised), 0 for
    none. `ulimit` sets soft and hard limits, so the command cannot raise them again."""
    import resource

    steps: list[str] = []
    for flag, rlimit, value, unit in (
        ("-d", resource.RLIMIT_DATA, memory_mb * 1024, 1024),
        ("-u", resource.RLIMIT_NPROC, processes, 1),
    ):
        if value <= 0:
            continue
        hard = resource.getrlimit(rlimit)[1]
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard // unit)
        steps.append(f"ulimit {flag} {value}")
    if not steps:
        return ["bash", "-c", command]
    return ["bash", "-c", " && ".join([*steps, 'exec bash -c "$1"']), "bash", command]


# The program that leads an unsandboxed background command's process group and ends everything
# the command started when the server dies or the command ends (see its docstring). A sandboxed
# command needs none: bwrap's --die-with-parent and its PID namespace do the same.
SUPERVISOR = str(Path(__file__).with_name("supervise.py"))


# Run first in a pty process's terminal: a session of its own (unless it leads one already)
# whose controlling terminal is its input, the pty, so that the keys typed there signal it (Ctrl-C)
# and what it starts; then the command argv[1:]. Inside a sandbox too: bwrap passes the pty on.
_TAKE_TERMINAL = (
    "import os, sys, fcntl, termios; os.getsid(0) == os.getpid() or os.setsid(); "
    "fcntl.ioctl(0, termios.TIOCSCTTY, 0); os.execvp(sys.argv[1], sys.argv[1:])"
)


@dataclass(slots=True)
class Started:
    """A command started in its own process group: the read end of its output, and for a
    background command the write end of its input (else -1), whether `SUPERVISOR` leads it, and
    for a pty process its terminal's size (both ends are then the pty's master)."""

    proc: asyncio.subprocess.Process
    output_fd: int
    input_fd: int = -1
    sandboxed: bool = False
    supervised: bool = False
    tty: TtySize | None = None


@dataclass(slots=True)
class _Stdio:
    """The command's standard input and output (its error goes with its output), our ends of
    them, and the descriptors only the command keeps (closed here once it has started)."""

    stdin: int
    stdout: int
    ours: tuple[int, int]  # (read its output, write its input: -1 for none)
    theirs: tuple[int, ...]

    @classmethod
    def make(cls, background: bool, tty: TtySize | None) -> _Stdio:
        if tty is not None:
            master, slave = os.openpty()
            fcntl.ioctl(slave, termios.TIOCSWINSZ, tty.winsize())
            return cls(slave, slave, (master, os.dup(master)), (slave,))
        read_fd, write_fd = os.pipe()
        if not background:
            return cls(subprocess.DEVNULL, write_fd, (read_fd, -1), (write_fd,))
        stdin_r, stdin_w = os.pipe()
        return cls(stdin_r, write_fd, (read_fd, stdin_w), (write_fd, stdin_r))


async def start_command(
    command: str,
    cwd: str,
    ctx: ToolContext,
    guard: dict[str, str],
    *,
    background: bool = False,
    tty: TtySize | None = None,
) -> Started:
    """Starts `command` in its own process group (in the process's sandbox, if on) with the
    agent's environment and limits. `background`: its input is a pipe for the caller to write
    (with `tty`, both its input and output are a pseudo-terminal of that size, its controlling
    terminal), and it never outlives the server (`SUPERVISOR`, or the sandbox); else its input
    is closed."""
    sandbox = active_sandbox()
    # An allow-list, never the server's environment (tokens, database URL, provider keys stay in
    # the server).
    env = child_env(
        ctx.env_pass,
        extra={"PAGER": "cat", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0", "DEVAGENT": "1", **guard},
    )
    argv = limited(command, ctx.command_memory_mb, ctx.command_processes)
    if tty is not None:
        bash = shutil.which("bash") or "bash"
        argv = [os.path.realpath(sys.executable), "-I", "-S", "-c", _TAKE_TERMINAL, bash, *argv[1:]]
        env["TERM"] = TERM
    if sandbox is not None:
        if (why := sandbox.unwritable(ctx.workspace.roots, cwd)) is not None:
            raise ToolFailure(why, ToolErrorType.SANDBOX_UNAVAILABLE)
        argv = sandbox.argv(ctx.workspace.roots, cwd, argv)
        env["TMPDIR"] = "/tmp"  # the private one; elsewhere is read-only
    elif background:
        argv = [os.path.realpath(sys.executable), "-I", "-S", SUPERVISOR, str(os.getpid()), *argv]
    # Our own pipes rather than asyncio's: we can close our end when background jobs keep the
    # write end open after the shell exited, and the process transport holds no pipes (so its
    # wait() ends when the process does).
    stdio = _Stdio.make(background, tty)
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=env,
            stdin=stdio.stdin,
            stdout=stdio.stdout,
            stderr=stdio.stdout,
            start_new_session=True,
            **(sandbox.run_as() if sandbox is not None else {}),
        )
    except BaseException:
        for fd in stdio.ours:
            if fd >= 0:
                os.close(fd)
        raise
    finally:
        for fd in stdio.theirs:
            os.close(fd)
    read_fd, input_fd = stdio.ours
    return Started(proc, read_fd, input_fd, sandbox is not None, background and sandbox is None, tty)


async def _follow_command(
    proc: asyncio.subprocess.Process,
    read_fd: int,
    time_limit: float,
    ctx: ToolContext,
    out: HeadTail,
    saving: OutputFileLike | None,
) -> str:
    """Reads the command's output into `out` (shown live) and `saving` until it ends, runs past
    `time_limit` seconds, is cancelled or leaves background processes holding the pipe; how it
    ended ("done", "timeout", "cancelled", "detached"). A timed out or cancelled command's group
    is killed."""
    loop = asyncio.get_running_loop()
    stdout = asyncio.StreamReader(loop=loop)
    try:
        pipe, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(stdout, loop=loop), os.fdopen(read_fd, "rb", buffering=0)
        )
    except BaseException:
        await asyncio.shield(kill_group(proc))
        raise

    async def read() -> None:
        while data := await stdout.read(READ_CHUNK):
            out.feed(data)
            if saving is not None:
                saving.write(data)
        out.feed(b"", final=True)

    reader = asyncio.create_task(read())
    cancel = asyncio.create_task(ctx.cancelled.wait())
    deadline = loop.time() + time_limit
    eof_deadline: float | None = None
    outcome = "done"
    try:
        while not (reader.done() and proc.returncode is not None):
            now = loop.time()
            if now >= deadline:
                outcome = "timeout"
                break
            if eof_deadline is not None and now >= eof_deadline:
                outcome = "detached"  # background processes still hold the pipe
                break
            pending = {t for t in (reader, cancel) if not t.done()}
            await asyncio.wait(pending, timeout=min(LIVE_INTERVAL, deadline - now))
            if out.changed:
                out.changed = False
                await ctx.live(out.render())
            if cancel.done():
                outcome = "cancelled"
                break
            if proc.returncode is not None and not reader.done() and eof_deadline is None:
                eof_deadline = loop.time() + EOF_GRACE
        if outcome in ("timeout", "cancelled"):
            await kill_group(proc)
        if outcome != "detached" and not reader.done():
            # The pipe closes once every process of the group is gone: collect the last output.
            await asyncio.wait({reader}, timeout=1.0)
    except BaseException:
        # The turn was cancelled (asyncio.CancelledError) or the live callback failed: leave
        # nothing running behind us.
        await asyncio.shield(kill_group(proc))
        raise
    finally:
        for task in (reader, cancel):
            if not task.done():
                task.cancel()
        pipe.close()
    if proc.returncode is None:  # pragma: no cover - the loop ends only after exit or a kill
        await wait_exit(proc, KILL_GRACE)
    return outcome


class RunShellCommand(Tool):
    name = "run_shell_command"
    description = (
        "Run a command with `bash -c` in the workspace (or in `directory`, relative to the workspace "
        "root) and return its combined stdout and stderr followed by `exit code N`. A non-zero exit "
        "code is reported, not treated as a failure. Standard input is closed, so interactive "
        "programs cannot prompt (pass flags such as `--yes`; avoid pagers and editors) unless the "
        f"call asks for a terminal (`tty`). The command is killed after `timeout` seconds (default "
        f"{SHELL_TIMEOUT:g}, at most {SHELL_TIMEOUT_MAX:g} unless the operator set other limits). Long "
        "output keeps its first and last lines and a line naming the file that holds it whole, "
        "which read_file pages through (offset and limit, in lines). For a server, a watcher or "
        "any long-running process pass `background: true`: the call returns its id at once, and "
        "background_process reads its output, writes its input, lists and stops it."
    )
    parameters = parameters_schema(
        ["command"],
        command=parameter("string", "The bash command line to run."),
        description=parameter(
            "string", "A short description of what the command does and why, shown to the user."
        ),
        directory=parameter(
            "string", "The directory to run in, relative to the workspace root. Default: the root."
        ),
        timeout=parameter(
            "number",
            f"Seconds before the command is killed: give more (up to {SHELL_TIMEOUT_MAX:g}) for a "
            f"long build or test run. Default {SHELL_TIMEOUT:g}; the server's operator may set other "
            "limits. Not for background processes.",
            exclusiveMinimum=0,
        ),
        background=parameter(
            "boolean",
            "Start the command in the background and return at once with its id (see "
            "background_process). Default: false.",
        ),
        tty=parameter(
            "boolean",
            "Run it in the background in a terminal (REPLs, `git add -p`, full-screen programs); "
            "implies `background`. Default: false.",
        ),
        rows=parameter(
            "integer",
            "`tty`: lines (default {}, {} to {}).".format(*TTY_ROWS),
        ),
        cols=parameter(
            "integer",
            "`tty`: columns (default {}, {} to {}).".format(*TTY_COLS),
        ),
    )
    kind = ToolKind.EXECUTE
    SANDBOX_NOTE = (
        " Commands run in a sandbox: only the workspace is writable, /tmp is private to each "
        "command, {network}. A job started with `&` ends when its command ends: use `background: "
        "true` for processes that must keep running."
    )
    NETWORK: ClassVar[dict[bool, str]] = {
        True: "the network (the host's, loopback included) is reachable",
        False: "there is no network, and each command has a loopback of its own (a background "
        "server can be reached only by its own command)",
    }

    def definition(self) -> dict[str, Any]:
        if (missing := sandbox_missing()) is not None:
            return {**super().definition(), "description": f"Unavailable: {missing.message()}."}
        sandbox = active_sandbox()
        if sandbox is None:
            return super().definition()
        return {
            **super().definition(),
            "description": self.description + self.SANDBOX_NOTE.format(network=self.NETWORK[sandbox.network]),
        }

    def describe(self, args: dict[str, Any]) -> str:
        command = args.get("command")
        if not isinstance(command, str):
            return "Run a shell command"
        if args.get("tty") is True:
            return f"{command} (in the background, in a terminal)"
        return f"{command} (in the background)" if args.get("background") is True else command

    def _cwd(self, args: dict[str, Any], ctx: ToolContext) -> str:
        directory = opt_str_arg(args, "directory", ".") or "."
        real = ctx.workspace.resolve(directory, must_exist=True)
        if not real.is_dir():
            raise ToolFailure(f"{directory!r} is not a directory", ToolErrorType.NOT_A_DIRECTORY)
        return str(real)

    async def confirmation(self, args: dict[str, Any], ctx: ToolContext) -> ConfirmationDetails:
        command = str_arg(args, "command")
        self._check_can_run(ctx)  # never ask for what cannot run
        return ExecuteDetails(
            command=command, working_directory=self._cwd(args, ctx), root_command=root_command(command)
        )

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        proposed = str_arg(args, "command")
        # "Edit first": the user may change the command when approving it (the decision's
        # new_content, as for an edit's content); the model is told what ran instead.
        edited = ctx.new_content is not None and ctx.new_content.strip() not in ("", proposed)
        command = ctx.new_content.strip() if edited and ctx.new_content is not None else proposed
        cwd = self._cwd(args, ctx)
        tty = _tty_size(args)
        background = bool_arg(args, "background") or tty is not None
        limit = TimeLimit.of(num_arg(args, "timeout"), ctx)
        if ctx.cancelled.is_set():
            raise ToolFailure("the command was cancelled before it started", ToolErrorType.CANCELLED)
        # Under a prefix grant, git starts no program its configuration names.
        guard = granted_env() if ctx.granted else {}
        if background:
            return await self._start_background(command, cwd, ctx, guard, edited, tty)
        if ctx.backends.commands is not None:  # the client's terminal (tools/backends.py)
            return await self._run_elsewhere(ctx.backends.commands, command, cwd, limit, ctx, guard)
        self._check_can_run(ctx)
        result = await self._run_here(command, cwd, limit, ctx, guard, edited)
        if result.data is not None and result.data.get("exit_code") == 0:
            await in_thread(shell_reads.note_shown, ctx, command, cwd)  # `sed -n`, `cat`: a read
        return result

    async def _run_here(
        self,
        command: str,
        cwd: str,
        limit: TimeLimit,
        ctx: ToolContext,
        guard: dict[str, str],
        edited: bool,
    ) -> ToolResult:
        """Runs the command as a process of this server, its whole output saved when long."""
        started = await start_command(command, cwd, ctx, guard)
        out = HeadTail(*ctx.output_caps)
        saved_outputs = ctx.saved_outputs
        saving = saved_outputs.open(ctx.session_id, ctx.call_id) if saved_outputs is not None else None
        try:
            outcome = await _follow_command(started.proc, started.output_fd, limit.seconds, ctx, out, saving)
        except BaseException:
            if saving is not None:
                saving.finish(keep=False)
            raise
        saved = saving.finish(keep=out.elided) if saving is not None else None
        if saved is not None and saved_outputs is not None:
            await asyncio.to_thread(saved_outputs.prune)
        text = out.render(str(saved) if saved is not None else "")
        await ctx.live(text)
        if outcome == "timeout":
            raise ToolFailure(
                f"the command {limit.timed_out()} and was killed. Output so far:\n{text}",
                ToolErrorType.TIMEOUT,
            )
        if outcome == "cancelled":
            raise ToolFailure(f"the command was cancelled. Output so far:\n{text}", ToolErrorType.CANCELLED)
        notes = limit.notes()
        if outcome == "detached":
            notes.append(
                "(background processes still hold the output; their further output is not captured: "
                "start such processes with `background: true`)"
            )
        notes += _edited(command) if edited else []
        code = started.proc.returncode if started.proc.returncode is not None else -9
        return ToolResult(
            text=_with_status(text, _exit_status(code), notes),
            data={
                "exit_code": code,
                "command": command,
                "user_modified": edited,
                "directory": ctx.workspace.display(Path(cwd)),
                "truncated": out.elided,
                "saved_output": None if saved is None else str(saved),
                "sandboxed": started.sandboxed,
            },
        )

    @staticmethod
    def _check_can_run(ctx: ToolContext) -> None:
        """Fails closed where the sandbox is on but cannot run; commands that
        run in the client's terminal are the client's."""
        missing = sandbox_missing()
        if missing is not None and ctx.backends.commands is None:
            raise ToolFailure(missing.message(), ToolErrorType.SANDBOX_UNAVAILABLE)

    async def _start_background(
        self,
        command: str,
        cwd: str,
        ctx: ToolContext,
        guard: dict[str, str],
        edited: bool,
        tty: TtySize | None = None,
    ) -> ToolResult:
        if ctx.backends.commands is not None or ctx.processes is None:
            raise ToolFailure(
                "background processes are not available here (commands run in the client's terminal)"
                if ctx.backends.commands is not None
                else "background processes are not available here",
                ToolErrorType.UNSUPPORTED,
            )
        self._check_can_run(ctx)
        process = await ctx.processes.start(command, cwd, ctx, guard, tty)
        text = (
            f"Started in the background as {process.id}. Read its output with background_process "
            f"(action `output`, id `{process.id}`; `wait_for` waits for a line such as a server's "
            "'listening'), write to its input (action `input`), or stop it (action `stop`). It is "
            "stopped when the turn is cancelled, when the session ends or has been idle for long, "
            "and when the server stops."
        )
        if tty is not None:
            text += (
                f" It runs in a {tty.rows}x{tty.cols} terminal: `output` returns its screen, and "
                "`input` types keys (<Enter>, <Tab>, <C-c>, <Up>, <Esc>; other text as typed)."
            )
        return ToolResult(
            text="\n".join([text, *(_edited(command) if edited else [])]),
            data={
                "background_id": process.id,
                "command": command,
                "user_modified": edited,
                "directory": ctx.workspace.display(Path(cwd)),
                "sandboxed": process.sandboxed,
                **({"tty": {"rows": tty.rows, "cols": tty.cols}} if tty is not None else {}),
            },
        )

    async def _run_elsewhere(
        self,
        backend: CommandBackend,
        command: str,
        cwd: str,
        limit: TimeLimit,
        ctx: ToolContext,
        env: dict[str, str],
    ) -> ToolResult:
        result = await backend.run(command, cwd, limit.seconds, ctx, env)
        text = head_and_tail(result.output)
        if result.exit_code is not None:
            status = f"exit code {result.exit_code}"
        else:
            status = f"killed by signal {result.signal or '?'}"
        return ToolResult(
            text=_with_status(text, status, limit.notes()),
            data={
                "exit_code": result.exit_code,
                "command": command,
                "directory": ctx.workspace.display(Path(cwd)),
                "truncated": result.truncated or len(text) < len(result.output),
                "sandboxed": False,
            },
        )


@dataclass(frozen=True, slots=True)
class TimeLimit:
    """How long a command may run: what it asked for, within the server's maximum (never below
    the server's default), else the server's default."""

    seconds: float
    asked: float | None = None

    @classmethod
    def of(cls, asked: float | None, ctx: ToolContext) -> TimeLimit:
        if asked is None:
            return cls(ctx.shell_timeout)
        return cls(min(asked, max(ctx.shell_timeout_max, ctx.shell_timeout)), asked)

    @property
    def lowered(self) -> bool:
        return self.asked is not None and self.asked > self.seconds

    def notes(self) -> list[str]:
        if not self.lowered:
            return []
        return [
            f"(the timeout asked for, {self.asked:g} s, is more than the server allows: it had "
            f"{self.seconds:g} s)"
        ]

    def timed_out(self) -> str:
        more = f" (the server's maximum; {self.asked:g} s was asked for)" if self.lowered else ""
        return f"timed out after {self.seconds:g} s{more}"


def _tty_size(args: dict[str, Any]) -> TtySize | None:
    """The terminal asked for (`tty`, `rows`, `cols`), or None for none."""
    if not bool_arg(args, "tty"):
        for key in ("rows", "cols"):
            if args.get(key) is not None:
                raise ToolFailure(
                    f"{key!r} is the size of a terminal: pass `tty: true` too",
                    ToolErrorType.INVALID_ARGUMENTS,
                )
        return None
    rows = int_arg(args, "rows", TTY_ROWS[0], minimum=TTY_ROWS[1])
    cols = int_arg(args, "cols", TTY_COLS[0], minimum=TTY_COLS[1])
    if rows > TTY_ROWS[2] or cols > TTY_COLS[2]:
        raise ToolFailure(
            f"a terminal has at most {TTY_ROWS[2]} rows and {TTY_COLS[2]} columns here",
            ToolErrorType.INVALID_ARGUMENTS,
        )
    return TtySize(rows, cols)


def _edited(command: str) -> list[str]:
    return [f"(the user edited the command before approving it; what ran was: {command})"]


def _exit_status(code: int) -> str:
    return f"exit code {code}" if code >= 0 else f"exit code {128 - code} (killed by signal {-code})"


def _with_status(output: str, status: str, notes: Sequence[str]) -> str:
    """A command's result as the model reads it: its output, then how it ended, then notes."""
    body = output if output.strip() else "(no output)"
    if not body.endswith("\n"):
        body += "\n"
    return body + "\n".join([status, *notes])
