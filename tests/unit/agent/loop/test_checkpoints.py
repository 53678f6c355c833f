"""Checkpoints taken before edits and `/restore` (G5), across restarts (G6)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import messages as pm

from devagent.agent.events import (
    Decision,
    NeedsInput,
    Resume,
    ToolCallStatus,
    ToolCallUpdate,
    TurnEnd,
    UserPrompt,
)
from tests.core_helpers import call, collect, notices, text_of


def git_out(git: str, cwd: Path, *args: str) -> str:
    return subprocess.run([git, *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def last_text(msgs: list[Any]) -> str:
    m = msgs[-1]
    return "".join(p.content for p in m.parts if isinstance(p, pm.TextPart))


STEPS = [
    # README.md is read before step 2 edits it; a read takes no checkpoint
    [
        call("write_file", {"path": "notes.txt", "content": "one\n"}, "w1"),
        call("read_file", {"path": "README.md"}),
    ],
    [{"text": "wrote"}],  # 1
    [call("edit", {"path": "README.md", "old_string": "Hello.", "new_string": "Bonjour."}, "e1")],  # 2
    [{"text": "edited"}],  # 3
    [call("write_file", {"path": "notes.txt", "content": "two\n"}, "w2")],  # 4
    [{"text": "rewrote"}],  # 5
    [{"text": "after the restore: {last_user}"}],  # 6
]


async def after_three_edits(core: Any, workspace: Path) -> Any:
    """A new auto-edit session of `core` in `workspace`, once STEPS' three edits are made."""
    s = await core.create_session([workspace], approval_mode="auto-edit")
    for prompt in ("make notes", "edit the readme", "rewrite the notes"):
        ev = await collect(s.advance(UserPrompt(prompt)))
        assert isinstance(ev[-1], TurnEnd) and ev[-1].reason == "finished", ev
        assert not [e for e in ev if isinstance(e, ToolCallUpdate) and e.call.status is ToolCallStatus.FAILED]
    return s


async def test_g5_edits_take_checkpoints_and_restore_puts_files_and_conversation_back(
    core_factory: Any, script: Any, workspace: Path
) -> None:
    core = await core_factory(script(STEPS), approval_mode="auto-edit")
    s = await after_three_edits(core, workspace)
    assert (workspace / "notes.txt").read_text() == "two\n"
    assert (workspace / "README.md").read_text() == "# Demo project\nBonjour.\n"
    before = len(await s.messages())

    listing = text_of(await collect(s.advance(UserPrompt("/restore"))))
    lines = [ln.strip() for ln in listing.splitlines()[1:]]
    assert [ln.split()[0] for ln in lines] == ["1", "2", "3"]
    assert "Write notes.txt [write_file w1]  files: notes.txt" in lines[0]
    assert "Edit README.md [edit e1]  files: README.md" in lines[1]

    ev = await collect(s.advance(UserPrompt("/restore 2")))
    out = text_of(ev)
    assert "Restored checkpoint 2 (Edit README.md)" in out, (out, notices(ev))
    # every edit from checkpoint 2 on is undone, newest first
    assert (workspace / "README.md").read_text() == "# Demo project\nHello.\n"
    assert (workspace / "notes.txt").read_text() == "one\n"
    # the conversation ends before the step that made the edit, with a note for the model
    msgs = await s.messages()
    assert len(msgs) == 6 < before  # prompt, call, result, "wrote", prompt 2, then the note
    assert "restored checkpoint 2" in last_text(msgs)
    assert isinstance(msgs[-2], pm.ModelRequest)
    assert "edit the readme" in str(msgs[-2].parts[0].content)

    listing = text_of(await collect(s.advance(UserPrompt("/restore"))))
    assert [ln.split()[0] for ln in listing.splitlines()[1:]] == ["1"]
    # the session goes on from there (the script's step = responses in the conversation)
    ev = await collect(s.advance(UserPrompt("continue")))
    assert text_of(ev) == "edited"  # step 3: the restored conversation has 3 responses


async def test_g5_restore_refuses_when_a_file_changed_since(
    core_factory: Any, script: Any, workspace: Path
) -> None:
    core = await core_factory(script(STEPS), approval_mode="auto-edit")
    s = await after_three_edits(core, workspace)
    (workspace / "README.md").write_text("# Demo project\nMy own words.\n")  # the user's change

    ev = await collect(s.advance(UserPrompt("/restore 1")))
    msg = "\n".join(notices(ev))
    assert "Cannot restore checkpoint 1; nothing was changed" in msg
    assert "README.md: changed since the agent's last edit" in msg
    assert "notes.txt" not in msg  # notes.txt is as the agent left it
    assert (workspace / "notes.txt").read_text() == "two\n"  # nothing was changed
    assert (workspace / "README.md").read_text() == "# Demo project\nMy own words.\n"
    assert isinstance(ev[-1], TurnEnd) and ev[-1].reason == "finished"

    # a file already back at the checkpoint's content is fine: nothing to do for it
    (workspace / "README.md").write_text("# Demo project\nHello.\n")
    out = text_of(await collect(s.advance(UserPrompt("/restore 1"))))
    assert "Restored checkpoint 1 (Write notes.txt): notes.txt." in out
    assert not (workspace / "notes.txt").exists()  # it did not exist before checkpoint 1
    assert len(await s.messages()) == 2  # the first prompt and the note


