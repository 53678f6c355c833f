"""Issue 42 (ACP's `authMethods`): `devagent acp` runs as the editor's own child process, as the
user who started the editor, over stdio; there is no one to authenticate, so a real `devagent acp`
process declares no auth methods (ACP: clients then never call `authenticate`), offers no logout,
opens a session without `authenticate` (never `auth_required`), and refuses an `authenticate` a
client sends anyway in ACP's own terms."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("acp", reason="agent-client-protocol is installed by scripts/test (pyproject.toml)")

from acp.schema import InitializeResponse

from tests.acp.conftest import acp_argv
from tests.acp.test_editor_errors import _raw
from tests.conftest import ScriptFile


def test_issue42_acp_declares_no_auth_methods_and_needs_none(
    acp_env: dict[str, str], work_dir: Path, script: ScriptFile
) -> None:
    init = {"protocolVersion": 1, "clientCapabilities": {}}
    answers = _raw(
        acp_argv(script([[{"text": "unused"}]])),
        acp_env,
        work_dir,
        [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "session/new",
                "params": {"cwd": str(work_dir), "mcpServers": []},
            },
            {"jsonrpc": "2.0", "id": 3, "method": "authenticate", "params": {"methodId": "env"}},
        ],
    )
    initialized, opened, auth = answers
    result = initialized["result"]
    assert result["authMethods"] == [], result
    assert "auth" not in result["agentCapabilities"], result  # no logout offered
    assert InitializeResponse.model_validate(result).auth_methods == []  # the SDK's schema reads it so
    assert opened["result"]["sessionId"], opened  # no authenticate needed first
    assert auth["error"]["code"] == -32602, auth
    assert auth["error"]["message"] == "Invalid params: devagent offers no auth methods", auth
