"""Issue 40 item 2 through a real server on Docker: `devagent serve` with `sandbox_backend =
container` and `sandbox_engine = docker`, its client pointed at the session's private dockerd
(DOCKER_HOST, tests/sandbox/docker_daemon.py). A scripted turn's file tool and shell command run
in the session's own Docker container (the image's non-root user, in /workspace, the caller's
folder); the output comes back over A2A SSE. The backend-level tests run on Docker through
`sandbox_engine` (test_container.py); this is the server's path to them."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.a2a.helpers import turn
from tests.a2a.procs import serving
from tests.a2a.test_hostile import ALICE, Site, script, tool_outputs
from tests.core_helpers import call, shell_call
from tests.sandbox import docker_daemon as dockerd
from tests.sandbox.image import UID, tag


def bound_to(daemon: dockerd.Daemon, folder: Path) -> dict[str, str]:
    """The daemon's sandbox containers whose /workspace is a folder under `folder`."""
    found: dict[str, str] = {}
    names = daemon.run("ps", "-a", "--filter", "label=devagent.sandbox", "--format", "{{.Names}}").stdout
    for name in names.split():
        mounts = daemon.run("container", "inspect", "--format", "{{json .Mounts}}", name).stdout
        for mount in json.loads(mounts or "[]") or []:
            source = str(mount.get("Source") or "")
            if mount.get("Destination") == "/workspace" and source.startswith(str(folder) + "/"):
                found[name] = source
    return found


@pytest.fixture
def docker_site(tmp_path: Path, docker_daemon: dockerd.Daemon) -> Iterator[Site]:
    """The hostile test's site, its folders the image user's, the server on the container
    backend with Docker; the containers it made are removed afterwards, and none is left."""
    s = Site(tmp_path)
    for who in ("alice", "bob"):
        for path in [s.root / who, *(s.root / who).rglob("*")]:
            os.chown(path, UID, UID, follow_symlinks=False)
    template = {"default": {"image": tag(), "memory_mb": 256, "pids": 64}}
    s.env.update(
        {
            "DEVAGENT_SANDBOX_BACKEND": "container",
            "DEVAGENT_SANDBOX_ENGINE": "docker",
            "DEVAGENT_SANDBOX_TEMPLATES": json.dumps(template),
            "DOCKER_HOST": docker_daemon.host,
            "PATH": f"{os.path.dirname(docker_daemon.client)}{os.pathsep}{os.environ.get('PATH', '')}",
        }
    )
    try:
        yield s
    finally:
        made = bound_to(docker_daemon, s.root)
        for name in made:
            docker_daemon.run("rm", "--force", name)
        assert bound_to(docker_daemon, s.root) == {}
        assert docker_daemon.run("volume", "ls", "--quiet").stdout.split() == []  # bind mounts only


async def test_issue40_item2_serve_runs_a_turns_tools_in_a_docker_container(
    docker_site: Site, docker_daemon: dockerd.Daemon
) -> None:
    site = docker_site
    ws = site.root / "alice"
    probe = (
        "echo uid=$(id -u) user=$(id -un) pwd=$(pwd); cat secret.txt by-tool.txt; "
        "echo host=${DOCKER_HOST:-none}; ls /var/run/docker.sock /run/docker.sock 2>&1 | grep -c such; "
        f"test -e {docker_daemon.folder} || echo no-daemon-folder; echo END"
    )
    steps = [
        [call("write_file", {"path": "by-tool.txt", "content": "written by the tool\n"})],
        [shell_call(probe)],
        [{"text": "done"}],
    ]
    model = script(site.tmp / "s.json", steps)
    args = site.args(model, "--sandbox")
    with serving(args, site.tmp / "serve.log", env=site.env) as s:
        frames = await turn(s.url, ALICE, "where do you run?", ws)
        log = s.stderr()
        containers = bound_to(docker_daemon, site.root)  # in the private daemon, around her folder
    output = tool_outputs(json.dumps(frames))
    assert f"uid={UID} user=agent pwd=/workspace" in output, output
    assert "alice's own file" in output and "written by the tool" in output and "END" in output, output
    # no way to its daemon: no DOCKER_HOST, neither socket path (2 "No such file"), not its folder
    assert "host=none\\n2\\nno-daemon-folder" in output, output  # the frames' JSON text
    assert "containers (docker), one per session" in log, log
    assert list(containers.values()) == [str(ws)], containers
    assert (ws / "by-tool.txt").stat().st_uid == UID