async def test_g5_restore_after_restart_and_outside_the_workspace(
    core_factory: Any, script: Any, workspace: Path, db_url: str
) -> None:
    git = shutil.which("git")
    if git:
        git_out(git, workspace, "init", "-q")
    core = await core_factory(script(STEPS), db=db_url, approval_mode="auto-edit")
    s = await after_three_edits(core, workspace)
    await core.close()
    # nothing but the edits themselves appeared in the workspace
    assert sorted(p.name for p in workspace.iterdir() if p.name != ".git") == ["README.md", "notes.txt"]
    if git:
        assert git_out(git, workspace, "stash", "list") == ""
        assert (
            git_out(git, workspace, "for-each-ref") == ""
        )  # no commits, branches or refs made behind the user's back

    core2 = await core_factory(script(STEPS), db=db_url)
    s2 = await core2.get_session(s.id)
    assert s2 is not None
    assert "3" in text_of(await collect(s2.advance(UserPrompt("/restore"))))
    out = text_of(await collect(s2.advance(UserPrompt("/restore 3"))))
    assert "Restored checkpoint 3" in out
    assert (workspace / "notes.txt").read_text() == "one\n"
    assert (workspace / "README.md").read_text() == "# Demo project\nBonjour.\n"
    ev = await collect(s2.advance(UserPrompt("go on")))
    assert text_of(ev) == "rewrote"  # step 5: 5 responses (two turns, then the note)


async def test_g5_checkpoint_of_a_waiting_step_and_save_memory(
    core_factory: Any, script: Any, workspace: Path
) -> None:
    spec = script(
        [
            [call("save_memory", {"fact": "Tests run with pytest"}, "m1")],
            [call("write_file", {"path": "a.txt", "content": "A"}, "w1")],
        ]
    )
    core = await core_factory(spec)
    s = await core.create_session([workspace], approval_mode="ask")
    ev = await collect(s.advance(UserPrompt("remember")))
    assert isinstance(ev[-1], NeedsInput)
    ev = await collect(s.advance(Resume(decisions=[Decision("m1", "proceed_once")])))
    assert isinstance(ev[-1], NeedsInput) and ev[-1].calls[0].name == "write_file"
    assert "Tests run with pytest" in (workspace / "AGENTS.md").read_text()

    # restoring while the next edit waits for permission: the waiting step is dropped too
    out = text_of(await collect(s.advance(UserPrompt("/restore 1"))))
    assert "Restored checkpoint 1 (Remember: Tests run with pytest): AGENTS.md." in out
    assert not (workspace / "AGENTS.md").exists()
    assert s.state.status == "idle" and s.waiting_calls() == []
    assert len(await s.messages()) == 2


async def test_g5_an_edit_that_changes_nothing_leaves_no_checkpoint(
    core_factory: Any, script: Any, workspace: Path
) -> None:
    spec = script(
        [
            [call("edit", {"path": "README.md", "old_string": "nope", "new_string": "x"}, "e1")],
            [{"text": "failed"}],
        ]
    )
    core = await core_factory(spec, approval_mode="auto-edit")
    s = await core.create_session([workspace], approval_mode="auto-edit")
    ev = await collect(s.advance(UserPrompt("edit")))
    assert [e.call.status for e in ev if isinstance(e, ToolCallUpdate)][-1] is ToolCallStatus.FAILED
    assert "No checkpoints" in text_of(await collect(s.advance(UserPrompt("/restore"))))


async def test_g5_restore_usage_errors(core_factory: Any, script: Any, workspace: Path) -> None:
    core = await core_factory(script([[{"text": "hi"}]]))
    s = await core.create_session([workspace])
    assert "No checkpoints" in text_of(await collect(s.advance(UserPrompt("/restore"))))
    assert "There is no checkpoint 7" in notices(await collect(s.advance(UserPrompt("/restore 7"))))[0]
    assert "is not a checkpoint id" in notices(await collect(s.advance(UserPrompt("/restore abc"))))[0]
    from devagent.agent.commands import registry

    assert {"mcp", "restore"} <= {c.name for c in registry().list()}


@pytest.mark.parametrize("content", ["binary"])
async def test_g5_restore_keeps_bytes_exactly(
    core_factory: Any, script: Any, workspace: Path, content: str
) -> None:
    raw = b"\x00\xffnot text\r\n"
    (workspace / "blob.bin").write_bytes(raw)
    spec = script([[call("write_file", {"path": "blob.bin", "content": "text now"}, "w1")], [{"text": "ok"}]])
    core = await core_factory(spec, approval_mode="auto-edit")
    s = await core.create_session([workspace], approval_mode="auto-edit")
    await collect(s.advance(UserPrompt("overwrite")))
    assert (workspace / "blob.bin").read_text() == "text now"
    await collect(s.advance(UserPrompt("/restore 1")))
    assert (workspace / "blob.bin").read_bytes() == raw


async def test_g4_g5_restore_never_writes_through_a_symlink_out(
    core_factory: Any, script: Any, workspace: Path, tmp_path: Path
) -> None:
    """A directory swapped for a symlink pointing outside after the edit: restoring would write
    outside the workspace roots, so it is refused and the outside file is untouched."""
    import shutil

    steps = [
        [call("read_file", {"path": "sub/x.txt"})],
        [call("write_file", {"path": "sub/x.txt", "content": "agent\n"}, "w")],
        [{"text": "ok"}],
    ]
    core = await core_factory(script(steps), approval_mode="yolo")
    s = await core.create_session([workspace], approval_mode="yolo")
    (workspace / "sub").mkdir()
    (workspace / "sub" / "x.txt").write_text("mine\n")
    await collect(s.advance(UserPrompt("write")))
    assert (workspace / "sub" / "x.txt").read_text() == "agent\n"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.txt").write_text("agent\n")  # what restore would find "as the agent left it"
    shutil.rmtree(workspace / "sub")
    (workspace / "sub").symlink_to(outside)
    ev = await collect(s.advance(UserPrompt("/restore 1")))
    assert "resolves outside the workspace roots" in "\n".join(notices(ev))
    assert (outside / "x.txt").read_text() == "agent\n"
