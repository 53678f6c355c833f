"""The folder the container engine's clients run in (sandbox/podman.py `engine_workdir`): Podman's
conmon writes its marker of an out-of-memory kill into its working directory, which must not be
the server's (tests/sandbox/test_container.py checks that with a real OOM kill). Here: the folder
is the user's own private one, made once and shared by the process's calls, and one that is not
(a link planted in its place, a folder open to others) is passed over for a private new one."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from devagent.agent.sandbox import podman


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The temporary folder here, and no folder found yet."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(podman, "_WORKDIR", [])
    yield tmp_path / f"devagent-engine-{os.getuid()}"


def test_issue40_the_engines_clients_run_in_the_users_private_folder(fresh: Path) -> None:
    folder = podman.engine_workdir()
    assert folder == str(fresh) and podman.engine_workdir() == folder
    found = os.lstat(folder)
    assert stat.S_ISDIR(found.st_mode) and stat.S_IMODE(found.st_mode) == 0o700
    assert podman.Engine().client()["cwd"] == folder  # every run of the engine's command line


@pytest.mark.parametrize("planted", ["link", "open folder"])
def test_issue40_a_planted_or_open_folder_is_passed_over(fresh: Path, tmp_path: Path, planted: str) -> None:
    if planted == "link":
        (tmp_path / "elsewhere").mkdir(mode=0o700)
        fresh.symlink_to(tmp_path / "elsewhere")
    else:
        fresh.mkdir()
        fresh.chmod(0o777)
    folder = Path(podman.engine_workdir())
    assert folder != fresh and folder.parent == tmp_path and not folder.is_symlink()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
