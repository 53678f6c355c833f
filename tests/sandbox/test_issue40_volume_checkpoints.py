"""Issue 40 item 1: checkpoints and `/restore` of a session whose workspace is the container's
volume: the files an edit changes are read through the sandbox before and after it, and a
restore puts them back there; the server's host never holds them. Real Podman (runc), the
locally built image, a core on the container provider (its containers and volumes swept)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from devagent.agent.events import ToolCallStatus, ToolCallUpdate, TurnEnd, UserPrompt
from devagent.agent.sandbox.container import ContainerProvider
from tests.core_helpers import call, collect, notices, task_call, text_of, write_script

Make = Callable[..., ContainerProvider]
GUARD = 120.0

STEPS = [
    [
        call("write_file", {"path": "notes.txt", "content": "one\n"}, "w1"),
        call("read_file", {"path": "README.md"}),
    ],
    [{"text": "wrote"}],
    [call("edit", {"path": "README.md", "old_string": "Hello.", "new_string": "Bonjour."}, "e1")],
    [{"text": "edited"}],
    [call("write_file", {"path": "notes.txt", "content": "two\n"}, "w2")],
    [{"text": "rewrote"}],
]


async def test_issue40_item1_checkpoints_and_restore_through_the_containers_volume(
    make_provider: Make, core_factory: Any, script: Any, tmp_path: Path
) -> None:
    provider = make_provider()
    core = await core_factory(script(STEPS), approval_mode="auto-edit", sandboxes=provider)
    root = tmp_path / "ws"
    root.mkdir()  # the session's name for its workspace: a folder that stays empty
    s = await core.create_session([root], approval_mode="auto-edit")
    assert s.sandbox.files_here is False

    async def shell(command: str) -> str:
        done = await s.sandbox.run(command, time_limit=GUARD)
        assert done.outcome == "done" and done.code == 0, done
        return str(done.output.decode())

    await shell("printf '# Demo project\\nHello.\\n' > /workspace/README.md")
    for prompt in ("make notes", "edit the readme", "rewrite the notes"):
        ev = await collect(s.advance(UserPrompt(prompt)))
        assert isinstance(ev[-1], TurnEnd) and ev[-1].reason == "finished", ev
        failed = [e for e in ev if isinstance(e, ToolCallUpdate) and e.call.status is ToolCallStatus.FAILED]
        assert not failed, failed
    assert await shell("cat /workspace/notes.txt /workspace/README.md") == "two\n# Demo project\nBonjour.\n"

    listing = text_of(await collect(s.advance(UserPrompt("/restore"))))
    assert [ln.split()[0] for ln in listing.splitlines()[1:]] == ["1", "2", "3"], listing
    ev = await collect(s.advance(UserPrompt("/restore 2")))
    assert "Restored checkpoint 2 (Edit README.md)" in text_of(ev), (text_of(ev), notices(ev))
    assert await shell("cat /workspace/notes.txt /workspace/README.md") == "one\n# Demo project\nHello.\n"
    ev = await collect(s.advance(UserPrompt("/restore 1")))
    assert "Restored checkpoint 1" in text_of(ev), (text_of(ev), notices(ev))
    assert await shell("ls /workspace") == "README.md\n"  # the file the first write made is gone
    assert list(root.iterdir()) == []
    await s.sandbox.release(keep=False)


async def test_issue40_item1_a_subagent_works_in_its_parents_volume(
    make_provider: Make, core_factory: Any, tmp_path: Path
) -> None:
    """A subagent (the `task` tool) of a session whose workspace is a volume works in that same
    sandbox: it reads what the parent wrote and writes what the parent then reads; its end does
    not release the parent's container."""
    steps = [
        {"items": [call("write_file", {"path": "from-parent.txt", "content": "parent wrote this\n"})]},
        {"items": [task_call("read and write", "CHILD: go", "t1")]},
        {"items": [call("read_file", {"path": "from-child.txt"})]},
        {"items": [{"text": "parent: {last_tool_results}"}]},
    ]
    child = [
        [call("read_file", {"path": "from-parent.txt"})],
        [call("write_file", {"path": "from-child.txt", "content": "child wrote this\n"})],
        [{"text": "child: {last_tool_results}"}],
    ]
    spec = write_script(tmp_path / "s.json", steps, {"CHILD": child})
    core = await core_factory(spec, approval_mode="yolo", sandboxes=make_provider())
    root = tmp_path / "ws"
    root.mkdir()
    s = await core.create_session([root], approval_mode="yolo")
    ev = await collect(s.advance(UserPrompt("go")))
    assert isinstance(ev[-1], TurnEnd) and ev[-1].reason == "finished", ev
    failed = [e for e in ev if isinstance(e, ToolCallUpdate) and e.call.status is ToolCallStatus.FAILED]
    assert not failed, failed
    assert "child wrote this" in text_of(ev), text_of(ev)
    done = await s.sandbox.run("cat /workspace/from-parent.txt /workspace/from-child.txt", time_limit=GUARD)
    assert done.output.decode() == "parent wrote this\nchild wrote this\n", done
    assert list(root.iterdir()) == []
    await s.sandbox.release(keep=False)
