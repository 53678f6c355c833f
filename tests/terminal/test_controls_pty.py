"""Issue 37 item 1: text the model (or a command it runs) chose never drives the terminal. The real
`devagent chat` (local, and `--url` against a real `devagent serve`) and `devagent run` run in a
pseudo-terminal read by a VT emulator (pyte): the model's answer, the command of a permission
prompt, a question and its choices, and the command's output carry CSI, OSC 52 (the clipboard),
window titles, a C1 CSI (U+009B), bells, backspaces and carriage returns. The screen shows each of
them escaped, the permission prompt shows the whole command (not "Allow ls -la?") and answers,
and none of those bytes is in what the program wrote to the terminal."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.a2a.procs import TOKEN, serve_argv, serving
from tests.conftest import Script
from tests.core_helpers import ask_call, shell_call
from tests.terminal.screen import PtyScreen

# The model's answer: the clipboard (OSC 52), the window title (OSC 0), a C1 CSI, a bell,
# backspaces and a carriage return that would write over the line.
ANSWER = (
    "Plan: \x1b]52;c;UFdORUQ=\x07 copied, \x1b]0;ANSWER-TITLE\x07 titled, "
    "\x9b31mred\x1b[0m, ok\x08\x08XX\rOVER."
)
ANSWER_SHOWN = (
    r"Plan: \x1b]52;c;UFdORUQ=\x07 copied, \x1b]0;ANSWER-TITLE\x07 titled, "
    r"\x9b31mred\x1b[0m, ok\x08\x08XX\rOVER."
)
# The command: raw, `ESC[24D ls -la ESC[18D` moved the cursor back over it, so that the prompt read
# "Allow ls -la?"; then a clipboard write, a title and a C1 byte (after a `#`: the shell ignores
# them). Its first part prints the same kinds of bytes, as output.
COMMAND = (
    r"printf 'OUT\033]52;c;T1VU\007|\302\233|\033]2;OUT-TITLE\007END\n'; "
    "echo PWNED > pwned.txt\x1b[24D ls -la \x1b[18D #\x1b]52;c;UFdORUQ=\x07\x1b]0;PWNED-TITLE\x07\x9b2K"
)
COMMAND_SHOWN = (
    r"printf 'OUT\033]52;c;T1VU\007|\302\233|\033]2;OUT-TITLE\007END\n'; "
    r"echo PWNED > pwned.txt\x1b[24D ls -la \x1b[18D #\x1b]52;c;UFdORUQ=\x07\x1b]0;PWNED-TITLE\x07\x9b2K"
)
OUTPUT_SHOWN = r"OUT\x1b]52;c;T1VU\x07|\x9b|\x1b]2;OUT-TITLE\x07END"
QUESTION = "Pick\x1b[2J a colour\x1b]0;Q-TITLE\x07"
QUESTION_SHOWN = r"Pick\x1b[2J a colour\x1b]0;Q-TITLE\x07"
CHOICES = ["Red\x1b[31m", "Gr\x9been"]
CHOICES_SHOWN = [r"1. Red\x1b[31m", r"2. Gr\x9been"]
GOT_SHOWN = r"Got: The user answered: Gr\x9been"

THOUGHT = "Thinking \x1b]52;c;VEhPVUdIVA==\x07 \x1b[1Ahard"
THOUGHT_SHOWN = r"Thinking \x1b]52;c;VEhPVUdIVA==\x07 \x1b[1Ahard"

STEPS = [
    {"items": [{"thinking": THOUGHT}, {"text": ANSWER}, shell_call(COMMAND)]},
    {"items": [ask_call(QUESTION, CHOICES)]},
    {"items": [{"text": "Got: {last_tool_results}"}]},
]


def _through_the_turn(s: PtyScreen, workspace: Path, allow: str, answer: str) -> None:
    """STEPS' turn as the terminal shows it: the permission prompt with the whole command, allowed
    with `allow`; the question and its choices, answered with `answer`; the answer it got."""
    allow_line = s.wait_for_line("Allow")
    assert allow_line.startswith(f"Allow {COMMAND_SHOWN}?"), allow_line
    assert s.wait_for_line("$ ").startswith(f"$ {COMMAND_SHOWN}")
    assert ANSWER_SHOWN in s.text() and THOUGHT_SHOWN in s.text()
    s.send(allow)
    s.wait_for(OUTPUT_SHOWN)
    s.wait_for(CHOICES_SHOWN[1])
    assert QUESTION_SHOWN in s.text() and CHOICES_SHOWN[0] in s.text()
    s.wait_for_line("Answer")
    s.send(answer)
    s.wait_for(GOT_SHOWN)
    # the allowed command ran as it was shown: its file has the escape in its name
    assert (workspace / "pwned.txt\x1b[24D").read_text() == "PWNED ls -la \x1b[18D\n"


def _prompt_after_the_turn(text: str) -> bool:
    return text.partition(GOT_SHOWN)[2].lstrip().startswith("›")


def _chat_through_the_turn(s: PtyScreen, workspace: Path) -> None:
    """`devagent chat` (local or `--url`): "go" said at its prompt, STEPS' turn through, its prompt
    again, then Ctrl-D: it ends with status 0."""
    s.wait_for_line("›")
    s.send("go\r")
    _through_the_turn(s, workspace, "y", "2\r")
    s.wait_for(_prompt_after_the_turn)
    s.send("\x04")
    assert s.exit_status() == 0


def _nothing_raw_reached_the_terminal(s: PtyScreen) -> None:
    raw = s.raw
    assert b"\x1b]" not in raw  # no OSC: no clipboard write, no window title
    assert "\x9b" not in raw.decode("utf-8", "replace")  # no C1 CSI
    # (an escape's text is drawn in reverse video: a style's own sequence may follow "pwned.txt")
    hostile_bytes = (
        b"pwned.txt\x1b[24D",
        b"\x1b[24D ls",
        b"ls -la \x1b[18D",
        b"\x1b[2J a colour",
        b"\x1b[1Ahard",
    )
    for hostile in hostile_bytes:
        assert hostile not in raw, hostile
    assert b"\x08\x08XX" not in raw and b"XX\rOVER" not in raw
    assert s.screen.title == "" and s.screen.icon_name == ""  # the emulator saw no title set


def test_issue37_item1_chat_shows_every_control_escaped(
    screens: Callable[..., PtyScreen], script: Script, tmp_path: Path, workspace: Path
) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'c.db'}"
    s = screens(workspace, "chat", "--model", script(STEPS), "--db", db, "--no-sandbox")
    _chat_through_the_turn(s, workspace)
    _nothing_raw_reached_the_terminal(s)


def test_issue37_item1_chat_url_shows_every_control_escaped(
    screens: Callable[..., PtyScreen], script: Script, tmp_path: Path, workspace: Path
) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'srv.db'}"
    args = serve_argv(db, workspace, script(STEPS), "--no-sandbox")
    with serving(args, tmp_path / "serve.log") as srv:
        s = screens(workspace, "chat", "--url", srv.url, "--token", TOKEN)
        _chat_through_the_turn(s, workspace)
    _nothing_raw_reached_the_terminal(s)


def test_issue37_item1_run_shows_every_control_escaped(
    screens: Callable[..., PtyScreen], script: Script, tmp_path: Path, workspace: Path
) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'r.db'}"
    s = screens(workspace, "run", "--model", script(STEPS), "--db", db, "--no-sandbox", "go")
    _through_the_turn(s, workspace, "y\r", "2\r")
    assert s.exit_status() == 0
    _nothing_raw_reached_the_terminal(s)
