"""Hooks at the session's other points, on the core: SubagentStop keeps a subagent going, a
question notifies, /compact and /clear fire PreCompact, SessionEnd and SessionStart again; and
how several hooks' answers combine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from devagent.agent.events import NeedsInput, Notice, TurnEnd, UserPrompt
from devagent.agent.hooks.run import HookRun
from devagent.agent.hooks.verdict import combine
from tests.core_helpers import ask_call, collect, task_call, text_of, write_script
from tests.hook_files import command, logged, logger, write_hooks


def hooks_file(tmp_path: Path, hooks: dict[str, Any]) -> str:
    return str(write_hooks(tmp_path, hooks, settings_file=True))


def logging_hooks(tmp_path: Path, log: Path, *events: str) -> str:
    return hooks_file(tmp_path, {e: [{"hooks": [logger(log)]}] for e in events})


async def test_issue32_item1_subagentstop_keeps_the_subagent_going(
    core_factory: Any, workspace: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "once"
    block = json.dumps({"decision": "block", "reason": "look in tests/ too"})
    hook = command(f"[ -e {marker} ] && exit 0; touch {marker}; echo '{block}'")
    spec = write_script(
        tmp_path / "s.json",
        [
            {"items": [task_call("explore", "CHILD: find the tests", "t1")]},
            {"items": [{"text": "parent: {last_tool_results}"}]},
        ],
        {"CHILD": [[{"text": "found nothing"}], [{"text": "then: {last_user}"}]]},
    )
    log = tmp_path / "events.log"
    path = hooks_file(
        tmp_path,
        {
            "SubagentStop": [{"matcher": "general-purpose", "hooks": [hook]}],
            **{e: [{"hooks": [logger(log)]}] for e in ("Stop", "SessionStart", "UserPromptSubmit")},
        },
    )
    core = await core_factory(spec, hooks_file=path)
    parent = await core.create_session([workspace], approval_mode="yolo")
    events = await collect(parent.advance(UserPrompt("go")))
    assert isinstance(events[-1], TurnEnd) and events[-1].reason == "finished"
    assert "then: [SubagentStop hook] look in tests/ too" in text_of(events)
    # the parent's events; the subagent's prompt and stop are not the user's
    assert logged(log) == [["SessionStart", "startup"], ["UserPromptSubmit", ""], ["Stop", ""]]


async def test_issue32_item1_a_question_notifies(core_factory: Any, workspace: Path, tmp_path: Path) -> None:
    log = tmp_path / "events.log"
    spec = write_script(tmp_path / "s.json", [{"items": [ask_call("Which branch?", ["main", "dev"], "q1")]}])
    core = await core_factory(spec, hooks_file=logging_hooks(tmp_path, log, "Notification"))
    s = await core.create_session([workspace], approval_mode="yolo")
    events = await collect(s.advance(UserPrompt("go")))
    assert isinstance(events[-1], NeedsInput)
    assert logged(log) == [["Notification", "elicitation_dialog"]]


async def test_issue32_item1_G5_compact_and_clear_fire_their_events(
    core_factory: Any, workspace: Path, tmp_path: Path
) -> None:
    log = tmp_path / "events.log"
    spec = write_script(tmp_path / "s.json", [{"items": [{"text": "ok"}]}] * 12)
    path = logging_hooks(tmp_path, log, "SessionStart", "PreCompact", "SessionEnd")
    core = await core_factory(spec, hooks_file=path)
    s = await core.create_session([workspace], approval_mode="yolo")
    for prompt in ("one", "two", "three"):
        await collect(s.advance(UserPrompt(prompt)))
    await collect(s.advance(UserPrompt("/compact keep the names")))
    await collect(s.advance(UserPrompt("four")))
    await collect(s.advance(UserPrompt("/clear")))
    await collect(s.advance(UserPrompt("five")))
    assert logged(log) == [
        ["SessionStart", "startup"],
        ["PreCompact", "manual"],
        ["SessionStart", "compact"],
        ["SessionEnd", "clear"],
        ["SessionStart", "clear"],
    ]


async def test_issue32_item1_a_failing_hook_is_reported_and_the_turn_goes_on(
    core_factory: Any, workspace: Path, tmp_path: Path
) -> None:
    broken = command("echo 'no such linter' >&2; exit 1")
    spec = write_script(tmp_path / "s.json", [{"items": [{"text": "fine"}]}])
    core = await core_factory(
        spec, hooks_file=hooks_file(tmp_path, {"UserPromptSubmit": [{"hooks": [broken]}]})
    )
    s = await core.create_session([workspace])
    events = await collect(s.advance(UserPrompt("go")))
    assert text_of(events) == "fine" and events[-1].reason == "finished"
    [notice] = [e for e in events if isinstance(e, Notice)]
    assert "exited with 1: no such linter" in notice.text


def run(code: int | None, stdout: str = "", stderr: str = "") -> HookRun:
    return HookRun("hook", code, stdout, stderr, "" if code is not None else "it timed out")


def decision(value: str, reason: str = "") -> str:
    out = {"hookSpecificOutput": {"permissionDecision": value, "permissionDecisionReason": reason}}
    return json.dumps(out)


def test_issue32_item1_deny_wins_over_ask_over_allow() -> None:
    v = combine(
        "PreToolUse", [run(0, decision("allow")), run(0, decision("ask")), run(0, decision("deny", "no"))]
    )
    assert v.permission == "deny" and v.blocked and v.reason == "no"
    v = combine("PreToolUse", [run(0, decision("allow")), run(0, decision("ask"))])
    assert v.permission == "ask" and not v.blocked
    v = combine("PreToolUse", [run(0, json.dumps({"decision": "approve"}))])
    assert v.permission == "allow"


def test_issue32_item1_exit_codes_and_output() -> None:
    v = combine("PreToolUse", [run(2, stdout=decision("allow"), stderr="blocked: reason")])
    assert v.blocked and v.reason == "blocked: reason" and v.permission is None  # exit 2: stdout ignored
    v = combine("PostToolUse", [run(0, "plain text"), run(3, stderr="oops"), run(None)])
    assert not v.blocked and v.context == [] and len(v.notices) == 2
    v = combine("UserPromptSubmit", [run(0, "plain text")])
    assert v.context == ["plain text"]
    v = combine(
        "Stop", [run(0, json.dumps({"continue": False, "stopReason": "enough", "systemMessage": "hi"}))]
    )
    assert v.stop and v.stop_reason == "enough" and v.notices == ["hi"]
    v = combine("PreToolUse", [run(0, "{not json")])
    assert not v.blocked and v.permission is None
