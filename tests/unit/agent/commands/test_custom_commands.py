"""Custom slash commands at the core: Markdown prompt files from the user's config folder and the
workspace's `.devagent/commands/`, their expansion, precedence, the confined read, and a session
running one (the scripted model echoes the user message it received)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.commands import custom, registry, with_custom
from devagent.agent.commands.custom import expand, parse
from devagent.agent.events import TurnEnd, UserPrompt
from devagent.agent.tools.workspace import Workspace
from tests.core_helpers import collect, text_of, write_script


@pytest.fixture
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home / "devagent"


def _command(folder: Path, name: str, text: str) -> Path:
    path = folder / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


REVIEW = (
    "---\ndescription: Review a file\nargument-hint: <file> [focus]\n---\n"
    "Review $1 for $2.\nAll: $ARGUMENTS\n"
)


def test_issue32_item3_expansion_of_arguments_and_positions() -> None:
    body = "Review $1 for $2.\nAll: $ARGUMENTS\n"
    assert expand(body, "src/app.py security") == "Review src/app.py for security.\nAll: src/app.py security"
    # quotes group words, as in a shell; $ARGUMENTS is the text as typed
    assert expand(body, "\"my file.py\" 'error handling'") == (
        "Review my file.py for error handling.\nAll: \"my file.py\" 'error handling'"
    )
    # a missing position is empty; an unbalanced quote falls back to plain words
    assert expand(body, "only") == "Review only for .\nAll: only"
    assert expand(body, "") == "Review  for .\nAll:"
    assert expand("Say $1 and $2", 'it"s odd') == 'Say it"s and odd'
    # $10 is the tenth word, not $1 followed by 0
    assert expand("$10|$1", " ".join(str(i) for i in range(1, 11))) == "10|1"
    # no placeholder: the arguments follow the body
    assert expand("Explain the build.\n", "briefly") == "Explain the build.\n\nArguments: briefly"
    assert expand("Explain the build.\n", "  ") == "Explain the build."


def test_issue32_item3_front_matter_is_optional_and_checked() -> None:
    c = parse(REVIEW, "review", "/x/review.md")
    assert (c.description, c.argument_hint, c.body) == (
        "Review a file",
        "<file> [focus]",
        "Review $1 for $2.\nAll: $ARGUMENTS\n",
    )
    plain = parse("Summarise the open TODOs in this project.\n", "todos", "/x/todos.md")
    assert plain.description == "Summarise the open TODOs in this project."
    assert plain.argument_hint == ""
    for bad, why in [
        ("---\ndescription: [1, 2]\n---\nrun", "must be a string"),
        ("---\ndescription: x\n---\n   \n", "no prompt"),
        ("---\ndescription: x\nno end\n", "closing"),
    ]:
        with pytest.raises(ValueError, match=why):
            parse(bad, "bad", "/x/bad.md")


def test_issue32_item3_precedence_namespaces_and_order(tmp_path: Path, config_home: Path) -> None:
    ws = tmp_path / "ws"
    _command(config_home / "commands", "review", REVIEW)
    _command(config_home / "commands", "help", "I would replace /help.")  # a built-in keeps its name
    _command(config_home / "commands", "usage", "I would replace an alias.")
    _command(ws / ".devagent" / "commands", "review", "The repository's review, never used.")
    _command(
        ws / ".devagent" / "commands", "frontend/component", "---\ndescription: A component\n---\nMake $1."
    )
    _command(ws / ".devagent" / "commands", "deploy", "---\ndescription: no closing line\nbroken")
    (ws / ".devagent" / "commands" / "notes.txt").write_text("not a command")
    commands = with_custom(config_home.parent / "devagent", Workspace([ws]))
    names = [c.name for c in commands.list()]
    builtins = [c.name for c in registry().list()]
    assert names == [*builtins, "frontend:component", "review"]
    review = commands.find(["review"])
    assert review is not None and review.description == "Review a file"
    assert [a.name for a in review.arguments] == ["<file> [focus]"]
    assert commands.find(["help"]) is registry().find(["help"])
    assert registry().find(["review"]) is None  # the built-in registry is untouched


def test_issue32_item3_a_workspace_folder_is_read_through_the_confined_walk(
    tmp_path: Path, config_home: Path
) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    _command(outside, "secret", "A file outside the workspace.")
    _command(outside / "sub", "inner", "Also outside.")
    folder = ws / ".devagent" / "commands"
    folder.mkdir(parents=True)
    os.symlink(outside / "secret.md", folder / "leak.md")  # a file link out of the roots
    os.symlink(outside / "sub", folder / "linked")  # a folder link out of the roots
    _command(folder, "ok", "Fine.")
    found = custom.load(config_home, Workspace([ws]), [])
    assert [c.name for c in found] == ["ok"]
    # the whole folder a link out of the roots: nothing is read
    ws2 = tmp_path / "ws2"
    (ws2 / ".devagent").mkdir(parents=True)
    os.symlink(outside, ws2 / ".devagent" / "commands")
    assert custom.load(config_home, Workspace([ws2]), []) == []


async def test_issue32_item3_a_session_runs_a_command_as_the_user_message(
    core_factory: Any, workspace: Path, tmp_path: Path, config_home: Path
) -> None:
    _command(config_home / "commands", "review", REVIEW)
    _command(workspace / ".devagent" / "commands", "git/summary", "Summarise the last $1 commits.")
    spec = write_script(tmp_path / "s.json", [[{"text": "MODEL GOT <<{last_user}>>"}]] * 4)
    core = await core_factory(spec)
    session = await core.create_session([workspace])
    listed = [c.name for c in session.commands().list()]
    _command(workspace / ".devagent" / "commands", "late", "Too late for this session.")
    assert [c.name for c in session.commands().list()] == listed  # read once per loaded session
    before = await session.request_parameters()

    events = await collect(session.advance(UserPrompt('/review "src/my app.py" speed')))
    assert text_of(events) == 'MODEL GOT <<Review src/my app.py for speed.\nAll: "src/my app.py" speed>>'
    assert isinstance(events[-1], TurnEnd) and events[-1].reason == "finished"

    events = await collect(session.run_command(["git:summary"], "5"))
    assert text_of(events) == "MODEL GOT <<Summarise the last 5 commits.>>"
    events = await collect(session.advance(UserPrompt("/help")))
    assert "  /review <file> [focus]  Review a file\n" in text_of(events)
    # the commands never change the system prompt or the tools
    after = await session.request_parameters()
    assert before == after
    assert "late" not in listed and "git:summary" in listed


def test_issue32_item3_the_documented_example_expands_as_documented(tmp_path: Path) -> None:
    doc = (Path(__file__).parents[4] / "docs" / "commands.md").read_text()
    example = doc.split("```markdown\n", 1)[1].split("```", 1)[0]
    shown = doc.split("sends the model:\n\n```\n", 1)[1].split("```", 1)[0]
    command = parse(example, "review", "review.md")
    assert command.argument_hint == "<file> [concern]"
    expanded = command.expand('"src/app/main.py" error handling')
    head, _, tail = shown.strip().partition("...")
    assert expanded.startswith(head) and expanded.endswith(tail.strip().splitlines()[-1])
