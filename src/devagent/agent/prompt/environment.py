"""What the model is told about where it works: the operating system, the shell, the day, the
workspace roots, the git state, and how commands run (sandbox, network).

Taken once, when a session makes its first request, and stored with the session, so the prompt
stays byte-identical for the whole session (the provider's prompt cache keeps it). The git line
is read from the repository's files (HEAD, the branch it names); the snapshot of the working tree
under it comes from git run with every program its configuration could name turned off
(`git_snapshot`), since a workspace's configuration is not trusted. In a repository the section
ends with what to do when the user asks for a commit."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from devagent.agent.sandbox.base import Sandbox


@dataclass(frozen=True, slots=True)
class Execution:
    """How the shell tool runs a session's commands."""

    sandboxed: bool
    network: bool
    summary: str = ""  # the sandbox's own line (bubblewrap version, user)

    def describe(self) -> str:
        if self.sandboxed:
            network = "with network access" if self.network else "without network access"
            return (
                f"Commands run in a sandbox ({self.summary}), {network}; files outside the workspace "
                "roots are read-only or hidden."
            )
        return "Commands run directly on the machine, with its network, as the server's user."


def execution_of(sandbox: Sandbox | None, sandbox_network: bool) -> Execution:
    """How the session's commands run: in its sandbox, or directly (none, or one that cannot run)."""
    if sandbox is None or sandbox.kind == "none" or sandbox.unavailable() is not None:
        return Execution(sandboxed=False, network=True)
    return Execution(sandboxed=True, network=sandbox.network or sandbox_network, summary=sandbox.describe())


def _git_dir(root: Path) -> Path | None:
    """The git directory of the repository `root` is in (a `.git` folder, or the folder a `.git`
    file names), looking upwards."""
    # Plain strings, not `Path.parents`: this runs for every new conversation, and building
    # each parent as a Path cost more than the stat calls.
    folder = str(root)
    while True:
        dot_git = os.path.join(folder, ".git")
        try:
            if os.path.isdir(dot_git):
                return Path(dot_git)
            if os.path.isfile(dot_git):
                text = Path(dot_git).read_text(encoding="utf-8", errors="replace").strip()
                if text.startswith("gitdir:"):
                    target = Path(text[len("gitdir:") :].strip())
                    return target if target.is_absolute() else (Path(folder) / target)
        except OSError:
            return None
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def in_repository(root: Path) -> bool:
    """Whether `root` is in a git repository (the environment section then runs git)."""
    return _git_dir(root) is not None


def git_state(root: Path) -> str:
    """One line on the repository the primary root is in: its branch (or detached commit)."""
    git_dir = _git_dir(root)
    if git_dir is None:
        return "The workspace is not a git repository."
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return "The workspace is in a git repository whose HEAD cannot be read."
    if head.startswith("ref: refs/heads/"):
        where = f"on branch {head[len('ref: refs/heads/') :]}"
    elif head.startswith("ref:"):
        where = f"at {head[len('ref:') :].strip()}"
    else:
        where = f"at detached commit {head[:12]}"
    return (
        f"The workspace is a git repository, {where}. It may hold the user's uncommitted changes "
        "(`git status` shows them)."
    )


COMMIT_RUNBOOK = """- When the user asks you to commit: run `git status`, `git diff` and `git diff --staged`
  to see what changed; stage only the files that belong to the change (by name, not `git add -A`
  when the tree holds other work); write a message in the style of the recent commits whose first
  line says what changed and whose body, if any, says why. Never push, amend, rebase or change the
  configuration unless asked, and never skip the hooks (`--no-verify`): when a hook fails, fix the
  cause and make a new commit."""


def git_section(root: Path) -> str:
    """The Git line; in a repository, its snapshot and the commit runbook under it."""
    line = f"- Git: {git_state(root)}"
    if _git_dir(root) is None:
        return line
    # late: only a session in a repository runs git
    from devagent.agent.prompt.git_snapshot import take_snapshot

    snapshot = take_snapshot(root)
    parts = [line, snapshot.describe()] if snapshot is not None else [line]
    return "\n".join([*parts, COMMIT_RUNBOOK])


def describe_environment(roots: list[str], started_on: str, execution: Execution, here: bool = True) -> str:
    """The environment section of the prompt (`here`: the workspace is a folder of this host,
    whose git state is told; else it is in the session's sandbox, where git is the model's to ask)."""
    system = f"{platform.system()} {platform.release()}".strip()
    shell = "bash (`run_shell_command` runs `bash -c`)"
    lines = [
        f"- Operating system: {system}",
        f"- Shell: {shell}",
        f"- Today's date: {started_on} (the day this session started)",
        f"- Workspace roots: {', '.join(roots)}. Relative paths start at the first; no tool reaches "
        "outside them.",
        f"- {execution.describe()}",
    ]
    if not here:
        git = (
            "- Git: the workspace is in the session's sandbox; ask git there (run_shell_command). "
            "The project guides in its subfolders (nested memory files) were not read: find them with glob"
        )
    else:
        git = git_section(Path(roots[0])) if roots else "- Git: no workspace"
    lines.insert(-1, git)
    return "\n".join(lines)
