"""Wire mode: `initialize` with `repository` starts the session in a clone of it (a real `devagent
wire` process, a bare repository on disk); the prompt's result carries the patch and the branch
pushed; a remote outside the allow-list is refused at `initialize` with Invalid params."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.core_helpers import shell_call, write_call
from tests.git_remotes import make_remote
from tests.wire.conftest import WireProc


def test_issue40_item4_wire_initialize_repository_returns_patch_and_branch(
    start_wire: Callable[..., WireProc], wire_env: dict[str, Any], tmp_path: Path, work_dir: Path
) -> None:
    remote = make_remote(tmp_path / "remotes")
    wire_env["DEVAGENT_REPOSITORY_REMOTES"] = f"{tmp_path / 'remotes'}/"
    steps = [
        {"items": [write_call("wire.txt", "over wire\n"), shell_call("echo w > w.txt")]},
        {"items": [{"text": "ok"}]},
    ]
    refused = start_wire(steps, "--yolo")
    bad = {"url": str(tmp_path / "x.git"), "ref": "main"}
    refused.call("init", "initialize", {"protocol_version": "1.7", "repository": bad})
    error = refused.until_response("init")["error"]
    assert error["code"] == -32602 and "not among the remotes this server allows" in error["data"], error
    refused.close()
    w = start_wire(steps, "--yolo")
    wanted = {"url": str(remote.path), "ref": remote.first, "push": True}
    w.call("init", "initialize", {"protocol_version": "1.7", "repository": wanted})
    assert "result" in w.until_response("init")
    w.prompt("go", "p1")
    resp = w.until_response("p1", timeout=120)
    got = resp["result"]["repository"]
    assert resp["result"]["status"] == "finished"
    assert got["base_commit"] == remote.first and sorted(got["files"]) == ["w.txt", "wire.txt"]
    assert "+over wire\n" in got["patch"]
    assert remote.branches()[got["branch"]] == got["commit"]
    clones = [p for p in work_dir.iterdir() if p.is_dir()]
    assert len(clones) == 1 and (clones[0] / "wire.txt").read_text() == "over wire\n"
    w.close()
