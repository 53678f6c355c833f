"""Wire mode at the end of its standard input (issue 28 item 13, "What to build" item 12): the
prompts already read run to their end (`printf '<initialize>\\n<prompt>\\n' | devagent wire`
answers the prompt), a client that sent `cancel` first has its running turn stopped, and a turn
that waits for the client stays waiting; each is said on stderr. The running turn is a shell
command that waits for a file the test creates only once stdin is closed: nothing waits on time."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.core_helpers import shell_call
from tests.wire.conftest import WireProc, is_response, text_of

HANG = 60.0  # only bounds a hang


def _gated(call_id: str, gate: Path) -> dict[str, Any]:
    command = f'while [ ! -e "{gate}" ]; do sleep 0.05; done; echo gate open'
    return shell_call(command, call_id)


def _line(method: str, rpc_id: str, params: dict[str, Any] | None = None) -> str:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rpc_id, "method": method}
    if params is not None:
        msg["params"] = params
    return json.dumps(msg)


INIT = _line("initialize", "init", {"protocol_version": "1.7", "client": {"name": "printf", "version": "0"}})


def _pipe(w: WireProc, *lines: str) -> None:
    """Write `lines` and close stdin at once, as `printf ... | devagent wire` does."""
    assert w.proc.stdin is not None
    w.proc.stdin.write("".join(line + "\n" for line in lines).encode())
    w.proc.stdin.close()


def _wait_stderr(w: WireProc, text: str) -> None:
    deadline = time.monotonic() + HANG
    while text not in w.stderr:
        assert time.monotonic() < deadline, f"stderr never said {text!r}:\n{w.stderr}"
        assert w.proc.poll() is None or text in w.stderr, f"exited without saying {text!r}:\n{w.stderr}"
        time.sleep(0.05)


def _rest(w: WireProc) -> list[dict[str, Any]]:
    """Every message until the server closes stdout."""
    out = []
    while (line := w.lines.get(timeout=HANG)) is not None:
        out.append(json.loads(line))
    return out


def test_issue28_item12_piped_prompt_runs_to_its_end(
    start_wire: Callable[..., WireProc], work_dir: Path
) -> None:
    gate = work_dir / "gate"
    steps = [{"items": [_gated("tc-1", gate)]}, {"items": [{"text": "done: {last_tool_results}"}]}]
    w = start_wire(steps, "--yolo")
    _pipe(w, INIT, _line("prompt", "p1", {"user_input": "go"}))
    _wait_stderr(w, "end of input: finishing 1 prompt(s)")
    gate.touch()  # the turn may go on only now: it is running (or queued) after stdin closed
    msgs = _rest(w)
    assert w.proc.wait(HANG) == 0
    assert any(is_response(m, "init") for m in msgs)
    answer = [m for m in msgs if is_response(m, "p1")]
    assert answer and answer[0]["result"] == {"status": "finished"}, msgs
    assert "done: " in text_of(msgs) and "gate open" in text_of(msgs)
    assert "the prompts ended; exiting" in w.stderr


def test_issue28_item12_cancel_before_the_end_of_input_stops_the_running_turn(
    start_wire: Callable[..., WireProc], work_dir: Path
) -> None:
    """The client asks: `cancel` before closing stops the running turn; a prompt read after it
    still runs (a cancel applies to the running turn only)."""
    ran = {"items": [{"text": "second ran"}]}
    steps = [{"items": [_gated("tc-1", work_dir / "never")]}, ran, ran]  # (the cancel closes a step)
    w = start_wire(steps, "--yolo")
    w.prompt("one", "p1")
    w.until(lambda m: m.get("method") == "event" and m["params"]["type"] == "ToolCall", timeout=HANG)
    _pipe(w, _line("prompt", "p2", {"user_input": "two"}), _line("cancel", "c1"))
    msgs = _rest(w)
    assert w.proc.wait(HANG) == 0
    assert [m["result"] for m in msgs if is_response(m, "p1")] == [{"status": "cancelled"}]
    p2 = [m for m in msgs if is_response(m, "p2")]
    assert [m.get("result") for m in p2] == [{"status": "finished"}], p2
    assert "second ran" in text_of(msgs)
    assert not (work_dir / "never").exists()


def test_issue28_item12_a_turn_waiting_for_the_client_stays_waiting(
    start_wire: Callable[..., WireProc], work_dir: Path
) -> None:
    """No answer can come once stdin is closed: the server exits at once, the request stays
    stored (a later --session asks it again), and stderr says so."""
    steps = [
        {"items": [shell_call("ls", "tc-1")]},
        {"items": [{"text": "after: {last_tool_results}"}]},
    ]
    w = start_wire(steps, "--session", "s-eof")
    w.prompt("go", "p1")
    w.until_request("ApprovalRequest", timeout=HANG)
    _pipe(w)
    _rest(w)
    assert w.proc.wait(HANG) == 0
    assert "waits for an answer from the client" in w.stderr and "--session s-eof" in w.stderr
    again = start_wire(steps, "--session", "s-eof")
    again.initialize()
    _msgs, request = again.until_request("ApprovalRequest", timeout=HANG)
    again.approve(request)
    msgs, _ = again.until(lambda m: m.get("method") == "event" and m["params"]["type"] == "TurnEnd", HANG)
    assert "after: " in text_of(msgs)
    again.close()
