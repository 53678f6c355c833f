"""How models trained in Codex edit: `apply_patch <<'EOF' ... EOF` run as a shell command is the
patch it means (asked, shown and applied as one), and a patch after a read with `sed -n` in the
shell goes through; only a file that changed since the model last saw it is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import messages as pm

from devagent.agent.events import (
    Decision,
    FileDiff,
    NeedsInput,
    Resume,
    ToolCall,
    ToolCallStatus,
    ToolCallUpdate,
    TurnEnd,
    UserPrompt,
)
from devagent.agent.tools.shell_patch import patch_of, routed
from devagent.agent.tools.shell_reads import files_shown
from devagent.agent.wording import request_text
from tests.core_helpers import call, collect, text_of, updates

APP = 'def greet():\n    print("Hi")\n\n\ndef other():\n    return 1\n'
PATCH = (
    "*** Begin Patch\n*** Update File: app.py\n@@ def greet():\n"
    '-    print("Hi")\n+    print("Hello")\n*** End Patch'
)
HEREDOC = f"apply_patch <<'EOF'\n{PATCH}\nEOF\n"


def _last(events: list[Any], call_id: str) -> ToolCall:
    return [e.call for e in events if isinstance(e, ToolCallUpdate) and e.call.id == call_id][-1]


@pytest.fixture
def app(workspace: Path) -> Path:
    (workspace / "app.py").write_text(APP)
    return workspace


@pytest.mark.parametrize(
    "command",
    [
        HEREDOC,
        f'applypatch <<"PATCH"\n{PATCH}\nPATCH',
        f"apply_patch <<-EOF\n\t{PATCH}\n\tEOF",
        f"apply_patch '{PATCH}'",
        f"cd . && apply_patch <<'EOF'\n{PATCH}\nEOF",
    ],
)
def test_issue37_item8_apply_patch_commands_are_patches(command: str) -> None:
    assert patch_of(command) == PATCH
    assert routed("run_shell_command", {"command": command}, {"apply_patch"}) == (
        "apply_patch",
        {"input": PATCH},
    )


def test_issue37_item8_only_a_whole_apply_patch_command_is_routed() -> None:
    for command in (
        f"{HEREDOC}pytest -q",  # something runs after it
        f"echo hi && {HEREDOC}",
        "apply_patch --help",
        "apply_patch <<'EOF'\nnot a patch\nEOF",
        "apply_patchx <<'EOF'\n*** Begin Patch\n*** End Patch\nEOF",
    ):
        assert patch_of(command) is None, command
    # Not offered apply_patch, or a background start: the command stays a command.
    assert routed("run_shell_command", {"command": HEREDOC}, {"edit"})[0] == "run_shell_command"
    args = {"command": HEREDOC, "background": True}
    assert routed("run_shell_command", args, {"apply_patch"})[0] == "run_shell_command"
    # Paths follow the directory the command would have run in.
    args = {"command": f"cd pkg && {HEREDOC}", "directory": "src"}
    nested = routed("run_shell_command", args, {"apply_patch"})
    assert "*** Update File: src/pkg/app.py" in nested[1]["input"]


async def test_issue37_item8_codex_heredoc_shell_call_is_asked_and_applied_as_a_patch(
    core_factory: Any, script: Any, app: Path
) -> None:
    spec = script(
        [
            [call("run_shell_command", {"command": HEREDOC}, "p1")],
            [{"text": "result: {last_tool_results}"}],
        ]
    )
    core = await core_factory(spec)
    s = await core.create_session([app], approval_mode="ask")
    events = await collect(s.advance(UserPrompt("say hello")))
    end = events[-1]
    assert isinstance(end, NeedsInput) and len(end.calls) == 1
    (waiting,) = end.calls
    # Asked as a patch: the apply_patch tool, kind edit, the file's diff (not a command to run).
    assert waiting.name == "apply_patch" and waiting.kind.value == "edit"
    assert waiting.args == {"input": PATCH} and waiting.description == "Patch app.py"
    assert waiting.confirmation is not None and isinstance(waiting.confirmation.details, FileDiff)
    assert '+    print("Hello")' in waiting.confirmation.details.formatted_diff
    assert request_text(waiting) == "change app.py (+1 -1 lines)"
    assert (app / "app.py").read_text() == APP
    events = await collect(s.advance(Resume(decisions=[Decision("p1", "proceed_once")])))
    assert updates(events, "p1") == [ToolCallStatus.EXECUTING, ToolCallStatus.SUCCEEDED]
    assert (app / "app.py").read_text() == APP.replace('print("Hi")', 'print("Hello")')
    assert isinstance(events[-1], TurnEnd)
    assert "result: Edited app.py" in text_of(events)  # what the model read back
    # The model's own call was a shell command: the result answers it under that name.
    messages = await s.messages()
    returns = [p for m in messages for p in m.parts if isinstance(p, pm.ToolReturnPart)]
    assert [(r.tool_name, r.tool_call_id) for r in returns] == [("run_shell_command", "p1")]
    # A stored view of the conversation shows the patch too.
    (shown,) = [i for i in await s.timeline() if getattr(i, "id", None) == "p1"]
    assert shown.name == "apply_patch" and shown.output is not None and shown.output.diff is not None


async def test_issue37_item8_a_sed_read_then_a_patch_succeeds(
    core_factory: Any, script: Any, app: Path
) -> None:
    # The second patch only adds lines (no line of the file in it): the read alone lets it through.
    (app / "notes.md").write_text("# Notes\n")
    append = "*** Begin Patch\n*** Update File: notes.md\n+- greet says Hello\n*** End Patch"
    spec = script(
        [
            [call("run_shell_command", {"command": "sed -n '1,20p' app.py"}, "r1")],
            [call("apply_patch", {"input": PATCH}, "p1")],
            [call("run_shell_command", {"command": "cat notes.md | head -5"}, "r2")],
            [call("run_shell_command", {"command": f"apply_patch <<'EOF'\n{append}\nEOF"}, "p2")],
            [{"text": "done"}],
        ]
    )
    core = await core_factory(spec, approval_mode="yolo", allowed_approval_modes=("yolo",))
    s = await core.create_session([app], approval_mode="yolo")
    events = await collect(s.advance(UserPrompt("say hello")))
    for cid in ("r1", "p1", "r2", "p2"):
        done = _last(events, cid)
        assert done.status is ToolCallStatus.SUCCEEDED, (cid, done.error)
    assert (app / "app.py").read_text() == APP.replace('print("Hi")', 'print("Hello")')
    assert (app / "notes.md").read_text() == "# Notes\n- greet says Hello\n"


@pytest.mark.parametrize("how", ["read_file", "sed"])
async def test_issue37_item8_a_patch_on_a_file_changed_since_the_model_saw_it_is_refused(
    core_factory: Any, script: Any, app: Path, how: str
) -> None:
    read = (
        call("read_file", {"path": "app.py"}, "r1")
        if how == "read_file"
        else call("run_shell_command", {"command": "sed -n '1,20p' app.py"}, "r1")
    )
    spec = script(
        [
            [read],
            [{"text": "read it"}],
            [call("run_shell_command", {"command": HEREDOC}, "p1")],
            [{"text": "done"}],
        ]
    )
    core = await core_factory(spec, approval_mode="yolo", allowed_approval_modes=("yolo",))
    s = await core.create_session([app], approval_mode="yolo")
    events = await collect(s.advance(UserPrompt("look at app.py")))
    assert _last(events, "r1").status is ToolCallStatus.SUCCEEDED
    # Behind the model's back: another line changes; the lines the patch quotes are still there.
    changed = APP.replace("return 1", "return 2")
    (app / "app.py").write_text(changed)
    events = await collect(s.advance(UserPrompt("say hello")))
    refused = _last(events, "p1")
    assert refused.name == "apply_patch" and refused.status is ToolCallStatus.FAILED
    assert refused.error is not None and refused.error.type == "file_changed"
    assert "app.py changed since this session last read or wrote it" in refused.error.message
    assert (app / "app.py").read_text() == changed


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        ("sed -n '1,200p' app.py", ["app.py"]),
        ("cat -n a.py b.py", ["a.py", "b.py"]),
        ("head -n 50 x.py | tail -5", ["x.py"]),
        ("rg -n 'def greet' src/app.py", ["src/app.py"]),
        ("grep -e foo a.py", ["a.py"]),
        ("cd src && nl -ba m.py", ["src/m.py"]),
        ("sed -i 's/a/b/' app.py", []),  # a write
        ("sed -n '/x/w out' app.py", []),  # a script that may write
        ("cat a.py > b.py", []),
        ("cat $(ls)", []),
        ("cat a.py; rm b.py", []),
        ("python app.py", []),
        ("rg foo", []),  # no file named
    ],
)
def test_issue37_item8_which_shell_commands_count_as_reads(command: str, shown: list[str]) -> None:
    assert files_shown(command) == shown
