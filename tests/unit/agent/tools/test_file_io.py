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


def test_g2_small_on_disk_by_kind_and_size(tmp_path: Path) -> None:
    small = tmp_path / "small.txt"
    small.write_text("x" * LOOP_READ_MAX)
    big = tmp_path / "big.txt"
    big.write_text("x" * (LOOP_READ_MAX + 1))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "to-big").symlink_to(big)
    (tmp_path / "to-small").symlink_to(small)
    assert small_on_disk([small, tmp_path / "to-small", tmp_path / "missing"])
    assert small_on_disk([])
    assert not small_on_disk([small, big])
    assert not small_on_disk([tmp_path / "to-big"])  # what the link names is what is read
    assert not small_on_disk([fifo])  # a read of it would wait for a writer
    assert not small_on_disk([tmp_path])  # a folder: the work walks it


async def test_g2_small_reads_run_on_the_loop_larger_ones_in_a_thread(tmp_path: Path) -> None:
    small = tmp_path / "small.txt"
    small.write_text("small\n")
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * (LOOP_READ_MAX + 1))
    loop_thread = threading.get_ident()

    def read(path: Path) -> tuple[int, bytes]:
        return threading.get_ident(), path.read_bytes()

    here, data = await off_loop_unless_small([small], read, small)
    assert (here, data) == (loop_thread, b"small\n")
    there, data = await off_loop_unless_small([big], read, big)
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


async def test_g4_confinement_holds_on_the_loop(tmp_path: Path, trips: list[str]) -> None:
    """A small file reached through a symlink out of the workspace is refused on the loop's thread
    as it was in a worker thread: the plan resolves the path through the confined walk."""
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
    assert outside.read_text() == "secret\n" and trips == []
