"""`ask_user` through `devagent mcp` (a real subprocess, the official `mcp` client over stdio): a
host with elicitation gets a form with the choices as an enum and a text field, and its answer (a
choice, the user's words, a decline) is what the model reads, in both eras of MCP; a host
without elicitation, or one that dismisses the form, gets `input_required` with the question in
words and answers with `devagent_continue`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_types import ElicitResult

from tests.conftest import Script
from tests.core_helpers import ask_then_echo
from tests.mcpdoor.test_stdio import params, structured

QUESTION = "Which colour should the button be?"
STEPS = ask_then_echo(QUESTION, ["Red", "Green"])


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_issue30_item6_elicitation(script: Script, sqlite_url: str, workspace: Path, mode: str) -> None:
    forms: list[Any] = []
    answers: list[tuple[str, dict[str, Any] | None]] = [
        ("accept", {"choice": "Green"}),
        ("accept", {"answer": "a dark teal"}),
        ("decline", None),
    ]

    async def elicit(context: Any, p: Any) -> ElicitResult:
        forms.append(p)
        action, content = answers.pop(0)
        return ElicitResult(action=action, content=content)  # type: ignore[arg-type]

    model = script(STEPS)
    async with Client(
        params(workspace, model, sqlite_url, "--approval", "yolo"), elicitation_callback=elicit, mode=mode
    ) as client:
        got = [structured(await client.call_tool("devagent_start", {"prompt": "style it"})) for _ in range(3)]
    assert [g["status"] for g in got] == ["completed"] * 3, got
    assert got[0]["answer"] == "Got: The user answered: Green"
    assert got[1]["answer"] == "Got: The user answered: a dark teal"
    assert got[2]["answer"] == "Got: Error (cancelled): the user dismissed the question without answering"
    assert forms[0].message == f"devagent asks: {QUESTION}"
    schema = forms[0].requested_schema
    assert schema["properties"]["choice"]["enum"] == ["Red", "Green"]
    assert schema["properties"]["answer"]["type"] == "string"
    assert "required" not in schema or not schema["required"]


@pytest.mark.parametrize("host", ["no elicitation", "dismissed"])
async def test_issue30_item6_input_required_answered_with_continue(
    script: Script, sqlite_url: str, workspace: Path, host: str
) -> None:
    async def dismiss(context: Any, p: Any) -> ElicitResult:
        return ElicitResult(action="cancel")

    p = params(workspace, script(STEPS), sqlite_url)
    callback = dismiss if host == "dismissed" else None
    async with Client(p, elicitation_callback=callback) as client:
        data = structured(await client.call_tool("devagent_start", {"prompt": "style it"}))
        assert data["status"] == "input_required", data
        assert data["pending"] == [
            {
                "call_id": "q1",
                "tool": "ask_user",
                "description": QUESTION,
                "options": ["Red", "Green", "any other answer in the user's words"],
            }
        ]
        assert data["asking"] == (
            f"devagent asks the user:\n{QUESTION}\n1. Red\n2. Green\n"
            "Reply with the number or the text of a choice, or answer in your own words."
        )
        sid = data["session_id"]
        refused = await client.call_tool("devagent_continue", {"session_id": sid, "prompt": "something else"})
        assert refused.is_error and "question" in refused.content[0].text  # type: ignore[union-attr]
        data = structured(await client.call_tool("devagent_continue", {"session_id": sid, "answer": "2"}))
    assert data["status"] == "completed", data
    assert data["answer"] == "Got: The user answered: Green"
