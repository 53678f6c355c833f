"""Issue 40 items 3 and 4 with the container backend's workspace on a volume: a session started
from a repository has its clone (made by the server, with the server's credentials) in the
container's volume and none of it on the server's host; its result's patch and pushed branch are
made from the volume's work tree, copied out without its `.git`, which the model may have
rewritten (an `insteadOf` to another remote: not followed). Real git (bare repositories on disk),
real Podman (runc) on the locally built image; every container and volume is swept."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from devagent.agent.api import RepositoryRequest, repository_result
from devagent.agent.sandbox.container import ContainerProvider
from tests.git_remotes import make_remote

Make = Callable[..., ContainerProvider]
GUARD = 120.0


async def test_issue40_item4_repository_session_on_a_volume_gives_its_patch_and_branch(
    make_provider: Make, core_factory: Callable[..., Any], tmp_path: Path
) -> None:
    remote = make_remote(tmp_path / "remotes")
    evil = make_remote(tmp_path / "evil")
    core = await core_factory(repository_remotes=(f"{tmp_path / 'remotes'}/",), sandboxes=make_provider())
    root = tmp_path / "root"
    root.mkdir()
    s = await core.create_session([root], repository=RepositoryRequest(str(remote.path), "main", push=True))
    assert s.sandbox.files_here is False
    ws = Path(s.state.workspace_roots[0])
    assert ws.parent == root and list(ws.iterdir()) == []  # the clone is not on the host

    async def shell(command: str) -> str:
        done = await s.sandbox.run(command, time_limit=GUARD)
        assert done.outcome == "done" and done.code == 0, done
        return str(done.output.decode())

    assert "Hello." in await shell("cat README.md; git status --short; git log --oneline | wc -l")
    await shell(
        "echo \"print('changed')\" > app.py && echo new > added.txt && "
        f"git config url.{evil.path}.insteadOf {remote.path}"
    )
    result = await repository_result(s)
    assert sorted(result.files) == ["added.txt", "app.py"], result.files
    assert "+print('changed')" in result.patch and "+new" in result.patch
    assert result.branch and remote.branches()[result.branch] == result.commit
    assert remote.show(result.commit, "added.txt") == "new"
    assert set(evil.branches()) == {"main", "feature"}
    assert list(ws.iterdir()) == []
    await s.sandbox.release(keep=False)
