"""`ask_user` over ACP, against a real `devagent acp` process driven by the Python SDK's client
side: an editor that declares form elicitation gets the question as `elicitation/create` (the
choices as a single-select, a text field) and answers it with a choice, its own words, or a
decline (the question dismissed, the turn going on); an editor without elicitation gets
`session/request_permission` with the choices as its options."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("acp", reason="agent-client-protocol is installed by scripts/test (pyproject.toml)")

from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp.schema import (
    AcceptElicitationResponse,
    ClientCapabilities,
    DeclineElicitationResponse,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
)

from devagent.agent.events import choice_option
from tests.acp.conftest import acp_argv
from tests.acp.test_python_sdk import TIMEOUT, EditorClient
from tests.conftest import ScriptFile
from tests.core_helpers import ask_then_echo

QUESTION = "Which colour should the button be?"
# one conversation, four questions (each its own call id)
STEPS = [step for n in (1, 2, 3, 4) for step in ask_then_echo(QUESTION, ["Red", "Green"], f"q{n}")]


class AskedEditor(EditorClient):
    """An editor that also answers elicitations, from a list (a dict: accept with that content;
    None: decline)."""

    def __init__(self, forms: list[dict[str, Any] | None], answers: list[str | None] | None = None) -> None:
        super().__init__(answers)
        self.forms = list(forms)
        self.elicited: list[dict[str, Any]] = []

    async def create_elicitation(self, message: str, mode: Any, **kw: Any) -> Any:
        kind = type(mode).__name__
        self.elicited.append(
            {"message": message, "kind": kind, **mode.model_dump(by_alias=True, exclude_none=True)}
        )
        content = self.forms.pop(0)
        if content is None:
            return DeclineElicitationResponse(action="decline")
        return AcceptElicitationResponse(action="accept", content=content)


@contextlib.asynccontextmanager
async def agent(
    client: EditorClient, argv: list[str], env: dict[str, str], cwd: Path, log: Path
) -> AsyncIterator[Any]:
    """`devagent acp` with the SDK's client side, which takes elicitations (unstable in ACP) only
    when told to."""
    with log.open("ab") as err:
        async with spawn_agent_process(
            client,
            argv[0],
            *argv[1:],
            env=env,
            cwd=cwd,
            # as test_python_sdk.agent: a loaded machine's agent may take over 2 s to exit
            transport_kwargs={"stderr": err, "shutdown_timeout": float(TIMEOUT)},
            use_unstable_protocol=True,
        ) as (conn, _proc):
            yield conn


async def prompt(conn: Any, session_id: str) -> str:
    resp = await asyncio.wait_for(
        conn.prompt(session_id=session_id, prompt=[text_block("style it")]), TIMEOUT
    )
    assert resp.stop_reason == "end_turn"  # a dismissed question never ends the turn
    return str(resp.stop_reason)


def said(client: EditorClient) -> str:
    return client.text()


async def test_issue30_item6_elicitation(
    acp_env: dict[str, str], work_dir: Path, script: ScriptFile, tmp_path: Path
) -> None:
    client = AskedEditor([{"choice": "Green"}, {"choice": "Red", "answer": "a dark teal"}, None, {}])
    argv = acp_argv(script(STEPS), "--approval", "yolo")  # a question is never answered by the mode
    async with agent(client, argv, acp_env, work_dir, tmp_path / "err.log") as conn:
        caps = ClientCapabilities(elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities()))
        await asyncio.wait_for(
            conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=caps), TIMEOUT
        )
        new = await asyncio.wait_for(conn.new_session(cwd=str(work_dir), mcp_servers=[]), TIMEOUT)

        await prompt(conn, new.session_id)
        (form,) = client.elicited
        assert form["message"] == QUESTION and form["kind"] == "ElicitationFormSessionMode"
        assert form["sessionId"] == new.session_id and form["toolCallId"] == "q1"
        schema = form["requestedSchema"]
        assert schema["properties"]["choice"]["enum"] == ["Red", "Green"]
        assert schema["properties"]["answer"]["type"] == "string"
        assert said(client).endswith("Got: The user answered: Green")
        assert not client.permissions  # the form, not a permission request

        await prompt(conn, new.session_id)  # words of one's own win over a choice
        assert said(client).endswith("Got: The user answered: a dark teal")
        await prompt(conn, new.session_id)  # declined: dismissed, and the model goes on
        assert said(client).endswith(
            "Got: Error (cancelled): the user dismissed the question without answering"
        )
        await prompt(conn, new.session_id)  # accepted empty: dismissed too
        assert said(client).endswith("the user dismissed the question without answering")
        q1 = client.calls("q1")
        assert q1[0]["sessionUpdate"] == "tool_call" and q1[0]["kind"] == "other"
        assert q1[-1]["status"] == "completed"


async def test_issue30_item6_permission_request_without_elicitation(
    acp_env: dict[str, str], work_dir: Path, script: ScriptFile, tmp_path: Path
) -> None:
    steps = [*STEPS[:4], *ask_then_echo("Which port?", None, "q3")]  # the last one takes only words
    client = AskedEditor([], answers=[choice_option(2), "cancel"])
    async with agent(client, acp_argv(script(steps)), acp_env, work_dir, tmp_path / "err.log") as conn:
        await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), TIMEOUT)
        new = await asyncio.wait_for(conn.new_session(cwd=str(work_dir), mcp_servers=[]), TIMEOUT)
        await prompt(conn, new.session_id)
        ask = client.permissions[0]
        assert [(o["optionId"], o["name"], o["kind"]) for o in ask["options"]] == [
            (choice_option(1), "Red", "allow_once"),
            (choice_option(2), "Green", "allow_once"),
            ("cancel", "Dismiss", "reject_once"),
        ]
        assert ask["toolCall"]["title"] == f"Ask the user: {QUESTION}"
        assert said(client).endswith("Got: The user answered: Green")
        await prompt(conn, new.session_id)
        assert said(client).endswith("the user dismissed the question without answering")
        # a permission request takes no typed answer: not asked, and the model is told why
        await prompt(conn, new.session_id)
        assert len(client.permissions) == 2
        assert said(client).endswith(
            "the user's editor cannot take a typed answer; ask again with choices, "
            "or say in your answer what you need to know"
        )
