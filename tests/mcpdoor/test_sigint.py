"""Issue 28 item 8: SIGINT ends the stdio doors (`devagent mcp`, `wire`, `acp`), and so does
SIGTERM. Agent hosts stop their servers with SIGINT first and SIGTERM only after a wait; a door
that ignores SIGINT holds the host up, and one that dies on SIGTERM without stopping its turn
leaves the turn's command running. Each door is a real subprocess spoken to in its own JSON-RPC
lines, signalled while idle after its handshake and while a turn runs a command that never ends
by itself: the door ends, and so does the command."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Script, process_ended
from tests.core_helpers import shell_call

WITHIN = 60.0  # seconds: a bound for the events awaited on 2 shared cores, never a pace


class Door:
    def __init__(self, argv: list[str], cwd: Path) -> None:
        self.cwd = cwd
        env = {k: v for k, v in os.environ.items() if not k.startswith("DEVAGENT_")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "devagent", *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
        )

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def response(self, rid: Any) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while line := self.proc.stdout.readline():
            msg: dict[str, Any] = json.loads(line)
            if msg.get("id") == rid and "method" not in msg:
                return msg
        raise AssertionError("the door closed its output")


def mcp(d: Door) -> None:
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    d.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
    d.response(1)
    d.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    # the SDK itself answers (not only the early `initialize` answer): it is serving
    d.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
    d.response(2)


def mcp_turn(d: Door) -> None:
    args = {"prompt": "run", "approval_mode": "yolo"}
    d.send(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "devagent_start", "arguments": args},
        }
    )


def wire(d: Door) -> None:
    init = {"protocol_version": "1.7", "client": {"name": "t", "version": "0"}}
    d.send({"jsonrpc": "2.0", "id": "i", "method": "initialize", "params": init})
    d.response("i")


def wire_turn(d: Door) -> None:
    d.send({"jsonrpc": "2.0", "id": "p", "method": "prompt", "params": {"user_input": "run"}})


def acp(d: Door) -> None:
    d.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
    d.response(1)


def acp_turn(d: Door) -> None:
    cwd = str(d.cwd)
    d.send({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": cwd, "mcpServers": []}})
    sid = d.response(2)["result"]["sessionId"]
    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "run"}]}
    d.send({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": prompt})


DOORS = {
    "mcp": (["mcp", "--approval", "yolo", "--work-dir", "."], mcp, mcp_turn),
    "wire": (["wire", "--yolo", "--work-dir", "."], wire, wire_turn),
    "acp": (["acp", "--approval", "yolo"], acp, acp_turn),
}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("busy", ["idle", "running"])
@pytest.mark.parametrize("name", ["mcp", "wire", "acp"])
def test_issue28_item8_sigint_ends_a_stdio_door(
    script: Script, sqlite_url: str, workspace: Path, name: str, busy: str, sig: signal.Signals
) -> None:
    gate = workspace / "started"
    command = f"echo $$ > {gate}.tmp; mv {gate}.tmp {gate}; while true; do sleep 0.05; done"
    model = script([[shell_call(command, "s1")]])
    argv, handshake, turn = DOORS[name]
    d = Door([*argv, "--model", model, "--db", sqlite_url], workspace)
    try:
        handshake(d)
        if busy == "running":
            turn(d)
            deadline = time.monotonic() + WITHIN
            while not gate.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            assert gate.exists(), "the command did not start"
        d.proc.send_signal(sig)
        try:
            d.proc.wait(WITHIN)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"devagent {name} still runs {WITHIN:.0f} s after {sig.name}") from None
        if busy == "running":
            shell = int(gate.read_text())
            deadline = time.monotonic() + WITHIN
            while not process_ended(shell) and time.monotonic() < deadline:
                time.sleep(0.02)
            if not process_ended(shell):
                os.kill(shell, signal.SIGKILL)
                raise AssertionError(f"the turn's command still runs after devagent {name} ended")
    finally:
        if d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()
