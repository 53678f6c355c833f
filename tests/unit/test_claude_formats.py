"""Claude Code's custom commands, agent types and skills working unchanged (issue 38 items 1-3):
the real public files of `shared/data/claude-formats/` (read where they are, never copied into
the project; the tests that need them skip when the folder is missing), and small files of our
own for the other shapes. Sessions run through the real loop with scripted models."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.commands import custom, with_custom
from devagent.agent.events import NeedsInput, ToolKind, TurnEnd, UserPrompt
from devagent.agent.models.aliases import parse_aliases, resolve
from devagent.agent.naming.claude import read_rules
from devagent.agent.subagents.types import load_catalog, narrow, parse_type
from devagent.agent.tools import skill_catalog as skills
from devagent.agent.tools.workspace import Workspace
from tests.claude_formats import DATA, copy_into, needs_data
from tests.core_helpers import (
    call,
    calls_by_id,
    collect,
    notices,
    result_text,
    task_call,
    text_of,
    write_script,
)

# The parent's tools, as a session of a scripted model has them (both editing tools).
PARENT_TOOLS = {
    "read_file": ToolKind.READ,
    "read_many_files": ToolKind.READ,
    "write_file": ToolKind.EDIT,
    "edit": ToolKind.EDIT,
    "apply_patch": ToolKind.EDIT,
    "list_directory": ToolKind.READ,
    "glob": ToolKind.READ,
    "grep": ToolKind.READ,
    "run_shell_command": ToolKind.EXECUTE,
    "write_todos": ToolKind.INTERNAL,
    "task": ToolKind.INTERNAL,
    "srv__search": ToolKind.MCP,
    "srv__drop": ToolKind.MCP,
    "other__a": ToolKind.MCP,
}


@pytest.fixture
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    (home / "devagent").mkdir(parents=True)
    return home / "devagent"


def _link(config_home: Path, kind: str) -> Path:
    return copy_into(config_home, kind)


def _script(path: Path, steps: list[Any], conversations: dict[str, list[Any]] | None = None) -> str:
    return write_script(path, steps, conversations)


# --- item 1: custom commands ----------------------------------------------------------------------


@needs_data
def test_issue38_item1_every_real_command_file_is_a_command(
    config_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _link(config_home, "commands")
    files = sorted(p.stem for p in (DATA / "commands").glob("*.md"))
    with caplog.at_level(logging.WARNING):
        commands = {c.name: c for c in custom.load(config_home, None, [])}
    print(f"\nclaude-formats commands accepted: {len(commands)} of {len(files)}")
    assert sorted(commands) == files and "custom commands" not in caplog.text
    assert commands["ai-review"].model == commands["accessibility-audit"].model == "claude-sonnet-4-0"
    assert commands["team-debug"].argument_hint == (
        "<error-description-or-file> [--hypotheses N] [--scope files|module|project]"
    )
    business = commands["business-case"]
    assert business.tools == ("Read", "Write", "Edit", "Glob", "Grep", "Bash", "WebSearch", "WebFetch")
    assert business.description.startswith("Generate comprehensive investor-ready business case")


@needs_data
async def test_issue38_item1_allowed_tools_narrow_the_commands_turn_and_never_widen(
    core_factory: Any, workspace: Path, tmp_path: Path, config_home: Path
) -> None:
    """The real business-case.md lists Read, Write, Edit, Glob, Grep, Bash, WebSearch, WebFetch:
    its turn offers only those (write_todos and list_directory are gone), web_fetch stays off when
    the operator turned it off, Bash still asks in ask mode; the next turn has every tool again."""
    _link(config_home, "commands")
    spec = _script(
        tmp_path / "s.json",
        [
            [
                call("list_directory", {"path": "."}, "ls"),
                call("run_shell_command", {"command": "echo hi"}, "sh"),
            ],
            [{"text": "after: {last_tool_results}"}],
            [{"text": "plain turn"}],
        ],
    )
    core = await core_factory(spec, web_fetch=False)
    session = await core.create_session([workspace], approval_mode="ask")
    everything = set(session.tools())
    assert {"list_directory", "write_todos"} <= everything and "web_fetch" not in everything

    turn = session.advance(UserPrompt("/business-case a bakery"))
    events = await collect(turn)
    narrowed = set(session.tools())
    assert narrowed == everything - {
        "list_directory",
        "write_todos",
        "task",
        "save_memory",
        "skill",
        "ask_user",
        "background_process",
    }
    assert "web_fetch" not in narrowed and "run_shell_command" in narrowed
    pause = events[-1]
    assert isinstance(pause, NeedsInput) and [c.name for c in pause.calls] == ["run_shell_command"]
    assert session.state.turn_scope is not None and session.state.turn_scope.command == "business-case"

    # the narrowing holds for the whole turn, across its pause, in a session loaded afresh
    core2 = await core_factory(spec, db=core.config.db_url, web_fetch=False)
    again = await core2.get_session(session.id)
    assert set(again.tools()) == narrowed
    events = await collect(again.advance(_approve(pause)))
    assert "unknown tool 'list_directory'" in text_of(events) and "hi" in text_of(events)
    assert isinstance(events[-1], TurnEnd) and again.state.turn_scope is None
    assert set(again.tools()) == everything
    events = await collect(again.advance(UserPrompt("hello")))
    assert text_of(events) == "plain turn"


def _approve(pause: NeedsInput) -> Any:
    from devagent.agent.events import Decision, Resume

    return Resume([Decision(c.id, "proceed_once") for c in pause.calls], [])


async def test_issue38_item1_a_commands_model_runs_its_turn_where_callers_may_choose(
    core_factory: Any, workspace: Path, tmp_path: Path, config_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`model: opus` on a session of the scripted provider, which the operator maps opus on: the
    command's turn is answered by that model, the next plain turn by the session's. Where the
    server does not let callers choose models, the key is left out with a log line."""
    custom_folder = config_home / "commands"
    custom_folder.mkdir()
    (custom_folder / "deep.md").write_text(
        "---\nmodel: opus\ndescription: Think hard\n---\nThink about $1.\n"
    )
    opus = tmp_path / "opus.json"
    _script(opus, [[{"text": "OPUS: {last_user}"}]])
    spec = _script(tmp_path / "s.json", [[{"text": "SESSION: {last_user}"}]] * 3)
    aliases = parse_aliases({"scripted": {"opus": str(opus)}})
    core = await core_factory(spec, model_aliases=aliases)
    session = await core.create_session([workspace])
    events = await collect(session.advance(UserPrompt("/deep caching")))
    assert text_of(events) == "OPUS: Think about caching."
    assert session.state.model == "" and session.model_name == spec  # the session's stays
    assert text_of(await collect(session.advance(UserPrompt("and now?")))) == "SESSION: and now?"

    closed = await core_factory(spec, model_aliases=aliases, allow_client_model=False)
    other = await closed.create_session([workspace])
    with caplog.at_level(logging.INFO, logger="devagent.session"):
        events = await collect(other.advance(UserPrompt("/deep caching")))
    assert text_of(events).startswith("SESSION: Think about caching.")
    assert "asks for the model 'opus': callers may not choose models here" in caplog.text


