"""Issue 12 item 7: the shell sandbox (bubblewrap). A sandboxed `run_shell_command` writes only in
the workspace roots, reaches no network, and leaves no process behind; the settings, flags and the
start-up line that choose it."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.events import ExecuteDetails, ToolKind
from devagent.agent.policy import approval
from devagent.agent.sandbox import accounts, choose, probe
from devagent.agent.sandbox.base import SandboxError, runs_sandboxed
from devagent.agent.sandbox.choose import choose_sandbox
from devagent.agent.sandbox.local import Bubblewrap
from devagent.agent.sandbox.none import SandboxMissing, root_note
from devagent.agent.settings import CoreConfig
from devagent.agent.state import SessionState
from devagent.agent.tools.base import ToolContext, ToolResult
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.shell import RunShellCommand
from devagent.agent.tools.workspace import Workspace
from devagent.config import ConfigError, load_config
from tests.sandboxes import sandbox_of

WITHIN = 30.0  # seconds a condition may take on a loaded machine (a bound, never a pace)


def _bwrap_here() -> Bubblewrap | str:
    return probe.probe_bwrap()


@pytest.fixture
def bwrap() -> Bubblewrap:
    probed = _bwrap_here()
    if isinstance(probed, str):
        pytest.skip(f"bubblewrap cannot run here: {probed}")
    return probed


def make_ctx(root: Path, sandbox: Bubblewrap | None = None, **kw: Any) -> ToolContext:
    """A tool call's context in `root`, its commands in `sandbox` (None: unsandboxed)."""
    return ToolContext(
        workspace=Workspace([root]),
        state=SessionState(workspace_roots=[str(root)]),
        call_id="c1",
        sandbox=sandbox_of(sandbox, [root]),
        **kw,
    )


def use_sandbox(ctx: ToolContext, sandbox: Bubblewrap | None) -> None:
    """The context's commands from now on in `sandbox` (None: unsandboxed)."""
    ctx.sandbox = sandbox_of(sandbox, ctx.workspace.roots)


async def sh(command: str, ctx: ToolContext) -> ToolResult:
    return await RunShellCommand().run({"command": command}, ctx)


def exit_code(res: ToolResult) -> int:
    code = res.data["exit_code"]
    assert isinstance(code, int)
    return code


# --- the filesystem --------------------------------------------------------------------------------


async def test_sandboxed_command_writes_only_in_the_workspace(
    bwrap: Bubblewrap, ws: Path, tmp_path: Path
) -> None:
    """issue 12 item 7: a sandboxed command writes in the workspace root; outside it (a directory
    elsewhere on disk, /root, a temporary directory beside the workspace) it cannot: the command
    fails or writes into its private /tmp, and no file appears."""
    outside_tmp = tmp_path / "outside"  # under /tmp, which is private inside the sandbox
    outside_tmp.mkdir()
    disk = Path("/var/tmp") if os.access("/var/tmp", os.W_OK) else Path.home()
    outside_disk = Path(tempfile.mkdtemp(prefix="devagent-sandbox-", dir=disk))  # not under /tmp
    try:
        ctx = make_ctx(ws)
        use_sandbox(ctx, bwrap)
        res = await sh("echo in > inside.txt && mkdir -p sub && echo deeper > sub/f && cat inside.txt", ctx)
        assert exit_code(res) == 0, res.text
        assert res.data["sandboxed"] is True
        assert (ws / "inside.txt").read_text() == "in\n" and (ws / "sub" / "f").read_text() == "deeper\n"

        res = await sh(f"touch {outside_disk}/x", ctx)
        assert exit_code(res) != 0 and "Read-only file system" in res.text, res.text
        res = await sh("touch /tmp/../root/devagent-sandbox-x", ctx)
        assert exit_code(res) != 0, res.text
        await sh(f"echo leaked > {outside_tmp}/x; echo leaked > {ws}/../leaked", ctx)
        assert not (outside_disk / "x").exists()
        assert not Path("/root/devagent-sandbox-x").exists()
        assert not (outside_tmp / "x").exists() and not (tmp_path / "leaked").exists()
        assert (ws / "inside.txt").exists()

        # the same command unsandboxed does write there: the refusal above is the sandbox's
        use_sandbox(ctx, None)
        res = await sh(f"touch {outside_disk}/x", ctx)
        assert exit_code(res) == 0 and (outside_disk / "x").exists()
    finally:
        for f in outside_disk.iterdir():
            f.unlink()
        outside_disk.rmdir()


