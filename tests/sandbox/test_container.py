"""The `container` sandbox backend on real Podman and real Docker (issue 40 item 2; each test runs
on both engines, `sandbox_engine`): a session's commands and
files live in a container of its own, under the template's limits, apart from every other
session's, and its workspace volume outlives the container."""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from devagent.agent.sandbox.base import Started
from devagent.agent.sandbox.container import ContainerProvider, ContainerSandbox, OutsideWorkspace
from devagent.agent.sandbox.groups import kill_group
from devagent.agent.sandbox.relay import INTERRUPTED
from devagent.agent.tools.tty_screen import TtySize
from tests.process_scan import running
from tests.sandbox.conftest import EngineUnderTest

Make = Callable[..., ContainerProvider]
GUARD = 120.0  # a hang guard only: every wait below ends on an outcome long before it


async def _reader(started: Started) -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(started.output_fd, "rb", buffering=0)
    )
    return reader


async def _until(reader: asyncio.StreamReader, marker: bytes) -> bytes:
    return await asyncio.wait_for(reader.readuntil(marker), GUARD)


async def _out(sandbox: ContainerSandbox, command: str) -> str:
    done = await sandbox.run(command, time_limit=GUARD)
    assert done.outcome == "done", done
    return done.output.decode()


async def test_issue40_item2_command_runs_as_non_root_user_seeing_only_its_workspace(
    make_provider: Make,
) -> None:
    sandbox = await make_provider().open("alone", [Path("/srv/never")])
    done = await sandbox.run(
        "id -u; pwd; ls -A /workspace; test -e /work && echo HOST-VISIBLE; touch /etc/x 2>&1",
        time_limit=GUARD,
    )
    lines = done.output.decode().splitlines()
    assert lines[0] != "0" and lines[0] == "1000"
    assert lines[1] == "/workspace"
    assert "HOST-VISIBLE" not in done.output.decode()
    assert "Read-only file system" in done.output.decode()  # the image itself cannot be changed
    caps = await _out(sandbox, "grep CapEff /proc/self/status")
    assert caps.split()[1] == "0000000000000000"
    assert (
        (await _out(sandbox, "cat /proc/self/attr/current 2>/dev/null; grep NoNewPrivs /proc/self/status"))
        .strip()
        .endswith("1")
    )
    assert sandbox.show_path("/srv/never/src/a.py") == "/workspace/src/a.py"


async def test_issue40_item2_G4_file_operations_stay_in_the_workspace(make_provider: Make) -> None:
    sandbox = await make_provider().open("files", [Path("/srv/ws")])
    await sandbox.write_atomic_async("/srv/ws/pkg/mod.py", b"print('hi')\n")
    assert await sandbox.read_bytes_async("pkg/mod.py") == b"print('hi')\n"
    assert await sandbox.list_dir_async("pkg") == ["mod.py"]
    found = await sandbox.stat_async("pkg/mod.py")
    assert found is not None and stat.S_ISREG(found.st_mode) and found.st_size == 12
    await sandbox.write_atomic_async("pkg/mod.py", b"x = 1\n")  # replaced whole, never half-written
    assert await sandbox.read_bytes_async("/workspace/pkg/mod.py") == b"x = 1\n"
    assert await _out(sandbox, "ls -A pkg") == "mod.py\n"  # no temporary file left beside it
    await _out(sandbox, "ln -s /etc/passwd pkg/out; ln -s ../.. pkg/up")
    for escape in ("/etc/passwd", "../etc/passwd", "pkg/out", "pkg/up/etc/passwd"):
        with pytest.raises(OutsideWorkspace):
            await sandbox.read_bytes_async(escape)
    with pytest.raises(OutsideWorkspace):
        await sandbox.write_atomic_async("pkg/up/tmp/x", b"no")
    link = await sandbox.stat_async("pkg/out")
    assert link is not None and stat.S_ISLNK(link.st_mode)  # the link itself, not what it names
    await sandbox.delete_async("pkg/out")
    assert await sandbox.stat_async("pkg/out") is None
    assert (await _out(sandbox, "cat /etc/passwd | wc -l")).strip() != "0"  # deleted the link only
    with pytest.raises(FileNotFoundError):
        await sandbox.read_bytes_async("missing.txt")
    with pytest.raises(IsADirectoryError):
        await sandbox.read_bytes_async("pkg")
    # The interface's blocking forms, as the core's tools call them (from a thread here).
    await asyncio.to_thread(sandbox.write_atomic, "/srv/ws/sync.txt", b"sync")
    assert await asyncio.to_thread(sandbox.read_bytes, "sync.txt") == b"sync"
    assert "sync.txt" in await asyncio.to_thread(sandbox.list_dir, "/workspace")
    await asyncio.to_thread(sandbox.delete, "sync.txt")
    assert await asyncio.to_thread(sandbox.stat, "sync.txt") is None
    with pytest.raises(OutsideWorkspace):
        await asyncio.to_thread(sandbox.read_bytes, "/etc/passwd")


