"""Helpers for tests that drive the core directly, and the scripted model's steps (tool calls and
texts) that the tests of every door give it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from devagent.agent.events import (
    Notice,
    TextDelta,
    ThoughtDelta,
    ToolCall,
    ToolCallStatus,
    ToolCallUpdate,
    TurnEnd,
    UserPrompt,
)


async def collect(gen: Any) -> list[Any]:
    return [e async for e in gen]


async def until(condition: Callable[[], object], what: str, within: float = 30.0) -> None:
    """Polls `condition` until it holds; else fails with "`what` within `within` s" (a bound for a
    loaded machine, never a pace)."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {within:g} s")
        await asyncio.sleep(0.05)  # polling the condition; the deadline only guards failure


def read_in_background(turn: Any, events: list[Any]) -> asyncio.Task[None]:
    """Append a turn's events to `events` as they come, in a task (the test acts meanwhile and
    awaits the task for the turn's end)."""

    async def read() -> None:
        async for e in turn:
            events.append(e)

    return asyncio.create_task(read())


def text_of(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def notices(events: list[Any]) -> list[str]:
    return [e.text for e in events if isinstance(e, Notice)]


def call(name: str, args: dict[str, Any], cid: str | None = None) -> dict[str, Any]:
    """A scripted-model tool call item (without `cid`, the model numbers the call itself)."""
    tool: dict[str, Any] = {"name": name, "args": args}
    if cid is not None:
        tool["id"] = cid
    return {"tool_call": tool}


def write_call(path: str, content: str, cid: str | None = None) -> dict[str, Any]:
    """A scripted-model `write_file` call item."""
    return call("write_file", {"path": path, "content": content}, cid)


def shell_call(command: str, cid: str | None = None) -> dict[str, Any]:
    """A scripted-model `run_shell_command` call item."""
    return call("run_shell_command", {"command": command}, cid)


def ask_call(
    question: str, choices: list[str] | None = None, cid: str | None = None, **more: Any
) -> dict[str, Any]:
    """A scripted-model `ask_user` call item."""
    args: dict[str, Any] = {"question": question, **more}
    if choices is not None:
        args["choices"] = choices
    return call("ask_user", args, cid)


def ask_then_echo(question: str, choices: list[str] | None = None, cid: str = "q1") -> list[dict[str, Any]]:
    """A scripted model's two steps: it asks the user, then says what the question's call returned."""
    return [{"items": [ask_call(question, choices, cid)]}, {"items": [{"text": "Got: {last_tool_results}"}]}]


def call_then_text(tool_call: dict[str, Any], text: str) -> list[dict[str, Any]]:
    """A scripted model's two steps: the tool call, then (once its result is in) the text."""
    return [{"items": [tool_call]}, {"items": [{"text": text}]}]


def updates(events: list[Any], call_id: str) -> list[ToolCallStatus]:
    """The statuses a call went through (live-output updates within a status collapsed)."""
    seen: list[ToolCallStatus] = []
    for e in events:
        if isinstance(e, ToolCallUpdate) and e.call.id == call_id and (not seen or seen[-1] != e.call.status):
            seen.append(e.call.status)
    return seen


async def ask_about_the_readme(core_factory: Any, spec: str, base_url: str, workspace: Path) -> list[Any]:
    """One turn of a new session in `workspace` on the model `spec` served at `base_url`, asked
    "What does the README say?"; its events."""
    core = await core_factory(spec, model_base_url=base_url, model_api_key="k")
    s = await core.create_session([workspace], approval_mode="ask")
    return [e async for e in s.advance(UserPrompt("What does the README say?"))]


def assert_read_the_readme(events: list[Any], thought: str, answer: str) -> TurnEnd:
    """The turn thought `thought`, said "Reading it.", read the README (the call asked, ran and
    succeeded) and finished saying `answer`; its TurnEnd."""
    assert "".join(e.text for e in events if isinstance(e, ThoughtDelta)) == thought
    text = text_of(events)
    assert text.startswith("Reading it.") and text.endswith(answer)
    statuses = [e.call.status for e in events if isinstance(e, ToolCallUpdate)]
    assert statuses == [ToolCallStatus.PENDING, ToolCallStatus.EXECUTING, ToolCallStatus.SUCCEEDED]
    end = events[-1]
    assert isinstance(end, TurnEnd) and end.reason == "finished"
    return end


def calls_by_id(events: list[Any]) -> dict[str, ToolCall]:
    """Each call's last update in these events, by its id."""
    return {e.call.id: e.call for e in events if isinstance(e, ToolCallUpdate)}


def result_text(c: ToolCall) -> str:
    """What the model read of a call: its output, or its error's message."""
    if c.output is not None:
        return c.output.text
    assert c.error is not None, c
    return c.error.message


def task_call(description: str, prompt: str, cid: str, agent: str | None = None) -> dict[str, Any]:
    """A scripted-model `task` call item: a subagent for `prompt` (which begins with the prefix of
    the subagent's conversation in the script, see `write_script`)."""
    args: dict[str, Any] = {"description": description, "prompt": prompt}
    if agent is not None:
        args["agent"] = agent
    return call("task", args, cid)


def write_script(path: Path, steps: list[Any], conversations: dict[str, list[Any]] | None = None) -> str:
    """A scripted-model file at `path` with the parent's `steps` and, for each prefix of
    `conversations`, the steps of the conversations whose first prompt starts with it (a
    subagent's); its `scripted:FILE` spec."""
    data: dict[str, Any] = {"steps": steps}
    if conversations:
        data["conversations"] = [{"first_prompt": k, "steps": v} for k, v in conversations.items()]
    path.write_text(json.dumps(data))
    return f"scripted:{path}"


NOTES_REPLY = "parent: I wrote notes.txt."


def notes_by_a_subagent(path: Path) -> str:
    """The scripted session every door's subagent test plays: the parent starts a subagent
    ("write the notes", task call `t1`), whose write (`w1`) of notes.txt asks permission, then
    reports "I wrote notes.txt."; the parent answers NOTES_REPLY. Its `scripted:FILE` spec."""
    return write_script(
        path,
        [
            {"items": [task_call("write the notes", "CHILD: write notes.txt", "t1")]},
            {"items": [{"text": "parent: {last_tool_results}"}]},
        ],
        {"CHILD": [[write_call("notes.txt", "hello\n", "w1")], [{"text": "I wrote notes.txt."}]]},
    )
