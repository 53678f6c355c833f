"""A2A: a conversation whose AgentSettings name a repository and a ref starts in a clone of it (a
folder of the caller's own), and each completed task ends with a `repository-result` artifact:
the patch, and the branch pushed when the caller asked for it. Real server, real git remotes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.a2a.helpers import auth, rpc, running_server, stream, v03_message
from tests.conftest import Script
from tests.core_helpers import call, shell_call, write_call
from tests.git_remotes import git, git_daemon, make_remote

TOKENS = {"t-alice": "alice", "t-bob": "bob"}


def artifacts(frames: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    out = []
    for f in frames:
        art = (f.get("result") or {}).get("artifact")
        if art and art.get("name") == name:
            out.append(art)
    return out


def steps() -> list[Any]:
    return [
        {"items": [call("read_file", {"path": "README.md"})]},
        {"items": [write_call("notes.txt", "from a2a\n"), write_call("README.md", "# Project\nHallo.\n")]},
        {"items": [shell_call("echo compiled > out.txt")]},
        {"items": [{"text": "done"}]},
    ]


async def test_issue40_item4_a2a_starts_from_a_repository_and_returns_the_patch_and_branch(
    script: Script, db_url: str, workspace: Path, tmp_path: Path
) -> None:
    remote = make_remote(tmp_path / "served")
    with git_daemon(tmp_path / "served") as prefix:
        core_kw = {"repository_remotes": (prefix,), "approval_mode": "yolo"}
        async with running_server(script(steps()), db_url, workspace, tokens=TOKENS, core_kw=core_kw) as srv:
            async with httpx.AsyncClient(timeout=120) as c:
                repository = {"url": f"{prefix}project.git", "ref": "v1", "push": True}
                msg = v03_message("change it", settings={"repository": repository})
                frames = await stream(c, srv.url, rpc("message/stream", {"message": msg}), auth("t-alice"))
    assert all("error" not in f for f in frames), frames
    assert frames[-1]["result"]["status"]["state"] == "completed"
    [art] = artifacts(frames, "repository-result")
    text = next(p for p in art["parts"] if p.get("kind") == "text")
    info = next(p for p in art["parts"] if p.get("kind") == "data")["data"]
    assert "+++ b/notes.txt" in text["text"] and "+Hallo." in text["text"]
    assert info["base_commit"] == remote.first and info["ref"] == "v1"
    assert sorted(info["files"]) == ["README.md", "notes.txt", "out.txt"]
    branch = info["branch"]
    assert branch.startswith("devagent/") and remote.branches()[branch] == info["commit"]
    assert git("show", f"{branch}:out.txt", cwd=remote.path) == "compiled"
    assert (
        remote.branches()["main"] == remote.second and git("rev-parse", "v1", cwd=remote.path) == remote.first
    )
    # the clone is a new folder of alice's own, under her workspace root
    clones = list((workspace.parent / "alice").iterdir())
    assert len(clones) == 1 and clones[0].name.startswith("project-")
    assert (clones[0] / "notes.txt").read_text() == "from a2a\n"


async def test_issue40_item4_a2a_refuses_a_repository_outside_the_allow_list(
    script: Script, db_url: str, workspace: Path, tmp_path: Path
) -> None:
    remote = make_remote(tmp_path / "remotes")
    core_kw = {"repository_remotes": (f"{tmp_path}/allowed/",)}
    async with running_server(script(steps()), db_url, workspace, tokens=TOKENS, core_kw=core_kw) as srv:
        async with httpx.AsyncClient(timeout=60) as c:
            for repository, said in (
                ({"url": str(remote.path), "ref": "main"}, "not among the remotes this server allows"),
                ({"url": f"{tmp_path}/allowed/x.git", "ref": "-x"}, "not a branch, tag or commit"),
                ({"url": f"{tmp_path}/allowed/x.git"}, "repository.ref must be"),
            ):
                msg = v03_message("change it", settings={"repository": repository})
                r = await c.post(srv.url, json=rpc("message/send", {"message": msg}), headers=auth("t-alice"))
                error = r.json()["error"]
                assert error["code"] == -32602 and said in error["message"], error
    assert not (workspace.parent / "alice").exists() or not list((workspace.parent / "alice").iterdir())