async def test_issue40_item2_two_sessions_cannot_see_each_others_files_or_processes(
    make_provider: Make,
) -> None:
    provider = make_provider()
    a = await provider.open("caller-a", [])
    b = await provider.open("caller-b", [])
    await a.write_atomic_async("secret-of-a.txt", b"a's data")
    running = await a.start("echo ready; exec sleep 7777", stdin=True)
    reader = await _reader(running)
    await _until(reader, b"ready")
    assert "sleep 7777" in await _out(a, "ps -eo args")
    assert "sleep 7777" not in await _out(b, "ps -eo args")
    files = await _out(b, "ls -A /workspace; find / -name 'secret-of-a*' -print 2>/dev/null; echo end")
    assert "secret-of-a.txt" not in files  # the pattern in the command line has no .txt
    assert files.rstrip().endswith("end")
    await kill_group(running.proc)
    os.close(running.input_fd)


async def test_issue40_item2_fork_bomb_and_memory_hog_leave_the_other_session_responsive(
    make_provider: Make,
) -> None:
    provider = make_provider(pids=48, memory_mb=128)
    bomb_box = await provider.open("bomb", [])
    other = await provider.open("bystander", [])
    # A fork bomb: it forks until the pids limit refuses, says so, and keeps its children.
    bomb = await bomb_box.start(f"python3 -c {shlex.quote(FORK_BOMB)}", stdin=True)
    reader = await _reader(bomb)
    said = await _until(reader, b"BOMB-DONE")
    assert b"refused after" in said and b"Resource temporarily unavailable" in said, said
    assert await _out(other, "echo alive; seq 1 20 | xargs -n1 true && echo forks-ok") == "alive\nforks-ok\n"
    await kill_group(bomb.proc)  # its pids are exhausted: the kill reaches it from the host
    os.close(bomb.input_fd)
    assert "python3" not in await _out(bomb_box, "ps -eo args")
    # A memory hog: the container's memory limit ends it, never the other session.
    since = time.time() - 1
    hog = await bomb_box.run(
        "echo hog-start; python3 -c 'b = bytearray(512 * 1024 * 1024); print(len(b))'", time_limit=GUARD
    )
    assert b"hog-start" in hog.output and hog.code != 0 and b"536870912" not in hog.output
    # Podman's conmon writes its marker of the kill (`oom`, `oomKilled`) where the engine's client
    # runs: a folder of its own, never the server's working directory (here, the checkout).
    left = [p.name for p in Path.cwd().glob("oom*") if p.stat().st_mtime >= since]
    assert left == [], f"the engine wrote {left} into the working directory"
    assert await _out(other, "python3 -c 'print(len(bytearray(32 * 1024 * 1024)))'") == "33554432\n"
    assert await _out(bomb_box, "echo recovered") == "recovered\n"


FORK_BOMB = """
import os, time
n = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(9999)
            os._exit(0)
        n += 1
except OSError as e:
    print("refused after", n, e.strerror, flush=True)
print("BOMB-DONE", flush=True)
time.sleep(9999)
"""


async def test_issue40_item2_killing_a_command_kills_its_process_group_inside(make_provider: Make) -> None:
    sandbox = await make_provider().open("kill", [])
    started = await sandbox.start("sleep 4441 & sleep 4442 & echo ready; wait", stdin=True)
    reader = await _reader(started)
    await _until(reader, b"ready")
    assert "sleep 4441" in await _out(sandbox, "ps -eo args")
    await kill_group(started.proc)  # as the shell tool stops a command: signals to the host group
    assert started.proc.returncode is not None
    left = await _out(sandbox, "ps -eo args")
    assert "sleep 4441" not in left and "sleep 4442" not in left
    os.close(started.input_fd)


async def test_issue40_item2_stdin_tty_and_exit_codes(make_provider: Make) -> None:
    sandbox = await make_provider().open("io", [])
    piped = await sandbox.run("tr a-z A-Z; exit 7", input=b"hello\n", time_limit=GUARD)
    assert (piped.code, piped.output) == (7, b"HELLO\n")
    started = await sandbox.start("stty size; tty; echo tty-done", stdin=True, tty=TtySize(rows=33, cols=101))
    reader = await _reader(started)
    said = (await _until(reader, b"tty-done")).decode()
    assert "33 101" in said and "/dev/pts/" in said
    await asyncio.wait_for(started.proc.wait(), GUARD)
    os.close(started.input_fd)


