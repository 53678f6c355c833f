"""`ask_user` over A2A against real `devagent serve` processes: the question as the extension's
ToolCall (`question_details`, its choices as options) answered with a ToolCallConfirmation (a
choice, a typed answer, dismissed); as words for a plain client, whose next text message is the
answer; as gemini-core's `ask_user` confirmation for the coderAgent dialect; and answered by a
new server process after a restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from devagent.agent.events import ANSWER_OPTION, choice_option
from tests.a2a.helpers import auth, results, rpc, stream, v03_message
from tests.a2a.procs import TOKEN, get_task, serve_args, serving, status_text, status_tool_calls
from tests.a2a.test_legacy import legacy_message, tool_calls
from tests.conftest import Script
from tests.core_helpers import ask_then_echo

QUESTION = "Which colour should the button be?"
STEPS = ask_then_echo(QUESTION, ["Red", "Green"])
EXT = auth(TOKEN)
PLAIN = auth(TOKEN, ext=False)


async def send(
    c: httpx.AsyncClient, url: str, message: dict[str, Any], headers: dict[str, str]
) -> list[dict[str, Any]]:
    return results(await stream(c, url, rpc("message/stream", {"message": message}), headers))


async def ask(c: httpx.AsyncClient, url: str, headers: dict[str, str] = EXT) -> dict[str, Any]:
    """A new conversation whose turn stops at the question: its task."""
    evs = await send(c, url, v03_message("style the button"), headers)
    assert evs[-1]["status"]["state"] == "input-required", evs[-1]
    return evs[-1] | {"id": evs[0]["id"], "contextId": evs[0]["contextId"]}


async def answer(
    c: httpx.AsyncClient, url: str, task: dict[str, Any], conf: dict[str, Any], text: str | None = None
) -> list[dict[str, Any]]:
    conf = {"tool_call_id": "q1", **conf}
    m = v03_message(text, data=[conf], task_id=task["id"], context_id=task["contextId"])
    return await send(c, url, m, EXT)


def reply(evs: list[dict[str, Any]]) -> str:
    return "".join(
        p.get("text", "") for e in evs if e.get("kind") == "artifact-update" for p in e["artifact"]["parts"]
    )


async def test_issue30_item6_extension_client(
    script: Script, sqlite_url: str, workspace: Path, tmp_path: Path
) -> None:
    with serving(serve_args(sqlite_url, workspace, script(STEPS), "yolo"), tmp_path / "serve.log") as srv:
        async with httpx.AsyncClient(timeout=60) as c:
            # the question waits even in yolo mode, as a ToolCall with its choices as options
            task = await ask(c, srv.url)
            (tc,) = status_tool_calls(task)
            req = tc["confirmation_request"]
            assert tc["tool_name"] == "ask_user" and tc["status"] == "PENDING"
            assert req["question_details"] == {
                "question": QUESTION,
                "choices": ["Red", "Green"],
                "allow_free_text": True,
            }
            assert [(o["id"], o["name"]) for o in req["options"]][:2] == [
                (choice_option(1), "Red"),
                (choice_option(2), "Green"),
            ]
            assert [o["id"] for o in req["options"]][2:] == [ANSWER_OPTION, "cancel"]
            done = await answer(c, srv.url, task, {"selected_option_id": choice_option(2)})
            assert done[-1]["status"]["state"] == "completed"
            assert reply(done) == "Got: The user answered: Green"

            # a typed answer: in question_details, or as the text beside the confirmation
            task = await ask(c, srv.url)
            done = await answer(
                c,
                srv.url,
                task,
                {"selected_option_id": ANSWER_OPTION, "question_details": {"answer": "Teal"}},
            )
            assert reply(done) == "Got: The user answered: Teal"
            task = await ask(c, srv.url)
            done = await answer(c, srv.url, task, {"selected_option_id": ANSWER_OPTION}, "a dark blue")
            assert reply(done) == "Got: The user answered: a dark blue"

            # an empty typed answer is refused and the question keeps waiting; dismissing it does
            # not end the turn: the model reads that it was dismissed
            task = await ask(c, srv.url)
            m = v03_message(
                data=[{"tool_call_id": "q1", "selected_option_id": ANSWER_OPTION}], task_id=task["id"]
            )
            refused = await stream(c, srv.url, rpc("message/stream", {"message": m}), EXT)
            assert "empty" in refused[0]["error"]["message"], refused
            assert (await get_task(c, srv.url, task["id"]))["status"]["state"] == "input-required"
            done = await answer(c, srv.url, task, {"selected_option_id": "cancel"})
            assert done[-1]["status"]["state"] == "completed"
            assert reply(done) == "Got: Error (cancelled): the user dismissed the question without answering"


async def test_issue30_item6_plain_and_legacy_clients(
    script: Script, sqlite_url: str, workspace: Path, tmp_path: Path
) -> None:
    with serving(serve_args(sqlite_url, workspace, script(STEPS), "ask"), tmp_path / "serve.log") as srv:
        async with httpx.AsyncClient(timeout=60) as c:
            # plain: the question in words, the next text message the answer (a choice's number)
            task = await ask(c, srv.url, PLAIN)
            assert status_text(task) == (
                f"{QUESTION}\n1. Red\n2. Green\n"
                "Reply with the number or the text of a choice, or answer in your own words."
            )
            done = await send(
                c, srv.url, v03_message("2", task_id=task["id"], context_id=task["contextId"]), PLAIN
            )
            assert done[-1]["status"]["state"] == "completed"
            assert reply(done) == "Got: The user answered: Green"
            # words of one's own, on the context alone
            task = await ask(c, srv.url, PLAIN)
            done = await send(c, srv.url, v03_message("purple please", context_id=task["contextId"]), PLAIN)
            assert reply(done) == "Got: The user answered: purple please"

            # Gemini CLI's coderAgent dialect: gemini-core's ask_user confirmation, answered with
            # `answers` as gemini-core's ToolConfirmationPayload has them
            evs = await send(
                c,
                srv.url,
                legacy_message("style it", workspace=workspace),
                {"Authorization": f"Bearer {TOKEN}"},
            )
            asking = tool_calls(evs)[-1]
            assert asking["status"] == "awaiting_approval" and asking["tool"]["kind"] == "communicate"
            det = asking["confirmationDetails"]
            assert det["type"] == "ask_user"
            assert det["questions"] == [
                {
                    "question": QUESTION,
                    "header": "Question",
                    "type": "choice",
                    "options": [{"label": "Red", "description": ""}, {"label": "Green", "description": ""}],
                    "multiSelect": False,
                }
            ]
            ok = {"callId": "q1", "outcome": "proceed_once", "answers": {"0": "Red"}}
            m = legacy_message(data=[ok], task_id=evs[0]["id"], context_id=evs[0]["contextId"])
            evs = await send(c, srv.url, m, {"Authorization": f"Bearer {TOKEN}"})
            assert tool_calls(evs)[-1]["status"] == "success"
            text = "".join(
                p.get("text", "")
                for e in evs
                for p in ((e.get("status") or {}).get("message") or {}).get("parts") or []
            )
            assert "Got: The user answered: Red" in text


async def test_issue30_item6_answered_after_a_restart(
    script: Script, sqlite_url: str, workspace: Path, tmp_path: Path
) -> None:
    args = serve_args(sqlite_url, workspace, script(STEPS), "ask")
    async with httpx.AsyncClient(timeout=60) as c:
        with serving(args, tmp_path / "first.log") as srv:
            task = await ask(c, srv.url)
        with serving(args, tmp_path / "second.log") as srv:
            again = await get_task(c, srv.url, task["id"])
            assert again["status"]["state"] == "input-required"
            (tc,) = status_tool_calls(again)
            assert tc["confirmation_request"]["question_details"]["question"] == QUESTION
            done = await answer(c, srv.url, task, {"selected_option_id": choice_option(1)})
            assert done[-1]["status"]["state"] == "completed"
            assert reply(done) == "Got: The user answered: Red"
