"""`devagent serve` imports in two threads while it starts (a2a/server.py: the preload thread,
while the main thread probes the sandbox and starts uvicorn), then the model layer in a third while
it answers. Two threads importing one package at once can each enter an import cycle from its own
end; Python then hands one of them a half-run module. That happened in CI (issue 39's item 7 made
start-up faster, which moved the threads' timing): a replica died at start with "cannot import
name 'Server' from partially initialized module 'uvicorn.main'" (the preload imports sse-starlette,
which imports `uvicorn.main`; the main thread imported `uvicorn`).

The race itself depends on timing; what makes it possible does not: here the preload thread is held
at its first import until the main thread's uvicorn has started, so everything the main thread
imports to get there happens while the preload runs, and is recorded by thread (an audit hook on
`import`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

RUNNER = """
import json, os, sys, threading, time

records = []  # (thread name, module), in the order the modules were first looked for
seen = set()
started = threading.Event()  # the main thread's uvicorn has started
held = []

def hook(event, args):
    if event != "import" or args[0] in seen:
        return
    seen.add(args[0])
    name = threading.current_thread().name
    records.append((name, args[0]))
    if name == "devagent-preload" and not held:
        held.append(True)
        started.wait(60)  # hold the preload until the server runs (or give up: the test then fails)

sys.addaudithook(hook)

import devagent.a2a.server as server

real = server._stopping_server

def stopping_server(*args, **kwargs):
    made = real(*args, **kwargs)
    def watch():
        while not made.started:
            time.sleep(0.01)
        started.set()
    threading.Thread(target=watch, daemon=True).start()
    return made

server._stopping_server = stopping_server

import atexit

@atexit.register
def dump():
    with open(os.environ["RECORDS"], "w") as f:
        json.dump({"records": records, "held": started.is_set()}, f)

sys.argv = ["devagent", *sys.argv[1:]]
from devagent.cli import main
main()
"""


def _preload_window(records: list[list[str]]) -> list[str]:
    """What the main thread imported between the preload thread's first and last import."""
    where = [i for i, (thread, _) in enumerate(records) if thread == "devagent-preload"]
    assert where, "the preload thread imported nothing"
    return [m for thread, m in records[where[0] : where[-1]] if thread == "MainThread"]


def test_issue39_the_main_thread_imports_nothing_while_the_preload_thread_does(tmp_path: Path) -> None:
    script = tmp_path / "runner.py"
    script.write_text(textwrap.dedent(RUNNER))
    out = tmp_path / "records.json"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "RECORDS": str(out),
        "DEVAGENT_DATA_DIR": str(tmp_path / "data"),
    }
    log = tmp_path / "serve.log"
    with log.open("w") as f:
        proc = subprocess.Popen(
            [sys.executable, str(script), "serve", "--port", "0", "--token", "t", "--no-sandbox"],
            stderr=f,
            stdout=subprocess.DEVNULL,
            env=env,
            cwd=tmp_path,
        )
    try:
        deadline = time.monotonic() + 120
        while "listening on" not in log.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the server did not start (exit {proc.poll()}):\n{log.read_text()}")
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    seen = json.loads(out.read_text())
    assert seen["held"], "the server never started while the preload was held"
    imported = _preload_window(seen["records"])
    assert [m for m in imported if not m.startswith("devagent.")] == [], imported