async def test_issue40_item2_idle_container_stops_and_restarts_keeping_the_workspace(
    make_provider: Make,
) -> None:
    provider = make_provider(idle_seconds=0.0)
    sandbox = await provider.open("idle", [])
    await sandbox.write_atomic_async("notes.txt", b"kept\n")
    assert await provider.stop_idle() == [sandbox.name]
    assert await provider.engine.running(sandbox.name) is False
    assert await _out(sandbox, "cat notes.txt") == "kept\n"
    assert await provider.engine.running(sandbox.name) is True
    # Released with keep: the volume stays for a later turn (another server's provider finds it).
    await sandbox.release(keep=True)
    again = await make_provider().open("idle", [])
    assert await _out(again, "cat notes.txt") == "kept\n"
    await again.release(keep=False)
    assert await provider.engine.running(sandbox.name) is None
    assert not await provider.engine.volume_exists(sandbox.volume)


async def test_issue40_item2_kept_while_a_command_runs_is_stopped_by_the_reaper_once_it_ends(
    make_provider: Make,
) -> None:
    """Released with keep while a command still runs (a background process): the container runs
    on for it, the provider still knows the sandbox, and the idle reaper stops it once the command
    ends (forgotten, it ran until the sweep's keep period)."""
    provider = make_provider(idle_seconds=0.0)
    sandbox = await provider.open("kept-busy", [])
    lasting = await sandbox.start("echo up; exec sleep 9999", stdin=True)
    reader = await _reader(lasting)
    await _until(reader, b"up")
    await sandbox.release(keep=True)
    assert await provider.engine.running(sandbox.name) is True
    assert provider.for_session("kept-busy") is sandbox
    assert await provider.stop_idle() == []  # busy: left running
    await kill_group(lasting.proc)
    os.close(lasting.input_fd)
    await lasting.proc.wait()
    async with asyncio.timeout(GUARD):
        while sandbox.running_commands:  # noqa: ASYNC110 (the relay's reaping task, scheduled after its exit)
            await asyncio.sleep(0.05)
    assert await provider.stop_idle() == [sandbox.name]
    assert await provider.engine.running(sandbox.name) is False


async def test_issue40_item2_container_killed_mid_command_reports_interrupted_not_rerun(
    make_provider: Make,
) -> None:
    provider = make_provider()
    sandbox = await provider.open("killed", [])
    started = await sandbox.start("echo ran >> /workspace/count; echo started; exec sleep 9999", stdin=True)
    reader = await _reader(started)
    await _until(reader, b"started")
    await provider.engine.run("kill", "--signal", "KILL", sandbox.name)  # as an OOM kill or an operator would
    code = await asyncio.wait_for(started.proc.wait(), GUARD)
    rest = await asyncio.wait_for(reader.read(), GUARD)
    assert code == INTERRUPTED
    assert b"interrupted and is not run again" in rest
    os.close(started.input_fd)
    # The next command starts the container again; the killed one did not run a second time.
    assert await _out(sandbox, "cat /workspace/count") == "ran\n"


