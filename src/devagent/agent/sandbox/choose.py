"""Choosing a process's sandbox from the operator's settings and a door's flags: the backend
(`sandbox_backend`), whether it is on (`sandbox`, --sandbox/--no-sandbox, the command's default),
and for bubblewrap what its commands see (`sandbox_read`, `sandbox_hide`, `sandbox_user`). The
result is the core's `SandboxProvider`; a caller never chooses any of it."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from devagent.agent.sandbox.accounts import root_sandbox_user
from devagent.agent.sandbox.base import BACKENDS, SandboxError, SandboxProvider
from devagent.agent.sandbox.local import Bubblewrap, LocalProvider
from devagent.agent.sandbox.none import DirectProvider, SandboxMissing, root_note
from devagent.agent.sandbox.probe import probe_bwrap
from devagent.agent.sandbox.shown import not_holding, user_folders
from devagent.agent.settings import user_config_dir

if TYPE_CHECKING:
    from devagent.agent.settings import CoreConfig

SANDBOX_SETTINGS = ("auto", "on", "off")  # "" (unset): auto for serve, off for run and wire
# Never readable by a sandboxed command, whoever the server runs as.
SECRET_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-")
SECRET_DIRS = ("/root",)


def sandbox_setting(value: str) -> str:
    """The `sandbox` setting normalized: "", auto, on or off (true/false and yes/no accepted)."""
    v = value.strip().lower()
    v = {"true": "on", "yes": "on", "1": "on", "false": "off", "no": "off", "0": "off"}.get(v, v)
    if v and v not in SANDBOX_SETTINGS:
        raise ValueError(f"sandbox must be one of {', '.join(SANDBOX_SETTINGS)}, not {value!r}")
    return v


def sandbox_backend_setting(value: str) -> str:
    """The `sandbox_backend` setting normalized: local (the default), container or worker."""
    v = value.strip().lower() or "local"
    if v not in BACKENDS:
        raise ValueError(f"sandbox_backend must be one of {', '.join(BACKENDS)}, not {value!r}")
    return v


WORKSPACES = ("host", "volume")


def sandbox_workspace_setting(value: str) -> str:
    """The `sandbox_workspace` setting normalized: host (the default) or volume."""
    v = value.strip().lower() or "host"
    if v not in WORKSPACES:
        raise ValueError(f"sandbox_workspace must be one of {', '.join(WORKSPACES)}, not {value!r}")
    return v


def sandbox_mode(flag: bool | None, config: CoreConfig, command: str) -> tuple[str, str]:
    """Whether `devagent COMMAND`'s sandbox is on (on, off, auto, or "default": serve's, on
    but failing closed where it cannot run) and what said so: the flag (--sandbox/--no-sandbox)
    over the `sandbox` setting over the command's default."""
    if flag is not None:
        return ("on", "--sandbox") if flag else ("off", "--no-sandbox")
    if config.sandbox:
        mode = sandbox_setting(config.sandbox)
        return mode, f"sandbox = {mode} in the settings"
    if command == "serve":
        return "default", "the default of devagent serve"
    return "off", f"the default of devagent {command}; --sandbox turns it on"


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
) -> tuple[Bubblewrap | SandboxMissing | None, str]:
    """The sandbox for `devagent COMMAND`: the flag (--sandbox/--no-sandbox) over the `sandbox`
    setting over the command's default (on for serve, off for run and wire). Returns it with the
    line saying whether it is on and why. Where bwrap does not work: SandboxError when it was
    asked for (the flag or the setting "on"); SandboxMissing for serve's default, so that the
    server starts and its commands fail closed; off only for the operator's
    explicit "auto". `hide`: more directories no command may see (a server's workspace roots).
    `owned_by`: the workspace roots whose owner a root server's commands run as
    (`root_sandbox_user`)."""
    mode, source = sandbox_mode(flag, config, command)
    if mode == "off":
        return None, f"Shell sandbox: off ({source}){root_note()}"
    # Root inside a user namespace is still root to every file outside it: a root server's
    # commands run as another user.
    as_root = os.geteuid() == 0
    probed = probe_bwrap(root_sandbox_user(config.sandbox_user, owned_by) if as_root else None)
    if isinstance(probed, str):
        if mode == "on":
            raise SandboxError(f"the shell sandbox is on ({source}) but {probed}")
        if mode == "auto":
            return None, f"Shell sandbox: off (sandbox = auto and {probed}){root_note()}"
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


def provider_of(choice: Bubblewrap | SandboxMissing | None) -> SandboxProvider:
    """The core's sandboxes for a `choose_sandbox` result."""
    if isinstance(choice, Bubblewrap):
        return LocalProvider(choice)
    return DirectProvider(choice)


def _elsewhere(backend: str, config: CoreConfig) -> SandboxProvider:
    """The backend whose sandboxes are not this host's bubblewrap: a container per session, or
    a worker's (loaded late: neither is on the path of a local server)."""
    if backend == "container":
        from devagent.agent.sandbox.container import ContainerProvider

        return ContainerProvider(config)
    from devagent.agent.sandbox.worker import WorkerProvider

    return WorkerProvider(config)


def choose_provider(
    flag: bool | None,
    config: CoreConfig,
    command: str,
    hide: Sequence[Path] = (),
    owned_by: Sequence[Path] = (),
) -> tuple[SandboxProvider, str]:
    """The core's sandboxes for `devagent COMMAND` (see `choose_sandbox`) and the line saying
    which; SandboxError where they were asked for and cannot be had."""
    backend = sandbox_backend_setting(config.sandbox_backend)
    if backend != "local":
        mode, source = sandbox_mode(flag, config, command)
        provider = _elsewhere(backend, config)
        if mode != "off":
            return provider, f"Shell sandbox: on ({provider.describe()}; {source})"
    choice, line = choose_sandbox(flag, config, command, hide, owned_by)
    return provider_of(choice), line


def setup_sandbox(
    flag: bool | None,
    config: CoreConfig,
    command: str,
    hide: Sequence[Path] = (),
    owned_by: Sequence[Path] = (),
) -> str:
    """Chooses the sandbox of the core that opens with `config` (`choose_provider`), hands it to
    that core (`config.sandboxes`), returns the line to print."""
    config.sandboxes, line = choose_provider(flag, config, command, hide, owned_by)
    return line