@needs_data
async def test_issue38_item1_every_real_command_runs_through_the_loop(
    core_factory: Any, workspace: Path, tmp_path: Path, config_home: Path
) -> None:
    """Each real command's turn, on a scripted model that echoes the message it got: its
    $ARGUMENTS filled, the turn finished. ai-review.md and accessibility-audit.md ask for
    claude-sonnet-4-0: on a provider with no sonnet mapped, the session's model answers and a
    notice says why."""
    _link(config_home, "commands")
    names = sorted(p.stem for p in (DATA / "commands").glob("*.md"))
    spec = _script(tmp_path / "s.json", [[{"text": "GOT: {last_user}"}]] * len(names))
    core = await core_factory(spec)
    session = await core.create_session([workspace])
    working = []
    for name in names:
        events = await collect(session.advance(UserPrompt(f"/{name} the-argument")))
        said = notices(events)
        sent = await _last_prompt(session)
        assert "the-argument" in text_of(events) and "the-argument" in sent, name
        if name == "business-case":  # no $ARGUMENTS: the arguments follow; its amounts stay
            assert sent.endswith("\n\nArguments: the-argument") and "Total Raise: $5.0M\n" in sent
        assert isinstance(events[-1], TurnEnd) and events[-1].reason == "finished", name
        if name in ("ai-review", "accessibility-audit"):
            assert said == [
                f"/{name}: the model 'claude-sonnet-4-0' has no counterpart on the provider 'scripted' (the "
                "operator maps Claude's model names with the `model_aliases` setting): "
                f"scripted:{Path(spec).name} is used"
            ]
        else:
            assert said == [], (name, said)
        working.append(name)
    print(f"\nclaude-formats commands working through the loop: {len(working)} of {len(names)}")
    assert working == names


