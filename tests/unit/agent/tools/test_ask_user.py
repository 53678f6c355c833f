"""The `ask_user` tool in the core: a question waits like a permission request in every approval
mode, its options are the choices, a free answer and dismissing it; the answer (chosen or typed)
is what the model reads; a dismissed or unaskable question never ends the turn; a question with
bad arguments fails like any call; a question survives a restart of the process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devagent.agent.events import (
    ANSWER_OPTION,
    Decision,
    Event,
    InputError,
    NeedsInput,
    QuestionDetails,
    Resume,
    ToolCall,
    ToolCallStatus,
    ToolCallUpdate,
    ToolKind,
    TurnEnd,
    UserPrompt,
    choice_option,
)
from devagent.agent.loop.driver import Door, TurnDriver
from devagent.agent.tools import builtin_tools
from tests.core_helpers import ask_call, ask_then_echo, collect, text_of


async def _asked(core: Any, workspace: Path, mode: str = "ask") -> tuple[Any, ToolCall]:
    session = await core.create_session([workspace], approval_mode=mode)
    events = await collect(session.advance(UserPrompt("go")))
    end = events[-1]
    assert isinstance(end, NeedsInput), end
    (call,) = end.calls
    return session, call


@pytest.mark.parametrize("mode", ["ask", "auto-edit", "yolo", "plan"])
async def test_issue30_item6_question_waits_in_every_mode(
    core_factory: Any, script: Any, workspace: Path, mode: str
) -> None:
    core = await core_factory(script(ask_then_echo("Which database?", ["SQLite", "PostgreSQL"])))
    session, call = await _asked(core, workspace, mode)
    assert call.kind is ToolKind.QUESTION and call.name == "ask_user"
    assert call.question == QuestionDetails("Which database?", ["SQLite", "PostgreSQL"], True)
    assert call.option_ids() == [choice_option(1), choice_option(2), ANSWER_OPTION, "cancel"]
    assert [o.name for o in call.confirmation.options][:2] == ["SQLite", "PostgreSQL"]  # type: ignore[union-attr]
    assert session.state.status == "awaiting_input"


async def test_issue30_item6_a_choice_is_what_the_model_reads(
    core_factory: Any, script: Any, workspace: Path
) -> None:
    core = await core_factory(script(ask_then_echo("Which database?", ["SQLite", "PostgreSQL"])))
    session, call = await _asked(core, workspace)
    events = await collect(session.advance(Resume(decisions=[Decision(call.id, choice_option(2))])))
    assert text_of(events) == "Got: The user answered: PostgreSQL"
    done = [e.call for e in events if isinstance(e, ToolCallUpdate) and e.call.status.terminal]
    assert done[-1].status is ToolCallStatus.SUCCEEDED and done[-1].output.data == {"answer": "PostgreSQL"}  # type: ignore[union-attr]
    assert isinstance(events[-1], TurnEnd) and events[-1].reason == "finished"


async def test_issue30_item6_a_free_answer_is_what_the_model_reads(
    core_factory: Any, script: Any, workspace: Path
) -> None:
    core = await core_factory(script(ask_then_echo("Which port?")))
    session, call = await _asked(core, workspace)
    assert call.option_ids() == [ANSWER_OPTION, "cancel"]  # no choices: only words answer it
    with pytest.raises(InputError) as refused:
        await collect(session.advance(Resume(decisions=[Decision(call.id, ANSWER_OPTION, "  ")])))
    assert refused.value.code == "empty_answer"
    events = await collect(session.advance(Resume(decisions=[Decision(call.id, ANSWER_OPTION, " 8080 ")])))
    assert text_of(events) == "Got: The user answered: 8080"


async def test_issue30_item6_a_dismissed_question_does_not_end_the_turn(
    core_factory: Any, script: Any, workspace: Path
) -> None:
    core = await core_factory(script(ask_then_echo("Which port?")))
    session, call = await _asked(core, workspace)
    events = await collect(session.advance(Resume(decisions=[Decision(call.id, "cancel")])))
    assert "the user dismissed the question without answering" in text_of(events)
    assert isinstance(events[-1], TurnEnd) and events[-1].reason == "finished"
    core2 = await core_factory(script(ask_then_echo("Which port?")), db=None)
    s2, c2 = await _asked(core2, workspace)
    why = "the user's client cannot show questions"
    events = await collect(s2.advance(Resume(decisions=[Decision(c2.id, "cancel", feedback=why)])))
    assert f"the user did not answer the question: {why}" in text_of(events)


async def test_issue30_item6_options_not_offered_are_refused(
    core_factory: Any, script: Any, workspace: Path
) -> None:
    core = await core_factory(script(ask_then_echo("Pick", ["a", "b"])))
    session, call = await _asked(core, workspace)
    for option in ("proceed_once", "proceed_always", choice_option(3)):
        with pytest.raises(InputError) as refused:
            await collect(session.advance(Resume(decisions=[Decision(call.id, option)])))
        assert refused.value.code == "bad_option"


@pytest.mark.parametrize(
    ("args", "why"),
    [
        ({"question": " "}, "must not be empty"),
        ({"question": "q", "choices": ["a", "A"]}, "must differ"),
        ({"question": "q", "choices": ["a", ""]}, "must not be empty"),
        ({"question": "q", "choices": ["only"], "allow_free_text": False}, "at least two choices"),
        ({"question": "q", "choices": [str(i) for i in range(11)]}, "at most 10"),
    ],
)
async def test_issue30_item6_a_bad_question_fails_like_any_call(
    core_factory: Any, script: Any, workspace: Path, args: dict[str, Any], why: str
) -> None:
    steps = [
        {"items": [{"tool_call": {"name": "ask_user", "args": args, "id": "q1"}}]},
        {"items": [{"text": "Got: {last_tool_results}"}]},
    ]
    core = await core_factory(script(steps))
    session = await core.create_session([workspace])
    events = await collect(session.advance(UserPrompt("go")))
    assert why in text_of(events)
    assert isinstance(events[-1], TurnEnd) and events[-1].reason == "finished"


async def test_issue30_item6_typed_answers_pick_choices(core_factory: Any) -> None:
    q = QuestionDetails("Pick", ["Red", "Green"], allow_free_text=False)
    assert q.answer_for("2") == (choice_option(2), None)
    assert q.answer_for(" green ") == (choice_option(2), None)
    assert q.answer_for("blue") is None and q.answer_for("") is None and q.answer_for("3") is None
    free = QuestionDetails("Pick", ["Red", "Green"])
    assert free.answer_for("blue") == (ANSWER_OPTION, "blue")
    assert free.choice_of(choice_option(1)) == "Red" and free.choice_of("choice_9") is None
    tool = builtin_tools()["ask_user"]
    assert tool.kind is ToolKind.QUESTION
    assert tool.answer_content({"question": "q", "choices": ["x", "y"]}, choice_option(2), None) == "y"


class _Dismissing(Door):
    """A door that cannot show questions: it answers each one at once, as dismissed."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    async def show(self, event: Event) -> None:
        self.events.append(event)

    async def ask(self, call: ToolCall, driver: TurnDriver) -> None:
        driver.answer(Decision(call.id, "cancel", feedback="the client cannot show questions"))


