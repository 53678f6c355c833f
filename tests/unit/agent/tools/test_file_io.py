"""Where a tool's file work runs (issue 39 item 7): stats and reads of small files on the event
loop's thread, what may wait longer in a worker thread; the same results and the same confinement
either way (G2, G4, G5)."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.loop import checkpoints
from devagent.agent.tools import builtin_tools
from devagent.agent.tools._util import LOOP_READ_MAX, off_loop_unless_small, small_on_disk
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.workspace import Workspace
from tests.unit.agent.tools.test_tools import make_ctx, seen_files

TOOLS = builtin_tools()


@pytest.fixture
def trips(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the functions sent to a worker thread from here on."""
    sent: list[str] = []
    real = asyncio.to_thread

    async def counting(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        sent.append(getattr(fn, "__name__", repr(fn)))
        return await real(fn, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", counting)
    return sent


def test_g2_g4_small_on_disk_by_kind_and_size_through_the_confined_walk(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    small = ws / "small.txt"
    small.write_text("x" * LOOP_READ_MAX)
    big = ws / "big.txt"
    big.write_text("x" * (LOOP_READ_MAX + 1))
    os.mkfifo(ws / "fifo")
    (ws / "to-small").symlink_to(small)
    outside = tmp_path / "outside"
    outside.mkdir()
    os.mkfifo(outside / "fifo")
    (ws / "out").symlink_to(outside)
    workspace = Workspace([ws])
    assert small_on_disk([small, ws / "missing", str(small)], workspace)
    assert small_on_disk([], workspace)
    assert not small_on_disk([small, big], workspace)
    assert not small_on_disk([ws / "fifo"], workspace)  # a read of it would wait for a writer
    assert not small_on_disk([ws], workspace)  # a folder: the work walks it
    assert small_on_disk([ws / "to-small"], workspace)  # a link that stays inside: as the walk reads it
    # a path through a link out of the workspace, or outside it: refused by the walk, not stat'ed
    assert not small_on_disk([ws / "out" / "fifo"], workspace)
    assert not small_on_disk([outside / "fifo"], workspace)


async def test_g2_small_reads_run_on_the_loop_larger_ones_in_a_thread(tmp_path: Path) -> None:
    small = tmp_path / "small.txt"
    small.write_text("small\n")
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * (LOOP_READ_MAX + 1))
    workspace = Workspace([tmp_path])
    loop_thread = threading.get_ident()

    def read(path: Path) -> tuple[int, bytes]:
        return threading.get_ident(), path.read_bytes()

    here, data = await off_loop_unless_small([small], workspace, read, small)
    assert (here, data) == (loop_thread, b"small\n")
    there, data = await off_loop_unless_small([big], workspace, read, big)
    assert there != loop_thread and len(data) == LOOP_READ_MAX + 1


async def test_g2_g5_a_small_write_goes_to_a_thread_once_and_writes_the_same(
    tmp_path: Path, trips: list[str]
) -> None:
    """write_file of a small file: its plan (the read of the old text) on the loop, the atomic
    write (its fsyncs) in one worker thread; the checkpoint's states before and after on the loop.
    A file over the bound: each read in a thread, as before. The files and results are the same."""
    for name, size in (("small.txt", 10), ("big.txt", LOOP_READ_MAX + 10)):
        target = tmp_path / name
        target.write_text("o" * size)
        ctx = seen_files(make_ctx(tmp_path), target)
        trips.clear()
        before = await checkpoints.states_before(None, [target], ctx.workspace)
        result = await TOOLS["write_file"].run({"path": name, "content": "new\n"}, ctx)
        after = await checkpoints.state_now(None, target, ctx.workspace)
        assert target.read_text() == "new\n"
        assert result.text.startswith(f"Wrote {name}"), result.text
        assert before[0] is not None and before[0].before is not None
        assert after == checkpoints.current_state(target, ctx.workspace)
        if name == "small.txt":
            assert trips == ["_write"]
        else:
            assert trips == ["<lambda>", "_plan", "_write"]  # the state after: small again


async def test_g4_confinement_holds_and_a_link_out_goes_to_a_thread(tmp_path: Path, trips: list[str]) -> None:
    """A file reached through a symlink out of the workspace is not even stat'ed on the loop's
    thread: the plan goes to a worker thread, as before, and refuses it there."""
    ws = tmp_path / "ws"
    ws.mkdir()
    outside = tmp_path / "secret.txt"
    outside.write_text("secret\n")
    (ws / "link.txt").symlink_to(outside)
    ctx = make_ctx(ws)
    with pytest.raises(ToolFailure) as info:
        await TOOLS["write_file"].run({"path": "link.txt", "content": "pwned"}, ctx)
    assert info.value.type == "path_outside_workspace", info.value.message
    with pytest.raises(ToolFailure) as info:
        await TOOLS["edit"].run({"path": "link.txt", "old_string": "secret", "new_string": "x"}, ctx)
    assert info.value.type == "path_outside_workspace", info.value.message
    assert outside.read_text() == "secret\n" and trips == ["_plan", "_change"]
