"""Issue 40 items 1 and 5 through a real server: `devagent serve` (A2A) with the container backend
and `sandbox_workspace = volume` (DEVAGENT_SANDBOX_WORKSPACE). The session's workspace is the
container's own named volume: what the file tools write the shell reads and the other way round,
while the folder the caller named on the server's host gets none of it (so replicas on one engine
need no shared filesystem). Every container and volume the server made for the test's sessions
is removed afterwards, and the engine is asked that none is left."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

from tests.a2a.helpers import turn
from tests.a2a.procs import serving
from tests.a2a.test_hostile import ALICE, Site, script, tool_outputs
from tests.core_helpers import call, shell_call
from tests.sandbox.test_issue40_serve import engine_lines, serve_args, site

__all__ = ["site"]  # the served site's fixture, as test_issue40_serve makes it


def sandboxes() -> set[str]:
    return set(engine_lines("ps", "-a", "--quiet", "--filter", "label=devagent.sandbox"))


def sessions_holding(names: set[str], marker: str) -> list[str]:
    """The sessions (their label) of the containers among `names` whose volume holds `marker`
    in by-tool.txt: this test's own, whatever other tests run meanwhile."""
    found = []
    for name in names:
        done = subprocess.run(
            ["podman", "exec", name, "cat", "/workspace/by-tool.txt"], capture_output=True, text=True
        )
        if marker in done.stdout:
            label = '{{index .Config.Labels "devagent.session"}}'
            found += engine_lines("container", "inspect", "--format", label, name)
    return found


def remove_session(session: str) -> list[str]:
    """Removes the containers and volumes of one session; what the engine still lists after."""
    label = f"label=devagent.session={session}"
    for name in engine_lines("ps", "-a", "--quiet", "--filter", label):
        subprocess.run(["podman", "rm", "--force", name], capture_output=True)
    for name in engine_lines("volume", "ls", "--quiet", "--filter", label):
        subprocess.run(["podman", "volume", "rm", "--force", name], capture_output=True)
    return engine_lines("ps", "-a", "--quiet", "--filter", label) + engine_lines(
        "volume", "ls", "--quiet", "--filter", label
    )


def host_files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


async def test_issue40_item1_served_file_tools_work_on_the_containers_volume(site: Site) -> None:
    ws = site.root / "alice"
    before, running_before = host_files(ws), sandboxes()
    marker = f"written by the tool {uuid.uuid4().hex}"
    site.env["DEVAGENT_SANDBOX_WORKSPACE"] = "volume"
    steps = [
        [call("write_file", {"path": "by-tool.txt", "content": marker + "\n"})],
        [shell_call("cat by-tool.txt; mkdir -p sub && echo made by the shell > sub/by-shell.txt; echo END")],
        [call("read_file", {"path": "sub/by-shell.txt"})],
        [call("edit", {"path": "sub/by-shell.txt", "old_string": "made by", "new_string": "edited after"})],
        [call("glob", {"pattern": "**/*.txt"})],
        [call("grep", {"pattern": "edited after"})],
        [call("read_file", {"path": "secret.txt"})],
        [shell_call("cat sub/by-shell.txt; ls -a; echo END2")],
        [{"text": "done"}],
    ]
    model = script(site.tmp / "s.json", steps)
    sessions: list[str] = []
    try:
        with serving(serve_args(site, model), site.tmp / "serve.log", env=site.env) as s:
            frames = await turn(s.url, ALICE, "make files", ws)
        sessions = sessions_holding(sandboxes() - running_before, marker)
        assert len(sessions) == 1, sessions  # the session's container, around its volume
        output = tool_outputs(json.dumps(frames))
        assert marker in output and "END" in output, output
        assert "made by the shell" in output  # read_file read the shell's file, in the volume
        assert "by-shell.txt" in output and "by-tool.txt" in output  # glob
        assert "sub/by-shell.txt:1:edited after the shell" in output, output  # grep
        assert "edited after the shell" in output.split("END2")[0].rsplit("END", 1)[-1], output
        # the caller's host folder is not the workspace: its file is not in the volume, and
        # nothing the session made is on the host, nor is any host folder the container's
        assert "alice's own file" not in output and "does not exist" in output, output
        assert host_files(ws) == before
        label = f"label=devagent.session={sessions[0]}"
        (name,) = engine_lines("ps", "-a", "--quiet", "--filter", label)
        mounts = json.loads(engine_lines("container", "inspect", "--format", "{{json .Mounts}}", name)[0])
        kinds = {m["Destination"]: m["Type"] for m in mounts}
        assert kinds["/workspace"] == "volume" and "bind" not in kinds.values(), mounts
        assert len(engine_lines("volume", "ls", "--quiet", "--filter", label)) == 1
    finally:
        if not sessions:  # a failure before they were told: what this test made, if anything
            sessions = sessions_holding(sandboxes() - running_before, marker)
        for session in sessions:
            assert remove_session(session) == []