async def test_sandbox_hides_the_data_directory_and_run(bwrap: Bubblewrap, ws: Path, tmp_path: Path) -> None:
    """issue 12 item 7: the server's data directory (its database) and /run (host sockets) are
    empty inside the sandbox."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "devagent.db").write_text("secret")
    hiding = Bubblewrap(bwrap.bwrap, bwrap.version, hidden=(data,))
    res = await sh(f"ls -A {data} | wc -l; ls -A /run | wc -l", make_ctx(ws, hiding))
    assert res.text.split()[:2] == ["0", "0"], res.text
    assert (data / "devagent.db").read_text() == "secret"


async def test_workspace_inside_the_hidden_directory_stays_writable(
    bwrap: Bubblewrap, tmp_path: Path
) -> None:
    """issue 12 item 7: mounts go parents first, so a root inside a hidden directory is visible."""
    data = tmp_path / "data"
    root = data / "ws"
    root.mkdir(parents=True)
    hiding = Bubblewrap(bwrap.bwrap, bwrap.version, hidden=(data,))
    res = await sh("echo ok > f && cat f", make_ctx(root, hiding))
    assert exit_code(res) == 0 and (root / "f").read_text() == "ok\n", res.text


# --- the network -----------------------------------------------------------------------------------


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP listener on 127.0.0.1 (connections wait in its backlog); its port."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    try:
        yield srv.getsockname()[1]
    finally:
        srv.close()


async def test_sandboxed_command_cannot_connect_to_localhost(
    bwrap: Bubblewrap, ws: Path, listener: int
) -> None:
    """issue 12 item 7: with a listener on 127.0.0.1, an unsandboxed command connects to it, a
    sandboxed one cannot (no network); `sandbox_network` lets it."""
    ctx = make_ctx(ws)
    connect = f"echo > /dev/tcp/127.0.0.1/{listener} && echo CONNECTED"
    py = (
        f"{sys.executable} -c 'import socket; socket.create_connection((\"127.0.0.1\", {listener}), 5)' "
        "&& echo PY-CONNECTED"
    )
    res = await sh(f"{connect}; {py}", ctx)
    assert "CONNECTED" in res.text and "PY-CONNECTED" in res.text, res.text

    use_sandbox(ctx, bwrap)
    res = await sh(connect, ctx)
    assert exit_code(res) != 0 and "CONNECTED" not in res.text, res.text
    res = await sh(py, ctx)
    assert exit_code(res) != 0 and "CONNECTED" not in res.text, res.text

    use_sandbox(ctx, Bubblewrap(bwrap.bwrap, bwrap.version, network=True))
    res = await sh(connect, ctx)
    assert exit_code(res) == 0 and "CONNECTED" in res.text, res.text


# --- the process tree ------------------------------------------------------------------------------


def _pids_running(token: str) -> list[int]:
    """Host pids of live (not zombie) processes whose command line is `sleep TOKEN`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if argv[:2] == [b"sleep", token.encode()] and state != "Z":
            found.append(int(entry))
    return found


async def _until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + WITHIN
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


async def _children_started(a: str, b: str, ended: Callable[[], str | None]) -> None:
    """Until both children of `_tree_command(a, b)` run. The command (or the process running it)
    ending before that fails at once, saying how it ended, rather than after the whole wait."""
    deadline = time.monotonic() + WITHIN
    while not (_pids_running(a) and _pids_running(b)):
        how = ended()
        assert how is None, f"the command ended before its children were seen: {how}"
        assert time.monotonic() < deadline, "the command's children never started"
        await asyncio.sleep(0.05)


def _task_end(task: asyncio.Task[Any]) -> Callable[[], str | None]:
    def how() -> str | None:
        if not task.done():
            return None
        if task.cancelled():
            return "cancelled"
        error = task.exception()
        return repr(error) if error is not None else repr(task.result())

    return how


def _process_end(proc: asyncio.subprocess.Process) -> Callable[[], str | None]:
    return lambda: None if proc.returncode is None else f"its process exited {proc.returncode}"


