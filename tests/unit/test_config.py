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
