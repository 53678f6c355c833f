"""Issue 15 item 2, "done when": the README's Zed `agent_servers` entry (and the JetBrains
`acp.json` one, the same shape) starts devagent's ACP agent, which answers `initialize`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def _editor_json(editor: str) -> dict[str, object]:
    text = README.read_text()
    start = text.index(f"**{editor}**")
    block = re.search(r"```json\n(.*?)```", text[start:], re.S)
    assert block is not None, f"no JSON block after {editor}"
    return json.loads(block.group(1))  # type: ignore[no-any-return]


def test_issue15_readme_zed_and_jetbrains_settings_start_devagent(
    acp_env: dict[str, str], work_dir: Path
) -> None:
    zed = _editor_json("Zed")["agent_servers"]["devagent"]  # type: ignore[index]
    jetbrains = _editor_json("JetBrains IDEs")["agent_servers"]["devagent"]  # type: ignore[index]
    assert zed["type"] == "custom"
    assert {k: zed[k] for k in ("command", "args", "env")} == jetbrains
    # The command as the editor runs it: `devagent` from PATH (here, this virtualenv's).
    command = Path(sys.executable).parent / zed["command"]
    assert command.exists(), command
    env = {**acp_env, **zed["env"], "DEVAGENT_MODEL": "demo"}
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
    done = subprocess.run(
        [str(command), *zed["args"]],
        input=json.dumps(init) + "\n",
        capture_output=True,
        text=True,
        env=env,
        cwd=work_dir,
        timeout=120,  # a hang guard only
    )
    answer = json.loads(done.stdout.splitlines()[0])
    assert answer["id"] == 0 and answer["result"]["protocolVersion"] == 1, done.stderr
    assert answer["result"]["agentInfo"]["name"] == "devagent"
    assert done.returncode == 0, done.stderr
