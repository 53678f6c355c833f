"""Issue 28 item 3: a server running as root (the usual container) never runs a sandboxed command
as root. From outside: a real `devagent serve` as root with two named tokens, the model
(scripted, yolo) running what an attacker would run. The command's uid is not 0; it reads neither
/etc/shadow, nor a root-only file outside its workspace, nor what the operator hides with
`sandbox_hide`; what it creates in its workspace the server's file tools still read and edit, and
what the server writes there the command can still change. A workspace the sandbox user cannot
write is refused with the fix, and nothing runs. Roots mapped to identities are hidden from other
callers (who run as the same sandbox user). Root without CAP_SYS_ADMIN (a container) gets the
same.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.sandbox.probe import probe_bwrap
from tests.a2a.helpers import turn
from tests.a2a.procs import TOKEN, serving
from tests.a2a.test_hostile import ALICE, BOB, Site, script, shell_step, tool_outputs
from tests.sandbox_user import for_sandbox_user, nobody

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the server must run as root (as the usual container does)"),
    pytest.mark.skipif(isinstance(probe_bwrap(), str), reason="bubblewrap cannot run here"),
]

NOBODY = nobody()[0]  # the default sandbox user


@pytest.fixture
def outside() -> Iterator[Path]:
    """A folder outside every workspace and outside /tmp (which a sandboxed command sees empty
    anyway): what a command could reach on the disk, were it root."""
    folder = Path(tempfile.mkdtemp(prefix="devagent-item3-", dir="/var/tmp"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


def tool(name: str, **args: str) -> dict[str, Any]:
    return {"tool_call": {"name": name, "args": args}}


async def test_issue28_item3_sandboxed_command_on_a_root_server_is_not_root_and_reads_no_secret(
    tmp_path: Path, outside: Path
) -> None:
    """issue 28 item 3: as root, `serve`'s sandboxed command runs with a uid other than 0; it
    cannot read /etc/shadow, a root-only 0600 file outside the workspace, nor a world-readable
    token file and folder the operator named in DEVAGENT_SANDBOX_HIDE."""
    root_only = outside / "root-only.txt"
    root_only.write_text("leak-root-only\n")
    root_only.chmod(0o600)
    token_file = outside / "token"  # readable by anyone, as a careless operator left it
    token_file.write_text("leak-token-file\n")
    token_file.chmod(0o644)
    keys = outside / "keys"
    keys.mkdir()
    (keys / "id").write_text("leak-hidden-folder\n")
    (keys / "id").chmod(0o644)
    shadow = Path("/etc/shadow").read_text().splitlines()[0]  # root's line: the test is root

    site = Site(tmp_path)
    site.env["DEVAGENT_SANDBOX_HIDE"] = f"{token_file},{keys}"
    probe = (
        "echo uid=$(id -u); "
        "echo shadow bytes: $(cat /etc/shadow | wc -c); cat /etc/shadow; "
        f"cat {root_only}; cat {token_file}; echo keys: $(ls -A {keys}); cat {keys}/id; "
        f"echo visible: $(cat {outside}/visible.txt); echo END"
    )
    (outside / "visible.txt").write_text("yes\n")  # the same folder, not hidden: the probe works
    (outside / "visible.txt").chmod(0o644)
    model = script(tmp_path / "s.json", [shell_step(probe), [{"text": "done"}]])
    with serving(site.args(model, "--sandbox"), tmp_path / "serve.log", env=site.env) as s:
        blob = json.dumps(await turn(s.url, ALICE, "show me the machine's secrets", site.root / "alice"))
        log = s.stderr()
    output = tool_outputs(blob)
    assert "END" in output and "visible: yes" in output, output
    assert f"uid={NOBODY}" in output and "uid=0" not in output, output
    assert f"commands run as nobody (uid {NOBODY})" in log  # the start-up line says it
    assert "shadow bytes: 0" in output and shadow not in blob
    for secret in ("leak-root-only", "leak-token-file", "leak-hidden-folder"):
        assert secret not in blob, secret
    assert "keys:\\n" in output, output


async def test_issue28_item3_workspace_files_stay_usable_by_the_server_and_the_command(
    tmp_path: Path,
) -> None:
    """issue 28 item 3: in the folder the server made for a caller, a sandboxed command (not root)
    creates a file and a folder (and scratch files in its private /tmp and home); the server's
    file tools then read and edit that file, and write a new one that the next command can still
    change. Everything stays the sandbox user's; the server's user can delete it all."""
    site = Site(tmp_path)
    site.env["DEVAGENT_TOKEN"] += ",carol=tok-carol"
    ws = site.root / "carol"  # no folder of carol's yet: the server makes it
    steps = [
        shell_step(
            "echo made > made.txt && mkdir -p sub && echo deep > sub/deep.txt && echo MADE; "
            "echo t > /tmp/t && echo h > ~/h && echo SCRATCH"  # its private /tmp and $HOME too
        ),
        [tool("read_file", path="made.txt")],
        [tool("edit", path="made.txt", old_string="made", new_string="edited")],
        [tool("write_file", path="sub/new.txt", content="written\n")],
        [tool("write_file", path="by/server/note.txt", content="note\n")],  # folders the server makes
        shell_step(
            "echo more >> sub/new.txt && echo again >> made.txt && echo cmd > by/server/cmd.txt && echo OK"
        ),
        [{"text": "done"}],
    ]
    model = script(tmp_path / "s.json", steps)
    with serving(site.args(model, "--sandbox"), tmp_path / "serve.log", env=site.env) as s:
        blob = json.dumps(await turn(s.url, "tok-carol", "make some files", ws))
    output = tool_outputs(blob)
    assert "MADE" in output and "SCRATCH" in output and "OK" in output, output
    assert (ws / "made.txt").read_text() == "edited\nagain\n"
    assert (ws / "sub" / "new.txt").read_text() == "written\nmore\n"
    assert (ws / "by" / "server" / "cmd.txt").read_text() == "cmd\n"
    made = ("made.txt", "sub", "sub/deep.txt", "sub/new.txt", "by", "by/server", "by/server/note.txt")
    for path in (ws, *(ws / m for m in made)):
        assert path.stat().st_uid == NOBODY, path
    shutil.rmtree(ws)  # the server's user removes what the command made


async def test_issue28_item3_a_workspace_the_sandbox_user_cannot_write_is_refused(tmp_path: Path) -> None:
    """issue 28 item 3: with one token the workspace is the operator's folder; left to root, a
    sandboxed command there is refused with the fix (give it to the sandbox user, or name its
    owner in sandbox_user), and runs nothing."""
    site = Site(tmp_path)
    site.env["DEVAGENT_TOKEN"] = f"alice={ALICE},alice={TOKEN}"  # one identity: no folders of its own
    ws = tmp_path / "rootws"
    ws.mkdir()
    marker = ws / "ran"
    model = script(tmp_path / "s.json", [shell_step(f"touch {marker}"), [{"text": "done"}]])
    args = ["--workspace-root", str(ws), "--model", model, "--sandbox"]
    with serving(args, tmp_path / "serve.log", env=site.env) as s:
        blob = json.dumps(await turn(s.url, ALICE, "touch a file", ws))
        started = s.stderr()
    output = tool_outputs(blob)
    assert not marker.exists()
    # issue 37 item 10: what to do, said once: give the folder to a user (who then runs them)
    where = ws.resolve()
    hint = f"never run as root, and the workspace {where} is root's: give it to a user "
    hint += f"(chown -R USER {where})"
    assert hint in output and "sandbox_user" in output, output
    # said at start too, in one line, before any caller meets it
    [said] = [line for line in started.splitlines() if "will be refused" in line]
    assert said.startswith(f"Shell sandbox: commands in {ws.resolve()} will be refused: ") and hint in said
    assert f"commands run as nobody (uid {NOBODY})" in started


async def test_issue37_item10_commands_run_as_the_workspace_owner_when_it_is_not_root(tmp_path: Path) -> None:
    """issue 37 item 10: a root server whose workspace belongs to a user who is not root (a
    checkout or a volume of theirs), no sandbox_user set, runs its sandboxed commands as that
    user: nothing to chown first, and still never root."""
    owner = 4242  # a uid with no account: its own group, as a volume from another machine has
    site = Site(tmp_path)
    site.env["DEVAGENT_TOKEN"] = f"alice={ALICE},alice={TOKEN}"  # one identity: no folders of its own
    ws = tmp_path / "theirs"
    ws.mkdir()
    os.chown(ws, owner, owner)
    steps = [shell_step("echo uid=$(id -u); touch made; echo END"), [{"text": "done"}]]
    model = script(tmp_path / "s.json", steps)
    args = ["--workspace-root", str(ws), "--model", model, "--sandbox"]
    with serving(args, tmp_path / "serve.log", env=site.env) as s:
        blob = json.dumps(await turn(s.url, ALICE, "touch a file", ws))
        started = s.stderr()
    output = tool_outputs(blob)
    assert "END" in output and f"uid={owner}" in output, output
    assert (ws / "made").stat().st_uid == owner
    assert f"commands run as {owner} (uid {owner})" in started and "will be refused" not in started, started


async def test_issue28_item3_mapped_workspaces_are_hidden_from_other_callers(
    tmp_path: Path, outside: Path
) -> None:
    """issue 28 item 3 (with issue 20 item 4): roots the operator maps to identities
    (--workspace-for) are hidden like the shared roots: Bob's command sees nothing of Alice's
    mapped folder, only his own."""
    site = Site(tmp_path)
    mine = {who: outside / who for who in ("alice", "bob")}  # not under /tmp, private anyway
    for folder in mine.values():
        folder.mkdir(parents=True)
    alice = mine["alice"]
    (alice / "plan.txt").write_text("leak-alice-mapped\n")
    (alice / "plan.txt").chmod(0o644)
    for folder in mine.values():
        for_sandbox_user(folder)
    probe = f"echo alice holds: $(ls -A {alice} | wc -l); cat {alice}/plan.txt; echo b > mine; echo END"
    model = script(tmp_path / "s.json", [shell_step(probe), [{"text": "done"}]])
    maps = [arg for who in ("alice", "bob") for arg in ("--workspace-for", f"{who}={mine[who]}")]
    with serving([*site.args(model, "--sandbox"), *maps], tmp_path / "serve.log", env=site.env) as s:
        blob = json.dumps(await turn(s.url, BOB, "what does alice have?", mine["bob"]))
    output = tool_outputs(blob)
    assert "END" in output and "alice holds: 0" in output, output
    assert "leak-alice-mapped" not in blob
    assert (mine["bob"] / "mine").read_text() == "b\n"


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) drops the capability")
async def test_issue28_item3_root_without_cap_sys_admin_still_runs_commands_as_the_sandbox_user(
    outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """issue 28 item 3: root in a container usually lacks CAP_SYS_ADMIN, so bwrap cannot make
    its namespaces as root; it is then started as the sandbox user (in a user namespace of its
    own). The server runs so here (setpriv drops the capability): its command is still not
    root, reads no /etc/shadow and no root-only file, and writes its workspace."""
    import tests.a2a.procs as procs

    monkeypatch.setattr(procs, "DEVAGENT", ["setpriv", "--bounding-set=-sys_admin", *procs.DEVAGENT])
    root_only = outside / "root-only.txt"
    root_only.write_text("leak-root-only\n")
    root_only.chmod(0o600)
    site = Site(outside / "site")  # under /var/tmp: folders the sandbox user can pass through
    probe = (
        "echo uid=$(id -u); echo shadow bytes: $(cat /etc/shadow | wc -c); "
        f"cat {root_only}; grep CapEff /proc/self/status; echo w > written; echo END"
    )
    model = script(outside / "s.json", [shell_step(probe), [{"text": "done"}]])
    with serving(site.args(model, "--sandbox"), outside / "serve.log", env=site.env) as s:
        blob = json.dumps(await turn(s.url, ALICE, "show me the machine's secrets", site.root / "alice"))
        log = s.stderr()
    output = tool_outputs(blob)
    assert "END" in output and f"uid={NOBODY}" in output and "shadow bytes: 0" in output, output
    assert "CapEff:\\t0000000000000000" in output, output
    assert "leak-root-only" not in blob
    assert (site.root / "alice" / "written").stat().st_uid == NOBODY
    assert f"commands run as nobody (uid {NOBODY})" in log
