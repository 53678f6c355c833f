"""Issue 20 in the core: what the agent starts gets an allow-listed environment (shell commands and
MCP servers), the operator's extra names are checked, and each command runs under its limits."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.events import ToolCallStatus, ToolCallUpdate, UserPrompt
from devagent.agent.sandbox.childenv import check_env_pass, child_env
from devagent.agent.settings import CoreConfig, sqlite_file
from devagent.agent.state import SessionState
from devagent.agent.tools.base import ToolContext
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.shell import RunShellCommand
from devagent.agent.tools.workspace import Workspace
from devagent.config import ConfigError, load_config
from tests.core_helpers import call, collect
from tests.mcp_servers import SERVER

SERVER_ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/op",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TERM": "xterm",
    "DEVAGENT_TOKEN": "alice=t1,bob=t2",
    "DEVAGENT_DB": "postgresql+asyncpg://devagent:pw@db/devagent",
    "OPENAI_API_KEY": "sk-1",
    "GEMINI_API_KEY": "g-1",
    "OLLAMA_BASE_URL": "http://10.0.0.1:11434/v1",
    "AWS_SECRET_ACCESS_KEY": "aws-1",
    "BASH_FUNC_x%%": "() { id; }",
    "CI_TOKEN": "ci-1",
    "CI_NAME": "ci",
}


def test_issue20_child_env_is_an_allow_list() -> None:
    """issue 20 item 1: the base names pass, everything else stays in the server: devagent's
    settings, provider keys and endpoints, and names devagent never heard of."""
    env = child_env(environ=SERVER_ENV)
    assert env == {
        "PATH": "/usr/bin:/bin",
        "HOME": "/home/op",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "xterm",
    }
    assert child_env(home="/tmp", environ={})["HOME"] == "/tmp"
    assert child_env(environ={})["PATH"]  # a PATH, even when the server has none


def test_issue20_operator_passes_names_and_prefixes_never_devagents_own() -> None:
    """issue 20 item 1: `env_pass` adds names and `PREFIX*`; a prefix never carries devagent's
    own variables or provider keys along; naming one is a settings error."""
    env = child_env(["CI_*", "AWS_SECRET_ACCESS_KEY"], environ=SERVER_ENV)
    assert env["CI_TOKEN"] == "ci-1" and env["CI_NAME"] == "ci" and env["AWS_SECRET_ACCESS_KEY"] == "aws-1"
    env = child_env(["DEVAGENT*", "OPENAI*", "OLLAMA_*"], environ=SERVER_ENV)
    assert not any(k.startswith(("DEVAGENT", "OPENAI", "OLLAMA")) for k in env)
    for bad in (["OPENAI_API_KEY"], ["DEVAGENT_TOKEN"], ["DEVAGENT_DB"], ["MOONSHOT_API_KEY"]):
        with pytest.raises(ValueError, match="never passed"):
            check_env_pass(bad)
        with pytest.raises(ConfigError, match="env_pass"):
            load_config({"env_pass": bad}, environ={})
    with pytest.raises(ConfigError, match="not a variable name"):
        load_config(environ={"DEVAGENT_ENV_PASS": "A=B"})
    assert load_config(environ={"DEVAGENT_ENV_PASS": "CI_*, GITHUB_TOKEN"}).env_pass == (
        "CI_*",
        "GITHUB_TOKEN",
    )


def test_issue20_settings_file_is_the_operators(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 20 item 2: the file --config names, else the user's own config folder; a devagent.toml
    in the current directory is not read. The file read is protected from every tool."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "devagent.toml").write_text('approval_mode = "yolo"\n')
    assert load_config(environ={"XDG_CONFIG_HOME": str(tmp_path / "cfg")}).approval_mode == "ask"
    user = tmp_path / "cfg" / "devagent" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text('approval_mode = "plan"\n')
    config = load_config(environ={"XDG_CONFIG_HOME": str(tmp_path / "cfg")})
    assert config.approval_mode == "plan" and config.config_path == user.resolve()
    config = load_config(
        environ={"DEVAGENT_CONFIG": "devagent.toml", "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    )
    assert config.approval_mode == "yolo" and config.config_path == (tmp_path / "devagent.toml").resolve()
    assert config.config_path in config.protected_paths()


def test_issue20_protected_paths_refused_as_edit_targets(tmp_path: Path) -> None:
    """issue 20 item 2: with the settings file, the data folder and the database inside the
    workspace, each is refused as a write target (before any permission is asked), as is `.git/`;
    other files are not."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "devagent.toml").write_text("")
    config = CoreConfig(
        data_dir=ws / ".devagent",
        db_url=f"sqlite+aiosqlite:///{ws}/state.db",
        config_path=ws / "devagent.toml",
    )
    workspace = Workspace([ws], config.protected_paths())
    for path in ("devagent.toml", ".devagent/devagent.db", "state.db", "state.db-wal", ".git/config", ".git"):
        with pytest.raises(ToolFailure) as e:
            workspace.check_writable(ws / path, path)
        assert e.value.type == "protected_path", path
    workspace.check_writable(ws / "src" / "app.py")
    workspace.check_writable(ws / ".gitignore")
    assert sqlite_file("sqlite:///rel.db") == Path("rel.db").resolve()
    assert sqlite_file("postgresql+asyncpg://u:p@h/db") is None and sqlite_file("sqlite://") is None


