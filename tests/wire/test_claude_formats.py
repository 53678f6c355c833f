"""Claude Code's real command files over the wire, in a real subprocess (issue 38 item 1): listed
by `initialize`, `allowed-tools` narrowing the command's turn, and `model: opus` running the turn
on the model the operator maps opus to (`DEVAGENT_MODEL_ALIASES`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.claude_formats import DATA, copy_into, needs_data
from tests.wire.conftest import WireProc, text_of


@needs_data
def test_issue38_item1_real_commands_listed_narrowed_and_on_their_model(
    start_wire: Callable[..., WireProc], wire_env: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "config" / "devagent"
    commands = copy_into(config, "commands")
    (commands / "deep.md").write_text("---\nmodel: opus\nargument-hint: [topic]\n---\nThink about $1.\n")
    opus = tmp_path / "opus.json"
    opus.write_text(json.dumps({"steps": [[{"text": "OPUS: {last_user}"}]] * 4}))  # at any place
    wire_env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    wire_env["DEVAGENT_MODEL_ALIASES"] = json.dumps({"scripted": {"opus": str(opus)}})
    w = start_wire(
        [
            {"items": [{"tool_call": {"name": "list_directory", "args": {"path": "."}, "id": "ls"}}]},
            {"items": [{"text": "after: {last_tool_results}"}]},
            {"items": [{"text": "never played: the command's model answers"}]},
            {"items": [{"text": "SESSION: {last_user}"}]},
        ]
    )
    listed = {c["name"]: c for c in w.initialize()["result"]["slash_commands"]}
    real = {p.stem for p in (DATA / "commands").glob("*.md")}
    assert set(listed) >= real | {"deep"}
    assert listed["team-debug"]["description"].startswith("Debug issues using competing hypotheses")

    w.prompt("/business-case a bakery")  # allowed-tools: Read, Write, Edit, Glob, Grep, Bash, ...
    msgs = w.until(lambda m: m.get("id") == "p1" and "result" in m)[0]
    assert "after: Error (unknown_tool): unknown tool 'list_directory'" in text_of(msgs)

    w.prompt("/deep caching", "p2")
    msgs = w.until(lambda m: m.get("id") == "p2" and "result" in m)[0]
    assert text_of(msgs) == "OPUS: Think about caching."
    w.prompt("and now?", "p3")
    msgs = w.until(lambda m: m.get("id") == "p3" and "result" in m)[0]
    assert text_of(msgs) == "SESSION: and now?"
    assert w.close() == 0
