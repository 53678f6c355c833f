"""Subagents at the core (the `task` tool, its types, its questions through the parent): a scripted
model plays the parent's conversation and each subagent's (keyed by the subagent's first prompt)."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.events import (
    Decision,
    NeedsInput,
    Resume,
    ToolCallStatus,
    ToolCallUpdate,
    ToolKind,
    TurnEnd,
    UserPrompt,
)
from devagent.agent.models.errors import ModelConfigError
from devagent.agent.models.scripted import parse_conversations, parse_script
from devagent.agent.subagents.types import parse_type
from tests.conftest import process_ended
from tests.core_helpers import (
    call,
    collect,
    read_in_background,
    shell_call,
    task_call,
    text_of,
    write_call,
    write_script,
)


def _parent(*calls: dict[str, Any]) -> list[Any]:
    """The parent's steps: the calls, then an answer quoting their results."""
    return [{"items": list(calls)}, {"items": [{"text": "Done: {last_tool_results}"}]}]


@pytest.fixture
def asking_parent(core_factory: Any, workspace: Path, tmp_path: Path) -> Any:
    """Makes a core and its parent session in ask mode, the parent making one `task` call and each
    child answering by its conversation in `children`."""

    async def make(task: dict[str, Any], children: dict[str, Any]) -> tuple[Any, Any]:
        core = await core_factory(write_script(tmp_path / "s.json", _parent(task), children))
        return core, await core.create_session([workspace], approval_mode="ask")

    return make


async def _written(path: Path) -> str:
    """The file's text once something is written in it (by the subagent's command): waits for a
    state the test observes, not for a time."""
    for _ in range(6000):
        if path.exists() and path.read_text().strip():
            return path.read_text()
        await asyncio.sleep(0.01)
    raise AssertionError(f"{path} was never written")


async def test_issue31_item1_a_subagent_writes_a_file_asked_through_the_parent(
    asking_parent: Any, workspace: Path
) -> None:
    """The child's write waits as a call of the parent (named with the child, its id under the
    task call's); approved there, the child writes, and its answer is the task call's result, with
    its usage. The child is a session of its own, linked to its parent and call."""
    core, parent = await asking_parent(
        task_call("write the notes", "CHILD: write notes.txt", "t1"),
        {"CHILD": [[write_call("notes.txt", "hello\n", "w1")], [{"text": "I wrote notes.txt."}]]},
    )
    events = await collect(parent.advance(UserPrompt("make notes")))
    pause = events[-1]
    assert isinstance(pause, NeedsInput)
    [question] = pause.calls
    assert question.id == "t1/w1" and question.parent_call_id == "t1"
    assert question.description == "write the notes: Write notes.txt"
    assert question.kind == ToolKind.EDIT and question.confirmation is not None
    nested = [e.call for e in events if isinstance(e, ToolCallUpdate) and e.call.id == "t1/w1"]
    assert nested and nested[0].parent_call_id == "t1"
    assert not (workspace / "notes.txt").exists()

    events = await collect(parent.advance(Resume(decisions=[Decision("t1/w1", "proceed_once")])))
    assert (workspace / "notes.txt").read_text() == "hello\n"
    statuses = [e.call.status for e in events if isinstance(e, ToolCallUpdate) and e.call.id == "t1/w1"]
    assert statuses == [ToolCallStatus.EXECUTING, ToolCallStatus.SUCCEEDED]
    done = [e.call for e in events if isinstance(e, ToolCallUpdate) and e.call.id == "t1"][-1]
    assert done.status == ToolCallStatus.SUCCEEDED and done.output is not None
    assert done.output.text == "I wrote notes.txt."
    data = done.output.data
    assert data["agent"] == "general-purpose" and data["outcome"] == "finished"
    assert data["usage"]["requests"] == 2
    assert text_of(events) == "Done: I wrote notes.txt."
    assert isinstance(events[-1], TurnEnd) and events[-1].reason == "finished"

    child = await core.get_session(data["session"])
    link = child.state.subagent_of
    assert (link.session, link.call, link.agent, link.depth) == (parent.id, "t1", "general-purpose", 1)
    assert child.state.approval_mode == "ask" and child.state.workspace_roots == parent.state.workspace_roots
    assert child.state.outcome == "finished"
    assert "task" not in child.tools() and "write_file" in child.tools()


