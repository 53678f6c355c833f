"""A subagent in the terminal (`devagent chat` in a real pseudo-terminal): its write is asked at
the terminal's own permission prompt, named with the subagent, and answered with one key."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.core_helpers import notes_by_a_subagent
from tests.terminal.test_chat_pty import Term, term  # noqa: F401  (the fixture)


def test_issue31_item3_terminal_subagent_write_asked_at_the_prompt(
    term: Callable[..., Term],  # noqa: F811
    tmp_path: Path,
    workspace: Path,
) -> None:
    model = notes_by_a_subagent(tmp_path / "sub.json")
    t = term("chat", "--model", model, "--db", f"sqlite+aiosqlite:///{tmp_path / 'chat.db'}")
    t.prompt()
    t.line("make notes")
    out = t.expect("Allow")
    assert "write the notes: Write notes.txt" in out and "+hello" in out
    t.expect(r"\[e\] edit first")
    t.key("y")
    t.expect("parent: I wrote notes.txt.")
    assert (workspace / "notes.txt").read_text() == "hello\n"
    assert t.leave() == 0
