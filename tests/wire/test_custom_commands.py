"""Custom slash commands over the wire: listed in `initialize`'s slash commands, and a prompt
`/NAME ARGS` reaches the model as the command's expanded text (a real subprocess)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.wire.conftest import WireProc, text_of

ECHO = [{"items": [{"text": "MODEL GOT <<{last_user}>>"}]}]


def test_issue32_item3_listed_by_initialize_and_expanded_for_the_model(
    start_wire: Callable[..., WireProc], wire_env: dict[str, str], work_dir: Path, tmp_path: Path
) -> None:
    wire_env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    user = tmp_path / "config" / "devagent" / "commands"
    user.mkdir(parents=True)
    (user / "review.md").write_text("---\ndescription: Review a file\n---\nReview $1 for $2.\n")
    repo = work_dir / ".devagent" / "commands"
    repo.mkdir(parents=True)
    (repo / "review.md").write_text("The repository's review: never used.\n")
    (repo / "changelog.md").write_text("Write the changelog entry for $ARGUMENTS.\n")
    w = start_wire(ECHO * 3)
    commands = {c["name"]: c for c in w.initialize()["result"]["slash_commands"]}
    assert commands["review"] == {"name": "review", "description": "Review a file", "aliases": []}
    assert commands["changelog"]["description"] == "Write the changelog entry for $ARGUMENTS."
    (repo / "late.md").write_text(
        "Added after initialize: $1\n"
    )  # not the session's: it keeps the list shown
    w.prompt("/review 'src/my app.py' speed")
    msgs = w.until(lambda m: m.get("id") == "p1" and "result" in m)[0]
    assert text_of(msgs) == "MODEL GOT <<Review src/my app.py for speed.>>"
    w.prompt("/changelog version 2.0", "p2")
    msgs = w.until(lambda m: m.get("id") == "p2" and "result" in m)[0]
    assert text_of(msgs) == "MODEL GOT <<Write the changelog entry for version 2.0.>>"
    w.prompt("/late x", "p3")
    msgs = w.until(lambda m: m.get("id") == "p3" and "result" in m)[0]
    assert text_of(msgs) == "MODEL GOT <</late x>>"
    # a second initialize lists the same commands
    assert {c["name"]: c for c in w.initialize()["result"]["slash_commands"]} == commands
    assert w.close() == 0