async def test_issue31_item1_two_subagents_run_in_parallel(
    core_factory: Any, workspace: Path, tmp_path: Path
) -> None:
    """Each child waits until the other has started: they finish only if they run at once."""
    a, b = tmp_path / "a-started", tmp_path / "b-started"
    spec = write_script(
        tmp_path / "s.json",
        _parent(task_call("first", "CHILD-A go", "ta"), task_call("second", "CHILD-B go", "tb")),
        {
            "CHILD-A": [[{"touch": str(a)}, {"wait_for": str(b)}, {"text": "A done"}]],
            "CHILD-B": [[{"touch": str(b)}, {"wait_for": str(a)}, {"text": "B done"}]],
        },
    )
    core = await core_factory(spec)
    parent = await core.create_session([workspace], approval_mode="ask")
    events = await asyncio.wait_for(collect(parent.advance(UserPrompt("both"))), 60)
    assert text_of(events) == "Done: A done\nB done"


async def test_issue31_item1_at_most_subagents_parallel_run_at_once(
    core_factory: Any, workspace: Path, tmp_path: Path
) -> None:
    """With one place, the second subagent starts only once the first is done, which is after the
    test opens the first one's gate."""
    a, b, gate = tmp_path / "a-started", tmp_path / "b-started", tmp_path / "gate"
    spec = write_script(
        tmp_path / "s.json",
        _parent(task_call("first", "CHILD-A go", "ta"), task_call("second", "CHILD-B go", "tb")),
        {
            "CHILD-A": [[{"touch": str(a)}, {"wait_for": str(gate)}, {"text": "A done"}]],
            "CHILD-B": [[{"touch": str(b)}, {"text": "B done"}]],
        },
    )
    core = await core_factory(spec, subagents_parallel=1)
    parent = await core.create_session([workspace], approval_mode="ask")
    turn = asyncio.create_task(collect(parent.advance(UserPrompt("both"))))
    await _written_or_touched(a)
    assert not b.exists()
    gate.touch()
    events = await asyncio.wait_for(turn, 60)
    assert text_of(events) == "Done: A done\nB done"
    assert b.stat().st_mtime_ns >= gate.stat().st_mtime_ns


async def _written_or_touched(path: Path) -> None:
    for _ in range(6000):
        if path.exists():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{path} never appeared")


async def test_issue31_item1_a_new_prompt_instead_of_answers_ends_the_waiting_subagent(
    core_factory: Any, workspace: Path, tmp_path: Path
) -> None:
    spec = write_script(
        tmp_path / "s.json",
        [[task_call("write", "CHILD write", "t1")], [{"text": "moved on: {last_user}"}]],
        {"CHILD": [[write_call("x.txt", "x", "w")], [{"text": "never"}]]},
    )
    core = await core_factory(spec)
    parent = await core.create_session([workspace], approval_mode="ask")
    assert isinstance((await collect(parent.advance(UserPrompt("go"))))[-1], NeedsInput)
    events = await collect(parent.advance(UserPrompt("never mind")))
    assert text_of(events) == "moved on: never mind"
    [child] = await _children(core, parent.id)
    assert (child.state.status, child.state.outcome) == ("idle", "cancelled")
    assert not (workspace / "x.txt").exists()


async def test_issue31_item1_a_subagent_starts_none_of_its_own_unless_the_depth_allows(
    core_factory: Any, workspace: Path, tmp_path: Path
) -> None:
    spec = write_script(tmp_path / "s.json", [[{"text": "hi"}]])
    core = await core_factory(spec)
    parent = await core.create_session([workspace])
    assert "task" in parent.tools()
    no_task = await core_factory(spec, subagent_depth=0, db=f"sqlite+aiosqlite:///{tmp_path / 'b.db'}")
    assert "task" not in (await no_task.create_session([workspace])).tools()


