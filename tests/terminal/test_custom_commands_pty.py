"""Custom slash commands in the terminal: Tab completes a workspace's command (with its
description in the menu), and running it sends the expanded text to the model (a pty)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.terminal.test_chat_pty import Term, _script, term  # noqa: F401  (the fixture)


def test_issue32_item3_tab_completes_a_custom_command_and_runs_it(
    term: Callable[..., Term],  # noqa: F811
    tmp_path: Path,
    workspace: Path,
) -> None:
    folder = workspace / ".devagent" / "commands" / "git"
    folder.mkdir(parents=True)
    (folder / "summary.md").write_text(
        "---\ndescription: Summarise recent commits\n---\nSummarise the last $1 commits.\n"
    )
    model = _script(tmp_path, [{"items": [{"text": "MODEL GOT <<{last_user}>>"}]}])
    t = term(
        "chat",
        "--model",
        model,
        "--db",
        f"sqlite+aiosqlite:///{tmp_path / 'cmds.db'}",
        env={"XDG_CONFIG_HOME": str(tmp_path / "config")},
    )
    t.prompt()
    t.p.send("/git:su")
    t.expect("Summarise recent commits")  # the completion menu shows the command's description
    t.p.send("\t 5\r")
    t.expect(r"MODEL GOT <<Summarise the last 5 commits\.>>")
    assert t.leave() == 0
