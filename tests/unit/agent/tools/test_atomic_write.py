"""G4, issue 10 item 1 (atomic writes): write_file, edit, save_memory and /restore replace a file
through a temporary file in the same directory, fsync and rename, so a crash never leaves a
truncated file and a hard link to a file outside the workspace is never written through.

The kill tests run a real process that SIGKILLs itself (`devagent.common.faults`) between writing the
temporary file and the rename: the worst moment for a write.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.state import SessionState
from devagent.agent.tools import builtin_tools
from devagent.agent.tools import search as search_mod
from devagent.agent.tools._util import TEMP_PREFIX, atomic_write
from devagent.agent.tools.base import ToolContext, ToolResult
from devagent.agent.tools.workspace import Workspace

TOOLS = builtin_tools()
CRASH_POINT = "atomic_write.before_rename"

OLD = "".join(f"old line {i}\n" for i in range(20_000))  # content A, about 300 KiB
NEW = "".join(f"new line {i}\r\n" for i in range(40_000))  # content B, larger, CRLF kept

# Runs one built-in tool over a workspace in a fresh interpreter, through the tools' public API
# (the arguments, which are large, on stdin).
RUN_TOOL = """
import asyncio, json, sys
from pathlib import Path
from devagent.agent.state import SessionState
from devagent.agent.tools import builtin_tools
from devagent.agent.tools.base import ToolContext
from devagent.agent.tools.workspace import Workspace

root = Path(sys.argv[1])
ctx = ToolContext(workspace=Workspace([root]), state=SessionState(workspace_roots=[str(root)]), call_id="c1")
args = json.loads(sys.stdin.read())


async def main():
    tools = builtin_tools()
    if (root / args["path"]).exists():  # a file is read before it is replaced
        await tools["read_file"].run({"path": args["path"]}, ctx)
    return await tools[sys.argv[2]].run(args, ctx)


