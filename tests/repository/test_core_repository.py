"""The core's repository sessions without a door: the operator's allow-list and patterns, the
setup scripts it allows (its own, a repository file) run in the workspace with a clean environment,
a result made and pushed although the model rewrote the workspace's `.git` (hooks, `insteadOf`),
a push from another replica that has none of the session's git data, and never to the ref the
session started from. Real git, bare repositories on disk."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.api import InputError, RepositoryRequest, repository_result
from devagent.agent.repository.remotes import check_ref, check_url, git_auth, result_branch
from tests.git_remotes import git, make_remote


def test_issue40_item3_allow_list_matches_prefixes_at_a_boundary_and_patterns_by_segment() -> None:
    allowed = ("https://git.example.com/team/", "https://code.example.org/*/tools", "/srv/repos")
    assert check_url("https://git.example.com/team/app.git", allowed)
    assert check_url("https://code.example.org/alice/tools.git", allowed)
    assert check_url("/srv/repos/x.git", allowed)
    refused = [
        "https://git.example.com/team-evil/app.git",  # a prefix ends at a boundary
        "https://code.example.org/alice/bob/tools",  # `*` is one path segment
        "/srv/repos-other/x.git",
        "https://user:secret@git.example.com/team/app.git",  # credentials in the URL
        "ext::sh -c id",
        "fd::17",
        "file::/srv/repos/x.git",
        "--upload-pack=id",
        "https://git.example.com/team/../other/app.git",
        "https://git.example.com/team/app.git\n",
    ]
    for url in refused:
        with pytest.raises(InputError) as e:
            check_url(url, allowed)
        assert e.value.code == "repository_refused", url
    with pytest.raises(InputError, match="repository_remotes is empty"):
        check_url("https://git.example.com/team/app.git", ())
    for ref in ("main", "release/1.2", "v1.0.0", "0123abcd", "a" * 40):
        assert check_ref(ref) == ref
    for ref in ("-x", "--upload-pack=id", "a..b", "a b", "x@{1}", "HEAD~1", "a:b", "/main", "main.lock", ""):
        with pytest.raises(InputError):
            check_ref(ref)


def test_issue40_item4_the_result_branch_is_never_the_starting_ref() -> None:
    assert result_branch("devagent/{session}", "s1", "alice", "main") == "devagent/s1"
    assert result_branch("ai/{identity}/{session}", "s 1", "", "main") == "ai/local/s-1"
    with pytest.raises(InputError, match="would be the ref the session started from"):
        result_branch("devagent/{session}", "s1", "", "devagent/s1")
    with pytest.raises(InputError, match="would be the ref"):
        result_branch("refs/heads/devagent/{session}", "s1", "", "devagent/s1")


def test_issue40_item3_credentials_go_to_one_command_in_its_environment_only() -> None:
    creds = {"https://git.example.com/": {"token_env": "ACME_TOKEN", "username": "bot"}}
    auth = git_auth("https://git.example.com/team/app.git", creds, {"ACME_TOKEN": "tok-123456"})
    assert dict(auth.env) == {
        "DEVAGENT_GIT_USERNAME": "bot",
        "DEVAGENT_GIT_TOKEN": "tok-123456",
        "DEVAGENT_GIT_HOST": "git.example.com",  # the helper answers for this host only
    }
    assert not any("tok-123456" in c for c in auth.config)  # never on a command line
    assert auth.config[0] == "credential.helper="  # every other helper reset first
    other = git_auth("https://elsewhere.example.com/x.git", creds, {"ACME_TOKEN": "tok-123456"})
    assert other.env == () and other.config == ("credential.helper=",)
    with pytest.raises(InputError, match=r"\$ACME_TOKEN, which is not set"):
        git_auth("https://git.example.com/team/app.git", creds, {})


async def test_issue40_item3_setup_scripts_the_operator_allows_run_in_the_workspace_with_a_clean_env(
    core_factory: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = make_remote(tmp_path / "remotes")
    own = tmp_path / "operator-setup.sh"
    own.write_text("echo from-operator > op-marker.txt\nenv > setup-env.txt\n")
    failing = tmp_path / "failing.sh"
    failing.write_text("echo about to fail\nexit 3\n")
    monkeypatch.setenv("ACME_GIT_TOKEN", "tok-never-inside")
    core = await core_factory(
        repository_remotes=(f"{tmp_path / 'remotes'}/",),
        repository_setup=(f"default={own}", "repo=repo:setup.sh", f"broken={failing}"),
    )
    root = tmp_path / "root"
    root.mkdir()
    first = await core.create_session([root], repository=RepositoryRequest(str(remote.path), "main"))
    ws = Path(first.state.workspace_roots[0])
    assert (ws / "op-marker.txt").read_text() == "from-operator\n"
    env = (ws / "setup-env.txt").read_text()
    assert "tok-never-inside" not in env and "ACME_GIT_TOKEN" not in env and "DEVAGENT_DB" not in env
    assert first.state.repository["setup"]["exit_code"] == 0
    second = await core.create_session([root], repository=RepositoryRequest(str(remote.path), "main", "repo"))
    assert (Path(second.state.workspace_roots[0]) / "setup-marker.txt").read_text() == "set-up-ran\n"
    before = set(root.iterdir())
    with pytest.raises(InputError, match=r"the setup script failed \(exit code 3\): about to fail"):
        await core.create_session([root], repository=RepositoryRequest(str(remote.path), "main", "broken"))
    assert set(root.iterdir()) == before  # nothing left of the failed start
    with pytest.raises(InputError, match="setup 'other' is not one this server allows"):
        await core.create_session([root], repository=RepositoryRequest(str(remote.path), "main", "other"))


async def test_issue40_item4_a_rewritten_workspace_git_neither_runs_hooks_nor_redirects_the_push(
    core_factory: Callable[..., Any], tmp_path: Path
) -> None:
    """The model owns the workspace, its `.git` included: a pre-commit hook, a hooks path, an
    `insteadOf` sending the remote's URL elsewhere, a credential helper. The server's result
    reads none of them: its commit runs no hook and its push reaches the real remote."""
    remote = make_remote(tmp_path / "remotes")
    evil = make_remote(tmp_path / "evil")
    core = await core_factory(repository_remotes=(f"{tmp_path / 'remotes'}/",))
    root = tmp_path / "root"
    root.mkdir()
    s = await core.create_session([root], repository=RepositoryRequest(str(remote.path), "main", push=True))
    ws = Path(s.state.workspace_roots[0])
    marker = tmp_path / "hook-ran"
    hooks = ws / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    for name in ("pre-commit", "pre-push", "post-checkout", "reference-transaction"):
        (hooks / name).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (hooks / name).chmod(0o755)
    with (ws / ".git" / "config").open("a") as f:
        f.write(f'[core]\n\thooksPath = .git/hooks\n[url "{evil.path}"]\n\tinsteadOf = {remote.path}\n')
        f.write(f"[credential]\n\thelper = !touch {marker}\n")
    (ws / "app.py").write_text("print('changed')\n")
    result = await repository_result(s)
    assert result.branch and remote.branches()[result.branch] == result.commit
    assert set(evil.branches()) == {"main", "feature"} and not marker.exists()
    assert result.files == ["app.py"]


async def test_issue40_item4_another_replica_pushes_from_the_store_and_goes_on_from_the_last_push(
    core_factory: Callable[..., Any], tmp_path: Path, sqlite_url: str
) -> None:
    """The session's state in the store names everything a result needs: a replica with another
    data directory (none of the session's git data) makes and pushes it, and a later push from
    the first replica goes on from that commit (a fast-forward, never a force)."""
    remote = make_remote(tmp_path / "remotes")
    allowed = (f"{tmp_path / 'remotes'}/",)
    one = await core_factory(repository_remotes=allowed, data_dir=tmp_path / "data-one")
    two = await core_factory(repository_remotes=allowed, data_dir=tmp_path / "data-two")
    root = tmp_path / "root"
    root.mkdir()
    s = await one.create_session([root], repository=RepositoryRequest(str(remote.path), "feature"))
    ws = Path(s.state.workspace_roots[0])
    (ws / "a.txt").write_text("a\n")
    on_two = await two.get_session(s.id)
    assert on_two is not None and not (tmp_path / "data-two" / "repositories").exists()
    first = await repository_result(on_two, push=True)
    assert remote.branches()[first.branch] == first.commit
    assert git("rev-parse", f"{first.commit}^", cwd=remote.path) == remote.first
    await s.refresh()
    assert s.state.repository["pushed_commit"] == first.commit
    (ws / "b.txt").write_text("b\n")
    second = await repository_result(s, push=True)
    assert git("rev-parse", f"{second.commit}^", cwd=remote.path) == first.commit
    assert sorted(second.files) == ["a.txt", "b.txt"]  # the patch is always against the ref
    assert remote.branches()["feature"] == remote.first
    s.state.repository["result_branch"] = "feature"  # a record pointing the push at its own ref
    with pytest.raises(InputError, match="is the ref the session started from"):
        await repository_result(s, push=True)
    assert remote.branches()["feature"] == remote.first
    assert os.path.isdir(ws)


def test_issue40_item3_the_credential_helper_answers_for_the_remotes_own_host_only() -> None:
    """`git credential fill` with the helper devagent gives a command: the token for the remote's
    host, nothing for another (where a redirect would lead)."""
    import subprocess

    from devagent.agent.repository.git import git_env

    creds = {"https://git.example.com/": {"token_env": "ACME_TOKEN"}}
    auth = git_auth("https://git.example.com/team/app.git", creds, {"ACME_TOKEN": "tok-123456"})
    argv = ["git", *[a for c in auth.config for a in ("-c", c)], "credential", "fill"]
    env = git_env(dict(auth.env))
    own = subprocess.run(
        argv, input="protocol=https\nhost=git.example.com\n\n", env=env, capture_output=True, text=True
    )
    assert own.returncode == 0 and "password=tok-123456" in own.stdout
    other = subprocess.run(
        argv, input="protocol=https\nhost=evil.example.net\n\n", env=env, capture_output=True, text=True
    )
    assert other.returncode != 0 and "tok-123456" not in other.stdout + other.stderr
