"""The container relay's stop (devagent/agent/sandbox/relay.py) without an engine: its "exec" is a
stand-in client shaped like the command's wrapper (`/bin/sh -c SCRIPT PIDFILE`, which the relay
finds on this machine by that argument), so the relay signals its process group from here."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from devagent.agent.sandbox.container import RELAY
from tests.process_scan import running

GUARD = 60.0  # a hang guard only: every wait below ends on an outcome long before it


def _stopped_leaves_nothing(spec: dict[str, object], started: Path, marker: str) -> None:
    """Runs the relay on `spec` until its command has started (`started` written, the TERM-proof
    `sleep MARKER` running), stops it as the process table does (TERM to the relay's group), and
    checks that the client ended by itself and the TERM-proof process does not outlive the stop."""
    relay = subprocess.Popen([sys.executable, "-I", "-S", RELAY, json.dumps(spec)], start_new_session=True)
    try:
        deadline = time.monotonic() + GUARD
        while not (started.exists() and running(marker, argument=True)):
            assert time.monotonic() < deadline and relay.poll() is None, "the command never started"
            time.sleep(0.05)
        os.killpg(relay.pid, signal.SIGTERM)  # the process table's stop of the relay's group
        assert relay.wait(GUARD) == 0  # the client ended by itself on the TERM
        deadline = time.monotonic() + GUARD
        while running(marker, argument=True):
            assert time.monotonic() < deadline, "the TERM-proof process outlived the relay's stop"
            time.sleep(0.05)
    finally:
        for pid in running(marker, argument=True):
            os.kill(pid, signal.SIGKILL)
        if relay.poll() is None:
            relay.kill()
            relay.wait()


def test_issue40_item2_a_forwarded_term_is_followed_by_kill_when_the_client_ends_first(
    tmp_path: Path,
) -> None:
    """The client ends at once on TERM (exit 0), leaving in its group a process that ignores TERM:
    the relay's KILL, 1.5 s after the TERM it forwarded, still reaches it (it used to be sent only
    while the relay was waiting for the client)."""
    marker = str(7000 + int(uuid.uuid4().int % 1000))
    started = tmp_path / "started"
    script = (
        f"trap 'exit 0' TERM; (trap '' TERM; exec sleep {marker}) & "
        f"echo started > {started}; while :; do sleep 0.05; done"
    )
    spec = {
        "server": os.getpid(),
        "exec": ["/bin/sh", "-c", script, str(tmp_path / "pidfile")],
        "pidfile": str(tmp_path / "pidfile"),
        "kill": ["true"],  # never needed: the group is found here
        "state": ["echo", "true"],
    }
    _stopped_leaves_nothing(spec, started, marker)


def test_issue40_item2_a_term_forwarded_through_the_engine_is_followed_by_kill_through_it_too(
    tmp_path: Path,
) -> None:
    """As above, where the command's processes are not found on this machine (the stand-in client
    lacks the wrapper's argument, as with an engine on another host): the TERM went through the
    engine's `kill`, and so does the KILL that follows when the client ended first (it used to
    follow only for a group found here)."""
    marker = str(8000 + int(uuid.uuid4().int % 1000))
    started, group, asked = tmp_path / "started", tmp_path / "group", tmp_path / "asked"
    script = (
        f"echo $$ > {group}; trap 'exit 0' TERM; (trap '' TERM; exec sleep {marker}) & "
        f"echo started > {started}; while :; do sleep 0.05; done"
    )
    # the engine's `kill` stand-in: writes down the signal it was asked for (appended by the
    # relay), then sends it to the client's group, as the real one does inside
    kill = ["/bin/sh", "-c", f'echo "$1" >> {asked}; kill -"$1" -"$(cat {group})"', "kill"]
    spec = {
        "server": os.getpid(),
        "exec": ["/bin/sh", "-c", script],  # no pidfile argument: not found from here
        "pidfile": str(tmp_path / "pidfile"),
        "kill": kill,
        "state": ["echo", "true"],
    }
    _stopped_leaves_nothing(spec, started, marker)
    assert asked.read_text().split() == ["TERM", "KILL"]
