"""A repository session's result: the patch of its workspace against the commit it started from,
and, on request, that change as a commit on the operator's result branch pushed to the remote.

Both are made in the server process from the server's own git directory of the session
(`clone.server_git_dir`) with the workspace as its work tree: the workspace's `.git` (which the
model may have rewritten: hooks, helpers, `insteadOf` URLs) is never read. The push uses the
operator's credentials for that one command and only ever names `refs/heads/<result branch>`,
which is never the ref the session started from. A replica that does not have the session's git
directory fetches it again from the remote (the record in the store names everything needed).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devagent.agent.events import InputError
from devagent.agent.repository.clone import BASE_REF, fetch_remote, server_git_dir
from devagent.agent.repository.git import GitFailed, git
from devagent.agent.repository.remotes import check_ref, git_auth, refused

if TYPE_CHECKING:
    from devagent.agent.session import Session

_AUTHOR = {
    "GIT_AUTHOR_NAME": "devagent",
    "GIT_AUTHOR_EMAIL": "devagent@localhost",
    "GIT_COMMITTER_NAME": "devagent",
    "GIT_COMMITTER_EMAIL": "devagent@localhost",
}


@dataclass(slots=True)
class RepositoryResult:
    """What a repository session produced: `patch`, the unified diff (binary-safe, new files
    included) of its workspace against `base_commit`; `files`, the paths it touches; and when it
    was pushed, `branch` and `commit` (both "" otherwise)."""

    url: str
    ref: str
    base_commit: str
    patch: str
    files: list[str] = field(default_factory=list)
    branch: str = ""
    commit: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "repository": self.url,
            "ref": self.ref,
            "base_commit": self.base_commit,
            "patch": self.patch,
            "files": list(self.files),
        }
        if self.branch:
            out["branch"] = self.branch
            out["commit"] = self.commit
        return out


async def _has_commit(gitdir: Path, commit: str) -> bool:
    if not (gitdir / "HEAD").is_file():
        return False
    code, _ = await git(["cat-file", "-e", f"{commit}^{{commit}}"], git_dir=gitdir, check=False)
    return code == 0


async def _ensure_git_dir(session: Session, record: dict[str, Any]) -> Path:
    """The session's git directory, fetched again from the remote where this process has none."""
    config = session.core.config
    gitdir = server_git_dir(config, session.id)
    base = str(record["base_commit"])
    if not await _has_commit(gitdir, base):
        await fetch_remote(config, gitdir, str(record["url"]), base)
        await git(["cat-file", "-e", f"{base}^{{commit}}"], git_dir=gitdir)
        await git(["update-ref", BASE_REF, base], git_dir=gitdir)
    return gitdir


async def _snapshot(gitdir: Path, workspace: Path, base: str) -> tuple[str, str, list[str]]:
    """The workspace as a tree in the server's directory: (tree id, patch, files)."""
    fd, index = tempfile.mkstemp(prefix="index-", dir=gitdir)
    os.close(fd)
    os.unlink(index)  # git makes it; an empty file is not an index
    env = {"GIT_INDEX_FILE": index}

    async def run(*args: str) -> str:
        return (await git(args, cwd=workspace, git_dir=gitdir, work_tree=workspace, env=env))[1]

    try:
        await run("read-tree", base)
        await run("add", "-A", "--", ".")
        tree = await run("write-tree")
        patch = await run("diff", "--cached", "--binary", "--no-ext-diff", "--no-textconv", base)
        names = await run("diff", "--cached", "--name-only", "-z", base)
    finally:
        if os.path.exists(index):
            os.unlink(index)
    return tree.strip(), patch, [n for n in names.split("\0") if n]


async def _snapshot_of_sandbox(
    session: Session, gitdir: Path, workspace: Path, base: str
) -> tuple[str, str, list[str]]:
    """`_snapshot` of a workspace in the session's sandbox: its work tree copied out (without its
    `.git`) into a private folder beside the server's git directory, removed after."""
    from devagent.agent.repository.volume import copy_out  # late: only such sessions

    with tempfile.TemporaryDirectory(prefix="tree-", dir=gitdir.parent) as tree:
        await copy_out(session.sandbox, workspace, Path(tree))
        return await _snapshot(gitdir, Path(tree), base)


async def _push(session: Session, gitdir: Path, record: dict[str, Any], tree: str) -> str:
    """The tree as a commit on the result branch (after the last one pushed), pushed; its id."""
    branch, ref = str(record["result_branch"]), str(record["ref"])
    check_ref(branch)
    if branch == ref or branch == ref.removeprefix("refs/heads/"):
        raise refused(f"the result branch {branch} is the ref the session started from: not pushed")
    # After the last commit pushed (the store names it: any replica goes on from it), else the base
    parent = str(record.get("pushed_commit") or record["base_commit"])
    if not await _has_commit(gitdir, parent):
        await fetch_remote(session.core.config, gitdir, str(record["url"]))
    _, parent_tree = await git(["rev-parse", f"{parent}^{{tree}}"], git_dir=gitdir)
    if parent_tree.strip() == tree:
        return parent  # nothing new since the last push
    title = session.state.title or "changes"
    message = f"devagent: {title}\n\nSession {session.id}, from {ref} at {record['base_commit']}.\n"
    _, commit = await git(["commit-tree", tree, "-p", parent, "-m", message], git_dir=gitdir, env=_AUTHOR)
    commit = commit.strip()
    url = str(record["url"])
    auth = git_auth(url, session.core.config.git_credentials, os.environ)
    await git(
        ["push", "-q", "--end-of-options", url, f"{commit}:refs/heads/{branch}"], git_dir=gitdir, auth=auth
    )
    return commit


async def repository_result(session: Session, *, push: bool | None = None) -> RepositoryResult:
    """The session's result now (between turns): its patch, and with `push` (default: what the
    caller asked for when it started the session) its branch pushed. The store records the branch
    and commit pushed. InputError for a session that did not start from a repository, or a git
    failure (repository_failed: the patch is still in the workspace, nothing is lost)."""
    record = dict(session.state.repository or {})
    if not record:
        raise InputError(f"session {session.id} did not start from a repository", "not_a_repository")
    workspace = Path(str(record["workspace"]))
    here = session.sandbox.files_here
    if here and not workspace.is_dir():
        raise GitFailed(f"the workspace {workspace} of session {session.id} is gone")
    gitdir = await _ensure_git_dir(session, record)
    base = str(record["base_commit"])
    if here:
        tree, patch, files = await _snapshot(gitdir, workspace, base)
    else:
        tree, patch, files = await _snapshot_of_sandbox(session, gitdir, workspace, base)
    result = RepositoryResult(str(record["url"]), str(record["ref"]), base, patch, files)
    if push if push is not None else bool(record.get("push")):
        if patch:
            result.commit = await _push(session, gitdir, record, tree)
            result.branch = str(record["result_branch"])
            record.update(pushed_commit=result.commit, pushed_branch=result.branch)
            await session.record_repository(record)
    return result
