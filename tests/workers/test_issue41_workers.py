"""Issue 41 items 1-3: `devagent serve` with `sandbox_backend = worker` and real `devagent worker`
processes (local backend inside, bubblewrap), each in a network namespace of its own that reaches
only the server's port. A scripted model's turn runs shell commands and file operations through
the worker; a worker killed (SIGKILL, from outside) mid-command leaves that call interrupted, never
run again, and the next call runs on the other worker with the workspace as of the last finished
call; the tokens are kept apart and checked; a result for a call the worker does not hold is
refused; a revoked token is refused without a restart."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from tests.a2a.helpers import rpc, turn, v03_message
from tests.a2a.test_hostile import script, tool_outputs
from tests.core_helpers import call, shell_call
from tests.workers.conftest import CALLER, DEVAGENT, WITHIN, WORKER_TOKEN, WorkerSite
from tests.workers.fifos import FifoCounter, release_blocked
from tests.workers.netns import exists, isolated


@pytest.fixture
def site(tmp_path: Path) -> Iterator[WorkerSite]:
    s = WorkerSite(tmp_path)
    try:
        yield s
    finally:
        s.cleanup()


async def test_issue41_item1_a_turn_runs_its_shell_commands_on_a_worker(site: WorkerSite) -> None:
    """issue 41 item 1: the turn's shell commands run on the worker in its network namespace
    (its state folder is the commands' working directory, the server's workspace folder stays
    empty), their output streams back over A2A, and none of the server's secrets (model key,
    callers' or workers' tokens, database URL) reaches them."""
    steps = [
        [shell_call("pwd; echo made by the shell > by-shell.txt; env; echo END")],
        [shell_call("cat by-shell.txt; echo END2")],
        [{"text": "done"}],
    ]
    model = script(site.tmp / "s.json", steps)
    with site.server(model) as s, site.worker(s, "w1") as w1:
        w1.wait_connected()
        frames = await turn(s.url, CALLER, "make files", site.root / "alice")
    output = tool_outputs(json.dumps(frames))
    assert str(w1.state_dir / "workspaces") in output, output
    assert "END" in output and "made by the shell\\nEND2" in output, output
    for secret in ("sk-leak-model-key", CALLER, WORKER_TOKEN, "sqlite+aiosqlite", "DEVAGENT_"):
        assert secret not in output, secret
    assert list((site.root / "alice").iterdir()) == []  # the workspace is the worker's


async def test_issue41_item2_worker_killed_mid_command_interrupts_the_call_and_the_next_runs_on_the_other(
    site: WorkerSite,
) -> None:
    """issue 41 item 2: two workers; the command of the session's second call blocks on a FIFO
    the test controls, after changing the workspace. The worker holding the session is SIGKILLed
    from outside while it runs. That call is reported interrupted and never runs again (the
    side-effect counter, a FIFO the command writes its start into, holds one line); the session's
    next call runs on the other worker, in the workspace as of the last finished call (the first
    call's file is there, the interrupted call's change is not)."""
    started = FifoCounter(site.shared / "started")
    go = site.shared / "go"
    os.mkfifo(go, 0o666)
    os.chmod(go, 0o666)
    steps = [
        [shell_call("echo first > a.txt; echo ONE")],
        [shell_call(f"echo partial > c.txt; pwd > {started.path}; cat {go}; echo NEVER")],
        [shell_call("pwd; cat a.txt; test -e c.txt && echo HAS-C || echo NO-C; echo AFTER")],
        [{"text": "done"}],
    ]
    model = script(site.tmp / "s.json", steps)
    try:
        with site.server(model) as s, site.worker(s, "w1") as w1, site.worker(s, "w2") as w2:
            w1.wait_connected()
            w2.wait_connected()
            running = asyncio.ensure_future(turn(s.url, CALLER, "go", site.root / "alice"))
            holder_folder = await started.first_line()
            holder, other = (w1, w2) if holder_folder.startswith(str(w1.state_dir)) else (w2, w1)
            assert holder_folder.startswith(str(holder.state_dir)), holder_folder
            holder.kill()
            frames = await asyncio.wait_for(running, WITHIN * 2)
    finally:
        release_blocked(go)
        started.close()
    output = tool_outputs(json.dumps(frames))
    assert "ONE" in output
    assert "interrupted and is not run again" in output, output
    assert "NEVER" not in output
    after = next(line for line in output.splitlines() if "AFTER" in line)  # the third call's result
    assert str(other.state_dir) in after and "first" in after and "NO-C" in after, output
    assert started.lines == [holder_folder]  # the interrupted command ran once, never again


def devagent_cli(site: WorkerSite, *args: str) -> str:
    done = subprocess.run(
        [*DEVAGENT, *args, "--db", site.db_url], capture_output=True, text=True, env=site.env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def bearer(token: str, worker: str = "") -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", **({"X-Devagent-Worker": worker} if worker else {})}


async def test_issue41_item3_tokens_kept_apart_results_fenced_and_revoked_without_restart(
    site: WorkerSite,
) -> None:
    """issue 41 item 3: a worker's token is refused on the callers' endpoints (A2A, /metrics) and
    a caller's on the workers' door; a registered worker's result or output for a call another
    worker holds is refused (the call's result stays the real worker's); a token added to the
    store (`devagent workers token add`) opens the door at once, and once revoked (`... revoke`)
    it is refused on the next request and its running worker stops, the server never restarted; a
    token bound to a pool registers its workers for that pool only."""
    model = script(site.tmp / "s.json", [[shell_call("echo REAL")], [{"text": "done"}]])
    with site.server(model) as s, site.worker(s, "w1", netns=False) as w1:
        w1.wait_connected()
        frames = await turn(s.url, CALLER, "go", site.root / "alice")
        assert "REAL" in tool_outputs(json.dumps(frames))
        async with httpx.AsyncClient(base_url=s.url, timeout=60) as c:
            msg = {"message": v03_message("hi", settings={"workspace_path": str(site.root / "alice")})}
            assert (
                await c.post("/", json=rpc("message/send", msg), headers=bearer(WORKER_TOKEN))
            ).status_code == 401
            assert (await c.get("/metrics", headers=bearer(WORKER_TOKEN))).status_code == 401
            hello = {"worker": "intruder-1", "pool": "default", "templates": ["default"], "capacity": 1}
            r = await c.post("/workers/v1/hello", json=hello, headers=bearer(CALLER))
            assert r.status_code == 401
            r = await c.post("/workers/v1/poll", json={"wait": 0}, headers=bearer(CALLER, "intruder-1"))
            assert r.status_code == 401
            pool_b = devagent_cli(site, "workers", "token", "add", "pool-b", "--pool", "b")
            r = await c.post("/workers/v1/hello", json={**hello, "worker": "b-1"}, headers=bearer(pool_b))
            assert r.status_code == 403  # a pool's token registers for that pool only
            b_hello = {**hello, "worker": "b-1", "pool": "b"}
            assert (
                await c.post("/workers/v1/hello", json=b_hello, headers=bearer(pool_b))
            ).status_code == 200
            stored = devagent_cli(site, "workers", "token", "add", "intruder")
            assert (await c.post("/workers/v1/hello", json=hello, headers=bearer(stored))).status_code == 200
            as_intruder = bearer(stored, "intruder-1")
            done = {"code": 0, "result": None, "error": None, "snapshot": None}
            assert (
                await c.post("/workers/v1/calls/1/done", json=done, headers=as_intruder)
            ).status_code == 409
            r = await c.post(
                "/workers/v1/calls/1/output", params={"seq": 99}, content=b"forged", headers=as_intruder
            )
            assert r.status_code == 409
            # the worker's own token, another worker's name: not registered under it
            r = await c.post(
                "/workers/v1/calls/1/done", json=done, headers=bearer(WORKER_TOKEN, "intruder-1")
            )
            assert r.status_code == 409
            with site.worker(s, "w-stored", netns=False, token=stored) as w2:
                w2.wait_connected()
                assert "revoked intruder" in devagent_cli(site, "workers", "token", "revoke", "intruder")
                r = await c.post("/workers/v1/poll", json={"wait": 0}, headers=as_intruder)
                assert r.status_code == 401
                assert w2.proc.wait(WITHIN) == 1  # refused on its next poll: it stops
            assert "refused this worker" in w2.log_text()
            assert "intruder\tpool=*\trevoked" in devagent_cli(site, "workers", "token", "list")
    assert w1.proc.returncode == 0  # stopped at the end, never refused


def test_issue41_item1_a_workers_namespace_reaches_the_server_and_not_the_database(
    site: WorkerSite,
) -> None:
    """issue 41 (how to test): from inside a worker's namespace the server's port answers, and
    PostgreSQL's 127.0.0.1:5432 (and the host's 5432 through the veth) does not; the namespace
    is gone afterwards."""
    probe = (
        "import socket, sys\n"
        "for host, port in [(h, int(p)) for h, p in (a.split(':') for a in sys.argv[1:])]:\n"
        "    try:\n"
        "        socket.create_connection((host, port), timeout=3).close(); print(host, port, 'open')\n"
        "    except OSError as e:\n"
        "        print(host, port, 'closed', type(e).__name__)\n"
    )
    model = script(site.tmp / "s.json", [[{"text": "done"}]])
    with site.server(model) as s:
        port = int(s.url.rstrip("/").rsplit(":", 1)[1])
        with isolated(port) as ns:
            targets = [f"{ns.host}:{port}", "127.0.0.1:5432", f"{ns.host}:5432", "127.0.0.1:" + str(port)]
            done = subprocess.run(
                ns.argv([sys.executable, "-c", probe, *targets]), capture_output=True, text=True, timeout=60
            )
            name = ns.name
    lines = done.stdout.splitlines()
    assert lines[0] == f"{ns.host} {port} open", done
    assert all(" closed " in line for line in lines[1:]) and len(lines) == 4, done
    assert not exists(name)


async def test_issue41_item1_file_operations_reach_the_workers_workspace(site: WorkerSite) -> None:
    """issue 41 item 1: the worker backend's awaitable file operations (what the file tools use
    where `files_here` is False) run on the worker, confined to the session's workspace: write,
    read, list, stat, delete; a missing file is FileNotFoundError, a path outside a SandboxError;
    a command run in the same sandbox sees what they wrote."""
    from types import SimpleNamespace

    from devagent.agent.sandbox.base import Limits, SandboxError
    from devagent.agent.sandbox.worker import WorkerProvider

    config = SimpleNamespace(db_url=site.db_url, worker_lease_seconds=3, worker_wait_seconds=60)
    model = script(site.tmp / "s.json", [[{"text": "done"}]])
    ws = site.root / "alice"
    with site.server(model) as s, site.worker(s, "w1") as w1:
        w1.wait_connected()
        provider = WorkerProvider(config)
        try:
            sb = provider.for_session("files-session", [ws])
            assert sb.files_here is False
            await sb.write_atomic_async(ws / "d" / "x.txt", b"hello worker\n")
            assert await sb.read_bytes_async("d/x.txt") == b"hello worker\n"
            assert await sb.list_dir_async("d") == ["x.txt"]
            st = await sb.stat_async(ws / "d" / "x.txt")
            assert st is not None and st.st_size == 13
            assert await sb.stat_async("d/none") is None
            with pytest.raises(FileNotFoundError):
                await sb.read_bytes_async("d/none")
            with pytest.raises(SandboxError):
                await sb.read_bytes_async("/etc/passwd")
            started = await sb.start("cat d/x.txt; pwd", cwd=str(ws), env={}, limits=Limits())
            output = await asyncio.to_thread(read_to_end, started.output_fd)
            assert await started.proc.wait() == 0
            assert b"hello worker" in output and str(w1.state_dir).encode() in output
            await sb.delete_async("d/x.txt")
            assert await sb.list_dir_async("d") == []
        finally:
            await provider.close()
    assert list(ws.iterdir()) == []


async def test_issue41_item1_the_file_tools_of_a_turn_work_on_the_workers_workspace(site: WorkerSite) -> None:
    """issue 41 item 1 with issue 40's file tools: a turn's write_file, read_file, edit, glob and
    grep (the tools that go through the sandbox where its workspace is not on this host) act on
    the worker's copy of the workspace; the shell sees what they wrote, a path outside is refused,
    and the server's folder stays empty."""
    steps = [
        [call("write_file", {"path": "notes/a.txt", "content": "alpha\nbeta\n"}, "w")],
        [call("read_file", {"path": "notes/a.txt"}, "r")],
        [call("edit", {"path": "notes/a.txt", "old_string": "beta", "new_string": "gamma"}, "e")],
        [call("glob", {"pattern": "**/*.txt"}, "g")],
        [call("grep", {"pattern": "gam+a"}, "s")],
        [call("read_file", {"path": "/etc/hostname"}, "x")],
        [shell_call("cat notes/a.txt; echo END")],
        [{"text": "done"}],
    ]
    model = script(site.tmp / "s.json", steps)
    with site.server(model) as s, site.worker(s, "w1") as w1:
        w1.wait_connected()
        frames = await turn(s.url, CALLER, "files", site.root / "alice")
    output = tool_outputs(json.dumps(frames))
    assert "alpha" in output and "notes/a.txt" in output, output  # read, glob
    assert "alpha\\ngamma\\nEND" in output, output  # the edit, as the shell on the worker sees it
    assert "outside the workspace" in output, output  # /etc/hostname refused
    assert list((site.root / "alice").iterdir()) == []  # nothing of it on the server's host