async def test_issue30_item6_a_door_that_cannot_ask_lets_the_turn_go_on(
    core_factory: Any, script: Any, workspace: Path
) -> None:
    core = await core_factory(script(ask_then_echo("Which port?")))
    session = await core.create_session([workspace], approval_mode="yolo")
    door = _Dismissing()
    end = await TurnDriver(session, door).run(UserPrompt("go"))
    assert isinstance(end, TurnEnd) and end.reason == "finished"
    assert "the client cannot show questions" in text_of(door.events)


async def test_issue30_item6_a_question_outlives_its_process(
    core_factory: Any, script: Any, workspace: Path, tmp_path: Path
) -> None:
    steps = [{"items": [ask_call("Which?", ["a", "b"], "q1")]}, {"items": [{"text": "{last_tool_results}"}]}]
    spec = script(steps)
    db = f"sqlite+aiosqlite:///{tmp_path / 'restart.db'}"
    first = await core_factory(spec, db=db)
    session, _ = await _asked(first, workspace)
    await first.close()
    second = await core_factory(spec, db=db)
    again = await second.get_session(session.id)
    assert again is not None
    (waiting,) = again.waiting_calls()
    assert waiting.question == QuestionDetails("Which?", ["a", "b"], True)
    events = await collect(again.advance(Resume(decisions=[Decision("q1", ANSWER_OPTION, "neither")])))
    assert text_of(events) == "The user answered: neither"