async def test_issue31_item1_deeper_subagents_when_the_operator_raises_the_depth(
    core_factory: Any, workspace: Path, tmp_path: Path
) -> None:
    spec = write_script(
        tmp_path / "s.json",
        _parent(task_call("outer", "OUTER go", "t1")),
        {
            "OUTER": [[task_call("inner", "INNER go", "t2")], [{"text": "outer got: {last_tool_results}"}]],
            "INNER": [[write_call("deep.txt", "x\n", "w")], [{"text": "inner wrote"}]],
        },
    )
    core = await core_factory(spec, subagent_depth=2)
    parent = await core.create_session([workspace], approval_mode="ask")
    events = await collect(parent.advance(UserPrompt("nest")))
    [question] = events[-1].calls
    assert question.id == "t1/t2/w" and question.parent_call_id == "t1/t2"
    assert question.description == "outer: inner: Write deep.txt"
    events = await collect(parent.advance(Resume(decisions=[Decision("t1/t2/w", "proceed_once")])))
    assert (workspace / "deep.txt").read_text() == "x\n"
    assert text_of(events) == "Done: outer got: inner wrote"


async def test_issue31_item1_a_cancel_during_a_subagents_command_cancels_the_subagent(
    core_factory: Any, workspace: Path, tmp_path: Path
) -> None:
    """The parent's cancel reaches the child's running command (its process is killed), and
    the child's turn ends cancelled, as the parent's does."""
    started = workspace / "pid"
    spec = write_script(
        tmp_path / "s.json",
        _parent(task_call("wait", "CHILD run", "t1")),
        {"CHILD": [[shell_call("echo $$ > pid; exec sleep 600", "sh")], [{"text": "never"}]]},
    )
    core = await core_factory(spec, sandbox="off", approval_mode="yolo")
    parent = await core.create_session([workspace], approval_mode="yolo")
    turn = parent.advance(UserPrompt("go"))
    events: list[Any] = []
    reader = read_in_background(turn, events)
    pid = int(await _written(started))
    await parent.cancel()
    await asyncio.wait_for(reader, 30)
    assert isinstance(events[-1], TurnEnd) and events[-1].reason == "cancelled"
    assert process_ended(pid)
    task = [e.call for e in events if isinstance(e, ToolCallUpdate) and e.call.id == "t1"][-1]
    assert task.status == ToolCallStatus.CANCELLED
    sessions = [s for s in await _children(core, parent.id)]
    assert [s.state.outcome for s in sessions] == ["cancelled"]


async def _children(core: Any, parent_id: str) -> list[Any]:
    out = []
    for sid, _, _ in await core.store.list_sessions(None):
        s = await core.get_session(sid)
        if s is not None and s.state.subagent_of is not None and s.state.subagent_of.session == parent_id:
            out.append(s)
    return out


async def test_issue31_item1_a_cancel_while_a_subagent_waits_ends_the_subagent(
    asking_parent: Any, workspace: Path
) -> None:
    core, parent = await asking_parent(
        task_call("write", "CHILD write", "t1"),
        {"CHILD": [[write_call("x.txt", "x", "w")], [{"text": "never"}]]},
    )
    events = await collect(parent.advance(UserPrompt("go")))
    assert isinstance(events[-1], NeedsInput)
    await parent.cancel()
    assert parent.state.outcome == "cancelled" and parent.waiting_calls() == []
    [child] = await _children(core, parent.id)
    assert child.state.status == "idle" and child.state.outcome == "cancelled"
    assert not (workspace / "x.txt").exists()


async def test_issue31_item3_an_always_answer_holds_for_the_parent_and_its_later_subagents(
    core_factory: Any, workspace: Path, tmp_path: Path
) -> None:
    """ "Allow always" for a child's write also lets the next child's write run unasked; a refusal
    with feedback reaches the child's model."""
    spec = write_script(
        tmp_path / "s.json",
        [
            [task_call("one", "ONE", "t1")],
            [task_call("two", "TWO", "t2")],
            [{"text": "end: {last_tool_results}"}],
        ],
        {
            "ONE": [[write_call("one.txt", "1", "w")], [{"text": "one done"}]],
            "TWO": [[write_call("two.txt", "2", "w")], [{"text": "two: {last_tool_results}"}]],
        },
    )
    core = await core_factory(spec)
    parent = await core.create_session([workspace], approval_mode="ask")
    events = await collect(parent.advance(UserPrompt("go")))
    events = await collect(parent.advance(Resume(decisions=[Decision("t1/w", "proceed_always")])))
    assert (workspace / "one.txt").exists() and (workspace / "two.txt").exists()
    assert isinstance(events[-1], TurnEnd) and text_of(events).startswith("end: two: Created two.txt")
    assert "write_file" in parent.state.grants_tools