def _tokens() -> tuple[str, str]:
    n = uuid.uuid4().int % 10**6
    return f"{7000 + n / 10**6:.6f}", f"{8000 + n / 10**6:.6f}"  # sleep lengths no one else uses


def _tree_command(a: str, b: str) -> str:
    # a background child, and a daemon in its own session (out of reach of the process group)
    return f"sleep {a} & setsid sleep {b} & echo started > started; wait"


async def test_cancelled_sandboxed_command_leaves_no_process(bwrap: Bubblewrap, ws: Path) -> None:
    """issue 12 item 7: cancelling a sandboxed command (the turn's cancel event) ends its whole
    process tree: a sleeping child and a child that left the process group with setsid."""
    a, b = _tokens()
    ctx = make_ctx(ws, bwrap)
    task = asyncio.create_task(sh(_tree_command(a, b), ctx))
    await _children_started(a, b, _task_end(task))
    ctx.cancelled.set()
    with pytest.raises(ToolFailure) as info:
        await asyncio.wait_for(task, WITHIN)
    assert info.value.type == "cancelled"
    await _until(lambda: not _pids_running(a) and not _pids_running(b), "a child outlived the cancel")


async def test_turn_cancel_timeout_and_exit_end_the_sandboxed_tree(bwrap: Bubblewrap, ws: Path) -> None:
    """issue 12 item 7: the task being cancelled (the turn), the timeout, and the command's own
    exit end its whole tree too (background jobs do not outlive a sandboxed command)."""
    a, b = _tokens()
    task = asyncio.create_task(sh(_tree_command(a, b), make_ctx(ws, bwrap)))
    await _children_started(a, b, _task_end(task))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, WITHIN)
    await _until(lambda: not _pids_running(a) and not _pids_running(b), "a child outlived the turn")

    a, b = _tokens()
    with pytest.raises(ToolFailure) as info:
        await sh(_tree_command(a, b), make_ctx(ws, bwrap, shell_timeout=1.0))
    assert info.value.type == "timeout"
    await _until(lambda: not _pids_running(a) and not _pids_running(b), "a child outlived the timeout")

    a, b = _tokens()
    # the command exits once its children run (the test creates `go` after seeing them)
    command = f"{_tree_command(a, b).removesuffix('; wait')}; until [ -f go ]; do sleep 0.05; done; exit 7"
    ctx = make_ctx(ws, bwrap, shell_timeout=WITHIN)
    task = asyncio.create_task(sh(command, ctx))
    await _children_started(a, b, _task_end(task))
    (ws / "go").touch()
    res = await asyncio.wait_for(task, WITHIN)
    assert exit_code(res) == 7
    # the command ended: its background processes ended with it (its PID namespace is gone)
    await _until(lambda: not _pids_running(a) and not _pids_running(b), "a child outlived the command")


_SERVER = """
import asyncio, sys
from pathlib import Path
from devagent.agent.sandbox.local import LocalProvider
from devagent.agent.sandbox.probe import probe_bwrap
from devagent.agent.state import SessionState
from devagent.agent.tools.base import ToolContext
from devagent.agent.tools.workspace import Workspace
from devagent.agent.tools.shell import RunShellCommand

root = Path(sys.argv[1])
probed = probe_bwrap()
assert not isinstance(probed, str), probed
sandbox = LocalProvider(probed).for_session("s", [root])
state = SessionState(workspace_roots=[str(root)])
ctx = ToolContext(workspace=Workspace([root]), state=state, sandbox=sandbox)
asyncio.run(RunShellCommand().run({"command": sys.argv[2]}, ctx))
"""


async def _killed_leaves_no_child(server: asyncio.subprocess.Process, a: str, b: str) -> None:
    """SIGKILLs `server` (no clean-up of its own); its command's processes (tokens `a`, `b`) end too."""
    os.kill(server.pid, signal.SIGKILL)
    await asyncio.wait_for(server.wait(), WITHIN)
    await _until(lambda: not _pids_running(a) and not _pids_running(b), "a child outlived the server")


async def _reaped(server: asyncio.subprocess.Process) -> None:
    """Kills `server` if it still runs, and waits for it."""
    if server.returncode is None:
        server.kill()
        await server.wait()