def test_issue38_item1_amounts_of_money_are_not_placeholders() -> None:
    """business-case.md has no $ARGUMENTS but many amounts ($5.0M, $2.0M, $X,XXX): they stay as
    written and the arguments follow the prompt."""
    body = "Total Raise: $5.0M\n- Seed: $2M, $5,000 or $1k\n"
    assert custom.expand(body, "a bakery") == body.rstrip() + "\n\nArguments: a bakery"
    assert custom.expand("Raise $1 for $2.", "$5.0M growth") == "Raise $5.0M for growth."


async def _last_prompt(session: Any) -> str:
    from pydantic_ai import messages as pm

    for m in reversed(await session.messages()):
        if isinstance(m, pm.ModelRequest):
            for p in m.parts:
                if isinstance(p, pm.UserPromptPart) and isinstance(p.content, str):
                    return p.content
    return ""


def test_issue38_item1_our_own_shapes_hints_display_keys_and_documents(
    tmp_path: Path, config_home: Path
) -> None:
    folder = config_home / "commands"
    files = {
        "listed.md": "---\nargument-hint: [message]\ndescription: One\n---\nSay $1\n",
        "several.md": "---\nargument-hint:\n  - file\n  - focus\n---\nRead $1\n",
        "loose.md": "---\nargument-hint: [pr-number] [priority]\ndescription: Fix: a PR\n---\nFix $1\n",
        "hidden.md": (
            '---\ndisable-model-invocation: true\nhide-from-slash-command-tool: "true"\n'
            "allowed-tools: Bash(git status:*), Bash(git diff:*), mcp__github__get_pr, Read\n---\nLook.\n"
        ),
        "unreadable.md": "---\ndescription: Odd: yes\nallowed: x\n  allowed-tools: Read\n---\nGo.\n",
        "README.md": "# My commands\nThese are my commands.\n",
        "git/README.md": "# Git commands\n",
        "git/readme.md": "# git\n",
        "git/CHANGELOG.md": "- added\n",
        "git/push.md": "Push it.\n",
    }
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    commands = {c.name: c for c in custom.load(config_home, None, [])}
    assert sorted(commands) == ["git:push", "hidden", "listed", "loose", "several", "unreadable"]
    assert commands["listed"].argument_hint == "[message]"
    assert commands["several"].argument_hint == "[file, focus]"
    assert (
        commands["loose"].argument_hint == "[pr-number] [priority]"
        and commands["loose"].description == "Fix: a PR"
    )
    hidden = commands["hidden"]
    assert hidden.tools == ("Bash(git status:*)", "Bash(git diff:*)", "mcp__github__get_pr", "Read")
    rules = read_rules(hidden.tools)
    assert [
        n
        for n in ("run_shell_command", "github__get_pr", "github__merge", "read_file", "edit")
        if rules.allows(n)
    ] == [
        "run_shell_command",
        "github__get_pr",
        "read_file",
    ]
    # allowed-tools named but not readable as a key: the command's turn gets no tool at all
    assert commands["unreadable"].tools == () and commands["unreadable"].description.startswith("Odd: yes")
    registry = with_custom(config_home, Workspace([tmp_path]))
    listed = registry.find(["listed"])
    assert listed is not None and listed.usage() == "[message]"


# --- item 2: agent types ------------------------------------------------------------------------


