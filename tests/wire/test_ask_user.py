"""`ask_user` over wire, against a real `devagent wire` process: a client that declared
`capabilities.supports_question` gets kimi-cli's `QuestionRequest` (the choices as options) and
answers with a `QuestionResponse` (a choice's label, its own "other" text, or nothing: dismissed);
a client that did not is never sent one, and the model reads that it cannot ask. Either way the
turn goes on to its end."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.core_helpers import ask_then_echo
from tests.wire.conftest import WireProc, events, text_of

QUESTION = "Which colour should the button be?"
# one conversation, three questions (each its own call id)
STEPS = [step for n in (1, 2, 3) for step in ask_then_echo(QUESTION, ["Red", "Green"], f"q{n}")]


def initialize(w: WireProc, supports_question: bool) -> dict[str, Any]:
    params = {
        "protocol_version": "1.7",
        "client": {"name": "test", "version": "0"},
        "capabilities": {"supports_question": supports_question},
    }
    w.call("init", "initialize", params)
    return w.until_response("init")


def asked_and_answered(w: WireProc, answers: dict[str, str], n: int) -> list[dict[str, Any]]:
    """The `n`-th prompt, which stops at the question, answered with `answers`: everything after
    the answer."""
    rpc_id = f"p{n}"
    w.prompt("style the button", rpc_id)
    before, req = w.until_request("QuestionRequest")
    payload = req["params"]["payload"]
    assert req["id"] == payload["id"]
    assert payload["tool_call_id"] == f"q{n}"
    assert payload["questions"] == [
        {
            "question": QUESTION,
            "header": "",
            "options": [{"label": "Red", "description": ""}, {"label": "Green", "description": ""}],
            "multi_select": False,
            "body": "",
            "other_label": "",
            "other_description": "",
        }
    ]
    assert [e["_type"] for e in events(before, "ToolCall")] == ["ToolCall"]
    w.respond(req["id"], {"request_id": req["id"], "answers": answers})
    after, end = w.until(lambda m: m.get("id") == rpc_id and "method" not in m)
    assert end["result"] == {"status": "finished"}, end
    return after


def test_issue30_item6_question_request_answered(start_wire: Callable[..., WireProc]) -> None:
    w = start_wire(STEPS, "--yolo")  # a question is never answered by the mode
    assert initialize(w, True)["result"]["capabilities"] == {"supports_question": True}
    after = asked_and_answered(w, {QUESTION: "Green"}, 1)
    (result,) = events(after, "ToolResult")
    assert result["return_value"]["is_error"] is False
    assert result["return_value"]["output"] == "The user answered: Green"
    assert text_of(after) == "Got: The user answered: Green"
    # the client's "other" answer is the user's own words; no answer at all dismisses it
    after = asked_and_answered(w, {QUESTION: "a dark teal"}, 2)
    assert text_of(after) == "Got: The user answered: a dark teal"
    after = asked_and_answered(w, {}, 3)
    (result,) = events(after, "ToolResult")
    assert result["return_value"]["is_error"] is True
    assert text_of(after) == "Got: Error (cancelled): the user dismissed the question without answering"
    assert w.close() == 0


def test_issue30_item6_client_without_questions(start_wire: Callable[..., WireProc]) -> None:
    w = start_wire(STEPS)
    assert initialize(w, False)["result"]["capabilities"] == {"supports_question": True}
    w.prompt("style the button")
    msgs, end = w.until(lambda m: m.get("id") == "p1" and "method" not in m)
    assert end["result"] == {"status": "finished"}
    assert not [m for m in msgs if m.get("method") == "request"]  # nothing it could not show
    (result,) = events(msgs, "ToolResult")
    assert result["return_value"]["is_error"] is True
    assert "cannot show questions" in result["return_value"]["message"]
    assert "cannot show questions" in text_of(msgs)
    assert w.close() == 0