async def test_issue40_item2_no_secret_environment_enters_the_container(
    make_provider: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = {
        "OPENAI_API_KEY": "sk-test-openai-000",
        "ANTHROPIC_API_KEY": "sk-ant-test-000",
        "DEVAGENT_DB": "postgresql://u:pw-000@db/x",
        "DATABASE_URL": "postgresql://u:pw-001@db/x",
        "GITHUB_TOKEN": "ghp_test000",
        "DEVAGENT_TOKEN": "bearer-000",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    sandbox = await make_provider().open("env", [])
    # Even a caller's env holding them (it never should) does not carry them in.
    done = await sandbox.run(
        "env; cat /proc/1/environ | tr '\\0' '\\n'", env={**secrets, "FOO": "bar"}, time_limit=GUARD
    )
    seen = done.output.decode()
    assert "FOO=bar" in seen
    for name, value in secrets.items():
        assert name not in seen and value not in seen


async def test_issue40_item2_warm_pool_claim_gives_a_running_container(make_provider: Make) -> None:
    provider = make_provider(warm=1)
    pool = provider.pool(provider.template())
    await pool.fill()
    assert pool.ready == 1
    sandbox = await provider.open("from-pool", [])
    assert await provider.engine.running(sandbox.name) is True
    assert sandbox.volume.startswith("devagent-ws-pool-")
    assert await _out(sandbox, "id -un; ls -A /workspace | wc -l") == "agent\n0\n"
    await pool.fill()  # the refill the claim started, awaited here
    assert pool.ready == 1


# A server that starts a command in a session's container and dies without a word.
_DYING_SERVER = """
import asyncio, os, sys
from devagent.agent.sandbox.container import ContainerProvider
from devagent.agent.sandbox.podman import Engine, Template

async def main():
    templates = {"default": Template("default", sys.argv[1])}
    provider = ContainerProvider(engine=Engine(sys.argv[2]), templates=templates)
    sandbox = await provider.open("orphan", [])
    started = await sandbox.start("echo started; exec sleep 5551", stdin=True)
    said = b""
    while b"started" not in said:
        said += os.read(started.output_fd, 100)
    print("started", started.proc.pid, flush=True)
    os._exit(0)

asyncio.run(main())
"""


async def test_issue40_item2_a_command_never_outlives_the_server_that_started_it(
    make_provider: Make, sandbox_engine: EngineUnderTest
) -> None:
    sandbox = await make_provider().open("orphan", [])
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _DYING_SERVER,
        sandbox_engine.image,
        sandbox_engine.engine.program,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, **sandbox_engine.env},
    )
    out, _ = await asyncio.wait_for(server.communicate(), GUARD)
    assert out.startswith(b"started")
    relay_pid = int(out.split()[1])
    # The relay, orphaned, kills the command inside the container and ends: an outcome polled for.
    async with asyncio.timeout(GUARD):
        while "sleep 5551" in await _out(sandbox, "ps -eo args") or _alive(relay_pid):  # noqa: ASYNC110
            await asyncio.sleep(0.2)


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for its new parent to reap it does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


async def test_issue40_item2_timeout_and_background_process_with_its_input(make_provider: Make) -> None:
    provider = make_provider()
    sandbox, again = await asyncio.gather(provider.open("bg", []), provider.open("bg", []))
    assert sandbox is again  # one container for a session opened twice at once
    ended = await sandbox.run("sleep 3331 & sleep 3332; echo never", time_limit=1.0)
    assert ended.outcome == "timeout" and b"never" not in ended.output
    assert "sleep 333" not in await _out(sandbox, "ps -eo args")
    # A background process: input written as it runs, output read back, ended by closing its input.
    started = await sandbox.start("while read -r line; do echo got-$line; done; echo bye", stdin=True)
    reader = await _reader(started)
    os.write(started.input_fd, b"ping\n")
    assert (await _until(reader, b"\n")).strip() == b"got-ping"
    os.close(started.input_fd)
    assert (await _until(reader, b"bye")).strip() == b"bye"
    assert await asyncio.wait_for(started.proc.wait(), GUARD) == 0


async def test_issue40_item2_a_pty_command_stops_as_the_process_table_stops_it(make_provider: Make) -> None:
    sandbox = await make_provider().open("pty-stop", [])
    started = await sandbox.start("echo up; exec sleep 6661", stdin=True, tty=TtySize(rows=24, cols=80))
    reader = await _reader(started)
    await _until(reader, b"up")
    # The command inside, seen from outside: the container's processes are this machine's, in
    # /proc (asking the engine with another exec is slower, and a podman exec right after a
    # client was signalled can hang for minutes on a loaded machine: not what is tested here).
    # "up" comes just before the shell execs the sleep: it is looked for until it runs.
    async with asyncio.timeout(GUARD):
        while not running("6661", argument=True):  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    # tools/processes.py: SIGTERM to the process's own group (the relay) alone, which forwards it
    # inside; the terminal's foreground group is the engine's client, left to end by itself
    # (tests/unit/agent/tools/test_relayed_stop.py).
    assert started.relayed
    foreground = os.tcgetpgrp(started.input_fd)
    assert foreground not in (started.proc.pid, os.getpgrp())
    os.killpg(started.proc.pid, signal.SIGTERM)
    await asyncio.wait_for(started.proc.wait(), GUARD)
    async with asyncio.timeout(GUARD):
        while running("6661", argument=True):  # noqa: ASYNC110
            await asyncio.sleep(0.2)
    os.close(started.input_fd)


async def test_issue40_item2_an_unopened_sandbox_opens_on_its_first_use(make_provider: Make) -> None:
    provider = make_provider()
    sandbox = provider.for_session("lazy", [Path("/srv/lazy")])  # as the core's session does
    assert provider.for_session("lazy", []) is sandbox
    assert sandbox.volume == "" and sandbox.refuses("/srv/lazy/src") is None
    assert sandbox.refuses("/etc") is not None
    assert await asyncio.to_thread(sandbox.list_dir, "/srv/lazy") == []  # opened by a blocking call
    assert await _out(sandbox, "id -un") == "agent\n"


