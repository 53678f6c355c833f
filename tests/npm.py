"""The npm clients the interoperability tests drive: each lives in a `tests/<door>/js` folder with
a package.json and its lock, which `scripts/test` installs. A test run on its own installs its
folder here the same way; without node or npm, or when the install fails, the test is skipped
with the reason."""

from __future__ import annotations

import asyncio
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


async def run_headless(
    command: list[str], cwd: Path, env: dict[str, str], within: float
) -> tuple[int | None, str, str]:
    """Runs an npm client's command line headless (no input) to its end: (exit code, what it
    printed, what it printed on stderr). After `within` seconds it is killed (TimeoutError): a
    safety net on shared cores, never a pace."""
    proc = await asyncio.create_subprocess_exec(
        *command,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), within)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode, out.decode(), err.decode()
