"""issue 29 item 1: command-line flags reach config loading and error reports as values; parsing
them never writes the process environment (a flag stays with the command that read it)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from devagent import global_flags, stdio_cli
from devagent.config import ConfigError, load_config
from devagent.global_flags import GlobalFlags, take


def _devagent_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith("DEVAGENT_")}


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """No DEVAGENT_* variable that the flags under test could be confused with; what is left."""
    for var in ("DEVAGENT_CONFIG", "DEVAGENT_CONTEXT_TOKENS", "DEVAGENT_DEBUG", "DEVAGENT_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("DEVAGENT_API_KEY", raising=False)
    return _devagent_env()


def test_issue29_item1_take_lifts_the_global_flags_out_as_values(clean_env: dict[str, str]) -> None:
    line = ["--debug", "run", "hi", "--config=a.toml", "--context-tokens", "4096", "--", "--config", "b"]
    rest, flags = take(line)
    assert rest == ["run", "hi", "--", "--config", "b"]  # after `--` the line is the command's
    assert flags == GlobalFlags(config="a.toml", context_tokens="4096", debug=True)
    assert flags.settings() == {"config_path": "a.toml", "context_tokens": "4096"}
    rest, flags = take(["acp", "--debug", "--config", "c.toml"], keep_debug=True)
    assert rest == ["acp", "--debug"] and flags.debug and flags.config == "c.toml"
    assert _devagent_env() == clean_env


def test_issue29_item1_stdio_door_flags_are_settings_not_environment(clean_env: dict[str, str]) -> None:
    from devagent.acp.cli import build_parser as acp_parser
    from devagent.mcp.cli import build_parser as mcp_parser
    from devagent.wire.cli import build_parser as wire_parser

    flags = GlobalFlags(config="s.toml", context_tokens="8192")
    for door, parser in (("wire", wire_parser), ("acp", acp_parser), ("mcp", mcp_parser)):
        args = stdio_cli.parse(
            parser(), [door, "--base-url", "http://127.0.0.1:9/v1", "--api-key", "k1"], door
        )
        assert stdio_cli.settings(args, flags) == {
            "config_path": "s.toml",
            "context_tokens": "8192",
            "model_base_url": "http://127.0.0.1:9/v1",
            "model_api_key": "k1",
        }
        assert _devagent_env() == clean_env, door


def test_issue29_item1_the_doors_start_without_writing_the_environment(
    clean_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each stdio door runs its start (flags, settings, checks) up to a refused --work-dir."""
    from devagent.acp.cli import acp_from_argv
    from devagent.mcp.cli import mcp_from_argv
    from devagent.wire.cli import wire_from_argv

    missing = str(tmp_path / "no-such-dir")
    line = [
        "--work-dir",
        missing,
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--api-key",
        "k1",
        "--db",
        "sqlite://",
    ]
    flags = GlobalFlags(context_tokens="8192", debug=True)
    for start in (wire_from_argv, acp_from_argv, mcp_from_argv):
        assert start(line, flags) == 2
        assert "is not a directory" in capsys.readouterr().err
        assert _devagent_env() == clean_env, start


def test_issue29_item1_config_flag_over_devagent_config(tmp_path: Path) -> None:
    flagged, env_file = tmp_path / "flag.toml", tmp_path / "env.toml"
    flagged.write_text("[devagent]\nmax_steps = 3\ncontext_tokens = 2048\n")
    env_file.write_text("[devagent]\nmax_steps = 5\n")
    env = {"DEVAGENT_CONFIG": str(env_file), "DEVAGENT_CONTEXT_TOKENS": "4096"}
    assert load_config(environ=env).max_steps == 5
    c = load_config({"config_path": str(flagged)}, environ=env)
    assert c.max_steps == 3 and c.config_path == flagged.resolve()
    assert c.context_tokens == 4096  # the environment over the file
    c = load_config(GlobalFlags(config=str(flagged), context_tokens="8192").settings(), environ=env)
    assert c.context_tokens == 8192  # the flag over both
    with pytest.raises(ConfigError, match="is not a file"):
        load_config({"config_path": str(tmp_path / "missing.toml")}, environ={})


def test_issue29_item1_serve_borrows_the_flags_only_while_it_runs(tmp_path: Path) -> None:
    """serve_command loads its own settings: the flags are lent to it for the call, no longer."""
    from devagent.preflight import debug_enabled

    toml = tmp_path / "serve.toml"
    toml.write_text("[devagent]\nmax_steps = 4\n")
    with global_flags.lend(GlobalFlags(config=str(toml), debug=True)):
        assert load_config(environ={}).max_steps == 4
        assert debug_enabled()
    assert load_config(environ={}).max_steps != 4
    assert global_flags.lent() == GlobalFlags()


def test_issue29_item1_main_passes_global_flags_without_the_environment(
    clean_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from devagent.cli import main

    toml = tmp_path / "settings.toml"
    toml.write_text('[devagent]\nmodel = "demo"\n')
    monkeypatch.setattr(sys, "argv", ["devagent", "--debug", "info", "--config", str(toml), "--json"])
    with pytest.raises(SystemExit) as ended:
        main()
    assert ended.value.code == 0
    assert json.loads(capsys.readouterr().out)["settings_file"] == str(toml.resolve())
    assert _devagent_env() == clean_env
