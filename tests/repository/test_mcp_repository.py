"""MCP: `devagent_start` with `repository`, `ref` and `push` (the official client over stdio, a real
`devagent mcp` subprocess, a bare repository on disk): the task runs in a clone, the tool result
holds the patch and the branch pushed; a remote outside the allow-list is an error result."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from tests.conftest import Script
from tests.core_helpers import call, shell_call, write_call
from tests.git_remotes import git, make_remote


def params(workspace: Path, model: str, db: str, allowed: Path) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVAGENT_")}
    env["DEVAGENT_REPOSITORY_REMOTES"] = f"{allowed}/"
    args = ["-m", "devagent", "mcp", "--work-dir", str(workspace), "--model", model, "--db", db]
    return StdioServerParameters(command=sys.executable, args=[*args, "--approval", "yolo"], env=env)


async def test_issue40_item4_mcp_start_from_a_repository_returns_the_patch_and_pushed_branch(
    script: Script, sqlite_url: str, workspace: Path, tmp_path: Path
) -> None:
    remote = make_remote(tmp_path / "remotes")
    model = script(
        [
            [call("read_file", {"path": "README.md"})],
            [write_call("README.md", "# Project\nHej.\n"), shell_call("echo ok > checked.txt")],
            [{"text": "changed"}],
        ]
    )
    async with Client(params(workspace, model, sqlite_url, tmp_path / "remotes")) as client:
        args = {"prompt": "change it", "repository": str(remote.path), "ref": "feature", "push": True}
        result = await client.call_tool("devagent_start", args)
        assert not result.is_error, result
        data: dict[str, Any] = result.structured_content
        refused = await client.call_tool(
            "devagent_start", {"prompt": "x", "repository": str(tmp_path / "other.git"), "ref": "main"}
        )
    assert data["status"] == "completed"
    repo = data["repository"]
    assert repo["base_commit"] == remote.first and sorted(repo["files"]) == ["README.md", "checked.txt"]
    assert "-Hello.\n+Hej.\n" in repo["patch"]
    assert remote.branches()[repo["branch"]] == repo["commit"]
    assert git("show", f"{repo['branch']}:checked.txt", cwd=remote.path) == "ok"
    assert remote.branches()["feature"] == remote.first  # the starting ref is never pushed to
    assert Path(data["workspace"]).parent == workspace
    text = "".join(getattr(c, "text", "") for c in result.content)
    assert f"pushed as branch {repo['branch']}" in text
    assert refused.is_error and "not among the remotes this server allows" in refused.content[0].text
