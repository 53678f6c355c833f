"""ACP: `session/new` with `_meta.repository` starts the session in a clone (a real `devagent acp`
subprocess, the official Python client, a bare repository on disk); the prompt's response carries
the patch and the pushed branch in `_meta.devagent.repository`; a remote outside the allow-list is
an Invalid params error."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("acp", reason="agent-client-protocol is installed by scripts/test (pyproject.toml)")

from acp import RequestError, text_block

from tests.acp.conftest import acp_argv
from tests.acp.test_python_sdk import TIMEOUT, EditorClient, agent, start
from tests.conftest import ScriptFile
from tests.core_helpers import shell_call, write_call
from tests.git_remotes import make_remote


async def test_issue40_item4_acp_session_new_meta_repository_returns_patch_and_branch(
    acp_env: dict[str, str], work_dir: Path, script: ScriptFile, tmp_path: Path
) -> None:
    remote = make_remote(tmp_path / "remotes")
    env = {**acp_env, "DEVAGENT_REPOSITORY_REMOTES": f"{tmp_path / 'remotes'}/"}
    steps = [[write_call("acp.txt", "from the editor\n"), shell_call("echo ran > ran.txt")], [{"text": "ok"}]]
    argv = acp_argv(script(steps), "--approval", "yolo")
    async with agent(EditorClient(), argv, env, work_dir, tmp_path / "err.log") as (conn, _):
        await start(conn)
        wanted = {"url": str(remote.path), "ref": "main", "push": True}
        new = await asyncio.wait_for(
            conn.new_session(cwd=str(work_dir), mcp_servers=[], repository=wanted), TIMEOUT
        )
        done = await asyncio.wait_for(
            conn.prompt(session_id=new.session_id, prompt=[text_block("go")]), TIMEOUT
        )
        with pytest.raises(RequestError) as refused:
            await asyncio.wait_for(
                conn.new_session(
                    cwd=str(work_dir),
                    mcp_servers=[],
                    repository={"url": str(tmp_path / "x.git"), "ref": "main"},
                ),
                TIMEOUT,
            )
    got = done.field_meta["devagent"]["repository"]
    assert got["base_commit"] == remote.second and sorted(got["files"]) == ["acp.txt", "ran.txt"]
    assert "+from the editor\n" in got["patch"]
    assert remote.branches()[got["branch"]] == got["commit"] and remote.branches()["main"] == remote.second
    assert "not among the remotes this server allows" in str(refused.value)
    clones = [p for p in work_dir.iterdir() if p.is_dir()]
    assert len(clones) == 1 and (clones[0] / "acp.txt").read_text() == "from the editor\n"
