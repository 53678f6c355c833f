"""The operator's `sandbox_workspace` (issue 40 items 1 and 2): where a served container session's
workspace lives, `host` (the default: its folder, bind-mounted) or `volume` (the engine's named
volume, reached through the container), from the settings file or DEVAGENT_SANDBOX_WORKSPACE;
anything else is refused naming the setting. No engine needed here."""

from __future__ import annotations

from pathlib import Path

import pytest

from devagent.agent.sandbox.container import ContainerProvider
from devagent.config import ConfigError, load_config

TEMPLATES = '{"default": {"image": "localhost/dev:1"}}'


def test_issue40_item2_sandbox_workspace_chooses_host_or_volume(tmp_path: Path) -> None:
    base = {"DEVAGENT_SANDBOX_TEMPLATES": TEMPLATES}
    assert ContainerProvider(load_config(environ=base)).host_workspace is True  # the default
    config = load_config(environ={**base, "DEVAGENT_SANDBOX_WORKSPACE": "Volume"})
    assert config.sandbox_workspace == "volume"
    provider = ContainerProvider(config)
    assert provider.host_workspace is False
    assert provider.for_session("s", [tmp_path]).files_here is False
    settings = tmp_path / "devagent.toml"
    settings.write_text('[devagent]\nsandbox_workspace = "host"\n')
    config = load_config(environ={**base, "DEVAGENT_CONFIG": str(settings)})
    assert ContainerProvider(config).for_session("s", [tmp_path]).files_here is True


def test_issue40_item2_a_bad_sandbox_workspace_is_refused() -> None:
    with pytest.raises(ConfigError, match="sandbox_workspace"):
        load_config(environ={"DEVAGENT_SANDBOX_WORKSPACE": "nfs"})