async def test_issue31_item3_a_refusal_reaches_the_subagent(asking_parent: Any, workspace: Path) -> None:
    _, parent = await asking_parent(
        task_call("one", "ONE", "t1"),
        {"ONE": [[write_call("one.txt", "1", "w")], [{"text": "child read: {last_tool_results}"}]]},
    )
    await collect(parent.advance(UserPrompt("go")))
    decision = Decision("t1/w", "cancel", feedback="not that file")
    events = await collect(parent.advance(Resume(decisions=[decision])))
    assert not (workspace / "one.txt").exists()
    assert "the user said: not that file" in text_of(events)


# --- types ---------------------------------------------------------------------------------------


def _type_file(folder: Path, name: str, description: str, tools: str | None = None, **more: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["---", f"name: {name}", f"description: {description}"]
    if tools is not None:
        lines.append(f"tools: {tools}")
    lines += [f"{k}: {v}" for k, v in more.items()]
    (folder / f"{name}.md").write_text("\n".join([*lines, "---", f"You are the {name}.", ""]))


@pytest.fixture
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home / "devagent"


async def test_issue31_item2_types_from_both_folders_and_the_built_ins_in_a_stable_order(
    core_factory: Any, workspace: Path, tmp_path: Path, config_home: Path
) -> None:
    _type_file(config_home / "agents", "zeta-user", "The user's own type.", model="scripted:/nowhere.json")
    _type_file(workspace / ".devagent" / "agents", "alpha-repo", "A repository's type.", model="openai:x")
    _type_file(workspace / ".devagent" / "agents", "explorer", "A repository trying to replace the explorer.")
    (workspace / ".devagent" / "agents" / "broken.md").write_text("no front matter\n")
    spec = write_script(tmp_path / "s.json", [[{"text": "hi"}], [{"text": "again"}]])
    core = await core_factory(spec)
    session = await core.create_session([workspace])
    description = session.tools()["task"].description
    listing = description[description.index("- alpha-repo") :]
    assert listing.splitlines() == [
        "- alpha-repo: A repository's type.",
        "- explorer: read-only: searches and reads the code to answer a question about it.",
        "- general-purpose: your tools, for a change, a fix or an investigation done in a context of "
        "its own.",
        "- zeta-user: The user's own type.",
    ]
    catalog = session.subagents.catalog()
    assert catalog.types["zeta-user"].model == "scripted:/nowhere.json"  # the user's folder: honoured
    assert catalog.types["alpha-repo"].model == ""  # a repository's: not unless the operator allows
    assert catalog.types["explorer"].source == "built-in"
    assert any("broken.md" in w for w in catalog.warnings)
    # the same bytes on the next request, although a new type file appeared meanwhile
    first = await session.request_parameters()
    _type_file(workspace / ".devagent" / "agents", "beta-late", "Comes too late.")
    second = await session.request_parameters()
    assert first.function_tools == second.function_tools


async def test_issue31_item2_a_type_asking_for_more_tools_is_narrowed_with_a_warning(
    core_factory: Any, workspace: Path, tmp_path: Path, config_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A read-only subagent (depth 2 allowed) starts a type asking for write_file and a tool
    nobody has: it gets read_file only, and its result and the log say what was left out."""
    agents = workspace / ".devagent" / "agents"
    _type_file(agents, "reader", "Reads, and may delegate.", "read_file, grep, task")
    _type_file(agents, "writer", "Writes.", "[read_file, write_file, teleport]")
    spec = write_script(
        tmp_path / "s.json",
        _parent(task_call("look", "READER go", "t1", agent="reader")),
        {
            "READER": [
                [task_call("write", "WRITER go", "t2", agent="writer")],
                [{"text": "reader got: {last_tool_results}"}],
            ],
            "WRITER": [[write_call("w.txt", "w", "w")], [{"text": "writer: {last_tool_results}"}]],
        },
    )
    core = await core_factory(spec, subagent_depth=2, approval_mode="yolo")
    parent = await core.create_session([workspace], approval_mode="yolo")
    with caplog.at_level(logging.WARNING):
        events = await collect(parent.advance(UserPrompt("go")))
    assert not (workspace / "w.txt").exists()
    text = text_of(events)
    assert "unknown tool 'write_file'" in text
    assert "left out: write_file, teleport" in text
    assert "asks for tools its parent session" in caplog.text and "write_file, teleport" in caplog.text
    [reader] = await _children(core, parent.id)
    assert reader.state.subagent_of.tools == ["read_file", "grep", "task"]
    [writer] = await _children(core, reader.id)
    assert writer.state.subagent_of.tools == ["read_file"]
    assert writer.state.approval_mode == "yolo"


async def test_issue31_item2_the_explorer_only_reads(
    core_factory: Any, workspace: Path, tmp_path: Path, config_home: Path
) -> None:
    spec = write_script(
        tmp_path / "s.json",
        _parent(task_call("find", "EXPLORE where", "t1", agent="explorer")),
        {"EXPLORE": [[call("grep", {"pattern": "Hello"}, "g")], [{"text": "found: {last_tool_results}"}]]},
    )
    core = await core_factory(spec)
    parent = await core.create_session([workspace], approval_mode="yolo")
    events = await collect(parent.advance(UserPrompt("go")))
    assert "README.md" in text_of(events)
    [child] = await _children(core, parent.id)
    tools = child.tools()
    assert set(tools) == {"read_file", "read_many_files", "list_directory", "glob", "grep"}
    assert all(t.kind == ToolKind.READ for t in tools.values())
    prompt = child.instructions.text(child.state, tools)
    assert "# Your role\nYou are a subagent" in prompt and "You cannot change files" in prompt


async def test_issue31_item2_an_unknown_type_fails_the_call_with_the_types(
    core_factory: Any, workspace: Path, tmp_path: Path, config_home: Path
) -> None:
    spec = write_script(tmp_path / "s.json", _parent(task_call("x", "X", "t1", agent="wizard")))
    core = await core_factory(spec)
    parent = await core.create_session([workspace])
    events = await collect(parent.advance(UserPrompt("go")))
    assert "no subagent type 'wizard'; the types are: explorer, general-purpose" in text_of(events)


def test_issue31_item2_the_documented_example_parses() -> None:
    """examples/subagents (docs/subagents.md): the type file and the script with its subagent's
    conversation."""
    example = Path(__file__).parents[4] / "examples" / "subagents"
    path = example / ".devagent" / "agents" / "test-runner.md"
    agent = parse_type(path.read_text(), str(path))
    assert agent.name == "test-runner"
    assert agent.tools == ("read_file", "grep", "glob", "run_shell_command")
    data = json.loads((example / "script.json").read_text())
    assert len(parse_script(data)) == 2
    [(prefix, steps)] = parse_conversations(data)
    assert prefix == "TESTS:" and len(steps) == 2
    assert data["steps"][0]["items"][1]["tool_call"]["args"]["prompt"].startswith(prefix)


def test_issue31_item1_a_bad_scripted_conversation_names_its_place() -> None:
    bad = {"steps": [[{"text": "x"}]], "conversations": [{"first_prompt": "A", "steps": [[{"txt": "x"}]]}]}
    with pytest.raises(ModelConfigError, match=r"conversations\[0\]\.steps\[0\]\[0\]"):
        parse_conversations(bad)
    with pytest.raises(ModelConfigError, match=r"conversations\[0\]\.first_prompt"):
        parse_conversations({"steps": [], "conversations": [{"first_prompt": "", "steps": [[]]}]})