async def test_sandboxed_tree_dies_with_the_server(bwrap: Bubblewrap, ws: Path) -> None:
    """issue 12 item 7: when the process running the command is killed (SIGKILL: no clean-up of
    its own), the command and everything it started end too (--die-with-parent)."""
    a, b = _tokens()
    server = await asyncio.create_subprocess_exec(sys.executable, "-c", _SERVER, str(ws), _tree_command(a, b))
    try:
        await _children_started(a, b, _process_end(server))
        await _killed_leaves_no_child(server, a, b)
    finally:
        await _reaped(server)


# --- what the user and the model are told --------------------------------------------------------


async def test_permission_request_says_sandboxed(bwrap: Bubblewrap, ws: Path) -> None:
    """issue 12 item 7: the permission request of a shell command says it will run sandboxed
    (the options' descriptions, RFC PermissionOption fields); unsandboxed it does not."""
    args = {"command": "git status"}
    plain = approval.options_for(ToolKind.EXECUTE, "run_shell_command", args)
    assert not any("sandbox" in o.description for o in plain)
    assert "sandbox" not in RunShellCommand().definition()["description"]

    sandbox = sandbox_of(bwrap, [ws])
    options = {
        o.id: o.description
        for o in approval.options_for(ToolKind.EXECUTE, "run_shell_command", args, sandbox)
    }
    assert "in the sandbox" in options["proceed_once"] and "without network" in options["proceed_once"]
    assert "`git status`" in options["proceed_always"] and "sandbox" in options["proceed_always"]
    assert "sandbox" not in options["cancel"]
    described = RunShellCommand(sandbox).definition()["description"]
    assert "sandbox" in described and "no network" in described
    # the file tools' requests are unchanged
    edit = approval.options_for(ToolKind.EDIT, "write_file", {"path": "a"})
    assert not any("sandbox" in o.description for o in edit)
    details = await RunShellCommand(sandbox).confirmation(args, make_ctx(ws, bwrap))
    assert isinstance(details, ExecuteDetails) and details.command == "git status"


# --- settings, flags and the start-up line -------------------------------------------------------


def _fake_probe(monkeypatch: pytest.MonkeyPatch, result: Bubblewrap | str) -> None:
    def probe(user: tuple[int, int, str] | None = None) -> Bubblewrap | str:
        return result if isinstance(result, str) else replace(result, user=user)

    monkeypatch.setattr(choose, "probe_bwrap", probe)


WORKS = Bubblewrap("/usr/bin/bwrap", "bubblewrap 0.8.0")
MISSING = "bwrap not installed: apt-get install bubblewrap"
# What the start-up line adds where the tests run as root (issue 28 item 3): who commands run as
# with the sandbox on, and that they run as root with it off.
AS_USER = ", commands run as nobody (uid 65534)" if os.geteuid() == 0 else ""
AS_ROOT = root_note()


