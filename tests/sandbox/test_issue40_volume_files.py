"""Issue 40 item 1 ("every tool of a session goes through its sandbox"): with the container
backend's workspace on a named volume (`files_here` False), the built-in file tools (read_file,
write_file, edit, apply_patch, list_directory, glob, grep, read_many_files) work on the
container's files through the sandbox, never on a folder of this host; a symbolic link cannot lead
them out of the workspace, nor carry a write into `.git/`. Real Podman (runc) on the locally built
image; every container and volume is removed (the fixture checks with the engine)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.events import ToolErrorType
from devagent.agent.sandbox.container import ContainerProvider, ContainerSandbox
from devagent.agent.state import SessionState
from devagent.agent.tools import builtin_tools
from devagent.agent.tools.base import ToolContext, ToolResult
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.remote_files import SandboxFiles
from devagent.agent.tools.workspace import Workspace

Make = Callable[..., ContainerProvider]
GUARD = 120.0


class Session:
    """A session's tools over a container whose workspace is a volume: `root` is the name the
    session knows its workspace by, a folder that is never made on this host."""

    def __init__(self, sandbox: ContainerSandbox, root: Path) -> None:
        self.sandbox = sandbox
        self.root = root
        self.state = SessionState(workspace_roots=[str(root)])
        self.tools = builtin_tools(None, None, sandbox)

    def ctx(self) -> ToolContext:
        return ToolContext(workspace=Workspace([self.root]), state=self.state, sandbox=self.sandbox)

    async def run(self, name: str, **args: Any) -> ToolResult:
        return await self.tools[name].run(args, self.ctx())

    async def fails(self, name: str, **args: Any) -> ToolFailure:
        with pytest.raises(ToolFailure) as e:
            await self.run(name, **args)
        return e.value

    async def shell(self, command: str) -> str:
        done = await self.sandbox.run(command, time_limit=GUARD)
        assert done.outcome == "done" and done.code == 0, done
        return done.output.decode()


@pytest.fixture
async def session(make_provider: Make, tmp_path: Path) -> Session:
    provider = make_provider()
    assert not provider.host_workspace
    root = tmp_path / "ws"
    sandbox = provider.for_session("volume-files", [root])
    assert sandbox.files_here is False
    await sandbox.open()
    return Session(sandbox, root)


async def test_issue40_item1_file_tools_work_through_a_container_volume(session: Session) -> None:
    s = session
    assert isinstance(s.ctx().backends.files, SandboxFiles)
    await s.run("write_file", path="src/app.py", content="def greet():\n    return 'hello'\n")
    assert await s.shell("cat /workspace/src/app.py") == "def greet():\n    return 'hello'\n"
    await s.shell("printf 'one\\ntwo\\nthree\\n' > /workspace/notes.txt; mkdir -p /workspace/.git")
    await s.shell("echo 'hello from git' > /workspace/.git/config; mkdir -p /workspace/node_modules/x")
    await s.shell("echo hello > /workspace/node_modules/x/skip.js")

    read = await s.run("read_file", path="notes.txt")
    assert read.text == "1\tone\n2\ttwo\n3\tthree\n", read.text
    # the sandbox's own name of the file (what its shell and the prompt call it) is the same file
    assert (await s.run("read_file", path="/workspace/notes.txt")).text == read.text
    out = await s.fails("read_file", path="/workspace/../etc/passwd")
    assert out.type == ToolErrorType.PATH_OUTSIDE_WORKSPACE, out.message
    edited = await s.run("edit", path="notes.txt", old_string="two", new_string="TWO")
    assert "replaced 1 occurrence" in edited.text, edited.text
    assert await s.shell("cat /workspace/notes.txt") == "one\nTWO\nthree\n"
    # an edit of a file the session has not read since it changed is refused, as on a host folder
    await s.shell("echo four >> /workspace/notes.txt")
    stale = await s.fails("edit", path="notes.txt", old_string="one", new_string="ONE")
    assert stale.type == ToolErrorType.FILE_CHANGED

    patch = (
        "*** Begin Patch\n*** Update File: src/app.py\n@@ def greet():\n-    return 'hello'\n"
        "+    return 'patched'\n*** Add File: src/new.py\n+NEW = 1\n*** Delete File: notes.txt\n"
        "*** End Patch"
    )
    await s.run("read_file", path="src/app.py")
    await s.run("read_file", path="notes.txt")
    patched = await s.run("apply_patch", input=patch)
    assert "Applied the patch to 3 files" in patched.text, patched.text
    assert "patched" in await s.shell("cat /workspace/src/app.py")
    assert await s.shell("cat /workspace/src/new.py") == "NEW = 1\n"
    assert "gone" in await s.shell("test -e /workspace/notes.txt && echo there || echo gone")

    listed = await s.run("list_directory")
    assert "src/" in listed.text and ".git" not in listed.text and "node_modules/" in listed.text, listed.text
    globbed = await s.run("glob", pattern="**/*.py", sort="name")
    assert globbed.data["files"] == ["src/app.py", "src/new.py"], globbed.text
    found = await s.run("grep", pattern="patched|hello")
    assert found.text.splitlines()[1:] == ["src/app.py:2:    return 'patched'"], found.text
    counted = await s.run("grep", pattern="NEW", output="count", include="*.py")
    assert counted.data["matches"] == 1 and "src/new.py:1" in counted.text
    one = await s.run("grep", pattern="patched", path="src/app.py")
    assert one.text.splitlines()[1:] == ["src/app.py:2:    return 'patched'"], one.text
    assert (await s.run("glob", pattern="src/new.py")).data["files"] == ["src/new.py"]
    nowhere = await s.fails("glob", pattern="*", path="nowhere")
    assert nowhere.type == ToolErrorType.NOT_A_DIRECTORY, nowhere.message
    many = await s.run("read_many_files", paths=["src"])
    assert "--- src/app.py ---" in many.text and "--- src/new.py ---\nNEW = 1" in many.text, many.text
    moved = (
        "*** Begin Patch\n*** Update File: src/new.py\n*** Move to: lib/moved.py\n@@\n-NEW = 1\n"
        "+NEW = 2\n*** End Patch"
    )
    await s.run("apply_patch", input=moved)
    assert await s.shell("cat /workspace/lib/moved.py; ls /workspace/src") == "NEW = 2\napp.py\n"

    ran = await s.run("run_shell_command", command="pwd; ls", directory="src")
    assert "/workspace/src\napp.py\nexit code 0" in ran.text, ran.text
    folder = await s.fails("write_file", path="src", content="not a folder\n")
    assert folder.type == ToolErrorType.IS_DIRECTORY, folder.message
    missing = await s.fails("read_file", path="nothing/here.txt")
    assert missing.type == ToolErrorType.NOT_FOUND, missing.message

    # the server's host holds no copy of the workspace: the folder the session names is not made
    assert not s.root.exists()


async def test_issue40_item1_symlinks_cannot_lead_the_file_tools_out(session: Session) -> None:
    s = session
    await s.shell(
        "cd /workspace && echo inside > kept.txt && ln -s /etc/passwd passwd && ln -s / rootdir && "
        "mkdir -p .git && ln -s .git/config gitconfig && ln -s kept.txt alias.txt"
    )
    out = await s.fails("read_file", path="passwd")
    assert out.type == ToolErrorType.PATH_OUTSIDE_WORKSPACE, out.message
    out = await s.fails("read_file", path="rootdir/etc/hostname")
    assert out.type == ToolErrorType.PATH_OUTSIDE_WORKSPACE, out.message
    out = await s.fails("read_file", path="../../etc/passwd")
    assert out.type == ToolErrorType.PATH_OUTSIDE_WORKSPACE, out.message
    out = await s.fails("write_file", path="passwd", content="owned\n")
    assert out.type == ToolErrorType.PATH_OUTSIDE_WORKSPACE, out.message
    out = await s.fails("write_file", path="gitconfig", content="[core]\n")
    assert out.type == ToolErrorType.PROTECTED_PATH, out.message
    assert await s.shell("cat /workspace/.git/config 2>/dev/null; echo end") == "end\n"
    out = await s.fails("list_directory", path="rootdir")
    assert out.type == ToolErrorType.PATH_OUTSIDE_WORKSPACE, out.message

    listed = await s.run("list_directory")
    assert "passwd -> outside the workspace" in listed.text, listed.text
    assert "alias.txt -> kept.txt" in listed.text, listed.text
    globbed = await s.run("glob", pattern="*", sort="name")
    assert globbed.data["files"] == ["alias.txt", "kept.txt"], globbed.text
    found = await s.run("grep", pattern="root:")
    assert found.data["matches"] == 0, found.text
    many = await s.run("read_many_files", paths=["*"])
    assert "root:" not in many.text and "--- kept.txt ---\ninside" in many.text, many.text
    assert (await s.run("read_file", path="alias.txt")).text == "1\tinside\n"


async def test_issue40_item1_prompt_memory_and_save_memory_go_through_the_sandbox(session: Session) -> None:
    """The memory file at the workspace's root is read into the prompt from the volume, and
    save_memory adds to it there; the environment says git is the sandbox's to ask."""
    from devagent.agent.prompt.instructions import Instructions

    s = session
    await s.shell("printf '# Guide\\nUse tabs in the volume.\\n' > /workspace/AGENTS.md")
    instructions = Instructions(Workspace([s.root]), "AGENTS.md", sandbox=s.sandbox)
    await instructions.take_environment(s.state)
    prompt = instructions.text(s.state, ["read_file"])
    assert "Use tabs in the volume." in prompt
    assert "the workspace is in the session's sandbox" in prompt
    saved = await s.run("save_memory", fact="Run tests with make check")
    assert "Saved to AGENTS.md" in saved.text, saved.text
    assert "- Run tests with make check" in await s.shell("cat /workspace/AGENTS.md")
    assert not s.root.exists()


async def test_issue40_item4_another_replica_continues_on_the_same_volume(
    make_provider: Make, tmp_path: Path
) -> None:
    """Two replicas (two providers, no folder shared: each names the workspace by a folder of its
    own) on one engine: what the session's tools wrote through one, the other's tools read and
    change, in the same volume."""
    one, two = make_provider(), make_provider()
    first = Session(one.for_session("replicated", [tmp_path / "on-one"]), tmp_path / "on-one")
    await first.run("write_file", path="notes.txt", content="written on replica one\n")
    await one.close()
    second = Session(two.for_session("replicated", [tmp_path / "on-two"]), tmp_path / "on-two")
    read = await second.run("read_file", path="notes.txt")
    assert read.text == "1\twritten on replica one\n", read.text
    await second.run("edit", path="notes.txt", old_string="one", new_string="two")
    assert await second.shell("cat /workspace/notes.txt") == "written on replica two\n"
    assert not (tmp_path / "on-one").exists() and not (tmp_path / "on-two").exists()
