"""Issue 28 item 1: a command run under an "allow always" grant starts no program that git's
configuration names, with the real git: a folder the model filled with HEAD, config, objects/
and refs/, and a repository that arrived with hostile configuration. The same commands run
individually approved (not granted) do run them, which shows each attack is real here."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from devagent.agent.state import SessionState
from devagent.agent.tools.base import ToolContext
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.shell import RunShellCommand
from devagent.agent.tools.workspace import Workspace

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    """The file the programs a hostile git configuration names write to (outside the workspace)."""
    return tmp_path / "ran"


def marker_command(marker: Path, what: str) -> str:
    return f"echo {what} >> {marker}; false"


async def run(ws: Path, command: str, *, granted: bool) -> str:
    ctx = ToolContext(
        workspace=Workspace([ws]), state=SessionState(workspace_roots=[str(ws)]), granted=granted
    )
    return (await RunShellCommand().run({"command": command}, ctx)).text


def fake_git_dir(ws: Path, marker: Path) -> None:
    """What write_file alone can create: git takes the folder itself as a (bare) git directory."""
    (ws / "HEAD").write_text("ref: refs/heads/main\n")
    (ws / "config").write_text(
        "[core]\n"
        f'\tfsmonitor = "{marker_command(marker, "fsmonitor")}"\n'
        "[diff]\n"
        f'\texternal = "{marker_command(marker, "external-diff")}"\n'
    )
    (ws / "objects").mkdir()
    (ws / "objects" / "keep").write_text("")
    (ws / "refs").mkdir()
    (ws / "refs" / "keep").write_text("")
    (ws / "a.txt").write_text("a\n")
    (ws / "b.txt").write_text("b\n")


async def test_issue28_item1_granted_git_ignores_a_git_directory_the_model_wrote(
    ws: Path, marker: Path
) -> None:
    fake_git_dir(ws, marker)
    command = "git status --short; git diff --no-index a.txt b.txt; git log --oneline; echo END"
    out = await run(ws, command, granted=True)
    assert "END" in out and not marker.exists(), out
    await run(ws, command, granted=False)
    assert marker.exists()  # the attack works where the user approved the command itself


def hostile_repo(ws: Path, marker: Path) -> None:
    """A repository that arrives with configuration naming programs, and files that use them."""

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=ws, check=True, capture_output=True)

    git("init", "-q")
    (ws / "a.txt").write_text("one\n")
    inner = ws / "inner"  # a submodule, with a driver of its own
    inner.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=inner, check=True)
    (inner / "i.txt").write_text("a\n")
    subprocess.run(["git", "add", "i.txt"], cwd=inner, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "i"],
        cwd=inner,
        check=True,
    )
    with (inner / ".git" / "config").open("a") as f:
        f.write(f'[filter "evil"]\n\tclean = "{marker_command(marker, "inner-clean")}"\n')
    (inner / ".gitattributes").write_text("*.txt filter=evil\n")
    git("add", "a.txt", "inner")
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "first")
    (inner / "i.txt").write_text("b\n")  # the same size: git must read it (through the filter)
    os.utime(inner / "i.txt", (1_000_000_000, 1_000_000_000))
    hooks = ws / "hooks"
    hooks.mkdir()
    for hook in ("post-index-change", "pre-commit"):
        (hooks / hook).write_text(f"#!/bin/sh\necho hook >> {marker}\n")
        (hooks / hook).chmod(0o755)
    with (ws / ".git" / "config").open("a") as f:
        f.write(
            "[core]\n"
            f'\tfsmonitor = "{marker_command(marker, "fsmonitor")}"\n'
            f"\thooksPath = {hooks}\n"
            '[diff "evil"]\n'
            f'\tcommand = "{marker_command(marker, "diff-command")}"\n'
            f'\ttextconv = "{marker_command(marker, "textconv")}"\n'
            '[filter "evil"]\n'
            f'\tclean = "{marker_command(marker, "clean")}"\n'
            f'\tsmudge = "{marker_command(marker, "smudge")}"\n'
        )
    (ws / ".gitattributes").write_text("*.txt diff=evil filter=evil\n")
    (ws / "a.txt").write_text("one\ntwo\n")


async def test_issue28_item1_granted_git_runs_no_program_its_repository_names(ws: Path, marker: Path) -> None:
    hostile_repo(ws, marker)
    command = (
        "git status --short; git diff; git diff --stat; git log -p; git show; git blame a.txt; "
        "git ls-files -m; cd hooks && git status; echo END"
    )
    out = await run(ws, command, granted=True)
    assert "END" in out and " M a.txt" in out
    assert not marker.exists(), marker.read_text()
    await run(ws, command, granted=False)
    assert {"fsmonitor", "hook", "clean", "inner-clean"} <= set(marker.read_text().split())


def test_issue28_item1_head_is_refused_as_an_edit_target(ws: Path) -> None:
    """The file that makes a folder a git directory is never written by a tool (like .git/)."""
    workspace = Workspace([ws])
    for path in ("HEAD", "sub/HEAD"):
        with pytest.raises(ToolFailure) as e:
            workspace.check_writable(ws / path, path)
        assert e.value.type == "protected_path" and "HEAD" in e.value.message
    for path in ("config", "objects/x", "refs/x", "HEADER.md", "head"):
        workspace.check_writable(ws / path, path)
