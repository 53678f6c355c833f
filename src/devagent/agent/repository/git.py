"""Running git in the server process, for a repository session's clone, patch and push.

These commands run outside any sandbox, with the operator's credentials when a remote needs them,
over content a caller's repository and the model wrote: so each runs hermetic. No system or global
config is read (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`), hooks never run
(`core.hooksPath=/dev/null`), only the transports of `ALLOWED_PROTOCOLS` are spoken (never `ext::`),
nothing prompts, and the environment is a short allow-list (never the server's keys or database
URL). A command over a session's workspace names the server's own git directory
(`--git-dir`), never the workspace's `.git`, whose config the model may have rewritten.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from devagent.agent.events import InputError
from devagent.agent.repository.remotes import ALLOWED_PROTOCOLS, GitAuth
from devagent.common import scrub

# What git's own environment keeps from the server's: finding programs, the operator's ssh agent
# and keys for ssh remotes (HOME), and a locale.
_KEEP = ("PATH", "HOME", "SSH_AUTH_SOCK", "LANG", "LC_ALL", "TZ")
# Every command: hooks off, no fsmonitor, no pager, transports limited (also for submodules).
_ALWAYS = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.pager=cat",
    "protocol.allow=never",
    *(f"protocol.{p}.allow=always" for p in ALLOWED_PROTOCOLS.split(":")),
    "submodule.recurse=false",
    "advice.detachedHead=false",
    "init.defaultBranch=main",
)
GIT_TIMEOUT = 900.0  # a clone or push of a large repository; a hung remote ends the command here


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: os.environ[k] for k in _KEEP if k in os.environ}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_TERMINAL_PROMPT="0",
        GIT_ALLOW_PROTOCOL=ALLOWED_PROTOCOLS,
        GIT_PROTOCOL_FROM_USER="0",
        GCM_INTERACTIVE="never",
        LC_ALL="C",
    )
    env.update(extra or {})
    return env


class GitFailed(InputError):
    """A git command that failed: the repository, the ref or the remote is not what was asked."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "repository_failed")


async def git(
    args: Sequence[str],
    *,
    cwd: Path | None = None,
    git_dir: Path | None = None,
    work_tree: Path | None = None,
    auth: GitAuth | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
) -> tuple[int, str]:
    """Runs `git ARGS` hermetic (module docstring); (exit code, standard output). A failure, when
    `check`, is GitFailed with git's own words (any secret of `auth` scrubbed from them)."""
    auth = auth or GitAuth()
    argv = ["git"]
    for item in (*_ALWAYS, *auth.config):
        argv += ["-c", item]
    if git_dir is not None:
        argv.append(f"--git-dir={git_dir}")
    if work_tree is not None:
        argv.append(f"--work-tree={work_tree}")
    argv += list(args)
    if auth.secret:
        scrub.remember([auth.secret])
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=str(cwd) if cwd is not None else None,
        env=git_env({**dict(auth.env), **(env or {})}),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), GIT_TIMEOUT)
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    code = proc.returncode or 0
    if check and code != 0:
        words = err.decode(errors="replace").strip().splitlines()[-3:]
        said = scrub.scrub(" / ".join(words)) if words else f"exit code {code}"
        raise GitFailed(f"git {args[0]} failed: {said}")
    return code, out.decode(errors="replace")
