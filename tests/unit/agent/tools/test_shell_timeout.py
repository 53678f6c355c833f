"""The shell tool's timeout: 120 s when a command names none, at most 600 s, as the tool's
definition tells the model; a longer one asked for is lowered, through the session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from devagent.agent.events import Decision, Resume, UserPrompt
from devagent.agent.settings import CoreConfig
from tests.core_helpers import call, collect, text_of


async def test_issue43_item4_timeout_default_and_maximum_as_the_definition_says(
    core_factory: Any, script: Any, workspace: Path
) -> None:
    config = CoreConfig(data_dir=workspace)
    assert (config.shell_timeout, config.shell_timeout_max) == (120.0, 600.0)
    spec = script(
        [
            [call("run_shell_command", {"command": "echo done", "timeout": 900}, "c1")],
            [{"text": "result: {last_tool_results}"}],
        ]
    )
    core = await core_factory(spec)
    session = await core.create_session([workspace], approval_mode="ask")
    shell = session.tools()["run_shell_command"].definition()
    assert "(default 120, at most 600 unless the operator set other limits)" in shell["description"]
    timeout = shell["parameters"]["properties"]["timeout"]["description"]
    assert "up to 600" in timeout and "Default 120" in timeout
    await collect(session.advance(UserPrompt("run it")))  # asks before running
    out = text_of(await collect(session.advance(Resume(decisions=[Decision("c1", "proceed_once")]))))
    assert "done" in out
    assert "the timeout asked for, 900 s, is more than the server allows: it had 600 s" in out
