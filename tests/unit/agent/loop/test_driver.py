"""The one turn driver (agent/loop/driver.py) every door runs its turns through, on a real core session
and the scripted model: answers taken in any order, a cancel while it waits for answers, a door
that cannot wait (parks) and a later driver that answers, a door whose client gave up, and a
cancel that comes before the turn began."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.events import (
    Decision,
    Event,
    NeedsInput,
    ToolCall,
    ToolCallStatus,
    ToolCallUpdate,
    TurnEnd,
    UserPrompt,
)
from devagent.agent.loop.driver import Door, Outcome, Paused, TurnDriver
from devagent.agent.session import Session
from tests.core_helpers import write_call

TWO_WRITES = [
    {"items": [write_call("a.txt", "a\n", "wa"), write_call("b.txt", "b\n", "wb")]},
    {"items": [{"text": "Both written."}]},
]


class RecordingDoor(Door):
    """Shows nothing; keeps what it was asked and what it saw, and answers as the test says."""

    def __init__(self, on_ask: Any = None) -> None:
        self.events: list[Event] = []
        self.asked: list[ToolCall] = []
        self.withdrawn_calls: list[ToolCall] = []
        self.waited = asyncio.Event()
        self.on_ask = on_ask

    async def show(self, event: Event) -> None:
        self.events.append(event)

    async def ask(self, call: ToolCall, driver: TurnDriver) -> None:
        self.asked.append(call)
        if self.on_ask is not None:
            await self.on_ask(call, driver)

    async def waiting(self, calls: list[ToolCall]) -> None:
        self.waited.set()

    async def withdrawn(self, calls: list[ToolCall]) -> None:
        self.withdrawn_calls.extend(calls)


Waiting = tuple[Session, RecordingDoor, TurnDriver, "asyncio.Task[Outcome]"]


@pytest.fixture
async def waiting(core_factory: Any, script: Any, workspace: Path) -> Waiting:
    """A turn of two writes in `ask` mode whose driver waits for both answers: its session, door,
    driver and running task."""
    core = await core_factory(script(TWO_WRITES))
    session = await core.create_session([workspace], approval_mode="ask")
    door = RecordingDoor()
    driver = TurnDriver(session, door)
    running = asyncio.create_task(driver.run(UserPrompt("write both")))
    await door.waited.wait()
    return session, door, driver, running


def statuses(events: list[Event], call_id: str) -> list[ToolCallStatus]:
    return [e.call.status for e in events if isinstance(e, ToolCallUpdate) and e.call.id == call_id]


async def test_issue29_driver_takes_answers_in_any_order(waiting: Waiting, workspace: Path) -> None:
    """Both calls of a step are asked; the answers come back later, the second call's first, and
    the turn goes on once they came: both ran, the turn finished."""
    session, door, driver, running = waiting
    assert [c.id for c in door.asked] == ["wa", "wb"]
    assert driver.awaiting_answers
    driver.answer(Decision("wb", "proceed_once"))
    driver.answer(Decision("wa", "proceed_once"))
    end = await running
    assert isinstance(end, TurnEnd) and end.reason == "finished"
    assert (workspace / "a.txt").read_text() == "a\n" and (workspace / "b.txt").read_text() == "b\n"
    assert statuses(door.events, "wb")[-1] is ToolCallStatus.SUCCEEDED
    assert session.state.status == "idle" and session.state.outcome == "finished"


async def test_issue29_driver_asks_only_what_is_still_waiting_after_a_partial_answer(
    waiting: Waiting, workspace: Path
) -> None:
    """One answer resumes the turn with the other call still waiting: the driver does not ask it
    again, and waits for its answer."""
    _, door, driver, running = waiting
    door.waited.clear()
    driver.answer(Decision("wa", "proceed_once"))
    await door.waited.wait()  # waiting again, for wb only
    assert (workspace / "a.txt").exists() and not (workspace / "b.txt").exists()
    assert [c.id for c in door.asked] == ["wa", "wb"]
    driver.answer(Decision("wb", "cancel"))
    end = await running
    assert isinstance(end, TurnEnd) and end.reason == "finished"
    assert not (workspace / "b.txt").exists()


async def test_issue29_driver_cancel_while_waiting_withdraws_the_calls(
    waiting: Waiting, workspace: Path
) -> None:
    session, door, driver, running = waiting
    await driver.cancel()
    end = await running
    assert isinstance(end, TurnEnd) and end.reason == "cancelled"
    assert {c.id: c.status for c in door.withdrawn_calls} == {
        "wa": ToolCallStatus.CANCELLED,
        "wb": ToolCallStatus.CANCELLED,
    }
    assert session.state.status == "idle" and not session.waiting_calls()
    assert not (workspace / "a.txt").exists()


async def test_issue29_a_door_that_cannot_wait_parks_and_a_later_driver_answers(
    core_factory: Any, script: Any, workspace: Path
) -> None:
    """A door that disconnects or cannot hold the request open (A2A's input-required, an MCP host
    without elicitation) parks: the turn ends Paused with the calls waiting, stored; a new driver
    (another request, another process) asks them again and finishes the turn."""

    async def park(call: ToolCall, driver: TurnDriver) -> None:
        driver.park()

    core = await core_factory(script(TWO_WRITES))
    session = await core.create_session([workspace], approval_mode="ask")
    first = RecordingDoor(park)
    outcome = await TurnDriver(session, first).run(UserPrompt("write both"))
    assert isinstance(outcome, Paused) and [c.id for c in outcome.calls] == ["wa", "wb"]
    assert [c.id for c in first.asked] == ["wa"]  # parked at the first question
    assert session.state.status == "awaiting_input"
    assert any(isinstance(e, NeedsInput) for e in first.events)

    async def allow(call: ToolCall, driver: TurnDriver) -> None:
        driver.answer(Decision(call.id, "proceed_once"))

    later = RecordingDoor(allow)
    end = await TurnDriver(session, later).run(None, session.waiting_calls())
    assert isinstance(end, TurnEnd) and end.reason == "finished"
    assert [c.id for c in later.asked] == ["wa", "wb"]
    assert (workspace / "a.txt").exists() and (workspace / "b.txt").exists()


async def test_issue29_a_client_that_gave_up_cancels_the_turn(
    core_factory: Any, script: Any, workspace: Path
) -> None:
    """The door's client went away at the first question (it cancels): nothing more is asked,
    the waiting calls are withdrawn and the turn ends cancelled."""

    async def gone(call: ToolCall, driver: TurnDriver) -> None:
        await driver.cancel()

    core = await core_factory(script(TWO_WRITES))
    session = await core.create_session([workspace], approval_mode="ask")
    door = RecordingDoor(gone)
    end = await TurnDriver(session, door).run(UserPrompt("write both"))
    assert isinstance(end, TurnEnd) and end.reason == "cancelled"
    assert [c.id for c in door.asked] == ["wa"]
    assert sorted(c.id for c in door.withdrawn_calls) == ["wa", "wb"]
    assert session.state.status == "idle"


async def test_issue29_a_cancel_before_the_turn_began(
    core_factory: Any, script: Any, workspace: Path
) -> None:
    """Without `record_early_cancel` nothing runs and nothing is stored; with it, the turn begins
    cancelled and the session records how it ended (a door whose task must read canceled)."""
    core = await core_factory(script(TWO_WRITES))
    session = await core.create_session([workspace], approval_mode="ask")
    quiet = TurnDriver(session, RecordingDoor())
    await quiet.cancel()
    end = await quiet.run(UserPrompt("write both"))
    assert isinstance(end, TurnEnd) and end.reason == "cancelled"
    assert session.state.outcome == "" and not await session.messages()

    recorded = TurnDriver(session, RecordingDoor(), label="task-1", record_early_cancel=True)
    await recorded.cancel()
    end = await recorded.run(UserPrompt("write both"))
    assert isinstance(end, TurnEnd) and end.reason == "cancelled"
    assert session.state.outcome == "cancelled"
