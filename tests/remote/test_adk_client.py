"""Google ADK's A2A client (`RemoteA2aAgent`, google-adk 2.13.0 in tests/remote/py/.venv: its pins
differ from devagent's) delegates to a real `devagent serve --grpc-port`: it accepts the card only
when every interface the card names is on the card's own origin, with a scheme."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.a2a.procs import TOKEN, serve_args, serving
from tests.core_helpers import write_script

PY = Path(__file__).parent / "py"
ADK_PYTHON = PY / ".venv" / "bin" / "python"


def adk_delegates(card_url: str, prompt: str, tmp_path: Path) -> dict[str, object]:
    """What ADK's RemoteA2aAgent got for `prompt` (py/adk_delegate.py): its texts and error."""
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "DEVAGENT_TOKEN": TOKEN}
    out = subprocess.run(
        [str(ADK_PYTHON), str(PY / "adk_delegate.py"), card_url, prompt],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    result: dict[str, object] = json.loads(out.stdout.splitlines()[-1])
    return result


@pytest.mark.skipif(not ADK_PYTHON.exists(), reason="scripts/test makes tests/remote/py/.venv (google-adk)")
def test_issue38_item7_adk_remote_a2a_agent_accepts_a_card_with_grpc_on(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    spec = write_script(tmp_path / "remote.json", [{"items": [{"text": "hello from devagent"}]}])
    args = [*serve_args(f"sqlite+aiosqlite:///{tmp_path / 'r.db'}", ws, spec, "ask"), "--grpc-port", "0"]
    with serving(args, tmp_path / "serve.log") as srv:
        card_url = srv.url + ".well-known/agent-card.json"
        card = httpx.get(card_url, headers={"A2A-Version": "1.0"}, timeout=30).json()
        got = adk_delegates(card_url, "say hello", tmp_path)
    assert got == {"texts": ["hello from devagent"], "error": None}, got
    origin = srv.url.rstrip("/")
    assert {i["protocolBinding"] for i in card["supportedInterfaces"]} >= {"JSONRPC", "HTTP+JSON", "GRPC"}
    assert all(i["url"].startswith(origin) for i in card["supportedInterfaces"]), card