print(asyncio.run(main()).text)
"""


def run_tool_process(
    root: Path, name: str, args: dict[str, Any], crash_at: str | None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DEVAGENT_CRASH_AT"}
    if crash_at:
        env["DEVAGENT_CRASH_AT"] = crash_at
    return subprocess.run(
        [sys.executable, "-c", RUN_TOOL, str(root), name],
        input=json.dumps(args),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def make_ctx(root: Path) -> ToolContext:
    return ToolContext(
        workspace=Workspace([root]), state=SessionState(workspace_roots=[str(root)]), call_id="c1"
    )


async def run(name: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    return await TOOLS[name].run(args, ctx)


def temp_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.name.startswith(TEMP_PREFIX))


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    return root


@pytest.fixture(params=[True, False], ids=["ripgrep", "python"])
def grep_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    use_rg = bool(request.param)
    if use_rg and shutil.which("rg") is None:
        pytest.skip("ripgrep is not installed")
    monkeypatch.setattr(search_mod, "USE_RIPGREP", use_rg)
    return use_rg


@pytest.mark.parametrize(
    "tool,args",
    [
        ("write_file", {"path": "src/app.txt", "content": NEW}),
        ("edit", {"path": "src/app.txt", "old_string": OLD, "new_string": NEW}),
    ],
    ids=["write_file", "edit"],
)
async def test_g4_issue10_killed_before_the_rename_the_file_keeps_its_old_content(
    ws: Path, tool: str, args: dict[str, Any], grep_engine: bool
) -> None:
    """G4, issue 10 item 1 (atomic writes): a process SIGKILLed after the temporary file is written
    and before the rename leaves the file exactly as it was; the leftover temporary file is not a
    workspace file (list_directory, glob, grep and read_many_files skip it), and the next write
    works."""
    target = ws / "src" / "app.txt"
    target.write_bytes(OLD.encode())

    proc = run_tool_process(ws, tool, args, CRASH_POINT)

    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stdout, proc.stderr)
    assert target.read_bytes() == OLD.encode()  # A exactly: not truncated, not half of B
    # The crash came after the new content was complete in the temporary file: the promise was
    # tested at its worst moment, not before anything was written.
    leftovers = temp_files(ws / "src")
    assert len(leftovers) == 1 and leftovers[0].read_bytes() == NEW.encode()

    ctx = make_ctx(ws)
    listing = await run("list_directory", {"path": "src"}, ctx)
    assert [e["name"] for e in listing.data["entries"]] == ["app.txt"]
    assert TEMP_PREFIX not in listing.text
    found = await run("glob", {"pattern": "**/*"}, ctx)
    assert found.data["files"] == ["src/app.txt"]
    found = await run("glob", {"pattern": "src/.*"}, ctx)
    assert found.data["files"] == []
    hits = await run("grep", {"pattern": "new line 7$"}, ctx)
    assert hits.data["matches"] == 0, hits.text
    assert hits.data["engine"] == ("ripgrep" if grep_engine else "python")
    many = await run("read_many_files", {"paths": ["src"]}, ctx)
    assert many.data["files"] == ["src/app.txt"]

    # Nothing is stuck: the same call without the crash point writes B.
    proc = run_tool_process(ws, tool, args, None)
    assert proc.returncode == 0, proc.stderr
    assert target.read_bytes() == NEW.encode()
    assert temp_files(ws / "src") == leftovers  # only the crashed write's file, nothing new


def test_g4_issue10_killed_before_the_rename_a_new_file_does_not_appear(ws: Path) -> None:
    """G4, issue 10 item 1 (atomic writes): a crash while creating a file leaves no file at all."""
    proc = run_tool_process(ws, "write_file", {"path": "src/new.txt", "content": NEW}, CRASH_POINT)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert not (ws / "src" / "new.txt").exists()


@pytest.mark.parametrize("tool", ["write_file", "edit"])
async def test_g4_issue10_a_hard_link_to_a_file_outside_is_not_written_through(
    tmp_path: Path, ws: Path, tool: str
) -> None:
    """G4, issue 10 item 1 (atomic writes): a hard link in the workspace to a file outside it is
    replaced by the rename; the outside file keeps its content."""
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text("TOP SECRET\n")
    link = ws / "linked.txt"
    os.link(secret, link)
    args: dict[str, Any] = (
        {"path": "linked.txt", "content": "overwritten\n"}
        if tool == "write_file"
        else {"path": "linked.txt", "old_string": "TOP SECRET", "new_string": "overwritten"}
    )
    ctx = make_ctx(ws)
    await run("read_file", {"path": "linked.txt"}, ctx)
    await run(tool, args, ctx)
    assert link.read_text() == "overwritten\n"
    assert secret.read_text() == "TOP SECRET\n"
    assert os.stat(secret).st_nlink == 1  # the workspace name is a file of its own now
    assert temp_files(ws) == []


async def test_g4_issue10_save_memory_does_not_write_through_a_hard_link(tmp_path: Path, ws: Path) -> None:
    """G4, issue 10 item 1 (atomic writes): the memory file too."""
    outside = tmp_path / "guide.md"
    outside.write_text("# Guide\n")
    os.link(outside, ws / "AGENTS.md")
    await run("save_memory", {"fact": "Run tests with make test"}, make_ctx(ws))
    assert "Run tests with make test" in (ws / "AGENTS.md").read_text()
    assert outside.read_text() == "# Guide\n"


async def test_g4_issue10_permissions_are_kept_and_new_files_get_the_default(ws: Path) -> None:
    """Issue 10 item 1 (atomic writes): the replacement has the mode of the file it replaces; a new
    file has the default mode (0666 minus the umask)."""
    script = ws / "run.sh"
    script.write_text("#!/bin/sh\necho old\n")
    script.chmod(0o750)
    private = ws / "private.txt"
    private.write_text("old\n")
    private.chmod(0o600)
    ctx = make_ctx(ws)
    await run("read_many_files", {"paths": ["run.sh", "private.txt"]}, ctx)
    await run("edit", {"path": "run.sh", "old_string": "old", "new_string": "new"}, ctx)
    await run("write_file", {"path": "private.txt", "content": "new\n"}, ctx)
    await run("write_file", {"path": "fresh.txt", "content": "new\n"}, ctx)
    assert stat.S_IMODE(script.stat().st_mode) == 0o750
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((ws / "fresh.txt").stat().st_mode) == 0o666 & ~umask
    assert script.read_text() == "#!/bin/sh\necho new\n"


def test_g4_issue10_a_failed_write_leaves_the_file_and_no_temporary_file(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 10 item 1 (atomic writes): when the rename (or anything before it) fails, the target
    is untouched and the temporary file is removed."""
    target = ws / "a.txt"
    target.write_text("A\n")

    def refuse(src: Any, dst: Any, **dir_fds: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="No space left"):
        atomic_write(target, "B\n")
    assert target.read_text() == "A\n"
    assert temp_files(ws) == []
    # Content that cannot be encoded fails before any file is created.
    monkeypatch.undo()
    with pytest.raises(UnicodeEncodeError):
        atomic_write(target, "\udc80")
    assert target.read_text() == "A\n"
    assert temp_files(ws) == []


def test_g4_issue10_atomic_write_writes_bytes_exactly_and_creates_directories(ws: Path) -> None:
    data = b"\x00\xff\r\n\rraw"
    atomic_write(ws / "deep" / "er" / "blob.bin", data)
    assert (ws / "deep" / "er" / "blob.bin").read_bytes() == data
    atomic_write(ws / "text.txt", "line\r\nnext\n")
    assert (ws / "text.txt").read_bytes() == b"line\r\nnext\n"  # line endings untouched
    assert temp_files(ws) == [] and temp_files(ws / "deep" / "er") == []


def test_agent_checkpoints_import_no_sqlalchemy() -> None:
    """The checkpoints' SQL is in devagent.store.checkpoints, imported only when a checkpoint is
    used: importing the agent's side stays cheap."""
    code = (
        "import sys, devagent.agent.loop.checkpoints, devagent.agent.tools.read, "
        "devagent.agent.tools.write, devagent.agent.commands; "
        "print('sqlalchemy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