def test_issue20_startup_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 12 item 7: the line says whether the sandbox is on and why; "on" where bwrap does not
    work is an error naming the fix, "auto" falls back to off saying why."""
    config = CoreConfig()
    _fake_probe(monkeypatch, WORKS)
    sandbox, line = choose_sandbox(None, config, "serve")
    assert line == f"Shell sandbox: on (bubblewrap 0.8.0, no network{AS_USER})"
    assert isinstance(sandbox, Bubblewrap) and not sandbox.network
    home = Path(os.path.realpath(Path.home()))
    assert Path(os.path.realpath(config.data_dir)) in sandbox.hidden and home in sandbox.hidden
    sandbox, line = choose_sandbox(None, CoreConfig(sandbox_network=True), "serve")
    assert line == f"Shell sandbox: on (bubblewrap 0.8.0, network allowed{AS_USER})"
    assert isinstance(sandbox, Bubblewrap) and sandbox.network

    # issue 20 item 3: serve's default fails closed where bwrap cannot run; "auto" is the
    # operator's explicit choice to run unsandboxed then.
    _fake_probe(monkeypatch, MISSING)
    missing, line = choose_sandbox(None, config, "serve")
    assert missing == SandboxMissing(MISSING)
    assert line.startswith(f"Shell sandbox: UNAVAILABLE ({MISSING}). Shell commands will fail until")
    assert choose_sandbox(None, CoreConfig(sandbox="auto"), "serve") == (
        None,
        f"Shell sandbox: off (sandbox = auto and {MISSING}){AS_ROOT}",
    )
    with pytest.raises(SandboxError, match=r"on \(--sandbox\) but bwrap not installed: apt-get install"):
        choose_sandbox(True, config, "serve")
    with pytest.raises(SandboxError, match=r"sandbox = on in the settings"):
        choose_sandbox(None, CoreConfig(sandbox="on"), "run")
    assert choose_sandbox(False, config, "serve") == (None, f"Shell sandbox: off (--no-sandbox){AS_ROOT}")


def test_issue20_serve_prints_the_line_and_refuses_on_without_bwrap(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """issue 12 item 7: `devagent serve` prints the line before it starts the server and uses the
    sandbox; with --sandbox where bwrap cannot run it exits 2 with one line and starts nothing."""
    from devagent.a2a import server
    from devagent.a2a.cli import ServeFlags, serve_command

    monkeypatch.chdir(tmp_path)
    for var in ("DEVAGENT_SANDBOX", "DEVAGENT_SANDBOX_NETWORK", "DEVAGENT_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    started: list[bool] = []
    configs: list[CoreConfig] = []  # what each server's core opens with (its sandboxes)
    monkeypatch.setattr(
        server,
        "run_server",
        lambda config, *a, **k: (configs.append(config), started.append(runs_sandboxed(config.sandboxes))),
    )

    _fake_probe(monkeypatch, WORKS)
    assert serve_command(ServeFlags(port=0, tokens=["t"])) == 0
    assert started == [True]
    assert f"Shell sandbox: on (bubblewrap 0.8.0, no network{AS_USER})" in capsys.readouterr().err

    _fake_probe(monkeypatch, MISSING)
    assert serve_command(ServeFlags(port=0, tokens=["t"])) == 0
    assert started == [True, False]
    assert configs[-1].sandboxes.missing == SandboxMissing(MISSING)  # commands fail closed
    assert f"Shell sandbox: UNAVAILABLE ({MISSING})" in capsys.readouterr().err

    assert serve_command(ServeFlags(port=0, tokens=["t"], sandbox=True)) == 2
    assert started == [True, False]
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "devagent: the shell sandbox is on (--sandbox) but bwrap not installed: apt-get install bubblewrap"
    ]


def test_flag_over_environment_over_toml_over_the_command_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """issue 12 item 7: --sandbox/--no-sandbox over DEVAGENT_SANDBOX over `sandbox` in
    devagent.toml over the command's default (auto for serve, off for run and wire)."""
    _fake_probe(monkeypatch, WORKS)
    toml = tmp_path / "devagent.toml"

    def on(flag: bool | None, env: dict[str, str], command: str) -> bool:
        config = load_config(environ={"DEVAGENT_CONFIG": str(toml), **env})
        return choose_sandbox(flag, config, command)[0] is not None

    toml.write_text("[devagent]\n")
    assert on(None, {}, "serve") and not on(None, {}, "run") and not on(None, {}, "wire")
    assert on(True, {}, "run") and on(True, {}, "wire") and not on(False, {}, "serve")

    toml.write_text('[devagent]\nsandbox = "on"\nsandbox_network = true\n')
    assert on(None, {}, "run") and on(None, {}, "wire")
    config = load_config(environ={"DEVAGENT_CONFIG": str(toml)})
    assert config.sandbox == "on" and config.sandbox_network is True
    assert not on(None, {"DEVAGENT_SANDBOX": "off"}, "run")  # the environment over the file
    assert not on(False, {}, "run")  # the flag over the file
    assert on(True, {"DEVAGENT_SANDBOX": "off"}, "serve")  # the flag over the environment

    toml.write_text('[devagent]\nsandbox = "off"\n')
    assert not on(None, {}, "serve") and on(None, {"DEVAGENT_SANDBOX": "auto"}, "wire")
    assert load_config(
        environ={"DEVAGENT_CONFIG": str(toml), "DEVAGENT_SANDBOX_NETWORK": "1"}
    ).sandbox_network

    with pytest.raises(ConfigError, match="sandbox must be one of auto, on, off"):
        load_config(environ={"DEVAGENT_SANDBOX": "maybe"})
    assert load_config({"sandbox": "YES"}, environ={}).sandbox == "on"


