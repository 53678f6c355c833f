"""Remote A2A agents' settings and how their types are described (from their cards, read once)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devagent.agent.settings import CoreConfig
from devagent.agent.subagents import remote as remote_agents
from devagent.agent.subagents.types import load_catalog
from devagent.agent.tools.workspace import Workspace
from devagent.config import ConfigError, load_config
from tests.a2a.test_remote_agents import _fake


def _load(tmp_path: Path, text: str) -> CoreConfig:
    toml = tmp_path / "devagent.toml"
    toml.write_text(text)
    return load_config(environ={"DEVAGENT_CONFIG": str(toml)})


def test_issue31_item4_remote_agents_tables_beside_and_under_devagent(tmp_path: Path) -> None:
    beside = _load(
        tmp_path,
        '[devagent]\nremote_agent_timeout = 30\n[remote_agents.rev]\ncard_url = "https://r.example/c.json"\n'
        'bearer_token_env = "REV_TOKEN"\n',
    )
    assert beside.remote_agents == {
        "rev": {"card_url": "https://r.example/c.json", "bearer_token_env": "REV_TOKEN"}
    }
    assert beside.remote_agent_timeout == 30.0
    top = _load(
        tmp_path, '[remote_agents.a]\ncard_url = "http://a/"\napi_key_header = "X-K"\napi_key_env = "K"\n'
    )
    assert top.remote_agents["a"]["api_key_header"] == "X-K"
    env = {"DEVAGENT_REMOTE_AGENTS": json.dumps({"b": {"card_url": "https://b/"}})}
    assert load_config(environ=env).remote_agents == {"b": {"card_url": "https://b/"}}
    assert load_config(environ={}).remote_agent_timeout == 600.0


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('card_url = "http://a/"\npassword = "x"', "unknown keys password"),
        ('card_url = "ftp://a/"', "card_url must be an http"),
        ('card_url = "http://a/"\napi_key_header = "X-K"', "go together"),
        ('card_url = "http://a/"\noauth_token_url = "http://t/"', "OAuth needs"),
        (
            'card_url = "http://a/"\nbearer_token_env = "T"\napi_key_header = "X"\napi_key_env = "K"',
            "choose one",
        ),
    ],
)
def test_issue31_item4_bad_remote_agent_tables_are_named(tmp_path: Path, table: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, f"[remote_agents.a]\n{table}\n")


async def test_issue31_item4_types_are_described_by_their_cards_or_unavailable(
    tmp_path: Path, workspace: Path
) -> None:
    with _fake("garbage") as fake:
        card = f"http://127.0.0.1:{fake.server_port}/.well-known/agent-card.json"
        allowed = CoreConfig(outbound_allow=("127.0.0.1/32",), remote_agents={"rev": {"card_url": card}})
        refused = CoreConfig(remote_agents={"blocked": {"card_url": card.replace("agent-card", "other")}})
        await remote_agents.prefetch(allowed)
        await remote_agents.prefetch(refused)
    remote = {
        name: remote_agents.description(spec)
        for config in (allowed, refused)
        for name, spec in remote_agents.specs(config).items()
    }
    listing = load_catalog(
        tmp_path / "none", Workspace([workspace]), workspace_models=False, remote=remote
    ).listing()
    lines = listing.splitlines()
    assert lines == sorted(lines)  # a stable order, by name
    assert "- rev: remote A2A agent Fake reviewer: Reviews things, badly. Skills: poke: pokes a diff" in lines
    [blocked] = [line for line in lines if line.startswith("- blocked:")]
    assert "unavailable" in blocked and "outbound_allow" in blocked, blocked
