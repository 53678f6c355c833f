"""The container backend's operator settings (issue 40 item 2): read from the settings file or
DEVAGENT_* variables, checked, and turned into the engine's limits. No engine needed here."""

from __future__ import annotations

from pathlib import Path

import pytest

from devagent.agent.sandbox.container import ContainerProvider, container_env
from devagent.agent.sandbox.podman import Engine, Template
from devagent.agent.settings import parse_sandbox_templates
from devagent.config import ConfigError, load_config


def test_issue40_item2_templates_come_from_the_environment_as_json() -> None:
    config = load_config(
        environ={
            "DEVAGENT_SANDBOX_ENGINE": "docker",
            "DEVAGENT_SANDBOX_TEMPLATES": '{"py": {"image": "localhost/py:1", "memory_mb": 512, '
            '"pids": 100}}',
            "DEVAGENT_SANDBOX_WARM": "3",
            "DEVAGENT_SANDBOX_IDLE_SECONDS": "60",
        }
    )
    provider = ContainerProvider.from_config(config)
    assert provider.engine.program == "docker"
    assert ContainerProvider(config).template() == provider.template()  # as the core builds it
    assert provider.template() == Template("py", "localhost/py:1", memory_mb=512, pids=100)
    assert (provider.warm, provider.idle_seconds) == (3, 60.0)


def test_issue40_item2_templates_come_from_the_settings_file(tmp_path: Path) -> None:
    settings = tmp_path / "devagent.toml"
    settings.write_text(
        "[devagent]\nsandbox_warm = 1\n\n"
        '[sandbox_templates.default]\nimage = "localhost/dev:2"\nnetwork = "egress"\n'
    )
    config = load_config(environ={"DEVAGENT_CONFIG": str(settings)})
    assert config.sandbox_templates == {"default": {"image": "localhost/dev:2", "network": "egress"}}
    assert ContainerProvider.from_config(config).template().network == "egress"


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ({"a": {}}, "with an image"),
        ({"a": {"image": "x", "memory": 5}}, "unknown key 'memory'"),
        ({"a": {"image": "x", "pids": -1}}, "whole number of 0 or more"),
        ({"a": {"image": "x", "memory_mb": 0}}, "at least 1"),
        ({"a b": {"image": "x"}}, "not a template name"),
        ({"a": {"image": "x", "network": 3}}, "expected a string"),
    ],
)
def test_issue40_item2_bad_templates_are_refused_saying_why(raw: object, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_sandbox_templates(raw)


def test_issue40_item2_unknown_engine_and_no_template_are_refused() -> None:
    with pytest.raises(ConfigError, match="podman or docker"):
        load_config(environ={"DEVAGENT_SANDBOX_ENGINE": "lxc"})
    with pytest.raises(ValueError, match="at least one template"):
        ContainerProvider.from_config(load_config(environ={}))
    # Built as the core builds it, it fails closed: it says why no command can run.
    unavailable = ContainerProvider(load_config(environ={})).unavailable()
    assert unavailable is not None and "at least one template" in unavailable


def test_issue40_item2_container_is_created_with_the_enforced_limits() -> None:
    template = Template("t", "img", memory_mb=300, pids=40, nofile=1 << 30)
    argv = Engine("podman").create_args("c", "v", template, {"devagent.session": "s"})
    joined = " ".join(argv)
    for flag in (
        "--memory 300m",
        "--memory-swap 300m",
        "--pids-limit 40",
        "--network none",
        "--cap-drop ALL",
        "--security-opt no-new-privileges",
        "--read-only",
        "--user agent",
        "--label devagent.sandbox=1",
        "--label devagent.session=s",
        "type=volume,source=v,destination=/workspace",
    ):
        assert flag in joined
    nofile = int(joined.split("--ulimit nofile=")[1].split(":")[0])
    assert nofile < 1 << 30  # lowered to this machine's hard limit
    assert Engine("podman").argv("ps")[:3] == ["podman", "--runtime", "runc"]
    assert "--runtime" in Engine("docker").create_args("c", "v", template, {})  # per command for docker


def test_issue40_item2_secrets_never_pass_into_the_container_env() -> None:
    env = container_env(
        {
            "OPENAI_API_KEY": "k",
            "DEVAGENT_DB": "u",
            "MY_TOKEN": "t",
            "PATH": "/x",
            "HOME": "/root",
            "LANG": "C",
        },
        tty=True,
    )
    assert env == {"LANG": "C", "TERM": env["TERM"]}


def test_issue40_item5_a_folder_holding_devagents_own_files_is_never_a_containers_workspace(
    tmp_path: Path,
) -> None:
    """A bind mount cannot hide devagent's settings, database or data folder the way the local
    backend does: a workspace root holding them (or inside them) is refused, any other is not."""
    settings = tmp_path / "srv" / "devagent.toml"
    settings.parent.mkdir()
    settings.write_text('[sandbox_templates.default]\nimage = "localhost/dev:2"\n')
    data = tmp_path / "data"
    config = load_config(
        environ={
            "DEVAGENT_CONFIG": str(settings),
            "DEVAGENT_DATA_DIR": str(data),
            "DEVAGENT_DB": f"sqlite+aiosqlite:///{tmp_path / 'db' / 'devagent.db'}",
        }
    )
    provider = ContainerProvider.from_config(config)
    for exposing in (settings.parent, tmp_path / "db", data / "inside", tmp_path):
        why = provider.exposes(exposing)
        assert why is not None and "cannot hide" in why, exposing
        assert provider.refuses(exposing) == why
    assert provider.exposes(tmp_path / "work") is None
    sandbox = provider.for_session("s", [settings.parent])
    assert sandbox.refuses("/workspace") is not None and "cannot hide" in str(sandbox.refuses("/workspace"))
    # without host folders (each workspace a volume of its own) nothing of the host is mounted
    assert ContainerProvider(config, host_workspace=False).exposes(settings.parent) is None
