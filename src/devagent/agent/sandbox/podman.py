"""The container engine the `container` sandbox backend drives: Podman's (or Docker's) own command
line, run as asyncio subprocesses. One named volume and one container per session, labelled so a
sweep finds whatever a crashed server left behind.

Why the command line and not a socket API: both engines document the CLI as their stable
interface, a rootful or rootless Podman needs no service running for it, and the same arguments
work for Docker where the two agree (flags only Podman has are left out for Docker: the global
`--runtime`, given to Docker's `create` instead, `--read-only-tmpfs` and `exec --preserve-fds`).
Docker's client reaches its daemon through DOCKER_HOST, which the client's environment keeps."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

from devagent.common.errors import DevagentError

LABEL = "devagent.sandbox"  # on everything this module creates: a sweep's filter
SESSION_LABEL = "devagent.session"
TEMPLATE_LABEL = "devagent.template"
POOL_LABEL = "devagent.pool"  # "1" while a pooled container waits for a session
WORKSPACE = "/workspace"
CONTROL = "/tmp/.devagent"  # inside the container: the running commands' process-group files
ENGINES = ("podman", "docker")
# Docker's client sizes an exec's terminal only once the exec has started (its daemon's API before
# 1.42 takes no size with it), so a command would first see 0 rows and 0 columns: a terminal's
# command waits, up to two seconds, for the size, then becomes the command (same process).
SIZED = (
    'n=0; while [ $n -lt 40 ] && [ "$(stty size 2>/dev/null)" = "0 0" ]; do sleep 0.05; n=$((n + 1)); '
    'done; exec "$@"'
)
ENGINE_TIMEOUT = 120.0  # seconds any one engine call may take before it is given up
# The child environment of the engine's own client: never the server's (which holds model keys,
# tokens and the database URL); the client needs only to find its programs and its state.
CLIENT_ENV_KEEP = ("PATH", "XDG_RUNTIME_DIR", "CONTAINER_HOST", "DOCKER_HOST", "LANG")


class EngineError(DevagentError):
    """The engine refused or failed; the message is its own error line."""


@dataclass(frozen=True, slots=True)
class Template:
    """What the operator lets a session's container be: its image and its limits."""

    name: str
    image: str
    memory_mb: int = 1024
    pids: int = 256
    network: str = "none"  # "none", or the name of an engine network the operator made
    tmp_mb: int = 256  # /tmp is a size-limited tmpfs (counted against memory_mb)
    user: str = "agent"  # the image's own non-root user (a name or uid[:gid])
    # ulimits, lowered to this machine's hard limits (0: those limits). The engine's monitor may
    # hold lower ones than the server (conmon here: nproc 32768), and runc refuses any above them.
    nofile: int = 4096
    nproc: int = 4096  # counted per host uid, so across sessions; `pids` bounds each session
    workspace_mb: int = 0  # a size on the workspace volume where the engine's storage allows

    def summary(self) -> str:
        network = "no network" if self.network in ("", "none") else f"network {self.network}"
        return f"template {self.name}: {self.memory_mb} MB memory, {self.pids} processes, {network}"


@dataclass(slots=True)
class Result:
    code: int
    out: str
    err: str


_WORKDIR: list[str] = []  # the folder of this process's engine clients, found when first needed


def engine_workdir() -> str:
    """A folder of this user's for the engine's clients to run in: `devagent-engine-UID` in the
    temporary folder, made 0700 once and kept (every process of the user shares it, so none is
    left behind per process); one that is not this user's own private folder (another user made
    it first, or a link) is not used: a private folder of this process's is made instead."""
    if not _WORKDIR:
        import stat
        import tempfile

        folder = os.path.join(tempfile.gettempdir(), f"devagent-engine-{os.getuid()}")
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
        found = os.lstat(folder)
        if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid() or found.st_mode & 0o077:
            folder = tempfile.mkdtemp(prefix="devagent-engine-")
        _WORKDIR.append(folder)
    return _WORKDIR[0]


class EngineClient(TypedDict):
    """The keyword arguments every run of the engine's command line takes (`Engine.client`)."""

    env: dict[str, str]
    cwd: str


