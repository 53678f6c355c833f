"""The npm clients the interoperability tests drive: each lives in a `tests/<door>/js` folder with
a package.json and its lock, which `scripts/test` installs. A test run on its own installs its
folder here the same way; without node or npm, or when the install fails, the test is skipped
with the reason."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def ensure_installed(js: Path, installed: Path, package: str) -> None:
    """Skip the calling test unless `package` is installed in `js` (`installed`: a path that exists
    once it is), running `npm ci` there first if it is not."""
    if shutil.which("node") is None:
        pytest.skip(f"node is not installed: the {package} interoperability test needs it")
    if installed.exists():
        return
    if shutil.which("npm") is None:
        pytest.skip(f"npm is not installed: the {package} interoperability test needs it")
    r = subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=js,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if r.returncode != 0 or not installed.exists():
        pytest.skip(f"cannot install {package}: {r.stderr[-300:]}")


def ensure_runs(binary: Path, package: str) -> None:
    """Skip the calling test unless `binary --version` runs: an npm package that ships a native
    build for each platform installs a stub in its place where that build is missing (another
    platform, or its install script did not run)."""
    try:
        r = subprocess.run(
            [str(binary), "--version"], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120
        )
    except OSError as e:
        pytest.skip(f"{package} does not run here: {e}")
    if r.returncode != 0:
        pytest.skip(f"{package} does not run here: {(r.stderr or r.stdout)[-300:]}")
