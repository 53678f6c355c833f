"""`devagent run` and `devagent version` as a user runs them (a real subprocess, a real TTY)."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.core_helpers import shell_call, write_call

DEVAGENT = [sys.executable, "-m", "devagent"]


def run(args: list[str], tmp_path: Path, **kw: Any) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEVAGENT_DATA_DIR": str(tmp_path / "data"), "NO_COLOR": "1"}
    return subprocess.run(
        DEVAGENT + args, capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL, **kw
    )


def write_script(tmp_path: Path, steps: list[Any]) -> str:
    p = tmp_path / "script.json"
    p.write_text(json.dumps({"steps": steps}))
    return f"scripted:{p}"


def test_version(tmp_path: Path) -> None:
    out = run(["version"], tmp_path)
    assert out.returncode == 0 and out.stdout.startswith("devagent ")


def test_run_demo_model_says_so_plainly(tmp_path: Path, workspace: Path) -> None:
    out = run(["run", "hello", "--workspace", str(workspace)], tmp_path)
    assert out.returncode == 0, out.stderr
    assert "offline demo model" in out.stderr and "DEVAGENT_MODEL" in out.stderr
    assert "README.md" in out.stdout


def test_g3_run_without_tty_fails_clearly_when_permission_is_needed(tmp_path: Path, workspace: Path) -> None:
    spec = write_script(tmp_path, [[write_call("x", "x")]])
    out = run(["run", "write", "--workspace", str(workspace), "--model", spec], tmp_path)
    assert out.returncode == 4  # the session waits, stored: `run --resume ID --allow` goes on
    assert "not a terminal" in out.stdout + out.stderr and "--approval" in out.stdout + out.stderr
    assert not (workspace / "x").exists()


def test_run_yolo_writes_and_shows_the_diff(tmp_path: Path, workspace: Path) -> None:
    spec = write_script(
        tmp_path,
        [
            [write_call("x.txt", "new line\n")],
            [{"text": "Done."}],
        ],
    )
    out = run(["run", "write", "-w", str(workspace), "-m", spec, "--approval", "yolo"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert (workspace / "x.txt").read_text() == "new line\n"
    assert "+new line" in out.stdout and "Done." in out.stdout


def test_run_model_error_exits_non_zero(tmp_path: Path, workspace: Path) -> None:
    spec = write_script(tmp_path, [[{"error": {"message": "quota exceeded", "status": 429}}]])
    out = run(["run", "hi", "-w", str(workspace), "-m", spec], tmp_path)
    assert out.returncode == 1
    assert "quota exceeded" in out.stdout + out.stderr


def drive_tty(
    argv: list[str], env: dict[str, str], answer: bytes, prompt: bytes = b"[n] no"
) -> tuple[bool, int, str]:
    """Runs devagent on a real terminal, types `answer` at the permission prompt; returns
    (answered, exit code, what the terminal showed). Never leaves the child behind."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: devagent on a real terminal
        os.execve(sys.executable, [*DEVAGENT, *argv], env)
    seen = b""
    answered = False
    status = None
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = st
                break
            r, _, _ = select.select([fd], [], [], 0.2)
            if r:
                try:
                    seen += os.read(fd, 4096)
                except OSError:  # the child closed the terminal: it is exiting
                    pass
            if not answered and prompt in seen:
                os.write(fd, answer)
                answered = True
    finally:
        if status is None:
            os.kill(pid, 9)
            _, status = os.waitpid(pid, 0)
        os.close(fd)
    return answered, os.waitstatus_to_exitcode(status), seen.decode(errors="replace")


def tty_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "DEVAGENT_DATA_DIR": str(tmp_path / "data"),
        "NO_COLOR": "1",
        "COLUMNS": "120",
        **extra,
    }


def test_g3_run_asks_at_the_terminal(tmp_path: Path, workspace: Path) -> None:
    spec = write_script(
        tmp_path,
        [
            [shell_call("echo from-shell > out.txt")],
            [{"text": "ok"}],
        ],
    )
    answered, code, seen = drive_tty(
        ["run", "go", "-w", str(workspace), "-m", spec], tty_env(tmp_path), b"y\n"
    )
    assert answered, seen
    assert code == 0, seen
    assert (workspace / "out.txt").read_text() == "from-shell\n"


def test_g3_run_edit_first_writes_what_the_user_saved(tmp_path: Path, workspace: Path) -> None:
    """For an edit the terminal offers [e]: the proposal opens in $EDITOR, and what the user saves
    is what gets written."""
    editor = tmp_path / "editor.sh"
    editor.write_text("#!/bin/sh\nsed -i 's/proposed/changed by the user/' \"$1\"\n")
    editor.chmod(0o755)
    spec = write_script(
        tmp_path,
        [
            [write_call("n.txt", "proposed\n")],
            [{"text": "ok"}],
        ],
    )
    env = tty_env(tmp_path, EDITOR=str(editor))
    env.pop("VISUAL", None)
    answered, code, seen = drive_tty(
        ["run", "go", "-w", str(workspace), "-m", spec], env, b"e\n", prompt=b"[e] edit first"
    )
    assert answered, seen
    assert code == 0, seen
    assert (workspace / "n.txt").read_text() == "changed by the user\n"
