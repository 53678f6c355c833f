"""Settings: flags over DEVAGENT_* over devagent.toml over defaults, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from devagent.config import SETTINGS, ConfigError, load_config


def test_precedence_flags_env_toml_defaults(tmp_path: Path) -> None:
    toml = tmp_path / "devagent.toml"
    toml.write_text(
        '[devagent]\nmodel = "ollama:qwen3"\nmax_steps = 7\nshell_timeout = 5.5\n'
        'allowed_approval_modes = ["ask", "plan"]\nclient_tools_deny = ["rm"]\n'
    )
    env = {"DEVAGENT_CONFIG": str(toml), "DEVAGENT_MAX_STEPS": "9"}
    c = load_config({"shell_timeout": 3}, environ=env)
    assert c.default_model == "ollama:qwen3"  # from the file
    assert c.max_steps == 9  # the environment beats the file
    assert c.shell_timeout == 3.0  # a flag beats both
    assert c.allowed_approval_modes == ("ask", "plan")
    assert c.client_tool_deny == ("rm",)
    assert c.approval_mode == "ask"  # default


def test_env_lists_and_booleans() -> None:
    c = load_config(
        environ={"DEVAGENT_ALLOWED_APPROVAL_MODES": "ask, yolo", "DEVAGENT_ALLOW_CLIENT_MODEL": "false"}
    )
    assert c.allowed_approval_modes == ("ask", "yolo")
    assert c.allow_client_model is False


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DEVAGENT_APPROVAL": "sometimes"}, "approval mode"),
        ({"DEVAGENT_MAX_STEPS": "lots"}, "max_steps"),
        ({"DEVAGENT_MAX_STEPS": "0"}, "at least 1"),
        ({"DEVAGENT_ALLOWED_APPROVAL_MODES": "ask,never"}, "never"),
        ({"DEVAGENT_CONFIG": "/nonexistent/devagent.toml"}, "not a file"),
    ],
)
def test_bad_settings_are_clear_errors(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(environ=env)


def test_broken_toml_names_the_file(tmp_path: Path) -> None:
    toml = tmp_path / "devagent.toml"
    toml.write_text("model = \n")
    with pytest.raises(ConfigError, match=r"devagent\.toml"):
        load_config(environ={"DEVAGENT_CONFIG": str(toml)})


def test_every_setting_is_in_the_readme() -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    for var, key in SETTINGS.values():
        assert f"`{var}`" in readme, var
        assert f"`{key}`" in readme or f"[{key}." in readme, key


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('modle = "demo"\n', r"unknown setting 'modle'; did you mean 'model'\?"),
        (
            '[devagent]\nmodel = "demo"\nmax_step = 3\n',
            r"unknown setting 'max_step'; did you mean 'max_steps'\?",
        ),
        ("[server]\nport = 1\n", r"unknown table \[server\]"),
        ('[devagent]\nmodel = "demo"\n[server]\nport = 1\n', r"unknown table \[server\]"),
        ('allow_client_model = "maybe"\n', r"allow_client_model .*expected true or false, not 'maybe'"),
        ("max_steps = 7.5\n", r"max_steps .*expected a whole number, not 7\.5"),
        ('shell_timeout = "soon"\n', r"shell_timeout .*expected a number"),
        ("allowed_approval_modes = 3\n", r"allowed_approval_modes .*expected a list of strings"),
        ("model = 3.5\n", r"model .*expected a string"),
    ],
)
def test_config_typos_and_bad_values_name_the_key(tmp_path: Path, text: str, message: str) -> None:
    """A typo is an error naming the key and the nearest known one; a bad value names the key and
    the type expected. Nothing is silently ignored."""
    toml = tmp_path / "devagent.toml"
    toml.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(environ={"DEVAGENT_CONFIG": str(toml)})


def test_bad_environment_value_names_the_variable() -> None:
    with pytest.raises(ConfigError, match=r"DEVAGENT_ALLOW_CLIENT_MODEL .*expected true or false"):
        load_config(environ={"DEVAGENT_ALLOW_CLIENT_MODEL": "maybe"})


def test_every_documented_key_is_accepted(tmp_path: Path) -> None:
    toml = tmp_path / "devagent.toml"
    toml.write_text('[devagent]\nmodel = "demo"\nallow_client_model = false\n[mcp_servers]\n')
    c = load_config(environ={"DEVAGENT_CONFIG": str(toml)})
    assert c.default_model == "demo" and c.allow_client_model is False