def test_wire_and_run_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 12 item 7: `devagent wire` and `devagent run` take --sandbox/--no-sandbox."""
    from typer.testing import CliRunner

    from devagent.cli import app
    from devagent.wire.cli import build_parser

    assert build_parser().parse_args(["--sandbox"]).sandbox is True
    assert build_parser().parse_args(["--no-sandbox"]).sandbox is False
    assert build_parser().parse_args([]).sandbox is None
    _fake_probe(monkeypatch, MISSING)
    monkeypatch.delenv("DEVAGENT_SANDBOX", raising=False)
    result = CliRunner().invoke(app, ["run", "hi", "--sandbox"])
    assert result.exit_code == 2
    assert "the shell sandbox is on (--sandbox) but bwrap not installed" in result.output


def test_probe_on_this_machine() -> None:
    """issue 12 item 7: the probe answers once, with a working sandbox or why not and the fix."""
    probed = probe.probe_bwrap()
    assert probe.probe_bwrap() is probed  # cached: bwrap runs once per process
    if isinstance(probed, str):
        assert "apt-get install bubblewrap" in probed or "namespaces" in probed or "--no-sandbox" in probed
    else:
        assert probed.version.startswith("bubblewrap")


def test_issue28_item3_sandbox_user_and_sandbox_hide(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """issue 28 item 3: `sandbox_hide` (DEVAGENT_SANDBOX_HIDE, comma-separated, or a list in the
    settings file) and `sandbox_user` are settings; what is named is hidden (a folder) or masked (a
    file) beside /etc/shadow and /root; the sandbox user is never root; a root server says that
    its commands run as root when the sandbox is off, and as whom when it is on."""
    toml = tmp_path / "config.toml"
    toml.write_text('[devagent]\nsandbox_hide = ["/etc/devagent/token", "~/keys"]\nsandbox_user = "nobody"\n')
    config = load_config(environ={"DEVAGENT_CONFIG": str(toml)})
    assert config.sandbox_hide == ("/etc/devagent/token", "~/keys") and config.sandbox_user == "nobody"
    config = load_config(
        environ={"DEVAGENT_SANDBOX_HIDE": "/srv/a, /srv/b", "DEVAGENT_SANDBOX_USER": "1234:1234"}
    )
    assert config.sandbox_hide == ("/srv/a", "/srv/b") and config.sandbox_user == "1234:1234"

    assert accounts.sandbox_account("1234:1234")[:2] == (1234, 1234)
    assert accounts.sandbox_account("")[2] == "nobody"
    for root in ("0", "root", "1234:0"):
        with pytest.raises(SandboxError, match="never run as root"):
            accounts.sandbox_account(root)
    with pytest.raises(SandboxError, match="not a user"):
        accounts.sandbox_account("no-such-user-anywhere")

    _fake_probe(monkeypatch, WORKS)
    secret = tmp_path / "token"
    sandbox, line = choose_sandbox(None, CoreConfig(sandbox_hide=(str(secret),)), "serve")
    assert isinstance(sandbox, Bubblewrap)
    assert secret in sandbox.hidden and secret in sandbox.masked  # whichever it is at the time
    assert Path("/etc/shadow") in sandbox.masked and Path("/root") in sandbox.hidden
    if os.geteuid() == 0:
        assert sandbox.user is not None and sandbox.user[0] != 0
        assert line.endswith(f"commands run as nobody (uid {sandbox.user[0]}))")
        with pytest.raises(SandboxError, match="never run as root"):
            choose_sandbox(None, CoreConfig(sandbox_user="root"), "serve")
        off = choose_sandbox(False, CoreConfig(), "serve")[1]
        assert off.endswith("The server runs as root: so do its commands, with root's access to every file")
    else:
        assert sandbox.user is None


_ROOT_SERVER = """
import asyncio, sys
from pathlib import Path
from devagent.agent.sandbox.choose import setup_sandbox
from devagent.agent.settings import CoreConfig
from devagent.agent.state import SessionState
from devagent.agent.tools.base import ToolContext
from devagent.agent.tools.workspace import Workspace
from devagent.agent.tools.shell import RunShellCommand

