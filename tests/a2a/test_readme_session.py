"""The README's first A2A session, pasted as written: its shell blocks run in the order shown.

The server block starts a real `devagent serve` (on a free port instead of 41242, with the test's
own folders instead of /tmp); the blocks after it run in one bash, as a person pastes them into a
second terminal, so a variable one block sets (`EXT`, `TASK`) must be set before a later block
reads it."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from tests.a2a.procs import DEVAGENT, START_WITHIN

README = Path(__file__).parents[2] / "README.md"
README_PORT = "127.0.0.1:41242"


def _section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"## {title}")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def _sh_blocks(section: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", section, flags=re.S)


def _localise(text: str, tmp: Path, address: str) -> str:
    return (
        text.replace("/tmp/ws", str(tmp / "ws"))
        .replace("/tmp/stream", str(tmp / "stream"))
        .replace(README_PORT, address)
    )


def _start_server(block: str, tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    lines = [ln for ln in block.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    mkdir = [ln for ln in lines if ln.startswith("mkdir ")]
    serve = [ln for ln in lines if ln.startswith("scripts/start serve ")]
    assert len(serve) == 1 and len(mkdir) == 1, block
    subprocess.run(shlex.split(_localise(mkdir[0], tmp, README_PORT)), check=True)
    args = shlex.split(_localise(serve[0], tmp, README_PORT))[2:]  # after `scripts/start serve`
    env = {**os.environ, "HOME": str(tmp / "home"), "PYTHONUNBUFFERED": "1"}
    log = tmp / "serve.log"
    with log.open("wb") as f:
        proc = subprocess.Popen([*DEVAGENT, "serve", "--port", "0", "--no-sandbox", *args], stderr=f, env=env)
    deadline = time.monotonic() + START_WITHIN
    while time.monotonic() < deadline:
        m = re.search(r"listening on http://(\S+?)/", log.read_text(errors="replace"))
        if m:
            return proc, m.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"server did not start:\n{log.read_text(errors='replace')}")


def test_readme_curl_session_pastes_in_order(tmp_path: Path) -> None:
    """Issue 28 item 11 (A2, B9): the curl session works pasted in the README's order, with the
    extension named before the first curl and the ids taken from the first stream."""
    if subprocess.run(["which", "curl"], capture_output=True).returncode != 0:
        pytest.skip("curl is not installed")
    blocks = _sh_blocks(_section("A first A2A session with curl"))
    assert len(blocks) == 3, blocks
    proc, address = _start_server(blocks[0], tmp_path)
    try:
        script = "set -eu\n" + _localise("\n".join(blocks[1:]), tmp_path, address)
        done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=300)
    finally:
        proc.terminate()
        proc.wait(30)
    assert done.returncode == 0, done.stderr
    first = (tmp_path / "stream1.txt").read_text()
    assert '"state":"input-required"' in first
    assert "TOOL_CALL_UPDATE" in first, "the extension's events: EXT was set before the curl"
    assert '"state":"completed"' in done.stdout, done.stdout[-2000:]
    assert done.stdout.rstrip().endswith("a greeting"), "cat /tmp/ws/demo.txt shows the written file"
    assert (tmp_path / "ws" / "demo.txt").read_text() == "a greeting\n"
