"""Issue 37 item 10, what a new user met in `devagent chat` (a real pty, read with pyte): /help lists
the terminal's own commands too; leaving says the command line that goes on with the
conversation; a call the user refused is shown refused when the conversation is shown again."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from tests.a2a.procs import TOKEN, serve_argv, serving
from tests.conftest import Script
from tests.core_helpers import shell_call
from tests.terminal.screen import PtyScreen


def _prompt_after(said: str) -> Callable[[str], bool]:
    """The terminal shows `said`, then the prompt again."""

    def test(text: str) -> bool:
        return said in text and any(line.startswith("›") for line in text.rpartition(said)[2].splitlines())

    return test


def test_issue37_item10_help_lists_the_terminals_own_commands(
    screens: Callable[..., PtyScreen], script: Script, tmp_path: Path, workspace: Path
) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'h.db'}"
    s = screens(workspace, "chat", "--model", script([]), "--db", db)
    s.wait_for_line("›")
    s.send("/help\r")
    s.wait_for(_prompt_after("This terminal's own commands:"))
    lines = s.lines()
    assert any(line.strip().startswith("/init") for line in lines)  # the session's commands
    own = lines[lines.index("This terminal's own commands:") + 1 :]
    for name in ("/exit /quit", "/thoughts", "/approval", "/status"):
        assert any(line.strip().startswith(name) for line in own), (name, own)
    s.send("\x04")
    assert s.exit_status() == 0
    assert "To go on with this conversation" not in s.text()  # (nothing was said: nothing to go on with)


STEPS = [{"items": [shell_call("echo hi")]}, {"items": [{"text": "model read: {last_tool_results}"}]}]
REFUSED = "⊘ run_shell_command: the user declined to run this call"


def _refuse_then_leave(s: PtyScreen) -> str:
    """STEPS' command refused, then Ctrl-D; the line printed on leaving."""
    s.wait_for_line("›")
    s.send("go\r")
    s.wait_for_line("Allow echo hi?")
    s.send("n")
    s.wait_for_line("Why not")
    s.send("\r")
    s.wait_for(_prompt_after("model read: "))
    assert REFUSED in s.text(), s.text()
    s.send("\x04")
    assert s.exit_status() == 0
    return next(line for line in s.lines() if line.startswith("To go on with this conversation:"))


def _shown_again(s: PtyScreen) -> None:
    """The conversation shown again: the refused call is refused, never checked."""
    s.wait_for(_prompt_after("── the conversation goes on from here ──"))
    shown = s.text()
    assert "› go" in shown and "model read: " in shown, shown
    assert REFUSED in shown and "✓ run_shell_command" not in shown, shown
    s.send("\x04")
    assert s.exit_status() == 0


def test_issue37_item10_ctrl_d_says_how_to_go_on_and_a_refused_call_replays_refused(
    screens: Callable[..., PtyScreen], script: Script, tmp_path: Path, workspace: Path
) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'r.db'}"
    hint = _refuse_then_leave(screens(workspace, "chat", "--model", script(STEPS), "--db", db))
    found = re.search(r"devagent chat --resume (\S+)", hint)
    assert found is not None and "devagent chat --continue" in hint, hint
    _shown_again(screens(workspace, "chat", "--resume", found.group(1), "--db", db))


def test_issue37_item10_chat_url_says_how_to_go_on_and_a_refused_call_replays_refused(
    screens: Callable[..., PtyScreen], script: Script, tmp_path: Path, workspace: Path
) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'srv.db'}"
    args = serve_argv(db, workspace, script(STEPS), "--no-sandbox")
    with serving(args, tmp_path / "serve.log") as srv:
        hint = _refuse_then_leave(screens(workspace, "chat", "--url", srv.url, "--token", TOKEN))
        found = re.search(rf"devagent chat --url {re.escape(srv.url)} --resume (\S+)", hint)
        assert found is not None, hint
        _shown_again(
            screens(workspace, "chat", "--url", srv.url, "--token", TOKEN, "--resume", found.group(1))
        )