async def test_issue40_item2_streams_and_the_limits_timeout(make_provider: Make) -> None:
    sandbox = await make_provider().open("streams", [])
    # Streams as the interface's `Streams(errors=True)` asks: output and error apart.
    started = await sandbox.start(
        "read -r x; echo out-$x; echo err-$x >&2",
        stdin="pipe",
        streams=SimpleNamespace(errors=True, limit=2**16),
    )
    proc = started.proc
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out, err = await asyncio.wait_for(proc.communicate(b"one\n"), GUARD)
    assert (out, err, proc.returncode) == (b"out-one\n", b"err-one\n", 0)
    # Limits(timeout=...): the relay ends the command's group when its time is up.
    timed = await sandbox.start("sleep 2221 & sleep 2222", limits=SimpleNamespace(timeout=1.0))
    assert await asyncio.wait_for(timed.proc.wait(), GUARD) != 0
    os.close(timed.output_fd)
    assert "sleep 222" not in await _out(sandbox, "ps -eo args")


async def test_issue40_item2_a_sweep_removes_only_what_carries_all_its_labels(make_provider: Make) -> None:
    mine = make_provider(labels={"devagent.part": "mine"})
    theirs = make_provider(labels={"devagent.part": "theirs"})
    gone = await mine.open("swept", [])
    kept = await theirs.open("kept", [])
    assert await mine.sweep() == 2  # its container and its volume
    assert await mine.engine.running(gone.name) is None
    assert await theirs.engine.running(kept.name) is True
    assert await theirs.engine.volume_exists(kept.volume)


async def test_issue40_item1_a_container_stopped_between_commands_is_started_and_the_command_runs_once(
    make_provider: Make,
) -> None:
    """A container stopped from outside while the server believes it runs (an operator's `podman
    stop` or `docker stop`): the next command finds it stopped before it began, so the container
    is started and the command runs, once, on the same workspace; nothing is reported
    interrupted."""
    provider = make_provider()
    sandbox = await provider.open("stopped-outside", [])
    assert await _out(sandbox, "echo one >> count; cat count") == "one\n"
    await provider.engine.stop(sandbox.name, grace=0)
    assert await provider.engine.running(sandbox.name) is False
    done = await sandbox.run("echo two >> count; cat count", time_limit=GUARD)
    assert (done.code, done.outcome) == (0, "done"), done
    assert done.output.endswith(b"one\ntwo\n") and b"interrupted" not in done.output, done
    assert await _out(sandbox, "cat count") == "one\ntwo\n"


async def test_issue40_item2_what_a_command_leaves_running_ends_with_it(make_provider: Make) -> None:
    """A command's own leftovers (`cmd &`, with or without its output) end when it does, as a
    local command's namespace ends with it: the container outlives the command, its leftovers do
    not. A background command (the shell tool's `background`) is the command itself and runs on."""
    sandbox = await make_provider().open("leftovers", [])
    assert await _out(sandbox, "sleep 7771 >/dev/null 2>&1 & echo started") == "started\n"
    assert await _out(sandbox, "sleep 7772 & echo started") == "started\n"  # holding the output
    async with asyncio.timeout(GUARD):
        while "sleep 777" in await _out(sandbox, "ps -eo args"):  # noqa: ASYNC110
            await asyncio.sleep(0.2)
    lasting = await sandbox.start("echo up; exec sleep 7773", stdin=True)
    reader = await _reader(lasting)
    await _until(reader, b"up")
    assert await _out(sandbox, "echo other; true") == "other\n"
    assert "sleep 7773" in await _out(sandbox, "ps -eo args")  # another command's end left it be
    await kill_group(lasting.proc)
    os.close(lasting.input_fd)


async def test_issue40_item2_a_file_operation_starts_a_container_stopped_from_outside(
    make_provider: Make,
) -> None:
    """The blocking file operations (the core's tools call them from a thread) find the container
    stopped from outside, start it and run once more: Podman refuses the exec with 255, Docker's
    client with 1 (`Engine.refused`)."""
    provider = make_provider()
    sandbox = await provider.open("files-stopped", [])
    await sandbox.write_atomic_async("kept.txt", b"kept")
    await provider.engine.stop(sandbox.name, grace=0)
    assert await asyncio.to_thread(sandbox.read_bytes, "kept.txt") == b"kept"
    assert await provider.engine.running(sandbox.name) is True
