"""`devagent run --repo URL --ref REF [--push]`: a real subprocess cloning real remotes (a bare
repository on disk, `git daemon` and `git http-backend` on loopback), a scripted model editing a
file and running a command, the patch and the pushed branch in the JSON result."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.core_helpers import call, shell_call, write_call
from tests.git_remotes import git, git_daemon, http_remote, make_remote

DEVAGENT = [sys.executable, "-m", "devagent"]


def devagent_run(
    tmp_path: Path, args: list[str], settings: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "operator.toml"
    config.write_text(settings)
    environ = {**os.environ, "DEVAGENT_DATA_DIR": str(tmp_path / "data"), "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [*DEVAGENT, "--config", str(config), "run", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=environ,
        stdin=subprocess.DEVNULL,
    )


def script(tmp_path: Path, steps: list[Any]) -> str:
    p = tmp_path / "script.json"
    p.write_text(json.dumps({"steps": steps}))
    return f"scripted:{p}"


def editing_script(tmp_path: Path, command: str = "echo built > build.txt && git status --short") -> str:
    """The model writes a new file, changes README.md, and runs a command that writes a file."""
    return script(
        tmp_path,
        [
            [call("read_file", {"path": "README.md"})],  # a file is read before it is rewritten
            [
                write_call("notes.txt", "new notes\n", cid="w1"),
                write_call("README.md", "# Project\nBonjour.\n"),
            ],
            [shell_call(command, cid="s1")],
            [{"text": "done"}],
        ],
    )


def result_of(out: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    line: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return line


def root(tmp_path: Path) -> Path:
    r = tmp_path / "root"
    r.mkdir(exist_ok=True)
    return r


def test_issue40_item3_run_clones_a_branch_edits_and_pushes_a_new_branch(tmp_path: Path) -> None:
    remote = make_remote(tmp_path / "remotes")
    settings = f'repository_remotes = ["{tmp_path / "remotes"}/"]\n'
    args = ["change it", "-w", str(root(tmp_path)), "--repo", str(remote.path), "--ref", "main", "--push"]
    out = devagent_run(
        tmp_path, [*args, "-m", editing_script(tmp_path), "-a", "yolo", "--output-format", "json"], settings
    )
    assert out.returncode == 0, out.stdout + out.stderr
    result = result_of(out)
    assert result["base_commit"] == remote.second and result["ref"] == "main"
    assert sorted(result["files"]) == ["README.md", "build.txt", "notes.txt"]
    assert "+++ b/notes.txt\n@@ -0,0 +1 @@\n+new notes\n" in result["patch"]  # new files included
    assert "-Hello.\n+Bonjour.\n" in result["patch"]
    branch = result["branch"]
    assert branch == f"devagent/{result['session_id']}"
    branches = remote.branches()
    assert branches[branch] == result["commit"] and branches["main"] == remote.second  # main untouched
    assert remote.show(branch, "notes.txt") == "new notes" and remote.show(branch, "build.txt") == "built"
    assert git("rev-parse", f"{branch}^", cwd=remote.path) == remote.second
    # the patch applies to the ref it was made against, giving the pushed tree
    check = tmp_path / "check"
    git("clone", "-q", "-b", "main", str(remote.path), str(check))
    (tmp_path / "p.diff").write_text(result["patch"])
    git("apply", str(tmp_path / "p.diff"), cwd=check)
    assert (check / "notes.txt").read_text() == "new notes\n"
    # the workspace is a new folder under the root, a repository of its own without credentials
    ws = Path(result["workspace"])
    assert ws.parent == root(tmp_path) and ws.name.startswith("project-")
    config = (ws / ".git" / "config").read_text()
    assert f"url = {remote.path}" in config and "helper" not in config and "@" not in config
    assert git("rev-parse", "--abbrev-ref", "HEAD", cwd=ws) == branch
    assert not (ws / ".git" / "hooks").exists()  # made without git's templates: no hook at all


def test_issue40_item3_run_clones_at_a_commit_over_git_daemon_and_pushes_there(tmp_path: Path) -> None:
    remote = make_remote(tmp_path / "served")
    with git_daemon(tmp_path / "served") as prefix:
        url = f"{prefix}project.git"
        settings = (
            f'repository_remotes = ["{prefix}"]\nresult_branch_pattern = "agents/{{identity}}/{{session}}"\n'
        )
        args = ["change it", "-w", str(root(tmp_path)), "--repo", url, "--ref", remote.first, "--push"]
        model = editing_script(tmp_path)
        out = devagent_run(tmp_path, [*args, "-m", model, "-a", "yolo", "--output-format", "json"], settings)
    assert out.returncode == 0, out.stdout + out.stderr
    result = result_of(out)
    assert result["base_commit"] == remote.first and result["repository"] == url
    ws = Path(result["workspace"])
    assert not (ws / "app.py").exists()  # the first commit's tree, not main's
    assert result["branch"] == f"agents/local/{result['session_id']}"
    assert git("rev-parse", f"{result['branch']}^", cwd=remote.path) == remote.first
    assert remote.branches()["main"] == remote.second


def test_issue40_item3_run_refuses_remotes_refs_and_setups_the_operator_does_not_allow(
    tmp_path: Path,
) -> None:
    remote = make_remote(tmp_path / "remotes")
    allowed = tmp_path / "remotes"
    settings = f'repository_remotes = ["{allowed}/"]\n'
    model = script(tmp_path, [[{"text": "never"}]])
    cases = {
        str(tmp_path / "elsewhere.git"): ("main", "not among the remotes this server allows"),
        f"ext::sh%20-c%20touch%20{tmp_path}/pwned": ("main", "transport::address"),
        f"{allowed}-evil/project.git": ("main", "not among the remotes"),
        f"{allowed}/../x.git": ("main", "'..' is refused"),
        str(remote.path): ("--upload-pack=touch /tmp/x", "not a branch, tag or commit"),
    }
    for url, (ref, said) in cases.items():
        out = devagent_run(
            tmp_path,
            [
                "x",
                "-w",
                str(root(tmp_path)),
                "--repo",
                url,
                f"--ref={ref}",
                "-m",
                model,
                "--output-format",
                "json",
            ],
            settings,
        )
        assert out.returncode == 2, (url, out.stdout, out.stderr)
        assert said in result_of(out)["error"], (url, result_of(out)["error"])
    out = devagent_run(
        tmp_path,
        [
            "x",
            "-w",
            str(root(tmp_path)),
            "--repo",
            str(remote.path),
            "--ref",
            "main",
            "--setup",
            "mine",
            "-m",
            model,
        ],
        settings,
    )
    assert out.returncode == 2 and "setup 'mine' is not one this server allows" in out.stderr
    # a server without an allow-list starts no repository session at all
    out = devagent_run(tmp_path, ["x", "--repo", str(remote.path), "--ref", "main", "-m", model], "")
    assert out.returncode == 2 and "repository_remotes is empty" in out.stderr
    assert list(root(tmp_path).iterdir()) == [] and not (tmp_path / "pwned").exists()
    assert set(remote.branches()) == {"main", "feature"}


def test_issue40_item3_the_operators_token_never_reaches_the_clone_the_commands_or_their_output(
    tmp_path: Path,
) -> None:
    """An HTTP remote that wants basic credentials: the operator's token (an environment variable
    of the server, named in git_credentials) clones and pushes, yet the agent's command sees no
    trace of it: not in its environment, not in the clone's .git, not in any output; its own
    `git fetch` is refused by the remote."""
    from devagent.agent.sandbox.probe import probe_bwrap

    if isinstance(why := probe_bwrap(), str):
        pytest.skip(f"bubblewrap cannot run here: {why}")
    token = "tok-5f1c9e0d7a2b"
    remote = make_remote(tmp_path / "served")
    command = "env; cat .git/config; git config --list; git fetch origin 2>&1; echo fetch-exit=$?"
    with http_remote(tmp_path / "served", "bot", token) as http:
        url = f"{http.url}project.git"
        settings = (
            f'repository_remotes = ["{http.url}"]\nsandbox_network = true\n'
            f'[git_credentials."{http.url}"]\ntoken_env = "ACME_GIT_TOKEN"\nusername = "bot"\n'
        )
        args = ["x", "-w", str(root(tmp_path)), "--repo", url, "--ref", "feature", "--push", "--sandbox"]
        model = editing_script(tmp_path, command)
        out = devagent_run(
            tmp_path,
            [*args, "-m", model, "-a", "yolo", "--output-format", "stream-json"],
            settings,
            env={"ACME_GIT_TOKEN": token},
        )
        refused_before_push = http.refused
    assert out.returncode == 0, out.stdout + out.stderr
    result = result_of(out)
    assert result["branch"] and remote.branches()[result["branch"]] == result["commit"]
    calls = [json.loads(line) for line in out.stdout.splitlines()]
    shell = [c for c in calls if c.get("type") == "tool_call" and c.get("call_id") == "s1"][-1]
    assert "fetch-exit=" in shell["output"] and "fetch-exit=0" not in shell["output"]  # no credential inside
    assert "could not read Username" in shell["output"]  # it reached the remote, which asked for them
    encoded = base64.b64encode(f"bot:{token}".encode()).decode()
    for secret in (token, encoded):
        assert secret not in out.stdout and secret not in out.stderr
        ws = Path(result["workspace"])
        for path in ws.rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path
    assert "ACME_GIT_TOKEN" not in shell["output"]
    assert refused_before_push >= 1  # git asks without credentials first: the remote does want them
    assert any(a.startswith("Basic ") for a in http.authorizations)