@dataclass(slots=True)
class Engine:
    """One engine's command line: `program` is "podman" or "docker". Podman runs with runc
    (`runtime`): crun refuses hosts whose cgroups are the hybrid v1/v2 layout."""

    program: str = "podman"
    runtime: str = "runc"
    extra_env: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_podman(self) -> bool:
        return os.path.basename(self.program).startswith("podman")

    def argv(self, *args: str) -> list[str]:
        """The engine's command line for `args` (Podman takes the runtime as a global flag)."""
        head = [self.program]
        if self.is_podman and self.runtime:
            head += ["--runtime", self.runtime]
        return [*head, *args]

    def client(self) -> EngineClient:
        """Where and with what the engine's client runs, at every call of its command line
        (`subprocess(..., **engine.client())`): the environment variables it needs
        (`CLIENT_ENV_KEEP`, the engine's own `extra_env`), and the user's private folder
        (`engine_workdir`) as its working directory. The monitor the engine starts beside a
        container or an exec (Podman's conmon) writes its marker of an out-of-memory kill (`oom`,
        `oomKilled`) there, which would otherwise be the server's folder (an operator's, a checkout)."""
        env = {k: v for k, v in os.environ.items() if k in CLIENT_ENV_KEEP}
        env.setdefault("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        env.update(self.extra_env)
        return {"env": env, "cwd": engine_workdir()}

    async def run(self, *args: str, stdin: bytes | None = None, check: bool = True) -> Result:
        """Runs one engine command to its end; EngineError when it fails and `check`."""
        proc = await asyncio.create_subprocess_exec(
            *self.argv(*args),
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            **self.client(),
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(stdin), ENGINE_TIMEOUT)
        except BaseException:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            raise
        result = Result(proc.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace"))
        if check and result.code != 0:
            line = result.err.strip().splitlines()[-1:] or [f"exit code {result.code}"]
            raise EngineError(f"{self.program} {args[0]}: {line[0]}")
        return result

    async def works(self) -> str | None:
        """None when the engine answers here, else why not."""
        try:
            await self.run("info", "--format", "{{json .}}" if not self.is_podman else "json")
        except (OSError, EngineError) as e:
            return str(e)
        return None

    # --- volumes ----------------------------------------------------------------------------------

    async def create_volume(self, name: str, labels: Mapping[str, str], size_mb: int = 0) -> None:
        args = ["volume", "create", *_labels(labels)]
        if size_mb > 0:
            # Only where the volume's storage enforces it (Podman: XFS with project quotas); the
            # engine refuses otherwise, and the session fails closed rather than run unlimited.
            args += ["--opt", f"o=size={size_mb}m"]
        await self.run(*args, name)

    async def volume_exists(self, name: str) -> bool:
        return (await self.run("volume", "inspect", name, check=False)).code == 0

    async def remove_volume(self, name: str) -> None:
        await self.run("volume", "rm", "--force", name, check=False)

    # --- containers -------------------------------------------------------------------------------

    def create_args(
        self, name: str, volume: str, template: Template, labels: Mapping[str, str], bind: str = ""
    ) -> list[str]:
        """`create` for a session's long-lived container: it sleeps as PID 1 (an init that reaps)
        and each command is an `exec` in it. Its /workspace is the named `volume`, or with `bind`
        that folder of the server's host (the session's workspace root), and nothing else of it."""
        nofile = _at_most(template.nofile, resource.RLIMIT_NOFILE)
        nproc = _at_most(template.nproc, resource.RLIMIT_NPROC)
        args = [
            "create",
            "--name",
            name,
            *_labels(labels),
            "--init",
            "--user",
            template.user,
            "--workdir",
            WORKSPACE,
            "--memory",
            f"{template.memory_mb}m",
            "--memory-swap",
            f"{template.memory_mb}m",
            "--pids-limit",
            str(template.pids),
            "--network",
            template.network or "none",
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            "--ulimit",
            f"nofile={nofile}:{nofile}",
            "--ulimit",
            f"nproc={nproc}:{nproc}",
            "--read-only",
            "--tmpfs",
            f"/tmp:rw,nosuid,nodev,size={template.tmp_mb}m,mode=1777",
            "--mount",
            f"type=bind,source={bind},destination={WORKSPACE}"
            if bind
            else f"type=volume,source={volume},destination={WORKSPACE}",
            "--env",
            f"HOME={WORKSPACE}",
            "--env",
            "TMPDIR=/tmp",
        ]
        if not self.is_podman and self.runtime:
            args += ["--runtime", self.runtime]
        if self.is_podman:
            args += ["--read-only-tmpfs=false"]
        return [*args, template.image, "sleep", "infinity"]

    async def create_container(
        self, name: str, volume: str, template: Template, labels: Mapping[str, str], bind: str = ""
    ) -> None:
        await self.run(*self.create_args(name, volume, template, labels, bind))

    async def start(self, name: str) -> None:
        await self.run("start", name)

    async def stop(self, name: str, grace: int = 2) -> None:
        await self.run("stop", "--time", str(grace), name, check=False)

    async def remove(self, name: str) -> None:
        await self.run("rm", "--force", name, check=False)

    async def rename(self, old: str, new: str) -> None:
        await self.run("rename", old, new)

    async def running(self, name: str) -> bool | None:
        """Whether the container runs; None when there is none of that name."""
        result = await self.run("container", "inspect", "--format", "{{.State.Running}}", name, check=False)
        if result.code != 0:
            return None
        return result.out.strip() == "true"

    async def volume_of(self, name: str) -> str | None:
        """The name of the volume mounted at /workspace in container `name`."""
        result = await self.run("container", "inspect", "--format", "{{json .Mounts}}", name, check=False)
        if result.code != 0:
            return None
        for mount in json.loads(result.out or "[]") or []:
            if mount.get("Destination") == WORKSPACE:
                return str(mount.get("Name") or "") or None
        return None

    async def bound_folder(self, name: str) -> str | None:
        """The host folder bind-mounted at /workspace in container `name`, or None."""
        result = await self.run("container", "inspect", "--format", "{{json .Mounts}}", name, check=False)
        if result.code != 0:
            return None
        for mount in json.loads(result.out or "[]") or []:
            if mount.get("Destination") == WORKSPACE and mount.get("Type") == "bind":
                return str(mount.get("Source") or "") or None
        return None

    async def labelled(self, labels: Mapping[str, str], kind: str = "container") -> list[str]:
        """Names of the containers (or volumes) carrying all `labels`. Each is checked here too:
        Podman joins several label filters of `volume ls` with OR, not AND."""
        filters: list[str] = []
        for key, value in labels.items():
            filters += ["--filter", f"label={key}={value}" if value else f"label={key}"]
        if kind == "volume":
            listed = await self.run("volume", "ls", "--quiet", *filters)
        else:
            listed = await self.run("ps", "--all", "--format", "{{.Names}}", *filters)
        names = [line.strip() for line in listed.out.splitlines() if line.strip()]
        if not names:
            return []
        inspect = ["volume", "inspect"] if kind == "volume" else ["container", "inspect"]
        found = await self.run(
            *inspect,
            "--format",
            "{{json .Labels}}" if kind == "volume" else "{{json .Config.Labels}}",
            *names,
            check=False,
        )
        out = []
        for name, line in zip(names, found.out.splitlines(), strict=False):
            have = json.loads(line or "null") or {}
            if all(have.get(k) == v if v else k in have for k, v in labels.items()):
                out.append(name)
        return out

    def refused(self, code: int) -> bool:
        """Whether an `exec` that ended with `code` may have been refused by the engine itself (a
        stopped container) rather than failed in the container: Podman says 125, 126 or (a stopped
        container) 255; Docker's client exits 1 on any of its daemon's errors."""
        return code in (125, 126, 255) or (not self.is_podman and code == 1)

    def relay_checks(self, name: str) -> dict[str, object]:
        """How the relay (relay.py) tells, for a command's `exec` in container `name` that failed
        with the container stopped, whether the command had begun: Podman passes it a descriptor
        the command's wrapper writes on as it begins ("marker"); Docker passes none, so the relay
        asks when the container last stopped ("stopped_at"): before the exec was asked for, the
        daemon refused the exec and the command never ran. Also how it asks whether the container
        runs ("state") and starts it ("start")."""
        inspect = ["container", "inspect", "--format"]
        return {
            "state": self.argv(*inspect, "{{.State.Running}}", name),
            "start": self.argv("start", name),
            "marker": self.is_podman,
            "stopped_at": [] if self.is_podman else self.argv(*inspect, "{{.State.FinishedAt}}", name),
        }

    def exec_argv(
        self,
        name: str,
        argv: Sequence[str],
        *,
        cwd: str,
        env: Mapping[str, str],
        user: str,
        stdin: bool,
        tty: bool,
        preserve_fds: int = 0,
    ) -> list[str]:
        """`exec` of `argv` in container `name`, with exactly `env` (the engine's client passes
        nothing of its own environment unless asked: every variable is given as NAME=value).
        `preserve_fds`: the client's descriptors 3 and on it passes in (Podman only)."""
        args = ["exec", "--user", user, "--workdir", cwd]
        if preserve_fds and self.is_podman:
            args += ["--preserve-fds", str(preserve_fds)]
        if stdin or tty:
            args.append("--interactive")
        if tty:
            args.append("--tty")
        for key, value in env.items():
            args += ["--env", f"{key}={value}"]
        if tty and not self.is_podman:
            argv = ["/bin/sh", "-c", SIZED, "sh", *argv]
        return self.argv(*args, name, *argv)


def new_id() -> str:
    return secrets.token_hex(6)


def _labels(labels: Mapping[str, str]) -> list[str]:
    out: list[str] = []
    for key, value in {LABEL: "1", **labels}.items():
        out += ["--label", f"{key}={value}"]
    return out


def _at_most(wanted: int, limit: int) -> int:
    """`wanted` (0: the most) lowered to this process's hard limit: a container may not be given
    more than the machine gives its engine."""
    hard = resource.getrlimit(limit)[1]
    if hard == resource.RLIM_INFINITY:
        hard = 1 << 20
    return hard if wanted <= 0 else min(wanted, hard)
