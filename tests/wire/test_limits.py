"""Limits on wire mode's input (issue 12 item 2), on a real `devagent wire` subprocess: deep JSON
and overlong lines are refused with a JSON-RPC error and the server goes on serving."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from subprocess import PIPE
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


def test_wire_client_that_stops_reading_pauses_its_turn_not_the_process(
    tmp_path: Path, wire_env: dict[str, str], work_dir: Path
) -> None:
    """issue 12 item 5: a client that stops reading stdout while a turn writes 4 MB (far more
    than a pipe holds) does not freeze the server: with stdout unread, a notification it sends is
    still handled (its log line appears on stderr, which only the event loop writes). When the
    client reads again, the turn resumes and every line arrives whole and in order. With the old
    blocking write the loop sat in os.write and the log line never came (the test fails by timing
    out, not by measuring time)."""
    chunk = "x" * 4096
    steps = [{"items": [{"text": chunk * 256} for _ in range(4)]}]  # 4 x 1 MiB of text
    script = tmp_path / "big.json"
    script.write_text(json.dumps({"steps": steps}))
    argv = [sys.executable, "-m", "devagent", "wire", "--work-dir", str(work_dir), "--verbose"]
    argv += ["--model", f"scripted:{script}"]
    proc = subprocess.Popen(argv, stdin=PIPE, stdout=PIPE, stderr=PIPE, env=wire_env, cwd=work_dir)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    err_lines: queue.Queue[str] = queue.Queue()
    threading.Thread(
        target=lambda: [err_lines.put(ln.decode(errors="replace")) for ln in proc.stderr], daemon=True
    ).start()  # type: ignore[union-attr]

    def send(msg: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(msg).encode() + b"\n")
        proc.stdin.flush()

    def wait_log(text: str, within: float = 120) -> None:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            try:
                if text in err_lines.get(timeout=1):
                    return
            except queue.Empty:
                pass
        raise AssertionError(f"the server did not log {text!r} (its loop is blocked?)")

    try:
        send({"jsonrpc": "2.0", "id": "p1", "method": "prompt", "params": {"user_input": "go"}})
        wait_log("new session")  # the core is loaded; the turn writes now, nobody reads
        time.sleep(1)  # let stdout's pipe fill (the check below does not depend on it)
        send({"jsonrpc": "2.0", "method": "probe_while_blocked"})
        wait_log("probe_while_blocked")
        # the client reads again: the whole turn arrives, in order, and the prompt is answered
        text = ""
        while True:
            line = proc.stdout.readline()
            assert line, "stdout closed early"
            msg = json.loads(line)
            if msg.get("method") == "event" and msg["params"]["type"] == "ContentPart":
                text += msg["params"]["payload"]["text"]
            if msg.get("id") == "p1":
                assert msg["result"] == {"status": "finished"}, msg
                break
        assert text == chunk * 256 * 4
    finally:
        proc.kill()
        proc.wait()