root = Path(sys.argv[1])
config = CoreConfig()
print(setup_sandbox(True, config, "serve"), flush=True)
assert config.sandboxes is not None
sandbox = config.sandboxes.for_session("s", [root])
state = SessionState(workspace_roots=[str(root)])
ctx = ToolContext(workspace=Workspace([root]), state=state, sandbox=sandbox)
asyncio.run(RunShellCommand().run({"command": sys.argv[2]}, ctx))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox user is root's only")
async def test_issue28_item3_sandbox_user_tree_ends_with_the_server(bwrap: Bubblewrap, ws: Path) -> None:
    """issue 28 item 3: where a root server's commands become the sandbox user inside, everything
    they start is that user's (not root's) and still ends when the server is killed."""
    from tests.sandbox_user import for_sandbox_user, nobody

    for_sandbox_user(ws)
    a, b = _tokens()
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _ROOT_SERVER, str(ws), _tree_command(a, b), stdout=asyncio.subprocess.PIPE
    )
    try:
        assert server.stdout is not None
        assert "commands run as nobody" in (await server.stdout.readline()).decode()
        await _children_started(a, b, _process_end(server))
        for pid in (*_pids_running(a), *_pids_running(b)):
            assert os.stat(f"/proc/{pid}").st_uid == nobody()[0]
        await _killed_leaves_no_child(server, a, b)
    finally:
        await _reaped(server)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving folders away takes root")
def test_issue28_item3_workspace_the_sandbox_user_cannot_use_is_named() -> None:
    """issue 28 item 3: a workspace the sandbox user cannot write is refused with the fix; where
    bwrap itself runs as that user, so is one behind a folder closed to it (the outermost one
    is named: the first to open)."""
    import shutil

    from tests.sandbox_user import nobody

    tmp_path = Path(tempfile.mkdtemp(dir="/var/tmp"))  # pytest's own folders are closed: not here
    tmp_path.chmod(0o755)
    try:
        _unwritable_cases(tmp_path, *nobody())
    finally:
        shutil.rmtree(tmp_path)


def _unwritable_cases(tmp_path: Path, uid: int, gid: int) -> None:
    from tests.sandbox_user import for_sandbox_user

    user = (uid, gid, "nobody")
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    (closed / "ws").mkdir()
    ws = for_sandbox_user(closed / "ws")
    by_root, by_user = Bubblewrap("bwrap", user=user), Bubblewrap("bwrap", user=user, as_user=True)
    assert by_root.unwritable([ws], str(ws)) is None  # root makes the way to it
    why = by_user.unwritable([ws], str(ws))
    assert why is not None and f"({closed} is closed to it)" in why and f"chown -R {uid}:{gid} {ws}" in why
    theirs = tmp_path / "theirs"  # root's, 0755: passable, not writable
    theirs.mkdir(mode=0o755)
    for sandbox in (by_root, by_user):
        why = sandbox.unwritable([theirs], str(theirs))  # nobody by default: give it to a user
        assert why is not None and f"chown -R USER {theirs}" in why and "sandbox_user" in why
        named = replace(sandbox, user_named=True).unwritable([theirs], str(theirs))
        assert named is not None and "nobody cannot write in it" in named and f"chown -R {uid}:{gid}" in named
    assert Bubblewrap("bwrap").unwritable([theirs], str(theirs)) is None  # the server's own user


@pytest.mark.skipif(os.geteuid() != 0, reason="giving folders away takes root")
def test_issue37_item10_a_root_servers_commands_run_as_the_workspaces_owner(tmp_path: Path) -> None:
    """issue 37 item 10: with no sandbox_user set, a root server's commands run as the one owner
    of its workspace roots when that is not root; root's roots, or roots of several owners, give
    nobody; a sandbox_user set wins."""
    from tests.sandbox_user import nobody

    theirs, other, roots = tmp_path / "theirs", tmp_path / "other", tmp_path / "roots"
    for folder, owner in ((theirs, 4242), (other, 4343), (roots, 0)):
        folder.mkdir()
        os.chown(folder, owner, owner)
    assert accounts.root_sandbox_user("", [theirs]) == (4242, 4242, "4242")
    assert accounts.root_sandbox_user("", [theirs, theirs]) == (4242, 4242, "4242")
    for owned_by in ([roots], [theirs, other], [theirs, roots], []):
        assert accounts.root_sandbox_user("", owned_by)[:2] == nobody(), owned_by
    assert accounts.root_sandbox_user("4343", [theirs])[:2] == (4343, 4343)
    with pytest.raises(SandboxError, match="never run as root"):
        accounts.root_sandbox_user("root", [theirs])
