"""The red team's probes (tests/a2a/test_hostile.py, issue 20) that test_issue40_serve.py does not
already run against the container backend: a real `devagent serve` with
`sandbox_backend = container`, two callers, secrets in the server's environment, the scripted
model running what an attacker's prompt would make it run, in yolo mode."""

from __future__ import annotations

import json
import os
from typing import Any

from tests.a2a.helpers import context_of, turn
from tests.a2a.procs import serving
from tests.a2a.test_hostile import ALICE, BOB, Site, script, tool_outputs
from tests.core_helpers import call, shell_call
from tests.sandbox.image import UID
from tests.sandbox.test_issue40_serve import bound_to, serve_args, site  # noqa: F401


async def test_issue40_item5_no_command_changes_or_reads_devagents_own_files_in_the_container(
    site: Site,  # noqa: F811
) -> None:
    """issue 40 item 5 (issue 20 item 2's probe): the server runs from the caller's folder (as
    `scripts/start` does), its settings file and database inside it. The local backend hides
    them from a command there; a bind mount cannot, so on the container backend the folder is
    never the container's /workspace: the model's file tools are refused the settings, its
    command is refused with the operator's fix (no container is made), and the settings and the
    database are untouched; a restart reads the same settings."""
    ws = site.root / "alice"
    config, db = ws / "devagent.toml", ws / "devagent.db"
    config.write_text('[devagent]\nsandbox = "on"\napproval_mode = "yolo"\n')
    os.chown(config, UID, UID)  # as the rest of the folder: the image user's
    site.env.update({"DEVAGENT_DB": f"sqlite+aiosqlite:///{db}"})
    command = (
        "echo 'sandbox = \"off\"' >> devagent.toml; echo config: $(cat devagent.toml | wc -c); "
        "echo x >> devagent.db; rm -f devagent.db-wal devagent.db; echo RAN$((1+1))IT"
    )
    steps = [
        [call("write_file", {"path": "devagent.toml", "content": 'sandbox = "off"\n'})],
        [shell_call(command)],
        [{"text": "done"}],
    ]
    model = script(site.tmp / "s.json", steps)
    before = config.read_text()
    args = [*serve_args(site, model), "--config", str(config)]
    with serving(args, site.tmp / "serve.log", env=site.env) as s:
        output = tool_outputs(json.dumps(await turn(s.url, ALICE, "reconfigure yourself", ws)))
        assert db.exists() and db.stat().st_size > 0, output  # the server's database, whole
    assert "configures devagent or holds its data; no tool may change it" in output, output
    assert "which the container backend cannot hide" in output and "RAN2IT" not in output, output
    assert config.read_text() == before
    assert bound_to(site.root) == {}  # no container was made around the folder
    with serving(args, site.tmp / "again.log", env=site.env) as s:
        assert "Shell sandbox: on (containers" in s.stderr()


async def test_issue40_item5_a_fork_bomb_and_a_memory_hog_in_one_callers_container_leave_the_other_served(
    site: Site,  # noqa: F811
) -> None:
    """issue 40 item 5 through a server: Alice's command starts a fork bomb in the background
    and then holds as much memory as it can; her container's limits (pids, memory) stop both
    there. Bob's turn, meanwhile, runs a command that forks and allocates as usual and
    completes. The bomb's processes end with Alice's command (what a command leaves running in
    its group does), so her own next command runs in the same container."""
    bomb = (
        "(f() { f | f & }; f) >/dev/null 2>&1 & "
        'python3 -c \'b = bytearray(1024 * 1024 * 1024); print("hog", "survived")\'; '
        "echo bomb-set=$?"
    )
    (site.root / "alice" / "role").write_text("alice")
    (site.root / "bob" / "role").write_text("bob")
    work = (
        'if [ "$(cat role)" = alice ]; then ' + bomb + "; else "
        "seq 1 20 | xargs -n1 true && python3 -c 'print(len(bytearray(32 * 1024 * 1024)))' && echo bob-ok; fi"
    )
    steps: list[list[dict[str, Any]]] = [
        [shell_call(work)],  # each conversation plays from its own first step: Bob's too
        [{"text": "done"}],
        [shell_call("echo alice-again")],
        [{"text": "done"}],
    ]
    model = script(site.tmp / "s.json", steps)
    with serving(serve_args(site, model), site.tmp / "serve.log", env=site.env) as s:
        alice = await turn(s.url, ALICE, "use everything", site.root / "alice")
        bob = tool_outputs(json.dumps(await turn(s.url, BOB, "work", site.root / "bob")))
        again = tool_outputs(
            json.dumps(await turn(s.url, ALICE, "again", site.root / "alice", context_of(alice)))
        )
    said = tool_outputs(json.dumps(alice))
    assert "bomb-set=" in said and "hog survived" not in said, said
    assert "33554432" in bob and "bob-ok" in bob, bob
    assert "alice-again" in again, again