async def test_issue20_command_memory_limit(tmp_path: Path) -> None:
    """issue 20 item 3: a command that allocates more data memory than `command_memory_mb` fails;
    the same command under the default limit runs."""
    ctx = ToolContext(workspace=Workspace([tmp_path]), state=SessionState(workspace_roots=[str(tmp_path)]))
    grab = f"{sys.executable} -c 'b = bytearray(256 * 1024 * 1024); print(len(b))'"
    ctx.command_memory_mb = 64
    res = await RunShellCommand().run({"command": grab}, ctx)
    assert res.data["exit_code"] != 0 and "MemoryError" in res.text
    ctx.command_memory_mb = 4096
    res = await RunShellCommand().run({"command": grab + "; ulimit -d; ulimit -d unlimited"}, ctx)
    assert res.data["exit_code"] != 0, res.text  # the command cannot raise its limit
    assert "268435456\n4194304\n" in res.text


async def test_issue20_mcp_server_gets_the_allow_list(
    core_factory: Any, script: Any, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """issue 20 item 1: an operator's stdio MCP server sees the allow-list, the operator's `env`
    for it and the names of `env_pass`, never the server's secrets."""
    for k, v in SERVER_ENV.items():
        if k not in ("PATH", "HOME"):
            monkeypatch.setenv(k, v)
    server = tmp_path / "srv.py"
    server.write_text(SERVER)
    spec = script([[call("srv__environment", {}, "c1")], [{"text": "ok"}]])
    core = await core_factory(
        spec,
        mcp_servers={"srv": {"command": sys.executable, "args": [str(server)], "env": {"GIVEN": "op"}}},
        env_pass=("CI_NAME",),
        approval_mode="yolo",
    )
    s = await core.create_session([workspace], approval_mode="yolo")
    events = await collect(s.advance(UserPrompt("env")))
    done = [e.call for e in events if isinstance(e, ToolCallUpdate) and e.call.id == "c1"][-1]
    assert done.status is ToolCallStatus.SUCCEEDED, done
    seen = dict(line.split("=", 1) for line in done.output.text.splitlines() if "=" in line)
    assert seen["GIVEN"] == "op" and seen["CI_NAME"] == "ci" and seen["LANG"] == "C.UTF-8"
    for secret in ("DEVAGENT_TOKEN", "DEVAGENT_DB", "OPENAI_API_KEY", "GEMINI_API_KEY", "CI_TOKEN"):
        assert secret not in seen, secret


def test_issue20_workspaces_per_identity(tmp_path: Path) -> None:
    """issue 20 item 4: one identity: the roots; two or more: each its own folder under every
    root (made 0700 when first used); the operator's mapping wins for the identities it names."""
    from devagent.a2a.settings import A2ASettings, parse_token_args, parse_workspace_for

    root = tmp_path / "root"
    root.mkdir()
    one = A2ASettings(workspace_roots=[root], tokens=parse_token_args(["alice=t1"]))
    assert not one.per_identity and one.roots_for("alice") == [root.resolve()]
    two = A2ASettings(workspace_roots=[root], tokens=parse_token_args(["alice=t1,bob=t2"]))
    assert two.roots_for("alice") == [root.resolve() / "alice"]
    assert (root / "alice").is_dir() and (root / "alice").stat().st_mode & 0o777 == 0o700
    mapped_dir = tmp_path / "srv-bob"
    mapped_dir.mkdir()
    mapped = A2ASettings(
        workspace_roots=[root],
        tokens=parse_token_args(["alice=t1", "bob=t2"]),
        workspace_for=parse_workspace_for([f"bob={mapped_dir}"]),
    )
    assert mapped.roots_for("bob") == [mapped_dir.resolve()]
    assert mapped.roots_for("alice") == [root.resolve() / "alice"]
    mapped.check_identities()
    with pytest.raises(ValueError, match="NAME=DIR"):
        parse_workspace_for(["bob"])


def test_issue20_serve_refuses_bad_identities(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """issue 20 item 4: an identity name that cannot be a folder, or a mapped folder that does not
    exist, stops `serve` at start with one line and exit code 2."""
    from devagent.a2a import server
    from devagent.a2a.cli import ServeFlags, serve_command

    monkeypatch.delenv("DEVAGENT_WORKSPACE_FOR", raising=False)
    monkeypatch.setattr(server, "run_server", lambda *a, **k: None)
    root = tmp_path / "root"
    root.mkdir()
    data = {"workspace_roots": [root], "port": 0, "sandbox": False}
    assert serve_command(ServeFlags(tokens=["../x=t1", "bob=t2"], **data)) == 2
    assert "identity name '../x'" in capsys.readouterr().err
    missing = tmp_path / "missing"
    assert serve_command(ServeFlags(tokens=["alice=t1"], workspace_for=[f"alice={missing}"], **data)) == 2
    assert "not a directory" in capsys.readouterr().err
    assert serve_command(ServeFlags(tokens=["alice=t1"], workspace_for=[f"alice={root}"], **data)) == 0