def read_to_end(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


async def test_issue41_item1_input_signals_and_a_terminal_reach_the_command_on_the_worker(
    site: WorkerSite,
) -> None:
    """issue 41 item 1: what the shell tool, the background processes and the tty tool do to a
    local command reaches one on a worker through its relay: input written to it is read there;
    SIGTERM to the relay's process group ends the command there (exit 143, its side effect
    never repeated); a pseudo-terminal of 30x100 is the command's terminal there."""
    import signal as signals

    from devagent.agent.sandbox.base import Limits
    from devagent.agent.sandbox.worker import WorkerProvider
    from devagent.agent.tools.tty_screen import TtySize

    config = SimpleNamespace(db_url=site.db_url, worker_lease_seconds=5, worker_wait_seconds=60)
    started = FifoCounter(site.shared / "started")
    go = site.shared / "go"
    os.mkfifo(go, 0o666)
    os.chmod(go, 0o666)
    model = script(site.tmp / "s.json", [[{"text": "done"}]])
    ws = site.root / "alice"
    provider = WorkerProvider(config)
    try:
        with site.server(model) as s, site.worker(s, "w1") as w1:
            w1.wait_connected()
            sb = provider.for_session("interactive", [ws])
            piped = await sb.start("read x; echo got $x", cwd=str(ws), env={}, limits=Limits(), stdin="pipe")
            os.write(piped.input_fd, b"hello\n")
            os.close(piped.input_fd)
            assert b"got hello" in await asyncio.to_thread(read_to_end, piped.output_fd)
            assert await piped.proc.wait() == 0

            blocked = await sb.start(
                f"echo once > {started.path}; cat {go}", cwd=str(ws), env={}, limits=Limits()
            )
            await started.first_line()
            os.killpg(blocked.proc.pid, signals.SIGTERM)
            await asyncio.to_thread(read_to_end, blocked.output_fd)
            assert await blocked.proc.wait() == 143

            size = TtySize(30, 100)
            tty = await sb.start(
                "stty size; test -t 0 && echo TTY", cwd=str(ws), env={}, limits=Limits(), tty=size
            )
            screen = await asyncio.to_thread(read_pty, tty.output_fd)
            assert await tty.proc.wait() == 0
            assert "30 100" in screen and "TTY" in screen, screen
    finally:
        await provider.close()
        release_blocked(go)
        started.close()
    assert started.lines == ["once"]


def read_pty(fd: int) -> str:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the terminal's other end closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")
