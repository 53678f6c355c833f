"""The core's session loop with the scripted model (G1, G3, G5, G6)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.events import (
    ClientResult,
    Decision,
    InputError,
    NeedsInput,
    Notice,
    Resume,
    StatusUpdate,
    StepBegin,
    ThoughtDelta,
    ToolCallStatus,
    ToolCallUpdate,
    TurnEnd,
    UserPrompt,
)
from devagent.agent.policy.approval import EXACT
from devagent.agent.state import ClientTool
from tests.core_helpers import call, collect, text_of, updates


async def test_g1_text_thinking_usage(core_factory: Any, script: Any, workspace: Path) -> None:
    spec = script(
        [
            [
                {"thinking": "**Planning** the reply"},
                {"text": "Hello there, friend."},
                {"usage": {"input_tokens": 12, "output_tokens": 5, "reasoning_tokens": 2}},
            ]
        ]
    )
    core = await core_factory(spec)
    s = await core.create_session([workspace])
    events = await collect(s.advance(UserPrompt("hi")))
    assert isinstance(events[0], StepBegin)
    assert "".join(e.text for e in events if isinstance(e, ThoughtDelta)) == "**Planning** the reply"
    assert text_of(events) == "Hello there, friend."
    status = [e for e in events if isinstance(e, StatusUpdate)]
    assert status and status[0].usage.input_tokens == 12
    end = events[-1]
    assert isinstance(end, TurnEnd) and end.reason == "finished"
    assert (end.usage.input_tokens, end.usage.output_tokens, end.usage.reasoning_tokens) == (12, 5, 2)
    assert s.state.usage.requests == 1


async def test_g3_permission_edit_with_modified_content(
    core_factory: Any, script: Any, workspace: Path
) -> None:
    spec = script(
        [
            [call("write_file", {"path": "notes.txt", "content": "proposed\n"}, "w1")],
            [{"text": "Result: {last_tool_results}"}],
        ]
    )
    core = await core_factory(spec)
    s = await core.create_session([workspace], approval_mode="ask")
    events = await collect(s.advance(UserPrompt("write notes")))
    end = events[-1]
    assert isinstance(end, NeedsInput)
    (waiting,) = end.calls
    assert waiting.id == "w1" and waiting.confirmation is not None
    assert [o.id for o in waiting.confirmation.options] == [
        "proceed_once",
        "proceed_always",
        "cancel",
        "cancel_always",
    ]
    diff = waiting.confirmation.details
    assert diff.new_content == "proceed\n".replace("proceed", "proposed")  # type: ignore[union-attr]
    assert "+proposed" in diff.formatted_diff  # type: ignore[union-attr]
    assert not (workspace / "notes.txt").exists()
    events = await collect(s.advance(Resume(decisions=[Decision("w1", "proceed_once", "edited by user\n")])))
    assert (workspace / "notes.txt").read_text() == "edited by user\n"
    assert updates(events, "w1") == [ToolCallStatus.EXECUTING, ToolCallStatus.SUCCEEDED]
    assert isinstance(events[-1], TurnEnd) and events[-1].reason == "finished"


async def test_g3_cancel_option_skips_the_call(core_factory: Any, script: Any, workspace: Path) -> None:
    spec = script(
        [
            [call("run_shell_command", {"command": "touch made.txt"}, "s1")],
            [{"text": "model saw: {last_tool_results}"}],
        ]
    )
    core = await core_factory(spec)
    s = await core.create_session([workspace])
    events = await collect(s.advance(UserPrompt("touch")))
    assert isinstance(events[-1], NeedsInput)
    details = events[-1].calls[0].confirmation.details
    assert details.command == "touch made.txt" and details.working_directory == str(workspace)
    events = await collect(s.advance(Resume(decisions=[Decision("s1", "cancel")])))
    assert updates(events, "s1") == [ToolCallStatus.CANCELLED]
    assert not (workspace / "made.txt").exists()
    assert "declined" in text_of(events)
    assert events[-1].reason == "finished"


async def test_g3_allow_always_is_remembered_per_shell_root(
    core_factory: Any, script: Any, workspace: Path
) -> None:
    spec = script(
        [
            [call("run_shell_command", {"command": "echo one"}, "a")],
            [call("run_shell_command", {"command": "echo two"}, "b")],
            [call("run_shell_command", {"command": "ls"}, "c")],
            [{"text": "done"}],
        ]
    )
    core = await core_factory(spec)
    s = await core.create_session([workspace])
    events = await collect(s.advance(UserPrompt("go")))
    assert isinstance(events[-1], NeedsInput)
    events = await collect(s.advance(Resume(decisions=[Decision("a", "proceed_always")])))
    # "echo two" ran without asking; "ls" asks
    assert updates(events, "b") == [
        ToolCallStatus.PENDING,
        ToolCallStatus.EXECUTING,
        ToolCallStatus.SUCCEEDED,
    ]
    assert isinstance(events[-1], NeedsInput) and events[-1].calls[0].id == "c"
    assert s.state.grants_shell == ["echo"]


async def test_g3_plan_mode_refuses_edits(core_factory: Any, script: Any, workspace: Path) -> None:
    spec = script([[call("write_file", {"path": "x.txt", "content": "x"}, "w")], [{"text": "ok"}]])
    core = await core_factory(spec, allowed_approval_modes=("plan",))
    s = await core.create_session([workspace], approval_mode="plan")
    events = await collect(s.advance(UserPrompt("write")))
    final = [e.call for e in events if isinstance(e, ToolCallUpdate)][-1]
    assert final.status is ToolCallStatus.FAILED and "plan mode" in final.error.message  # type: ignore[union-attr]
    assert not (workspace / "x.txt").exists()


async def test_g3_client_cannot_choose_a_mode_policy_forbids(core_factory: Any, workspace: Path) -> None:
    core = await core_factory("demo")  # server default: ask; nothing listed by the operator
    assert (await core.create_session([workspace], approval_mode="yolo")).state.approval_mode == "ask"
    assert (await core.create_session([workspace], approval_mode="auto-edit")).state.approval_mode == "ask"
    assert (await core.create_session([workspace], approval_mode="plan")).state.approval_mode == "plan"
    assert (await core.create_session([workspace], approval_mode="nonsense")).state.approval_mode == "ask"
    listed = await core_factory("demo", allowed_approval_modes=("auto-edit",))
    assert (
        await listed.create_session([workspace], approval_mode="auto-edit")
    ).state.approval_mode == "auto-edit"
    assert (await listed.create_session([workspace], approval_mode="yolo")).state.approval_mode == "ask"
    strict = await core_factory("demo", approval_mode="plan")
    assert (await strict.create_session([workspace], approval_mode="ask")).state.approval_mode == "plan"


async def test_g4_escape_is_a_failed_call(core_factory: Any, script: Any, workspace: Path) -> None:
    spec = script([[call("read_file", {"path": "../../etc/passwd"}, "r")], [{"text": "{last_tool_results}"}]])
    core = await core_factory(spec)
    s = await core.create_session([workspace])
    events = await collect(s.advance(UserPrompt("read")))
    final = [e.call for e in events if isinstance(e, ToolCallUpdate)][-1]
    assert final.status is ToolCallStatus.FAILED
    assert final.error is not None and final.error.type == "path_outside_workspace"
    assert "outside the workspace" in text_of(events)


async def test_parallel_calls_run_or_wait_together(core_factory: Any, script: Any, workspace: Path) -> None:
    spec = script(
        [
            [
                call("read_file", {"path": "README.md"}, "r"),
                call("write_file", {"path": "a.txt", "content": "A"}, "w"),
                call("run_shell_command", {"command": "echo hi > b.txt"}, "x"),
            ],
            [{"text": "all: {last_tool_results}"}],
        ]
    )
    core = await core_factory(spec)
    s = await core.create_session([workspace])
    events = await collect(s.advance(UserPrompt("do three things")))
    assert updates(events, "r")[-1] is ToolCallStatus.SUCCEEDED  # ran before the pause
    assert isinstance(events[-1], NeedsInput) and [c.id for c in events[-1].calls] == ["w", "x"]
    # one answer: the other keeps waiting
    events = await collect(s.advance(Resume(decisions=[Decision("w", "proceed_once")])))
    assert isinstance(events[-1], NeedsInput) and [c.id for c in events[-1].calls] == ["x"]
    assert (workspace / "a.txt").read_text() == "A"
    events = await collect(s.advance(Resume(decisions=[Decision("x", "proceed_once")])))
    assert events[-1].reason == "finished"
    text = text_of(events)
    assert "Demo project" in text and "exit code 0" in text


async def test_invalid_resume_changes_nothing(core_factory: Any, script: Any, workspace: Path) -> None:
    spec = script([[call("write_file", {"path": "a.txt", "content": "A"}, "w")], [{"text": "ok"}]])
    core = await core_factory(spec)
    s = await core.create_session([workspace])
    with pytest.raises(InputError):
        await collect(s.advance(Resume(decisions=[Decision("w", "proceed_once")])))  # nothing waits yet
    await collect(s.advance(UserPrompt("go")))
    for bad in (
        Resume(decisions=[Decision("nope", "proceed_once")]),
        Resume(decisions=[Decision("w", "maybe")]),
        Resume(results=[ClientResult("w", output="x")]),
    ):
        with pytest.raises(InputError):
            await collect(s.advance(bad))
    assert [c.id for c in s.waiting_calls()] == ["w"]
    events = await collect(s.advance(Resume(decisions=[Decision("w", "proceed_once")])))
    assert events[-1].reason == "finished"


async def test_model_error_keeps_session_usable(core_factory: Any, script: Any, workspace: Path) -> None:
    spec = script(
        [
            [{"text": "partial "}, {"error": {"message": "upstream exploded", "status": 503}}],
            [{"text": "fine"}],
        ]
    )
    core = await core_factory(spec)
    s = await core.create_session([workspace])
    events = await collect(s.advance(UserPrompt("one")))
    assert events[-1].reason == "error" and "upstream exploded" in (events[-1].error or "")
    assert any(isinstance(e, Notice) and e.level == "error" for e in events)
    events = await collect(s.advance(UserPrompt("two")))
    assert events[-1].reason == "finished" and text_of(events) == "fine"


async def test_racing_first_messages_share_one_session(
    core_factory: Any, script: Any, workspace: Path
) -> None:
    """G6: two first messages of one conversation (an adapter's get_session found nothing for
    either, then both create it) get one live session, and both turns are kept, one after the
    other; before, each got its own object and the second turn failed writing message 0."""
    core = await core_factory(script([[{"text": "a"}], [{"text": "b"}]]))

    async def first_message(text: str) -> list[Any]:
        s = await core.get_session("one-conversation")
        if s is None:
            s = await core.create_session([workspace], session_id="one-conversation")
        return [s, await collect(s.advance(UserPrompt(text)))]

    (s1, ev1), (s2, ev2) = await asyncio.gather(first_message("x"), first_message("y"))
    assert s1 is s2
    assert ev1[-1].reason == "finished" and ev2[-1].reason == "finished"
    assert sorted([text_of(ev1), text_of(ev2)]) == ["a", "b"]
    assert len(await s1.messages()) == 4


async def test_c5_max_steps_guard(core_factory: Any, script: Any, workspace: Path) -> None:
    steps = [[call("list_directory", {"path": "."}, f"l{i}")] for i in range(5)]
    core = await core_factory(script(steps), max_steps=3)
    s = await core.create_session([workspace])
    events = await collect(s.advance(UserPrompt("loop")))
    assert events[-1].reason == "max_steps_reached"
    assert sum(isinstance(e, StepBegin) for e in events) == 3


async def test_cancel_kills_running_shell(core_factory: Any, script: Any, workspace: Path) -> None:
    spec = script(
        [[call("run_shell_command", {"command": "echo started; sleep 30"}, "s")], [{"text": "never"}]]
    )
    core = await core_factory(spec, approval_mode="yolo", allowed_approval_modes=("yolo",))
    s = await core.create_session([workspace], approval_mode="yolo")
    events: list[Any] = []

    async def consume() -> None:
        async for e in s.advance(UserPrompt("run")):
            events.append(e)
            if isinstance(e, ToolCallUpdate) and e.call.live_output and "started" in e.call.live_output:
                asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(s.cancel()))

    await asyncio.wait_for(consume(), 10)
    assert events[-1].reason == "cancelled"
    assert updates(events, "s")[-1] is ToolCallStatus.CANCELLED
    # the conversation goes on
    spec_events = await collect(s.advance(UserPrompt("/stats")))
    assert spec_events[-1].reason == "finished"


async def test_client_tools_round_trip(core_factory: Any, script: Any, workspace: Path) -> None:
    spec = script(
        [
            [call("client_clock", {"tz": "UTC"}, "c1"), call("list_directory", {"path": "."}, "l1")],
            [{"text": "clock: {last_tool_results}"}],
        ]
    )
    core = await core_factory(spec)
    s = await core.create_session([workspace])
    schema = {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}
    rejected = await s.set_client_tools(
        [
            ClientTool("client_clock", "Client time", schema),
            ClientTool("read_file", "mine", {"type": "object"}),
        ]
    )
    assert rejected == [("read_file", "conflicts with builtin tool")]
    events = await collect(s.advance(UserPrompt("time?")))
    assert isinstance(events[-1], NeedsInput)
    (c,) = events[-1].client_calls
    assert c.id == "c1" and c.args == {"tz": "UTC"} and c.awaiting_client
    assert updates(events, "l1")[-1] is ToolCallStatus.SUCCEEDED
    events = await collect(s.advance(Resume(results=[ClientResult("c1", output="12:00Z")])))
    assert "12:00Z" in text_of(events) and events[-1].reason == "finished"
    assert s.state.tool_stats["client_clock"] == {"calls": 1, "failures": 0}


async def test_new_prompt_while_waiting_cancels_waiting_calls(
    core_factory: Any, script: Any, workspace: Path
) -> None:
    spec = script([[call("write_file", {"path": "a.txt", "content": "A"}, "w")], [{"text": "moved on"}]])
    core = await core_factory(spec)
    s = await core.create_session([workspace])
    await collect(s.advance(UserPrompt("write")))
    events = await collect(s.advance(UserPrompt("never mind")))
    assert updates(events, "w")[0] is ToolCallStatus.CANCELLED
    assert events[-1].reason == "finished" and not (workspace / "a.txt").exists()


async def test_g6_same_session_on_sqlite_and_postgres(script: Any, workspace: Path, db_url: str) -> None:
    from devagent.agent.core import AgentCore
    from devagent.agent.settings import CoreConfig

    spec = script([[call("write_file", {"path": "p.txt", "content": "P"}, "w")], [{"text": "stored"}]])
    core = await AgentCore.open(CoreConfig(db_url=db_url, default_model=spec))
    s = await core.create_session([workspace])
    await collect(s.advance(UserPrompt("write p")))
    sid = s.id
    await core.close()
    core2 = await AgentCore.open(CoreConfig(db_url=db_url, default_model=spec))
    try:
        s2 = await core2.get_session(sid)
        assert s2 is not None and [c.id for c in s2.waiting_calls()] == ["w"]
        events = await collect(s2.advance(Resume(decisions=[Decision("w", "proceed_once")])))
        assert events[-1].reason == "finished" and text_of(events) == "stored"
        assert (workspace / "p.txt").read_text() == "P"
        assert len(await s2.messages()) == 4
    finally:
        await core2.close()


FIRST_HALF = textwrap.dedent(
    """
    import asyncio, os, sys
    from devagent.agent.core import AgentCore
    from devagent.agent.settings import CoreConfig
    from devagent.agent.events import NeedsInput, UserPrompt

    async def main():
        core = await AgentCore.open(CoreConfig(db_url=sys.argv[1], default_model=sys.argv[2]))
        s = await core.create_session([sys.argv[3]])
        async for ev in s.advance(UserPrompt("edit please")):
            if isinstance(ev, NeedsInput):
                print(s.id, flush=True)
                os._exit(0)  # the process dies without closing anything

    asyncio.run(main())
    """
)


async def test_g6_decision_given_to_a_fresh_process(script: Any, workspace: Path, sqlite_url: str) -> None:
    from devagent.agent.core import AgentCore
    from devagent.agent.settings import CoreConfig

    spec = script(
        [
            [call("read_file", {"path": "README.md"})],  # an edit needs a read first
            [
                {"thinking": "need to write"},
                call("edit", {"path": "README.md", "old_string": "Hello.", "new_string": "Hi!"}, "e"),
            ],
            [{"text": "edited: {last_tool_results}"}],
        ]
    )
    out = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", FIRST_HALF, sqlite_url, spec, str(workspace)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ},
    )
    assert out.returncode == 0, out.stderr
    sid = out.stdout.strip()
    core = await AgentCore.open(CoreConfig(db_url=sqlite_url, default_model=spec))
    try:
        s = await core.get_session(sid)
        assert s is not None
        (waiting,) = s.waiting_calls()
        assert waiting.name == "edit" and waiting.confirmation is not None
        events = await collect(s.advance(Resume(decisions=[Decision("e", "proceed_once")])))
        assert events[-1].reason == "finished"
        assert (workspace / "README.md").read_text() == "# Demo project\nHi!\n"
        assert "edited" in text_of(events)
    finally:
        await core.close()


async def test_g5_slash_commands(core_factory: Any, script: Any, workspace: Path) -> None:
    core = await core_factory(
        script([[{"text": "hello"}], [{"text": "hello again"}], [{"text": "A summary of things."}]])
    )
    s = await core.create_session([workspace])
    help_text = text_of(await collect(s.advance(UserPrompt("/help"))))
    for name in ("/init", "/memory add", "/compact", "/clear", "/tools", "/stats"):
        assert name in help_text
    await collect(s.advance(UserPrompt("/memory add the tests use pytest")))
    assert "the tests use pytest" in (workspace / "AGENTS.md").read_text()
    assert "the tests use pytest" in text_of(await collect(s.advance(UserPrompt("/memory show"))))
    await collect(s.advance(UserPrompt("hi")))
    await collect(s.advance(UserPrompt("hi again")))
    assert "write_file (edit)" in text_of(await collect(s.advance(UserPrompt("/tools"))))
    assert "2 model requests" in text_of(await collect(s.advance(UserPrompt("/stats"))))
    events = await collect(s.run_command(["compact"]))
    assert "Compacted" in text_of(events)
    assert "A summary of things." in json.dumps([str(m) for m in await s.messages()])
    await collect(s.advance(UserPrompt("/clear")))
    assert await s.messages() == []
    with pytest.raises(InputError):
        await collect(s.run_command(["nope"]))


async def test_g5_init_writes_agents_md_through_permission(
    core_factory: Any, script: Any, workspace: Path
) -> None:
    spec = script(
        [
            [call("write_file", {"path": "AGENTS.md", "content": "# Guide\n"}, "g")],
            [{"text": "Wrote the guide."}],
        ]
    )
    core = await core_factory(spec)
    s = await core.create_session([workspace])
    events = await collect(s.advance(UserPrompt("/init")))
    assert isinstance(events[-1], NeedsInput)  # the edit asks, as any edit does
    events = await collect(s.advance(Resume(decisions=[Decision("g", "proceed_once")])))
    assert (workspace / "AGENTS.md").read_text() == "# Guide\n"


async def test_cancel_twice_and_cancel_before_the_turn_starts(
    core_factory: Any, script: Any, workspace: Path
) -> None:
    spec = script([[{"sleep": 5}, {"text": "late"}], [{"text": "next"}]])
    core = await core_factory(spec)
    s = await core.create_session([workspace])
    gen = s.advance(UserPrompt("slow"))
    first = await gen.__anext__()  # StepBegin: the model is sleeping
    assert isinstance(first, StepBegin)
    await asyncio.gather(s.cancel(), s.cancel())  # a second cancel waits; it does not cut the cleanup
    rest = [e async for e in gen]
    assert isinstance(rest[-1], TurnEnd) and rest[-1].reason == "cancelled"
    # a cancel that arrives while the next advance is still starting cancels that turn
    gen = s.advance(UserPrompt("again"))
    task = asyncio.ensure_future(gen.__anext__())
    await asyncio.sleep(0)
    await s.cancel()
    events = [await task] + [e async for e in gen]
    assert events[-1].reason == "cancelled"
    events = await collect(s.advance(UserPrompt("third")))
    assert events[-1].reason == "finished"


async def test_refusal_feedback_reaches_the_model(core_factory: Any, script: Any, workspace: Path) -> None:
    spec = script(
        [[call("write_file", {"path": "a.txt", "content": "A"}, "w")], [{"text": "{last_tool_results}"}]]
    )
    core = await core_factory(spec)
    s = await core.create_session([workspace])
    await collect(s.advance(UserPrompt("write")))
    events = await collect(
        s.advance(Resume(decisions=[Decision("w", "cancel", feedback="use b.txt instead")]))
    )
    assert "use b.txt instead" in text_of(events)


CRASH_MID_TOOL = textwrap.dedent(
    """
    import asyncio, os, sys
    from devagent.agent.core import AgentCore
    from devagent.agent.settings import CoreConfig
    from devagent.agent.events import ToolCallUpdate, UserPrompt

    async def main():
        core = await AgentCore.open(CoreConfig(db_url=sys.argv[1], default_model=sys.argv[2],
                                               approval_mode="yolo"))
        s = await core.create_session([sys.argv[3]])
        async for ev in s.advance(UserPrompt("run it")):
            if isinstance(ev, ToolCallUpdate) and ev.call.live_output:
                print(s.id, flush=True)
                os._exit(0)  # the process dies while the shell command runs

    asyncio.run(main())
    """
)


async def test_g6_turn_cut_off_by_a_crash_recovers(script: Any, workspace: Path, sqlite_url: str) -> None:
    from devagent.agent.core import AgentCore
    from devagent.agent.settings import CoreConfig

    spec = script(
        [
            [call("run_shell_command", {"command": "echo begun; sleep 2"}, "s")],
            # the note that closes the interrupted step is not the model's: step 1 comes next
            [{"text": "after restart"}],
            [{"text": "never played"}],
        ]
    )
    out = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", CRASH_MID_TOOL, sqlite_url, spec, str(workspace)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    core = await AgentCore.open(CoreConfig(db_url=sqlite_url, default_model=spec))
    try:
        # a reader (A2A tasks/get) settles the turn whose process died (issue 10 item 1)
        s = await core.inspect(out.stdout.strip())
        assert s is not None and s.state.status == "idle" and s.waiting_calls() == []
        assert s.state.outcome == "interrupted" and "interrupted" in s.state.outcome_message
        # the interrupted call has a result in the transcript, so the model reads what happened
        returns = [
            p for m in await s.messages() for p in getattr(m, "parts", []) if p.part_kind == "tool-return"
        ]
        assert len(returns) == 1 and "was not run again" in str(returns[0].content)
        events = await collect(s.advance(UserPrompt("what happened?")))
        assert events[-1].reason == "finished" and text_of(events) == "after restart"
    finally:
        await core.close()


async def test_sessions_in_memory_are_bounded_and_never_doubled(
    core_factory: Any, script: Any, workspace: Path
) -> None:
    import gc

    core = await core_factory(script([[{"text": "a"}], [{"text": "b"}]]), sessions_in_memory=2)
    held = await core.create_session([workspace])
    ids = [(await core.create_session([workspace])).id for _ in range(5)]
    gc.collect()
    assert len(core._sessions) <= 3  # the two most recent, and the one this test holds
    assert await core.get_session(held.id) is held  # a session in use is never loaded twice
    again = await core.get_session(ids[0])  # dropped from memory: loaded from the store
    assert again is not None and again.id == ids[0]
    events = await collect(again.advance(UserPrompt("hi")))
    assert events[-1].reason == "finished"


async def test_internal_error_is_reported_without_details_and_session_survives(
    core_factory: Any, script: Any, workspace: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    from devagent.agent.loop.calls import StepCalls

    spec = script([[call("list_directory", {"path": "."}, "l")], [{"text": "ok"}], [{"text": "fine"}]])
    core = await core_factory(spec)
    s = await core.create_session([workspace])
    original = StepCalls.classify

    async def broken(self: StepCalls, part: Any, emit: Any) -> Any:
        raise RuntimeError("INSERT INTO secret_table VALUES ('password')")

    monkeypatch.setattr(StepCalls, "classify", broken)
    events = await collect(s.advance(UserPrompt("go")))
    end = events[-1]
    assert end.reason == "error" and "Internal error" in (end.error or "")
    assert "secret_table" not in (end.error or "") and all("secret_table" not in str(e) for e in events)
    assert "secret_table" in caplog.text  # the details are in the server log
    monkeypatch.setattr(StepCalls, "classify", original)
    events = await collect(s.advance(UserPrompt("again")))
    assert events[-1].reason == "finished"


async def test_issue23_timeline_reads_the_conversation_as_shown(
    core_factory: Any, script: Any, workspace: Path
) -> None:
    """Session.timeline (the web console's and MCP's view): prompts, whole texts and thoughts,
    each call once: waiting with its confirmation request, then with what became of it."""
    from devagent.agent.events import TextDelta, ToolCall

    spec = script(
        [
            [
                {"thinking": "plan"},
                {"text": "Writing."},
                call("write_file", {"path": "a.txt", "content": "x\n"}, "w1"),
            ],
            [call("write_file", {"path": "b.txt", "content": "y\n"}, "w2")],
            [{"text": "Done."}],
        ]
    )
    core = await core_factory(spec)
    s = await core.create_session([workspace], approval_mode="ask")
    await collect(s.advance(UserPrompt("write two")))
    items = await s.timeline()
    assert [type(i).__name__ for i in items] == ["UserPrompt", "ThoughtDelta", "TextDelta", "ToolCall"]
    waiting = items[-1]
    assert isinstance(waiting, ToolCall) and waiting.status == ToolCallStatus.PENDING
    assert waiting.confirmation is not None and waiting.args == {"path": "a.txt", "content": "x\n"}
    await collect(s.advance(Resume(decisions=[Decision("w1", "proceed_once")])))
    await collect(s.advance(Resume(decisions=[Decision("w2", "cancel", feedback="not b")])))
    items = await s.timeline()
    calls = {i.id: i for i in items if isinstance(i, ToolCall)}
    assert calls["w1"].status == ToolCallStatus.SUCCEEDED and calls["w1"].confirmation is None
    assert calls["w2"].status in (ToolCallStatus.CANCELLED, ToolCallStatus.FAILED)
    assert calls["w2"].error is not None and "not b" in calls["w2"].error.message
    assert isinstance(items[-1], TextDelta) and items[-1].text == "Done."
    assert [i.text for i in items if isinstance(i, UserPrompt)] == ["write two"]


async def test_issue28_item1_a_prefix_granted_call_starts_after_the_steps_other_calls(
    core_factory: Any, script: Any, workspace: Path
) -> None:
    """Issue 28 item 1: what a prefix grant runs unasked starts once the other calls of its step
    are done, so no file they write changes under it (git's configuration, read as git starts).
    Here the other call (an exact grant) writes f.txt only when the test lets it, after it is
    running: the granted `cat f.txt` of the same step reads what it wrote."""
    slow = "while [ ! -f go ]; do sleep 0.05; done; echo written > f.txt"
    spec = script(
        [
            [
                call("run_shell_command", {"command": "cat f.txt"}, "granted"),
                call("run_shell_command", {"command": slow}, "other"),
            ],
            [{"text": "done"}],
        ]
    )
    core = await core_factory(spec)
    s = await core.create_session([workspace])
    s.state.grants_shell += ["cat", EXACT + slow]
    events = []
    async for e in s.advance(UserPrompt("go")):
        events.append(e)
        if (
            isinstance(e, ToolCallUpdate)
            and e.call.id == "other"
            and e.call.status is ToolCallStatus.EXECUTING
        ):
            (workspace / "go").write_text("")
    assert events[-1].reason == "finished"
    result = next(
        e.call for e in reversed(events) if isinstance(e, ToolCallUpdate) and e.call.id == "granted"
    )
    assert result.status is ToolCallStatus.SUCCEEDED and result.output is not None
    assert "written" in result.output.text, result.output
