"""A session's workspace cloned from a repository at a ref.

The clone runs in the server process (never in a sandbox) with the operator's credentials for that
one command. It fetches into the server's own git directory for the session (`server_git_dir`,
under the data directory, which no sandboxed command can read), resolves the ref to a commit, and
makes the session's workspace (a new folder under the caller's workspace root) a repository of its
own fetched from that directory: its `.git/config` names the remote's URL (never userinfo), no
credential helper, and the branch the result will be pushed to, checked out at the commit. The
repository's content is untrusted: no hook runs (`git.py`), and the server never reads the
workspace's `.git` again (results.py works from its own directory).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Any

from devagent.agent.repository.git import GitFailed, git
from devagent.agent.repository.remotes import (
    RepositoryRequest,
    check_ref,
    check_url,
    chosen_setup,
    git_auth,
    result_branch,
)
from devagent.agent.sandbox.base import Sandbox, SandboxProvider
from devagent.agent.settings import CoreConfig

BASE_REF = "refs/devagent/base"  # the commit the session started from, in both repositories
_HEADS = "+refs/heads/*:refs/heads/*"
_TAGS = "+refs/tags/*:refs/tags/*"


def server_git_dir(config: CoreConfig, session_id: str) -> Path:
    """The server's own git directory of a session (its objects, the base and result commits)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "-", session_id)
    return config.data_dir / "repositories" / f"{safe}.git"


async def fetch_remote(config: CoreConfig, gitdir: Path, url: str, ref: str = "") -> None:
    """The remote's branches and tags into the server's git directory (made if missing), with
    the operator's credentials for this command only; a commit id no branch or tag holds is
    asked for by itself (servers that allow it give it)."""
    if not (gitdir / "HEAD").is_file():
        gitdir.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        await git(["init", "-q", "--bare", "--template=", str(gitdir)])
    auth = git_auth(url, config.git_credentials, os.environ)
    await git(["fetch", "-q", "--no-tags", "--end-of-options", url, _HEADS, _TAGS], git_dir=gitdir, auth=auth)
    if ref and await _commit_of(gitdir, ref) is None and re.fullmatch(r"[0-9a-fA-F]{7,40}", ref):
        await git(
            ["fetch", "-q", "--no-tags", "--end-of-options", url, ref], git_dir=gitdir, auth=auth, check=False
        )


async def _commit_of(gitdir: Path, ref: str) -> tuple[str, str] | None:
    """The commit `ref` names in the server's directory and what it is (branch, tag, commit)."""
    candidates = [(f"refs/heads/{ref}", "branch"), (f"refs/tags/{ref}", "tag")]
    if re.fullmatch(r"[0-9a-fA-F]{7,40}", ref):
        candidates.append((ref, "commit"))
    for name, kind in candidates:
        code, out = await git(
            ["rev-parse", "-q", "--verify", "--end-of-options", f"{name}^{{commit}}"],
            git_dir=gitdir,
            check=False,
        )
        if code == 0 and out.strip():
            return out.strip(), kind
    return None


async def resolve(gitdir: Path, url: str, ref: str) -> tuple[str, str]:
    found = await _commit_of(gitdir, ref)
    if found is None:
        raise GitFailed(f"{url} has no branch, tag or commit {ref!r}")
    return found


def _new_folder(root: Path, url: str) -> Path:
    """A new folder of the session under the caller's root, named after the repository."""
    name = re.sub(r"\.git$", "", url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1])
    name = re.sub(r"[^A-Za-z0-9._-]", "-", name).lstrip(".-")[:40] or "repository"
    folder = root / f"{name}-{uuid.uuid4().hex[:8]}"
    folder.mkdir(mode=0o700)
    return folder


async def _make_workspace(folder: Path, gitdir: Path, url: str, branch: str) -> None:
    """The workspace's own repository: fetched from the server's directory, its remote the
    caller's URL, the result branch checked out at the base commit."""
    await git(["init", "-q", "--template=", str(folder)])
    refspecs = ["+refs/heads/*:refs/remotes/origin/*", _TAGS, f"+{BASE_REF}:{BASE_REF}"]
    await git(["fetch", "-q", "--no-tags", "--end-of-options", str(gitdir), *refspecs], cwd=folder)
    await git(["config", "remote.origin.url", url], cwd=folder)
    await git(["config", "remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"], cwd=folder)
    await git(["checkout", "-q", "-b", branch, BASE_REF], cwd=folder)


async def open_workspace(
    config: CoreConfig,
    sandboxes: SandboxProvider,
    root: Path,
    request: RepositoryRequest,
    session_id: str,
    identity: str,
) -> dict[str, Any]:
    """Clone the repository a caller asked for into a new folder under `root` and run its setup;
    the record the session's state keeps (`SessionState.repository`). InputError refuses the
    request (repository_refused) or says what failed (repository_failed); nothing is left behind."""
    url = check_url(request.url, config.repository_remotes)
    ref = check_ref(request.ref)
    setup = chosen_setup(config.repository_setup, request.setup)
    branch = result_branch(config.result_branch_pattern, session_id, identity, ref)
    gitdir = server_git_dir(config, session_id)
    folder = _new_folder(root, url)
    sandbox: Sandbox | None = None
    try:
        await fetch_remote(config, gitdir, url, ref)
        base, kind = await resolve(gitdir, url, ref)
        await git(["update-ref", BASE_REF, base], git_dir=gitdir)
        await _make_workspace(folder, gitdir, url, branch)
        if setup:
            from devagent.agent.repository.setup import run_setup, setup_command  # late: the shell's

            command = setup_command(folder, setup)
        sandbox = sandboxes.for_session(session_id, [folder])
        if not sandbox.files_here:  # the workspace is the sandbox's own: the clone goes in there
            from devagent.agent.repository.volume import copy_in  # late: only such sessions

            await copy_in(sandbox, folder)
        sandboxes.give(folder)  # the clone belongs to the user its commands run as, where that is not ours
        record: dict[str, Any] = {
            "url": url,
            "ref": ref,
            "kind": kind,
            "base_commit": base,
            "result_branch": branch,
            "push": request.push,
            "workspace": str(folder),
        }
        if setup:
            record["setup"] = await run_setup(config, sandbox, folder, setup, command)
    except BaseException:
        if sandbox is not None:  # its workspace (a volume, a worker's snapshot) goes too
            with contextlib.suppress(Exception):
                await sandbox.release(keep=False)
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(gitdir, ignore_errors=True)
        raise
    return record
