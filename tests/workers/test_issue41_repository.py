"""Issue 41 item 1 with issue 40 item 4: a conversation started from a repository at a ref, its
sandbox on a worker. The clone is made by the server (git runs on the server's host, from a bare
repository the worker's namespace never reaches) and becomes the session's first stored snapshot:
the worker restores it, the repository's setup script and the model's commands run there on the
clone, the file tools edit it. The result (patch, pushed branch) is made from the server's stored
snapshot, the workspace as of the last finished call on the worker: after the worker is killed, a
later turn of the same conversation, with no worker connected, still returns every change."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import httpx

from tests.a2a.helpers import auth, completed_turn, context_of, rpc, v03_message
from tests.a2a.test_hostile import script, tool_outputs
from tests.core_helpers import call, shell_call
from tests.git_remotes import git, make_remote
from tests.repository.test_a2a_repository import artifacts
from tests.workers.conftest import CALLER, WITHIN, WorkerSite


def result_info(frames: list[Any]) -> tuple[str, dict[str, Any]]:
    """The `repository-result` artifact's patch and data."""
    [art] = artifacts(frames, "repository-result")
    patch = next((p["text"] for p in art["parts"] if p.get("kind") == "text"), "")
    info = next(p for p in art["parts"] if p.get("kind") == "data")["data"]
    return patch, info


async def test_issue41_item1_a_repository_session_on_a_worker_starts_from_the_clone_and_returns_its_result(
    tmp_path: Path,
) -> None:
    site = WorkerSite(tmp_path)
    remote = make_remote(tmp_path / "served")
    site.env["DEVAGENT_REPOSITORY_REMOTES"] = f"{tmp_path / 'served'}/"
    site.env["DEVAGENT_REPOSITORY_SETUP"] = "repo=repo:setup.sh"
    steps = [
        [shell_call("pwd; cat README.md setup-marker.txt; git rev-parse HEAD; echo first > notes.txt")],
        [call("read_file", {"path": "README.md"})],
        [call("write_file", {"path": "README.md", "content": "# Project\nHallo.\n"})],
        [shell_call("cat README.md; git status --short")],
        [{"text": "done"}],
        [{"text": "still done"}],
    ]
    model = script(tmp_path / "s.json", steps)
    repository = {"url": str(remote.path), "ref": "v1", "push": True, "setup": "repo"}
    try:
        with site.server(model) as s:
            with site.worker(s, "w1") as w1:
                w1.wait_connected()
                started = v03_message("change it", settings={"repository": repository})
                first = await completed_turn(s.url, CALLER, started)
                w1.kill()  # no goodbye: its workspace is gone with it
            context = context_of(first)
            again = await completed_turn(s.url, CALLER, v03_message("anything else?", context_id=context))
    finally:
        site.cleanup()
    output = tool_outputs(json.dumps(first))
    assert str(w1.state_dir / "workspaces") in output, output  # the commands ran on the worker
    assert "Hello." in output and "set-up-ran" in output and remote.first in output, output
    assert "# Project\\nHallo.\\n M README.md\\n?? notes.txt" in output, output  # seen by git there
    [clone] = list((site.root / "alice").glob("project-*"))
    assert list(clone.iterdir()) == []  # the server's folder is only the workspace's name
    for frames in (first, again):
        patch, info = result_info(frames)
        assert info["base_commit"] == remote.first and info["ref"] == "v1", info
        assert {"README.md", "notes.txt", "setup-marker.txt"} == set(info["files"]), info
        assert "+Hallo." in patch and "+++ b/notes.txt" in patch, patch
        branch = info["branch"]
        assert remote.branches()[branch] == info["commit"]
        assert git("show", f"{branch}:notes.txt", cwd=remote.path) == "first"
        assert git("show", f"{branch}:README.md", cwd=remote.path) == "# Project\nHallo."
    assert result_info(first)[1]["commit"] == result_info(again)[1]["commit"]  # nothing new to push
    assert remote.branches()["main"] == remote.second


async def folders_left(folder: Path) -> list[Path]:
    """What `folder` still holds once it is empty, or after WITHIN seconds (a hang guard)."""
    for _ in range(int(WITHIN / 0.1)):
        if not any(folder.iterdir()):
            break
        await asyncio.sleep(0.1)
    return list(folder.iterdir())


async def test_issue41_item1_a_repository_session_whose_setup_fails_on_the_worker_leaves_nothing(
    tmp_path: Path,
) -> None:
    """The operator's setup script fails on the worker: the task fails with the script's exit
    code and output, and nothing of the session is left: no stored snapshot, no
    lease, no folder on the worker, no clone on the server."""
    site = WorkerSite(tmp_path)
    remote = make_remote(tmp_path / "served")
    failing = tmp_path / "failing-setup.sh"
    failing.write_text("cat README.md; echo setup-broke; exit 3\n")
    site.env["DEVAGENT_REPOSITORY_REMOTES"] = f"{tmp_path / 'served'}/"
    site.env["DEVAGENT_REPOSITORY_SETUP"] = f"broken={failing}"
    model = script(tmp_path / "s.json", [[{"text": "never"}]])
    repository = {"url": str(remote.path), "ref": "main", "setup": "broken"}
    try:
        with site.server(model) as s, site.worker(s, "w1") as w1:
            w1.wait_connected()
            message = v03_message("change it", settings={"repository": repository})
            async with httpx.AsyncClient(timeout=300) as client:
                r = await client.post(
                    s.url, json=rpc("message/send", {"message": message}), headers=auth(CALLER)
                )
            # the release reaches the worker with its next poll: its folder goes then
            workspaces = await folders_left(w1.state_dir / "workspaces")
    finally:
        site.cleanup()
    task = r.json()["result"]
    said = task["status"]["message"]["parts"][0]["text"]
    assert task["status"]["state"] == "failed" and "the setup script failed (exit code 3)" in said, task
    assert "Hello.\nsetup-broke" in said  # the script ran on the clone, on the worker
    with sqlite3.connect(site.db_file) as db:
        assert db.execute("select count(*) from devagent_worker_snapshots").fetchone() == (0,)
        assert db.execute("select count(*) from devagent_worker_leases").fetchone() == (0,)
    assert workspaces == []
    assert list((site.root / "alice").iterdir()) == []
