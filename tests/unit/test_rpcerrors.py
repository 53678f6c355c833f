"""Error hygiene (issue 12 item 3): what a JSON-RPC error may tell a client."""

from __future__ import annotations

import logging

import pytest

from devagent.a2a.hygiene import clean_json_body, clean_sse_chunk
from devagent.common.rpcerrors import clean_error, client_message, leaks, pydantic_fields

PYDANTIC = (
    "2 validation errors for SendMessageRequest\n"
    "params.message.role\n"
    "  Input should be 'agent' or 'user' [type=enum, input_value='bogus', input_type=str]\n"
    "    For further information visit https://errors.pydantic.dev/2.14/v/enum\n"
    "params.message.parts.0.TextPart.text\n"
    "  Input should be a valid string [type=string_type, input_value=1, input_type=int]\n"
    "    For further information visit https://errors.pydantic.dev/2.14/v/string_type"
)


def test_pydantic_report_becomes_fields_without_input() -> None:
    assert pydantic_fields(PYDANTIC) == [
        {"field": "params.message.role", "message": "Input should be 'agent' or 'user'"},
        {"field": "params.message.parts.0.TextPart.text", "message": "Input should be a valid string"},
    ]
    assert pydantic_fields("task not found") is None
    cleaned = clean_error({"code": -32602, "message": "Invalid params", "data": PYDANTIC})
    assert cleaned["data"]["errors"][0]["field"] == "params.message.role"
    assert "pydantic" not in str(cleaned) and "bogus" not in str(cleaned)


def test_internal_error_names_a_reference_the_log_has(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="devagent.errors"):
        cleaned = clean_error({"code": -32603, "message": "'NoneType' object has no attribute 'id'"})
    ref = cleaned["data"]["reference"]
    assert cleaned["message"] == f"Internal error (reference {ref}); the server log has the details"
    assert any(ref in r.getMessage() and "NoneType" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    "message",
    [
        "Traceback (most recent call last):",
        "ValueError: bad",
        "(sqlite3.OperationalError) database is locked",
        'File "/work/src/devagent/a2a/app.py", line 3',
        "Expecting value: line 1 column 1 (char 0)",
    ],
)
def test_leaky_messages_are_replaced(message: str) -> None:
    assert leaks(message)
    cleaned = clean_error({"code": -32602, "message": message})
    assert cleaned["code"] == -32602
    assert cleaned["message"].startswith("Invalid params (reference ")


def test_clean_messages_stay() -> None:
    for message in ("Task not found", "minimum page size is 1", "TaskNotFoundError"):
        assert not leaks(message), message
    assert clean_error({"code": -32001, "message": "Task not found"}) == {
        "code": -32001,
        "message": "Task not found",
    }
    assert clean_error({"code": -32700, "message": "Expecting value: line 1 column 1 (char 0)"}) == {
        "code": -32700,
        "message": "Parse error: the body is not valid JSON",
    }
    assert clean_error("boom")["code"] == -32603
    assert clean_error({"code": True, "message": 5})["code"] == -32603


def test_client_message() -> None:
    assert client_message(ValueError("unknown model 'x'")) == "unknown model 'x'"
    assert client_message(KeyError("x")).startswith("Internal error (reference ")


def test_bodies_and_stream_events_cleaned() -> None:
    body = b'{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"KeyError: x"}}'
    assert b"KeyError" not in clean_json_body(body, "test")
    ok = b'{"jsonrpc":"2.0","id":1,"result":{"text":"ValueError: in the user\'s own words"}}'
    assert clean_json_body(ok, "test") == ok  # results are the conversation, not errors
    chunk = b'event: error\r\ndata: {"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"boom"}}\r\n\r\n'
    out = clean_sse_chunk(chunk, "test")
    assert b"boom" not in out and b"reference" in out and out.endswith(b"\r\n\r\n")