@needs_data
def test_issue38_item2_every_real_agent_file_is_a_type_with_its_tools(
    tmp_path: Path, config_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _link(config_home, "agents")
    with caplog.at_level(logging.WARNING):
        catalog = load_catalog(config_home, Workspace([tmp_path]), workspace_models=False)
    files = sorted((DATA / "agents").glob("*.md"))
    mine = {n: t for n, t in catalog.types.items() if t.source != "built-in"}
    print(f"\nclaude-formats agents accepted: {len(mine)} of {len(files)}")
    assert len(mine) == len(files) and not catalog.warnings
    tools = {n: narrow(t, PARENT_TOOLS, keep_task=True) for n, t in mine.items()}
    every_edit = ["read_file", "read_many_files", "write_file", "edit", "apply_patch", "glob", "grep"]
    assert tools["api-designer"] == ([*every_edit, "run_shell_command"], [])
    assert tools["backend-developer"] == tools["api-designer"]
    assert tools["team-debugger"] == (
        ["read_file", "read_many_files", "glob", "grep", "run_shell_command"],
        ["TaskList", "TaskGet", "TaskUpdate", "SendMessage"],
    )
    assert tools["api-scaffolding-backend-architect"] == (list(PARENT_TOOLS), [])  # no tools: the parent's
    assert {n: t.model for n, t in mine.items()} == {
        "api-designer": "sonnet",
        "backend-developer": "sonnet",
        "team-debugger": "opus",
        "api-scaffolding-backend-architect": "inherit",
    }


@needs_data
async def test_issue38_item2_real_opus_and_inherit_types_run_through_the_loop(
    core_factory: Any, workspace: Path, tmp_path: Path, config_home: Path
) -> None:
    """team-debugger (`model: opus`, `tools: Read, Glob, Grep, Bash, TaskList...`) runs on the
    model the operator maps opus to on the parent's provider, with the shell; the architect
    (`model: inherit`) on the parent's model; api-designer (`model: sonnet`, not mapped) on the
    parent's model with a notice."""
    _link(config_home, "agents")
    opus = tmp_path / "opus.json"
    _script(
        opus,
        [
            [call("run_shell_command", {"command": "echo from-opus"}, "sh")],
            [{"text": "opus saw {last_tool_results}"}],
        ],
    )
    parent_steps = [
        {"items": [task_call("debug", "DEBUG the bug", "t1", agent="team-debugger")]},
        {"items": [task_call("design", "ARCH the api", "t2", agent="api-scaffolding-backend-architect")]},
        {"items": [task_call("api", "API design", "t3", agent="api-designer")]},
        {"items": [task_call("backend", "BACKEND work", "t4", agent="backend-developer")]},
        {"items": [{"text": "parent: {last_tool_results}"}]},
    ]
    spec = _script(
        tmp_path / "s.json",
        parent_steps,
        {
            "ARCH": [[{"text": "architect on the parent's model"}]],
            "API": [[{"text": "designer on the parent's model"}]],
            "BACKEND": [
                [call("grep", {"pattern": "Demo"}, "g")],
                [{"text": "backend found {last_tool_results}"}],
            ],
        },
    )
    core = await core_factory(spec, model_aliases={"scripted": {"opus": str(opus)}}, approval_mode="yolo")
    parent = await core.create_session([workspace], approval_mode="yolo")
    events = await collect(parent.advance(UserPrompt("go")))
    results = {cid: result_text(c) for cid, c in calls_by_id(events).items()}
    assert results["t1"].startswith("opus saw from-opus")
    assert "left out: TaskList, TaskGet, TaskUpdate, SendMessage" in results["t1"]
    assert results["t2"] == "architect on the parent's model"
    assert results["t3"] == "designer on the parent's model"
    assert text_of(events).startswith("parent: backend found")
    assert "README.md:1:# Demo project" in text_of(events)
    children = {c.state.subagent_of.agent: c for c in await _children(core, parent.id)}
    assert children["team-debugger"].state.model == f"scripted:{opus}"
    assert children["team-debugger"].state.subagent_of.tools == [
        "read_file",
        "read_many_files",
        "glob",
        "grep",
        "run_shell_command",
    ]
    assert children["api-scaffolding-backend-architect"].state.model == ""  # the parent's (the default)
    assert children["api-designer"].state.model == children["backend-developer"].state.model == ""
    print(f"\nclaude-formats agents working through the loop: {len(children)} of 4")
    assert len(children) == 4
    assert any(
        "subagent type 'api-designer': the model 'sonnet' has no counterpart" in n for n in notices(events)
    )
    assert isinstance(events[-1], TurnEnd) and events[-1].reason == "finished"


async def _children(core: Any, parent_id: str) -> list[Any]:
    found = []
    for sid, _, _ in await core.store.list_sessions(None):
        s = await core.get_session(sid)
        if s is not None and s.state.subagent_of is not None and s.state.subagent_of.session == parent_id:
            found.append(s)
    return found


ANTHROPIC_STYLE = """---
name: code-reviewer
description: Use this agent when a change is ready for review. Examples:

<example>
Context: The user has just written a function.
user: "I've added the parser"
assistant: "I'll use the code-reviewer agent to look at it"
<commentary>
A change is ready: review it.
</commentary>
</example>
tools: Read, Grep, mcp__srv__search, mcp__other
model: sonnet
color: green
---

You review code.
"""


def test_issue38_item2_anthropic_style_front_matter_is_read_leniently_and_never_grants_more() -> None:
    warnings: list[str] = []
    agent = parse_type(ANTHROPIC_STYLE, "code-reviewer.md", warnings)
    assert agent.name == "code-reviewer" and agent.model == "sonnet" and not warnings
    assert agent.description.startswith("Use this agent when a change is ready for review. Examples:")
    assert 'user: "I\'ve added the parser"' in agent.description and agent.description.endswith("</example>")
    assert narrow(agent, PARENT_TOOLS, keep_task=True) == (
        ["read_file", "read_many_files", "grep", "srv__search", "other__a"],
        [],
    )
    # `tools` named where the lenient reading cannot read it: no tools rather than all
    hidden = ANTHROPIC_STYLE.replace("tools: Read", "  tools: Read").replace("color: green\n", "")
    assert narrow(parse_type(hidden, "x.md"), PARENT_TOOLS, keep_task=True)[0] == []
    star = ANTHROPIC_STYLE.replace("tools: Read, Grep, mcp__srv__search, mcp__other", 'tools: "*"')
    assert narrow(parse_type(star, "x.md"), PARENT_TOOLS, keep_task=False)[0] == [
        n for n in PARENT_TOOLS if n != "task"
    ]
    # disallowedTools taken away; one that cannot be read takes everything away
    denied = ANTHROPIC_STYLE.replace("color: green", "disallowedTools: Grep, mcp__srv")
    assert narrow(parse_type(denied, "x.md"), PARENT_TOOLS, keep_task=True)[0] == [
        "read_file",
        "read_many_files",
        "other__a",
    ]
    odd = ANTHROPIC_STYLE.replace("color: green", "color: green\n  disallowedTools: Grep")
    assert narrow(parse_type(odd, "x.md"), PARENT_TOOLS, keep_task=True)[0] == []
    # Claude Code keys devagent does not use: ignored, said once
    extra = ANTHROPIC_STYLE.replace(
        "color: green", "color: green\npermissionMode: bypassPermissions\nmaxTurns: 3"
    )
    parse_type(extra, "extra.md", warnings)
    assert warnings == ["extra.md: keys devagent does not use, ignored: maxTurns, permissionMode"]


def test_issue38_item2_model_names_resolve_on_the_parents_provider() -> None:
    aliases = parse_aliases({"openai": {"sonnet": "gpt-4.1"}, "gemini": {"haiku": "gemini-2.5-flash"}})
    assert resolve("inherit", "openai:gpt-5", aliases).spec == "openai:gpt-5"
    assert resolve("", "openai:gpt-5", aliases).spec == "openai:gpt-5"
    assert resolve("sonnet", "openai:gpt-5", aliases).spec == "openai:gpt-4.1"
    assert (
        resolve("claude-3-5-haiku-20241022", "google:gemini-2.5-pro", aliases).spec
        == "google:gemini-2.5-flash"
    )
    assert resolve("opus", "anthropic:claude-sonnet-4-5", aliases).spec == "anthropic:claude-opus-4-1"
    assert (
        resolve("claude-sonnet-4-0", "anthropic:claude-opus-4-1", aliases).spec
        == "anthropic:claude-sonnet-4-0"
    )
    assert resolve("openai:gpt-4.1-mini", "anthropic:x", aliases).spec == "openai:gpt-4.1-mini"
    kept = resolve("opus", "openai:gpt-5", aliases)
    assert kept.spec == "openai:gpt-5" and "no counterpart on the provider 'openai'" in kept.notice
    for bad in ({"nowhere": {"opus": "x"}}, {"openai": {"gpt": "x"}}, {"openai": {"opus": ""}}, []):
        with pytest.raises(ValueError):
            parse_aliases(bad)


# --- item 3: skills -----------------------------------------------------------------------------


@needs_data
async def test_issue38_item3_every_real_skill_loads_under_its_folders_name_and_is_used(
    core_factory: Any, workspace: Path, tmp_path: Path, config_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _link(config_home, "skills")
    with caplog.at_level(logging.WARNING, logger="devagent.agent.tools.skill_catalog"):
        found = skills.read_user(config_home)
    folders = sorted(p.name for p in (DATA / "skills").iterdir() if (p / "SKILL.md").is_file())
    print(f"\nclaude-formats skills accepted: {len(found)} of {len(folders)}")
    assert sorted(s.name for s in found) == folders
    assert (
        caplog.text.count("WARNING") == 1 and "'c-level-advisor' is not the name of its folder" in caplog.text
    )
    retro = next(s for s in found if s.name == "retro")
    assert retro.description.endswith("Usage: /retro analyze <retro_data.json>")
    spec = _script(
        tmp_path / "s.json",
        [
            [call("skill", {"name": n}, n) for n in folders],
            [{"text": "loaded: {last_tool_results}"}],
        ],
    )
    core = await core_factory(spec)
    session = await core.create_session([workspace], approval_mode="yolo")
    assert "- c-level-skills (user): 10 C-level advisory agent skills" in session.skills.listing()
    events = await collect(session.advance(UserPrompt("advise me")))
    loaded = {cid: result_text(c) for cid, c in calls_by_id(events).items()}
    for name in folders:  # each one's instructions, under its folder's name
        body = (DATA / "skills" / name / "SKILL.md").read_text().split("\n---\n", 1)[1].strip()
        assert loaded[name].startswith(f'<skill name="{name}"') and body[:200] in loaded[name], name
    print(f"\nclaude-formats skills working through the loop: {len(loaded)} of {len(folders)}")
    assert "# C-Level Advisory Ecosystem" in loaded["c-level-skills"]


def test_issue38_item3_our_own_loose_skills(tmp_path: Path) -> None:
    cases = {
        "no-name": ("description: Has no name.\n", "no `name`"),
        "dash": ("name: -dash\ndescription: - starts with a dash\n", "lowercase"),
        "colon": ("name: colon\ndescription: Reads notes. Usage: /colon <file>\n", None),
        "quoted": ("name: \"quoted\"\ndescription: 'Quoted: still one'\nmetadata:\n  x: 1\n", None),
    }
    for folder, (meta, why) in cases.items():
        warnings: list[str] = []
        skill = skills.parse(f"---\n{meta}---\nDo it.\n", tmp_path / folder, skills.USER, None, warnings)
        assert skill.name == folder and skill.body == "Do it."
        assert (why is None and not warnings) or (len(warnings) == 1 and why in warnings[0]), warnings
    colon = skills.parse(f"---\n{cases['colon'][0]}---\nx\n", tmp_path / "colon", skills.USER)
    assert colon.description == "Reads notes. Usage: /colon <file>"
    dash = skills.parse(f"---\n{cases['dash'][0]}---\nx\n", tmp_path / "dash", skills.USER)
    assert dash.description == "- starts with a dash"
    with pytest.raises(ValueError, match="not lowercase"):
        skills.parse("---\nname: x\ndescription: d\n---\nx\n", tmp_path / "Big Folder", skills.USER)
