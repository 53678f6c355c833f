"""Limits on wire mode's input (issue 12 item 2), on a real `devagent wire` subprocess: deep JSON
and overlong lines are refused with a JSON-RPC error and the server goes on serving."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.wire.conftest import WireProc, text_of

TEXT_ONLY = [{"items": [{"text": "Hello, world"}]}]


def _refused(w: WireProc, message: str) -> None:
    msg = w.recv()
    assert msg["jsonrpc"] == "2.0" and msg["id"] is None, msg
    assert (msg["error"]["code"], msg["error"]["message"]) == (-32600, message), msg


def _still_serves(w: WireProc) -> None:
    assert w.initialize()["result"]["protocol_version"]
    w.prompt("hi")
    seen, res = w.until(lambda m: "method" not in m and m.get("id") == "p1")
    assert res["result"] == {"status": "finished"}, res
    assert text_of(seen) == "Hello, world"


def test_wire_survives_json_nested_100000_deep(start_wire: Callable[..., WireProc]) -> None:
    """issue 12 item 2: a line nested 100,000 deep (and one nested 1,100 deep, which used to kill
    the process with a RecursionError) gets -32600 "JSON nested deeper than 64 levels"; 64 levels
    are parsed; the server goes on and runs a turn."""
    w = start_wire(TEXT_ONLY)
    for depth in (100_000, 1_100):
        w.send_raw("[" * depth + "]" * depth)
        _refused(w, "JSON nested deeper than 64 levels")
    for lists, ok in ((62, False), (61, True)):  # the request, params and x are 3 levels
        nested: Any = "x"
        for _ in range(lists):
            nested = [nested]
        w.call("deep", "initialize", {"protocol_version": "1.2", "x": {"nested": nested}})
        if ok:
            assert w.until_response("deep")["result"]["protocol_version"] == "1.2"
        else:
            _refused(w, "JSON nested deeper than 64 levels")
    w.send_raw(
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": "s",
                "method": "initialize",
                "params": {"protocol_version": "1.2", "x": "[{" * 5000},
            }
        )
    )
    assert "result" in w.until_response("s")  # brackets in strings do not count
    _still_serves(w)
    assert w.close() == 0


def test_wire_survives_an_overlong_line(
    start_wire: Callable[..., WireProc], wire_env: dict[str, str]
) -> None:
    """issue 12 item 2: with DEVAGENT_MAX_LINE_BYTES=1000 a longer line (5 kB, then 20 MB, read
    in pieces) gets -32600 "line longer than 1000 bytes"; a line of exactly 1000 bytes is
    served; the server goes on and runs a turn."""
    wire_env["DEVAGENT_MAX_LINE_BYTES"] = "1000"
    w = start_wire(TEXT_ONLY)
    w.send_raw("x" * 5000)
    _refused(w, "line longer than 1000 bytes")
    w.send_raw(" " * (20 * 1000 * 1000))
    _refused(w, "line longer than 1000 bytes")
    line = json.dumps(
        {"jsonrpc": "2.0", "id": "fits", "method": "initialize", "params": {"protocol_version": "1.2"}}
    )
    w.send_raw(line + " " * (1000 - len(line)))
    assert "result" in w.until_response("fits")
    w.send_raw(line + " " * (1001 - len(line)))
    _refused(w, "line longer than 1000 bytes")
    _still_serves(w)
    assert w.close() == 0


def test_wire_limit_settings(
    start_wire: Callable[..., WireProc], wire_env: dict[str, str], work_dir: Path
) -> None:
    """issue 12 item 2: DEVAGENT_MAX_JSON_DEPTH applies to wire too; a bad value stops the start
    with a line naming the variable."""
    wire_env["DEVAGENT_MAX_JSON_DEPTH"] = "3"
    w = start_wire(TEXT_ONLY)
    w.send_raw(json.dumps({"jsonrpc": "2.0", "id": "d", "method": "initialize", "params": {"a": [[]]}}))
    _refused(w, "JSON nested deeper than 3 levels")
    w.call("ok", "initialize", {"protocol_version": "1.2"})
    assert "result" in w.until_response("ok")
    assert w.close() == 0
    wire_env["DEVAGENT_MAX_LINE_BYTES"] = "lots"
    argv = [sys.executable, "-m", "devagent", "wire", "--work-dir", str(work_dir), "--model", "demo"]
    done = subprocess.run(argv, env=wire_env, input=b"", capture_output=True, timeout=60)
    assert done.returncode == 2
    assert "DEVAGENT_MAX_LINE_BYTES must be a whole number" in done.stderr.decode()
