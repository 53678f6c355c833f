"""Wire mode framing, errors and the initialize handshake (W1, W2, W7, W8), on a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from tests.wire.conftest import EXT_TOOL, WireProc, event_types, events, text_of

TEXT_ONLY = [{"items": [{"text": "Hello, world"}, {"usage": {"input_tokens": 120, "output_tokens": 8}}]}]


def test_handshake_reports_commands_and_tool_verdicts(start_wire: Callable[..., WireProc]) -> None:
    w = start_wire(TEXT_ONLY)
    res = w.initialize(
        tools=[
            EXT_TOOL,
            {"name": "run_shell_command", "description": "x", "parameters": {"type": "object"}},
            {"name": "bad_schema", "description": "x", "parameters": {"type": "object", "properties": 3}},
            {"name": "not_object", "description": "x", "parameters": {"type": "notatype"}},
        ]
    )
    r = res["result"]
    assert r["protocol_version"] == "1.2"  # the client asked 1.7; we speak up to 1.2
    assert r["server"] == {"name": "devagent", "version": r["server"]["version"]}
    names = {c["name"]: c for c in r["slash_commands"]}
    assert {"help", "init", "memory", "compact", "clear", "tools", "stats"} <= set(names)
    assert "reset" in names["clear"]["aliases"]
    assert all(set(c) == {"name", "description", "aliases"} for c in r["slash_commands"])
    assert r["external_tools"]["accepted"] == ["open_in_ide"]
    rejected = {x["name"]: x["reason"] for x in r["external_tools"]["rejected"]}
    assert rejected["run_shell_command"] == "conflicts with builtin tool"
    assert "invalid JSON Schema" in rejected["bad_schema"]
    assert "object" in rejected["not_object"]
    assert w.close() == 0


def test_version_negotiation(start_wire: Callable[..., WireProc]) -> None:
    w = start_wire(TEXT_ONLY)
    assert w.initialize(version="1.1")["result"]["protocol_version"] == "1.1"
    assert w.initialize(version="1.10")["result"]["protocol_version"] == "1.2"
    assert w.initialize(version="garbage")["result"]["protocol_version"] == "1.2"
    w.close()


def test_reinitialize_replaces_a_tool_and_model_sees_the_newest(
    start_wire: Callable[..., WireProc],
) -> None:
    steps = [
        {"items": [{"tool_call": {"id": "tc-1", "name": "open_in_ide", "args": {"file": "a"}}}]},
        {"items": [{"text": "done"}]},
    ]
    w = start_wire(steps)
    w.initialize(tools=[EXT_TOOL])
    newer = {
        "name": "open_in_ide",
        "description": "Open a file",
        "parameters": {"type": "object", "properties": {"file": {"type": "string"}}, "required": ["file"]},
    }
    r = w.initialize(tools=[newer])["result"]
    assert r["external_tools"]["accepted"] == ["open_in_ide"]
    w.prompt("go")
    # The call's arguments fit only the newer schema: it reaches the client.
    _, req = w.until_request("ToolCallRequest")
    assert json.loads(req["params"]["payload"]["arguments"]) == {"file": "a"}
    w.respond(
        "tc-1",
        {
            "tool_call_id": "tc-1",
            "return_value": {"is_error": False, "output": "ok", "message": "", "display": []},
        },
    )
    assert w.until_response("p1")["result"] == {"status": "finished"}
    w.close()


def test_every_error_code_and_the_server_keeps_serving(start_wire: Callable[..., WireProc]) -> None:
    w = start_wire(TEXT_ONLY)

    def err(raw: str) -> dict[str, Any]:
        w.send_raw(raw)
        return w.recv()

    parse = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Invalid JSON format", "data": None},
    }
    invalid = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": "Invalid request", "data": None},
    }
    assert err("{not-json") == parse
    assert err("") == parse  # an empty line, like the reference
    assert err("[]") == invalid
    assert err('{"jsonrpc":"2.1","id":"bad"}') == invalid
    assert err('{"jsonrpc":"2.0","id":true,"method":"prompt"}') == invalid
    assert err('{"jsonrpc":"2.0","id":"x","result":{},"error":{"code":1,"message":"m"}}') == invalid
    assert err('{"jsonrpc":"2.0","id":"u1","method":"nope"}') == {
        "jsonrpc": "2.0",
        "id": "u1",
        "error": {"code": -32601, "message": "Unexpected method received: nope", "data": None},
    }
    assert err('{"jsonrpc":"2.0","id":"ev","method":"event","params":{}}')["error"]["code"] == -32601
    assert err('{"jsonrpc":"2.0","id":"rp","method":"replay"}')["error"]["code"] == -32601
    e = err('{"jsonrpc":"2.0","id":"ip","method":"prompt","params":{}}')
    assert e["id"] == "ip" and e["error"]["code"] == -32602
    assert e["error"]["message"] == "Invalid parameters for method `prompt`"
    e = err('{"jsonrpc":"2.0","id":"ii","method":"initialize","params":{"external_tools":[]}}')
    assert e["error"]["code"] == -32602
    e = err('{"jsonrpc":"2.0","id":"c0","method":"cancel"}')
    assert e == {
        "jsonrpc": "2.0",
        "id": "c0",
        "error": {"code": -32000, "message": "No agent turn is in progress", "data": None},
    }
    # integer ids are valid JSON-RPC 2.0 and are answered with the same id
    assert err('{"jsonrpc":"2.0","id":7,"method":"cancel"}')["id"] == 7
    # a missing "jsonrpc" is tolerated, as by the reference
    assert err('{"id":"nojsonrpc","method":"cancel"}')["error"]["code"] == -32000
    # notifications and responses nobody waits for get no answer
    w.send_raw('{"jsonrpc":"2.0","method":"nope"}')
    w.send_raw('{"jsonrpc":"2.0","method":"cancel"}')
    w.send_raw('{"jsonrpc":"2.0","id":"zzz","result":{}}')
    w.expect_silence(0.5)
    # the server still works
    w.prompt("hi")
    msgs, resp = w.until(lambda m: m.get("id") == "p1")
    assert resp["result"] == {"status": "finished"}
    assert text_of(msgs) == "Hello, world"
    assert w.close() == 0


def test_prompt_events_in_the_reference_vocabulary(start_wire: Callable[..., WireProc]) -> None:
    steps = [
        {
            "items": [
                {"thinking": "Let me think."},
                {"text": "Hello"},
                {
                    "usage": {
                        "input_tokens": 120,
                        "output_tokens": 8,
                        "cache_read_tokens": 20,
                        "cache_write_tokens": 30,
                    }
                },
            ]
        }
    ]
    w = start_wire(steps)
    w.initialize()
    w.call("p1", "prompt", {"user_input": [{"type": "text", "text": "hi"}]})
    msgs, resp = w.until(lambda m: m.get("id") == "p1")
    assert resp == {"jsonrpc": "2.0", "id": "p1", "result": {"status": "finished"}}
    types = event_types(msgs)
    assert types[0] == "TurnBegin" and types[1] == "StepBegin" and types[-1] == "TurnEnd"
    assert events(msgs, "TurnBegin")[0]["user_input"] == [{"type": "text", "text": "hi"}]
    assert events(msgs, "StepBegin")[0]["n"] == 1
    think = [e for e in events(msgs, "ContentPart") if e["type"] == "think"]
    assert "".join(e["think"] for e in think) == "Let me think."
    assert all(e["encrypted"] is None for e in think)
    assert text_of(msgs) == "Hello"
    (status,) = events(msgs, "StatusUpdate")
    assert status["token_usage"] == {  # the prompt's three parts, cached ones included
        "input_other": 70,
        "output": 8,
        "input_cache_read": 20,
        "input_cache_creation": 30,
    }
    assert status["plan_mode"] is False
    w.close()


def test_slash_command_prompt(start_wire: Callable[..., WireProc]) -> None:
    w = start_wire(TEXT_ONLY)
    w.prompt("/help")
    msgs, resp = w.until(lambda m: m.get("id") == "p1")
    assert resp["result"] == {"status": "finished"}
    assert "/clear" in text_of(msgs)
    assert event_types(msgs)[-1] == "TurnEnd"
    w.close()


def test_model_error_is_a_chat_provider_error(start_wire: Callable[..., WireProc]) -> None:
    w = start_wire([{"items": [{"error": {"message": "overloaded", "status": 529}}]}])
    w.prompt("hi")
    msgs, resp = w.until(lambda m: m.get("id") == "p1")
    assert resp["error"]["code"] == -32003
    assert "overloaded" in resp["error"]["message"]
    assert "TurnEnd" in event_types(msgs)
    w.close()


def test_max_steps(start_wire: Callable[..., WireProc]) -> None:
    steps = [
        {"items": [{"tool_call": {"id": "t1", "name": "read_file", "args": {"path": "README.md"}}}]},
        {"items": [{"text": "never"}]},
    ]
    w = start_wire(steps, "--max-steps-per-turn", "1")
    w.prompt("hi")
    msgs, resp = w.until(lambda m: m.get("id") == "p1")
    assert resp["result"] == {"status": "max_steps_reached", "steps": 1}
    assert event_types(msgs)[-1] == "TurnEnd"
    w.close()


def test_subcommand_form_and_image_input(start_wire: Callable[..., WireProc]) -> None:
    w = start_wire(TEXT_ONLY, top_level=False)
    w.call("p0", "prompt", {"user_input": [{"type": "image_url", "image_url": {"url": "data:,"}}]})
    assert w.until_response("p0")["error"]["code"] == -32002
    w.prompt("hi")
    assert w.until_response("p1")["result"] == {"status": "finished"}
    w.close()


def test_info_json() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "devagent", "info", "--json"], capture_output=True, text=True, check=True
    ).stdout
    data = json.loads(out)
    assert data["wire_protocol_version"] == "1.2"
    assert data["devagent_version"]


def test_notices_are_shown_as_text(start_wire: Callable[..., WireProc]) -> None:
    w = start_wire(TEXT_ONLY)
    w.prompt("/memory add")
    msgs, resp = w.until(lambda m: m.get("id") == "p1")
    assert resp["result"] == {"status": "finished"}
    assert "Usage: /memory add" in text_of(msgs)
    w.close()


def test_cancel_right_after_the_first_prompt(start_wire: Callable[..., WireProc]) -> None:
    # The core is still loading when the cancel comes: the prompt is cancelled all the same.
    w = start_wire([{"items": [{"sleep": 5}, {"text": "too late"}]}, {"items": [{"text": "second"}]}])
    w.prompt("hi")
    w.call("c1", "cancel")
    msgs, resp = w.until(lambda m: m.get("id") == "p1", timeout=10)
    assert resp["result"] == {"status": "cancelled"}
    assert any(m.get("id") == "c1" and m.get("result") == {} for m in msgs)
    assert "too late" not in text_of(msgs)
    w.close()
