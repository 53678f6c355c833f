"""Wire mode turns: external tools, approvals, cancel, queueing, timeouts and resume (W3–W6, G6)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from tests.core_helpers import shell_call
from tests.wire.conftest import EXT_TOOL, WireProc, event_types, events, is_response, text_of


def ok_result(call_id: str, output: str) -> dict[str, object]:
    return {
        "tool_call_id": call_id,
        "return_value": {"is_error": False, "output": output, "message": "", "display": []},
    }


def test_external_tool_round_trip(start_wire: Callable[..., WireProc]) -> None:
    steps = [
        {
            "items": [
                {"text": "calling"},
                {"tool_call": {"id": "tc-1", "name": "open_in_ide", "args": {"path": "README.md"}}},
            ]
        },
        {"items": [{"text": "tool said: {last_tool_results}"}]},
    ]
    w = start_wire(steps)
    w.initialize(tools=[EXT_TOOL])
    w.prompt("run external tool")
    before, req = w.until_request("ToolCallRequest")
    assert req["id"] == "tc-1"
    assert req["params"]["payload"] == {
        "id": "tc-1",
        "name": "open_in_ide",
        "arguments": '{"path": "README.md"}',
    }
    (call,) = events(before, "ToolCall")
    assert call["id"] == "tc-1" and call["function"]["name"] == "open_in_ide"
    assert json.loads(call["function"]["arguments"]) == {"path": "README.md"}
    w.respond(
        "tc-1",
        {
            "tool_call_id": "tc-1",
            "return_value": {
                "is_error": False,
                "output": "Opened",
                "message": "Opened README.md",
                "display": [],
            },
        },
    )
    after, resp = w.until(lambda m: is_response(m, "p1"))
    assert resp["result"] == {"status": "finished"}
    (result,) = events(after, "ToolResult")
    assert result["tool_call_id"] == "tc-1" and result["return_value"]["is_error"] is False
    assert result["return_value"]["output"] == "Opened"
    assert "tool said: Opened" in text_of(after)
    assert event_types(after)[-1] == "TurnEnd"
    w.close()


def test_external_tool_errors(start_wire: Callable[..., WireProc]) -> None:
    steps = [
        {"items": [{"tool_call": {"id": "e1", "name": "open_in_ide", "args": {"path": "a"}}}]},
        {"items": [{"tool_call": {"id": "e2", "name": "open_in_ide", "args": {"path": "b"}}}]},
        {"items": [{"tool_call": {"id": "e3", "name": "open_in_ide", "args": {"nopath": 1}}}]},
        {"items": [{"tool_call": {"id": "e4", "name": "open_in_ide", "args": {"path": "d"}}}]},
        {"items": [{"text": "saw: {last_tool_results}"}]},
    ]
    w = start_wire(steps)
    w.initialize(tools=[EXT_TOOL])
    w.prompt("go")
    # 1. the client answers with a JSON-RPC error: the model sees a tool error
    w.until_request("ToolCallRequest")
    w.send({"jsonrpc": "2.0", "id": "e1", "error": {"code": -32000, "message": "IDE not available"}})
    msgs, _ = w.until(lambda m: m.get("method") == "event" and m["params"]["type"] == "ToolResult")
    r = events(msgs, "ToolResult")[0]["return_value"]
    assert r["is_error"] is True and "IDE not available" in r["message"]
    # 2. a malformed result: a JSON-RPC error back to the client, a tool error for the model
    w.until_request("ToolCallRequest")
    w.respond("e2", {"oops": True})
    msgs, _ = w.until(lambda m: m.get("method") == "event" and m["params"]["type"] == "ToolResult")
    invalid = [m for m in msgs if "error" in m and m.get("id") is None]
    assert invalid and invalid[0]["error"]["code"] == -32600 and invalid[0]["error"]["data"]["id"] == "e2"
    assert (
        events(msgs, "ToolResult")[0]["return_value"]["message"] == "Invalid tool result payload from client."
    )
    # 3. arguments that do not fit the schema never reach the client
    msgs, _ = w.until(lambda m: m.get("method") == "event" and m["params"]["type"] == "ToolResult")
    assert not [m for m in msgs if m.get("method") == "request"]
    r = events(msgs, "ToolResult")[0]
    assert (
        r["tool_call_id"] == "e3" and r["return_value"]["is_error"] and "path" in r["return_value"]["message"]
    )
    # 4. an answer of an unknown type
    w.until_request("ToolCallRequest")
    w.respond("e4", {"type": "QuestionResponse", "payload": {"request_id": "e4", "answers": {}}})
    msgs, resp = w.until(lambda m: is_response(m, "p1"))
    err = [m for m in msgs if "error" in m and m.get("id") is None]
    assert "Unknown wire message type: QuestionResponse" in err[0]["error"]["data"]["reason"]
    assert resp["result"] == {"status": "finished"}
    assert "Invalid tool result payload from client." in text_of(msgs)
    w.close()


def test_approve_approve_for_session_and_reject(start_wire: Callable[..., WireProc], work_dir: Path) -> None:
    steps = [
        {"items": [shell_call("echo first", "tc-1")]},
        {"items": [shell_call("echo second", "tc-2")]},
        {"items": [shell_call("echo third && echo again", "tc-3")]},
        {
            "items": [
                {
                    "tool_call": {
                        "id": "tc-4",
                        "name": "write_file",
                        "args": {"path": "a.txt", "content": "hi"},
                    }
                }
            ]
        },
        {"items": [{"text": "done: {last_tool_results}"}]},
    ]
    w = start_wire(steps)
    w.initialize()
    w.prompt("go")
    _, req = w.until_request("ApprovalRequest")
    p = req["params"]["payload"]
    assert req["id"] == p["id"]
    assert p["tool_call_id"] == "tc-1" and p["sender"] == "run_shell_command" and p["action"] == "run command"
    assert p["description"] == "Run command `echo first`"
    assert p["display"] == [{"type": "shell", "language": "bash", "command": "echo first"}]
    w.approve(req, "approve")
    msgs, req = w.until_request("ApprovalRequest")
    echo = events(msgs, "ApprovalResponse")[0]
    assert echo == {"_type": "ApprovalResponse", "request_id": p["id"], "response": "approve", "feedback": ""}
    r = next(e for e in events(msgs, "ToolResult") if e["tool_call_id"] == "tc-1")
    assert "first" in r["return_value"]["output"]
    # approve_for_session: the next `echo` runs without asking
    assert req["params"]["payload"]["tool_call_id"] == "tc-2"
    w.approve(req, "approve_for_session")
    msgs, req = w.until_request("ApprovalRequest")
    assert req["params"]["payload"]["tool_call_id"] == "tc-4"  # tc-3 (only echo commands) was not asked
    assert req["params"]["payload"]["action"] == "edit file"
    assert req["params"]["payload"]["display"][0]["type"] == "diff"
    r = next(e for e in events(msgs, "ToolResult") if e["tool_call_id"] == "tc-3")
    assert r["return_value"]["output"].split()[:2] == ["third", "again"]
    # reject with feedback: the file is not written; the model sees the refusal and the feedback
    w.respond(req["id"], {"request_id": req["id"], "response": "reject", "feedback": "use b.txt"})
    msgs, resp = w.until(lambda m: is_response(m, "p1"))
    r = next(e for e in events(msgs, "ToolResult") if e["tool_call_id"] == "tc-4")
    assert r["return_value"]["is_error"] is True
    assert not (work_dir / "a.txt").exists()
    said = "".join(e.get("text", "") for e in events(msgs, "ContentPart"))
    assert "declined" in said and "use b.txt" in said
    assert resp["result"] == {"status": "finished"}
    w.close()


def test_legacy_approval_answer_and_client_without_initialize(start_wire: Callable[..., WireProc]) -> None:
    steps = [{"items": [shell_call("echo legacy", "tc-1")]}, {"items": [{"text": "done"}]}]
    w = start_wire(steps)  # no initialize, no --yolo: the reference hangs here (its 1.6+)
    w.prompt("run shell")
    _, req = w.until_request("ApprovalRequest", timeout=15)
    rid = req["id"]
    w.respond(rid, {"type": "ApprovalRequestResolved", "payload": {"request_id": rid, "response": "approve"}})
    msgs, resp = w.until(lambda m: is_response(m, "p1"))
    assert resp["result"] == {"status": "finished"}
    assert "legacy" in events(msgs, "ToolResult")[0]["return_value"]["output"]
    w.close()


def test_yolo_runs_without_requests(start_wire: Callable[..., WireProc]) -> None:
    steps = [{"items": [shell_call("echo yolo", "tc-1")]}, {"items": [{"text": "done"}]}]
    w = start_wire(steps, "--yolo")
    w.prompt("go")
    msgs, resp = w.until(lambda m: is_response(m, "p1"))
    assert not [m for m in msgs if m.get("method") == "request"]
    assert resp["result"] == {"status": "finished"}
    w.close()


def test_cancel_during_a_shell_command(start_wire: Callable[..., WireProc], work_dir: Path) -> None:
    steps = [
        {"items": [shell_call("sleep 30 && touch finished.txt", "tc-1")]},
        {"items": [{"text": "unused"}]},
        {"items": [{"text": "after cancel"}]},
    ]
    w = start_wire(steps, "--yolo")
    w.prompt("go")
    w.until(lambda m: m.get("method") == "event" and m["params"]["type"] == "ToolCall")
    time.sleep(0.5)
    t0 = time.monotonic()
    w.call("c1", "cancel")
    msgs, resp = w.until(lambda m: is_response(m, "p1"), timeout=10)
    assert time.monotonic() - t0 < 5
    assert resp["result"] == {"status": "cancelled"}
    assert any(is_response(m, "c1") and m["result"] == {} for m in msgs)
    assert event_types(msgs)[-1] == "TurnEnd"
    # the session is usable afterwards, and the command really stopped
    w.prompt("again", "p2")
    msgs, resp = w.until(lambda m: is_response(m, "p2"))
    assert resp["result"] == {"status": "finished"}
    assert not (work_dir / "finished.txt").exists()
    w.close()


def test_cancel_while_waiting_for_the_client(start_wire: Callable[..., WireProc]) -> None:
    steps = [{"items": [{"tool_call": {"id": "tc-1", "name": "open_in_ide", "args": {"path": "z"}}}]}]
    w = start_wire(steps)
    w.initialize(tools=[EXT_TOOL])
    w.prompt("go")
    w.until_request("ToolCallRequest")
    w.call("c1", "cancel")
    _msgs, resp = w.until(lambda m: is_response(m, "p1"))
    assert resp["result"] == {"status": "cancelled"}
    # a late result is ignored
    w.respond("tc-1", ok_result("tc-1", "late"))
    w.expect_silence(0.5)
    w.close()


def test_second_prompt_is_queued_not_lost(start_wire: Callable[..., WireProc]) -> None:
    steps = [
        {"items": [{"sleep": 1.0}, {"text": "first answer"}]},
        {"items": [{"text": "second answer"}]},
    ]
    w = start_wire(steps)
    w.prompt("one", "p1")
    w.prompt("two", "p2")
    msgs, _ = w.until(lambda m: is_response(m, "p2"), timeout=20)
    responses = [m for m in msgs if "method" not in m]
    assert [r["id"] for r in responses] == ["p1", "p2"]
    assert all(r["result"] == {"status": "finished"} for r in responses)
    i1 = msgs.index(responses[0])
    assert events(msgs[:i1], "TurnBegin")[0]["user_input"] == "one"
    assert "first answer" in text_of(msgs[:i1])
    assert "second answer" in text_of(msgs[i1:])
    assert len(events(msgs, "TurnBegin")) == 2 and len(events(msgs, "TurnEnd")) == 2
    w.expect_silence(0.5)  # nothing runs twice
    w.close()


def test_timeouts_release_a_silent_client(start_wire: Callable[..., WireProc]) -> None:
    steps = [
        {"items": [shell_call("echo x", "tc-1")]},
        {"items": [{"tool_call": {"id": "tc-2", "name": "open_in_ide", "args": {"path": "a"}}}]},
        {"items": [{"text": "gave up: {last_tool_results}"}]},
    ]
    w = start_wire(steps, "--approval-timeout", "0.5", "--tool-call-timeout", "0.5")
    w.initialize(tools=[EXT_TOOL])
    w.prompt("go")
    msgs, resp = w.until(lambda m: is_response(m, "p1"), timeout=20)
    assert resp["result"] == {"status": "finished"}
    (echo,) = events(msgs, "ApprovalResponse")
    assert echo["response"] == "reject" and "0.5" in echo["feedback"]
    results = {e["tool_call_id"]: e["return_value"] for e in events(msgs, "ToolResult")}
    assert results["tc-1"]["is_error"] and results["tc-2"]["is_error"]
    assert "timed out" in results["tc-2"]["message"]
    w.close()


def test_resume_after_restart_sends_the_pending_request_again(start_wire: Callable[..., WireProc]) -> None:
    steps = [
        {"items": [shell_call("echo resumed", "tc-1")]},
        {"items": [{"text": "finished after restart"}]},
        {"items": [{"text": "next prompt"}]},
    ]
    w = start_wire(steps, session="s-1")
    w.initialize()
    w.prompt("go")
    _, first = w.until_request("ApprovalRequest")
    assert w.close() == 0  # the client goes away mid-approval

    w2 = start_wire(steps, session="s-1")
    w2.initialize()
    _, again = w2.until_request("ApprovalRequest")
    assert again["id"] == first["id"]
    assert again["params"]["payload"]["tool_call_id"] == "tc-1"
    # A prompt now waits behind the stored turn, and the request is sent once more for it.
    w2.prompt("more", "p2")
    _, third = w2.until_request("ApprovalRequest")
    assert third["id"] == first["id"]
    w2.approve(third)
    msgs, _ = w2.until(lambda m: m.get("method") == "event" and m["params"]["type"] == "TurnEnd")
    assert "resumed" in events(msgs, "ToolResult")[0]["return_value"]["output"]
    assert "finished after restart" in text_of(msgs)
    assert not [m for m in msgs if "method" not in m]  # the stored turn has no prompt to answer
    msgs, resp = w2.until(lambda m: is_response(m, "p2"))
    assert resp["result"] == {"status": "finished"} and "next prompt" in text_of(msgs)
    assert events(msgs, "TurnBegin")[0]["user_input"] == "more"
    w2.close()


def test_resume_of_an_external_tool_call_for_a_client_without_initialize(
    start_wire: Callable[..., WireProc],
) -> None:
    steps = [
        {"items": [{"tool_call": {"id": "tc-1", "name": "open_in_ide", "args": {"path": "a"}}}]},
        {"items": [{"text": "got {last_tool_results}"}]},
        {"items": [{"text": "second"}]},
    ]
    w = start_wire(steps, session="s-2")
    w.initialize(tools=[EXT_TOOL])
    w.prompt("go")
    w.until_request("ToolCallRequest")
    w.close()
    w2 = start_wire(steps, session="s-2")
    w2.prompt("new prompt", "p2")  # queued behind the resumed turn, which asks again first
    msgs, req = w2.until_request("ToolCallRequest")
    assert req["id"] == "tc-1" and events(msgs, "ToolCall")
    w2.respond("tc-1", ok_result("tc-1", "opened"))
    msgs, resp = w2.until(lambda m: is_response(m, "p2"))
    assert "got opened" in text_of(msgs)
    assert resp["result"] == {"status": "finished"}
    w2.close()


def test_parallel_requests_answered_one_by_one(start_wire: Callable[..., WireProc], work_dir: Path) -> None:
    steps = [
        {
            "items": [
                shell_call("echo a > a.txt", "tc-a"),
                {"tool_call": {"id": "tc-b", "name": "open_in_ide", "args": {"path": "b"}}},
                shell_call("echo c > c.txt", "tc-c"),
            ]
        },
        {"items": [{"text": "results: {last_tool_results}"}]},
    ]
    w = start_wire(steps)
    w.initialize(tools=[EXT_TOOL])
    w.prompt("go")
    requests = []
    while len(requests) < 3:
        _, req = w.until(lambda m: m.get("method") == "request")
        requests.append(req)
    by_call = {
        (r["params"]["payload"].get("tool_call_id") or r["params"]["payload"]["id"]): r for r in requests
    }
    assert set(by_call) == {"tc-a", "tc-b", "tc-c"}
    w.approve(by_call["tc-a"], "approve")
    msgs, _ = w.until(lambda m: m.get("method") == "event" and m["params"]["type"] == "ToolResult")
    assert not [m for m in msgs if m.get("method") == "request"]  # nothing is asked twice
    w.respond("tc-b", ok_result("tc-b", "opened b"))
    w.approve(by_call["tc-c"], "reject")
    msgs, resp = w.until(lambda m: is_response(m, "p1"))
    assert resp["result"] == {"status": "finished"}
    assert not [m for m in msgs if m.get("method") == "request"]
    assert (work_dir / "a.txt").exists() and not (work_dir / "c.txt").exists()
    assert "opened b" in text_of(msgs)
    w.close()


def test_unreadable_approval_answers_count_as_reject(
    start_wire: Callable[..., WireProc], work_dir: Path
) -> None:
    steps = [
        {"items": [shell_call("echo 1 > one.txt", "tc-1")]},
        {"items": [shell_call("echo 2 > two.txt", "tc-2")]},
        {"items": [{"text": "done"}]},
    ]
    w = start_wire(steps)
    w.prompt("go")
    _, req = w.until_request("ApprovalRequest")
    w.send({"jsonrpc": "2.0", "id": req["id"], "error": {"code": -1, "message": "user closed the dialog"}})
    msgs, req = w.until_request("ApprovalRequest")
    assert events(msgs, "ApprovalResponse")[0]["response"] == "reject"
    w.respond(req["id"], {"request_id": req["id"], "response": "maybe"})
    msgs, resp = w.until(lambda m: is_response(m, "p1"))
    bad = [m for m in msgs if "error" in m and m.get("id") is None]
    assert bad and bad[0]["error"]["message"] == "Invalid response"
    assert [e["response"] for e in events(msgs, "ApprovalResponse")] == ["reject"]
    assert resp["result"] == {"status": "finished"}
    assert not (work_dir / "one.txt").exists() and not (work_dir / "two.txt").exists()
    w.close()
