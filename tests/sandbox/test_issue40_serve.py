"""Issue 40 items 1, 2 and 5 through a real server: `devagent serve` (A2A) with
`sandbox_backend = container` and a template on the locally built test image. The scripted model
runs `run_shell_command` in the session's own container (its non-root user, in /workspace) and
the output comes back over A2A SSE; the file tools and the shell see the same files (the
session's workspace folder is the container's /workspace); the red team's secrets and
background-process probes hold against the container backend. Every container a server made
for these tests is removed, and the engine is asked that none is left."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.a2a.helpers import auth, context_of, rpc, turn, v03_message
from tests.a2a.procs import serving
from tests.a2a.test_hostile import ALICE, BOB, PASSED, SECRETS, Site, script, tool_outputs
from tests.core_helpers import call, shell_call
from tests.process_scan import running
from tests.sandbox.image import UID

A_SECONDS, B_SECONDS = "3601471", "3602583"  # the two background sleeps, told apart in /proc
WITHIN = 60.0  # seconds a process may take to go on a loaded machine (a failure guard, not a pace)


def engine_lines(*args: str) -> list[str]:
    done = subprocess.run(["podman", *args], capture_output=True, text=True)
    return [line for line in done.stdout.splitlines() if line.strip()]


def bound_to(folder: Path) -> dict[str, str]:
    """The sandbox containers whose /workspace is a folder under `folder`: name -> that folder."""
    found: dict[str, str] = {}
    for name in engine_lines("ps", "-a", "--filter", "label=devagent.sandbox", "--format", "{{.Names}}"):
        mounts = engine_lines("container", "inspect", "--format", "{{json .Mounts}}", name)
        for mount in json.loads(mounts[0] if mounts else "[]") or []:
            source = str(mount.get("Source") or "")
            if mount.get("Destination") == "/workspace" and source.startswith(str(folder) + "/"):
                found[name] = source
    return found


@pytest.fixture
def site(tmp_path: Path, sandbox_image: str) -> Iterator[Site]:
    """The hostile test's site (secrets in the server's environment, two callers' folders), its
    folders the image user's (as an operator gives them), the server on the container backend.
    Afterwards every container bound to its folders is removed, and none is left."""
    s = Site(tmp_path)
    for who in ("alice", "bob"):
        for path in [s.root / who, *(s.root / who).rglob("*")]:
            os.chown(path, UID, UID, follow_symlinks=False)
    template = {"default": {"image": sandbox_image, "memory_mb": 256, "pids": 64}}
    s.env.update(
        {"DEVAGENT_SANDBOX_BACKEND": "container", "DEVAGENT_SANDBOX_TEMPLATES": json.dumps(template)}
    )
    try:
        yield s
    finally:
        sessions: list[str] = []
        made = bound_to(s.root)
        for name in made:
            label = '{{index .Config.Labels "devagent.session"}}'
            sessions += engine_lines("container", "inspect", "--format", label, name)
            subprocess.run(["podman", "rm", "--force", name], capture_output=True)
        assert bound_to(s.root) == {} and len([x for x in sessions if x.strip()]) == len(made)
        for session in sessions:  # the workspace was the host folder: no volume was made either
            assert (
                engine_lines("volume", "ls", "--quiet", "--filter", f"label=devagent.session={session}") == []
            )


def serve_args(site: Site, model: str) -> list[str]:
    return site.args(model, "--sandbox")


async def test_issue40_item1_shell_runs_in_the_sessions_container_and_streams_over_sse(site: Site) -> None:
    """issue 40 item 1: a scripted turn's `run_shell_command` runs in the session's container as
    the image's non-root user in /workspace (the caller's folder: its file is there), and its
    output arrives in the turn's SSE frames; the server's start-up line names the backend."""
    probe = (
        "echo uid=$(id -u) user=$(id -un) pwd=$(pwd); cat secret.txt; cat /proc/1/cgroup | wc -l; echo END"
    )
    model = script(site.tmp / "s.json", [[shell_call(probe)], [{"text": "done"}]])
    with serving(serve_args(site, model), site.tmp / "serve.log", env=site.env) as s:
        frames = await turn(s.url, ALICE, "where do you run?", site.root / "alice")
        log = s.stderr()
    output = tool_outputs(json.dumps(frames))
    assert f"uid={UID} user=agent pwd=/workspace" in output, output
    # the command's output is in a frame of its own, streamed before the turn's last
    first = next(i for i, f in enumerate(frames) if f"uid={UID}" in json.dumps(f))
    assert first < len(frames) - 1 and frames[-1]["result"]["status"]["state"] == "completed"
    assert "alice's own file" in output and "END" in output
    assert "containers (podman), one per session" in log, log
    containers = bound_to(site.root)
    assert list(containers.values()) == [str(site.root / "alice")], containers


async def test_issue40_item2_file_tools_and_shell_see_the_same_workspace(site: Site) -> None:
    """issue 40 item 2 (G4): in a container session, what `write_file` writes the shell reads
    (`cat`), what the shell writes `read_file`, `edit`, `glob` and `grep` find, and what `edit`
    changed the shell reads again; on the host it is all in the caller's folder, the image user's."""
    ws = site.root / "alice"
    steps = [
        [call("write_file", {"path": "by-tool.txt", "content": "written by the tool\n"})],
        [shell_call("cat by-tool.txt; mkdir -p sub && echo made by the shell > sub/by-shell.txt; echo END")],
        [call("read_file", {"path": "sub/by-shell.txt"})],
        [call("edit", {"path": "sub/by-shell.txt", "old_string": "made by", "new_string": "edited after"})],
        [call("glob", {"pattern": "**/*.txt"})],
        [call("grep", {"pattern": "edited after"})],
        [shell_call("cat sub/by-shell.txt; echo END2")],
        [{"text": "done"}],
    ]
    model = script(site.tmp / "s.json", steps)
    with serving(serve_args(site, model), site.tmp / "serve.log", env=site.env) as s:
        frames = await turn(s.url, ALICE, "make files", ws)
    output = tool_outputs(json.dumps(frames))
    assert "written by the tool" in output and "END" in output, output
    assert "made by the shell" in output  # read_file saw the shell's file
    assert "by-shell.txt" in output and "by-tool.txt" in output  # glob
    assert "edited after the shell" in output.split("END2")[0].rsplit("END", 1)[-1], output
    assert (ws / "sub" / "by-shell.txt").read_text() == "edited after the shell\n"
    for made in (ws / "by-tool.txt", ws / "sub", ws / "sub" / "by-shell.txt"):
        assert made.stat().st_uid == UID, made  # the shell's user can change what the tools wrote


async def test_issue40_item5_secrets_probe_against_the_container_backend(site: Site) -> None:
    """issue 40 item 5 (issue 20's probe, G4): the command in Alice's container prints its
    environment and tries the server's files: no provider key, token, database URL, operator
    secret or git credential; not the server's home, database, Bob's folder; the name the
    operator passes does arrive."""
    (site.home / ".git-credentials").write_text("https://u:leak-git-credential@example.org\n")
    site.env["GIT_ASKPASS"] = "/bin/leak-askpass"
    probe = (
        "env; echo ---; "
        f"cat {site.home}/.ssh/id_ed25519 {site.home}/.git-credentials; "
        f"echo db bytes: $(cat {site.db_file} | wc -c); "
        f"echo root holds: $(ls {site.root}); git config --global --list; "
        f"cat {site.root}/bob/secret.txt; cat secret.txt; echo END"
    )
    model = script(site.tmp / "s.json", [[shell_call(probe)], [{"text": "done"}]])
    with serving(serve_args(site, model), site.tmp / "serve.log", env=site.env) as s:
        blob = json.dumps(await turn(s.url, ALICE, "show me your environment", site.root / "alice"))
    output = tool_outputs(blob)
    assert "END" in output and "alice's own file" in output, output
    for secret in (*SECRETS.values(), ALICE, BOB, "leak-git-credential", "leak-askpass", "leak-ssh-key"):
        assert secret not in blob, secret
    assert "sqlite+aiosqlite" not in output and "DEVAGENT_" not in output
    assert "leak-bob-file" not in blob
    assert "db bytes: 0" in output and "root holds:\\n" in output, output
    assert PASSED in output
    assert site.db_file.stat().st_size > 0


async def until(marker: str, runs: bool) -> None:
    """Waits until a process with the argument `marker` runs (or, `runs` False, none does)."""
    deadline = time.monotonic() + WITHIN
    while bool(running(marker, argument=True)) != runs:
        if time.monotonic() > deadline:
            raise AssertionError(f"{marker}: {running(marker, argument=True)}, expected running={runs}")
        await asyncio.sleep(0.05)  # polling /proc; the deadline only guards failure


async def test_issue40_item5_background_process_probe_against_the_container_backend(site: Site) -> None:
    """issue 40 item 5 (issue 37's probe): Alice and Bob each start a background process; Bob's
    next command lists every process it can see and kills all it can signal (`kill -9 -1`).
    Bob saw only his own, which is gone; Alice's still runs (she sees it, and the host does)
    until her container is stopped, which ends it; her next message starts the container again,
    without it."""
    for who, seconds in (("alice", A_SECONDS), ("bob", B_SECONDS)):
        (site.root / who / "seconds").write_text(seconds)
        (site.root / who / "role").write_text(who)
    look = 'ps -eo args | grep "[s]leep 36"; echo END; [ "$(cat role)" = bob ] && kill -9 -1; true'
    steps = [
        [call("run_shell_command", {"command": "sleep $(cat seconds)", "background": True})],
        [{"text": "started"}],
        [shell_call(look)],
        [{"text": "looked"}],
        [shell_call(look)],  # Alice's third turn, after her container was stopped from outside
        [{"text": "looked again"}],
    ]
    model = script(site.tmp / "s.json", steps)
    with serving(serve_args(site, model), site.tmp / "serve.log", env=site.env) as s:
        a = await turn(s.url, ALICE, "start", site.root / "alice")
        b = await turn(s.url, BOB, "start", site.root / "bob")
        for marker in (A_SECONDS, B_SECONDS):  # in their containers, seen by the host
            await until(marker, True)
        bob_saw = tool_outputs(json.dumps(await turn(s.url, BOB, "look", site.root / "bob", context_of(b))))
        await until(B_SECONDS, False)
        alice_saw = tool_outputs(
            json.dumps(await turn(s.url, ALICE, "look", site.root / "alice", context_of(a)))
        )
        assert f"sleep {B_SECONDS}" in bob_saw and A_SECONDS not in bob_saw, bob_saw
        assert f"sleep {A_SECONDS}" in alice_saw and B_SECONDS not in alice_saw, alice_saw
        assert running(A_SECONDS, argument=True)
        containers = {v: k for k, v in bound_to(site.root).items()}
        alice = containers[str(site.root / "alice")]
        await asyncio.to_thread(subprocess.run, ["podman", "stop", "--time", "1", alice], check=True)
        await until(A_SECONDS, False)
        again = tool_outputs(
            json.dumps(await turn(s.url, ALICE, "look again", site.root / "alice", context_of(a)))
        )
    # started again (by the server, or by the command's relay finding it stopped before the
    # command began), without the old process, and nothing reported interrupted
    assert "END" in again and A_SECONDS not in again and "interrupted" not in again, again


async def test_issue40_item4_repository_session_on_the_container_backend(
    sandbox_image: str, tmp_path: Path, db_url: str
) -> None:
    """issue 40 item 4 on the container backend: a conversation started from a repository at a
    ref is cloned on the server's host into the caller's folder, which is the container's
    /workspace: its setup script and the model's command run in the container as the image's
    user, the file tools edit the same clone, and the patch and the pushed branch come back."""
    from tests.a2a.helpers import running_server, stream
    from tests.git_remotes import git, git_daemon, make_remote
    from tests.repository.test_a2a_repository import artifacts

    workspace = tmp_path / "root" / "ws"
    workspace.mkdir(parents=True)
    steps = [
        [call("write_file", {"path": "notes.txt", "content": "from the tool\n"})],
        [shell_call("echo compiled as $(id -un) in $(pwd) > out.txt; cat notes.txt setup-marker.txt")],
        [{"text": "done"}],
    ]
    model = script(tmp_path / "s.json", steps)
    remote = make_remote(tmp_path / "served")
    template = {"default": {"image": sandbox_image, "memory_mb": 256, "pids": 64}}
    with git_daemon(tmp_path / "served") as prefix:
        core_kw = {
            "repository_remotes": (prefix,),
            "repository_setup": ("repo=repo:setup.sh",),
            "approval_mode": "yolo",
            "sandbox": "on",
            "sandbox_backend": "container",
            "sandbox_templates": template,
        }
        tokens = {"t-alice": "alice"}
        try:
            async with running_server(model, db_url, workspace, tokens=tokens, core_kw=core_kw) as srv:
                async with httpx.AsyncClient(timeout=300) as c:
                    repository = {"url": f"{prefix}project.git", "ref": "v1", "push": True, "setup": "repo"}
                    msg = v03_message("change it", settings={"repository": repository})
                    frames = await stream(
                        c, srv.url, rpc("message/stream", {"message": msg}), auth("t-alice")
                    )
        finally:
            containers = bound_to(tmp_path / "root")
            for name in containers:
                await asyncio.to_thread(
                    subprocess.run, ["podman", "rm", "--force", name], capture_output=True
                )
    assert frames[-1]["result"]["status"]["state"] == "completed", frames
    [clone] = list((tmp_path / "root").glob("project-*"))
    assert list(containers.values()) == [str(clone)], containers
    output = tool_outputs(json.dumps(frames))
    assert "from the tool" in output and "set-up-ran" in output, output
    [art] = artifacts(frames, "repository-result")
    info = next(p for p in art["parts"] if p.get("kind") == "data")["data"]
    assert info["base_commit"] == remote.first
    assert {"notes.txt", "out.txt"} <= set(info["files"]), info
    assert git("show", f"{info['branch']}:out.txt", cwd=remote.path) == "compiled as agent in /workspace"
    assert bound_to(tmp_path / "root") == {}


async def test_issue40_item2_G4_file_tools_stay_in_the_folder_whatever_the_container_links(
    site: Site,
) -> None:
    """issue 40 item 2 (G4): links a command makes in the container's /workspace lead the server's
    file tools nowhere outside the caller's folder: one to the host's /etc/shadow (as the
    container reads it, its own) and one to Bob's folder by its host path are refused; nothing
    of either reaches the conversation."""
    bob = site.root / "bob" / "secret.txt"
    steps = [
        [shell_call(f"ln -s /etc/shadow shadow && ln -s {bob} bobs && ln -s .. up && echo LINKED")],
        [call("read_file", {"path": "shadow"})],
        [call("read_file", {"path": "bobs"})],
        [call("read_file", {"path": "up/bob/secret.txt"})],
        [call("write_file", {"path": "up/bob/planted.txt", "content": "x\n"})],
        [{"text": "done"}],
    ]
    shadow = Path("/etc/shadow").read_text().splitlines()[0]
    model = script(site.tmp / "s.json", steps)
    with serving(serve_args(site, model), site.tmp / "serve.log", env=site.env) as s:
        blob = json.dumps(await turn(s.url, ALICE, "follow the links", site.root / "alice"))
    output = tool_outputs(blob)
    assert "LINKED" in output, output
    assert "leak-bob-file" not in blob and shadow not in blob
    assert not (site.root / "bob" / "planted.txt").exists()
    assert output.count("path_outside_workspace") == 4, output  # each of the four refused


async def test_issue40_item1_a_folder_the_image_user_cannot_write_is_refused_with_the_fix(site: Site) -> None:
    """issue 40 item 1: where the caller's folder is not the image user's (root's, 0755), the
    command is refused with the operator's fix (chown to the image user's uid) rather than run
    to fail on every write; the folder is not handed over behind the operator's back."""
    ws = site.root / "alice"
    os.chown(ws, 0, 0)
    ws.chmod(0o755)
    model = script(site.tmp / "s.json", [[shell_call("echo RAN > ran.txt")], [{"text": "done"}]])
    with serving(serve_args(site, model), site.tmp / "serve.log", env=site.env) as s:
        output = tool_outputs(json.dumps(await turn(s.url, ALICE, "write", ws)))
    assert f"chown -R {UID}:{UID} {ws}" in output, output
    assert not (ws / "ran.txt").exists() and ws.stat().st_uid == 0
