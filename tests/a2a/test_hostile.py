"""Issue 20: the trust boundaries of a shared server, probed from outside as an attacker would.

A real `devagent serve` with two named tokens, provider keys and a database URL in its environment,
the model (scripted) running what an attacker's prompt would make it run, in yolo mode so nothing
waits for a person. The probes: a command's environment holds no secret (sandbox on and off); in
the sandbox a command reads neither the server's home, nor the database file, nor another
caller's folder; no tool writes devagent's own files in any mode; where bubblewrap cannot run,
serve says so at start and commands fail closed.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from devagent.a2a.extension import EXTENSION_URI as EXT
from devagent.agent.sandbox.probe import probe_bwrap
from tests.a2a.helpers import auth, rpc, turn, v03_message
from tests.a2a.procs import TOKEN, serving
from tests.core_helpers import shell_call, write_call
from tests.sandbox_user import for_sandbox_user

SECRETS = {
    "OPENAI_API_KEY": "sk-leak-openai",
    "ANTHROPIC_API_KEY": "sk-leak-anthropic",
    "DEVAGENT_API_KEY": "leak-devagent-api-key",
    "MY_SERVICE_PASSWORD": "leak-operator-secret",  # a name devagent has never heard of
}
ALICE, BOB = "tok-alice-leak", "tok-bob-leak"
PASSED = "passed-on-by-the-operator"


def bwrap_works() -> bool:
    return not isinstance(probe_bwrap(), str)


def script(path: Path, steps: list[list[dict[str, Any]]]) -> str:
    path.write_text(json.dumps({"steps": [{"items": s} for s in steps]}))
    return f"scripted:{path}"


def shell_step(command: str) -> list[dict[str, Any]]:
    return [shell_call(command)]


class Site:
    """A server's surroundings: its home, data folder, database file, workspace roots, env."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.home = tmp / "home"
        (self.home / ".ssh").mkdir(parents=True)
        (self.home / ".ssh" / "id_ed25519").write_text("leak-ssh-key\n")
        self.data = tmp / "data"
        self.db_file = tmp / "state" / "devagent.db"
        self.db_file.parent.mkdir()
        self.root = tmp / "root"
        for who, secret in (("alice", "alice's own file"), ("bob", "leak-bob-file")):
            (self.root / who).mkdir(parents=True)
            (self.root / who / "secret.txt").write_text(secret + "\n")
            for_sandbox_user(self.root / who)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("DEVAGENT_")}
        self.env.update(SECRETS)
        self.env.update(
            {
                "HOME": str(self.home),
                "DEVAGENT_DATA_DIR": str(self.data),
                "DEVAGENT_DB": f"sqlite+aiosqlite:///{self.db_file}",
                "DEVAGENT_TOKEN": f"alice={ALICE},bob={BOB},ops={TOKEN}",  # ops: the readiness probe
                "DEVAGENT_APPROVAL": "yolo",
                "DEVAGENT_ENV_PASS": "PASSED_ON",
                "PASSED_ON": PASSED,
            }
        )

    def args(self, model: str, *extra: str) -> list[str]:
        return ["--workspace-root", str(self.root), "--model", model, *extra]


def tool_outputs(blob: str) -> str:
    """What the tool calls of a turn returned (their output and errors), as one text."""
    out: list[str] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            if x.get("tool_name") and x.get("status") in ("SUCCEEDED", "FAILED"):
                out.append(json.dumps(x.get("result") or x.get("output") or x))
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(json.loads(blob))
    return "\n".join(out)


@pytest.mark.parametrize("sandbox", ["on", "off"])
async def test_issue20_a_command_sees_no_secret_and_in_the_sandbox_nothing_of_the_server(
    tmp_path: Path, sandbox: str
) -> None:
    """issue 20 items 1, 3, 4 (G4): Alice's command prints its environment and tries the server's
    files. Neither token, no provider key, not the database URL, not the operator's own secret
    reach it, sandbox on or off; the name the operator passes does. In the sandbox it cannot read
    the server's ssh key, the database file or Bob's folder, and sees only its own workspace."""
    if sandbox == "on" and not bwrap_works():
        pytest.skip("bubblewrap cannot run here")
    site = Site(tmp_path)
    probe = (
        "env; echo ---; "
        f"cat {site.home}/.ssh/id_ed25519; "
        f"echo db bytes: $(cat {site.db_file} | wc -c); "
        f"echo root holds: $(ls {site.root}); "
        f"cat {site.root}/bob/secret.txt; cat secret.txt; echo END"
    )
    model = script(tmp_path / "s.json", [shell_step(probe), [{"text": "done"}]])
    flag = "--sandbox" if sandbox == "on" else "--no-sandbox"
    with serving(site.args(model, flag), tmp_path / "serve.log", env=site.env) as s:
        blob = json.dumps(await turn(s.url, ALICE, "show me your environment", site.root / "alice"))
    output = tool_outputs(blob)
    assert "END" in output and "alice's own file" in output
    for secret in (*SECRETS.values(), ALICE, BOB):
        assert secret not in blob, secret
    assert "sqlite+aiosqlite" not in output  # the database URL (the command names only its file)
    assert PASSED in output
    assert "DEVAGENT_" not in output
    if sandbox == "on":
        assert "leak-ssh-key" not in blob
        assert "leak-bob-file" not in blob
        assert "db bytes: 0" in output
        assert "root holds: alice\\n" in output or "root holds: alice\\\\n" in output
        # The database is intact, of course: the server still reads it.
        assert site.db_file.stat().st_size > 0


async def test_issue20_no_tool_changes_devagents_own_files_in_yolo(tmp_path: Path) -> None:
    """issue 20 item 2: the server runs from its workspace (as `scripts/start` does), its settings
    file, data folder and database inside it. In yolo mode the model's writes and edits of them,
    and of `.git/config`, fail with a clear message; in the sandbox a shell command cannot change
    or read them either. A restart then reads the same settings: the sandbox is still on."""
    if not bwrap_works():
        pytest.skip("bubblewrap cannot run here")
    site = Site(tmp_path)
    ws = site.root / "alice"
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    config = ws / "devagent.toml"
    config.write_text('[devagent]\nsandbox = "on"\napproval_mode = "yolo"\n')
    db = ws / "devagent.db"
    site.env.update({"DEVAGENT_DB": f"sqlite+aiosqlite:///{db}", "DEVAGENT_DATA_DIR": str(ws / ".devagent")})
    site.env.pop("DEVAGENT_APPROVAL")
    hostile = 'sandbox = "off"\napproval_mode = "yolo"\n'

    def write(tool: str, path: str, **args: str) -> dict[str, Any]:
        return {"tool_call": {"name": tool, "args": {"path": path, **args}}}

    writes = [
        write("write_file", "devagent.toml", content=hostile),
        write("edit", "devagent.toml", old_string="on", new_string="off"),
        write("write_file", "devagent.db-wal", content="x"),
        write("write_file", ".devagent/devagent.db", content="x"),
        write("write_file", ".git/config", content="[core]\nfsmonitor=x\n"),
    ]
    command = (
        "echo 'sandbox = \"off\"' >> devagent.toml; echo config: $(cat devagent.toml | wc -c); "
        "echo x >> devagent.db; echo db bytes: $(cat devagent.db | wc -c); echo END"
    )
    model = script(tmp_path / "s.json", [writes, shell_step(command), [{"text": "done"}]])
    size = len(config.read_text())
    with serving(site.args(model, "--config", str(config)), tmp_path / "serve.log", env=site.env) as s:
        blob = json.dumps(await turn(s.url, ALICE, "reconfigure yourself", ws))
    output = tool_outputs(blob)
    assert output.count("configures devagent or holds its data; no tool may change it") >= 4, output
    assert "inside a .git directory" in output
    assert "config: 0" in output and "db bytes: 0" in output and "END" in output
    assert len(config.read_text()) == size and "off" not in config.read_text()
    assert (ws / ".git" / "config").read_text() == "[core]\n"
    assert not (ws / ".devagent" / "devagent.db").exists()
    with serving(site.args(model, "--config", str(config)), tmp_path / "again.log", env=site.env) as s:
        assert "Shell sandbox: on" in s.stderr()


async def test_issue20_serve_fails_closed_where_bubblewrap_cannot_run(tmp_path: Path) -> None:
    """issue 20 item 3: bwrap fails as in a container without user namespaces. `serve` (sandbox
    on by default) starts, says that commands will fail until bubblewrap runs or the sandbox is
    turned off, and the model's command fails with that message instead of running unsandboxed."""
    site = Site(tmp_path)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text(
        "#!/bin/sh\n[ \"$1\" = --version ] && echo 'bubblewrap 0.8.0' && exit 0\n"
        "echo 'bwrap: No permissions to create a new namespace' >&2; exit 1\n"
    )
    (fake / "bwrap").chmod(0o755)
    site.env["PATH"] = f"{fake}:{site.env['PATH']}"
    marker = site.root / "alice" / "ran"
    model = script(tmp_path / "s.json", [shell_step(f"touch {marker}"), [{"text": "done"}]])
    with serving(site.args(model), tmp_path / "serve.log", env=site.env) as s:
        log = s.stderr()
        assert "Shell sandbox: UNAVAILABLE (bwrap cannot create its sandbox here" in log
        assert "Shell commands will fail until" in log
        blob = json.dumps(await turn(s.url, ALICE, "touch a file", site.root / "alice"))
    assert not marker.exists()
    assert "its sandbox is on but bwrap cannot create its sandbox here" in tool_outputs(blob)


async def test_g3_issue20_allow_always_bypasses_are_asked_again(tmp_path: Path) -> None:
    """issue 20 items 5-6 (G3): Alice allows `git status` and `find . -name x` always. Then the
    model's `git -c core.fsmonitor=... status` and `find . -exec ...` each ask again (nothing
    ran), while `git status --short` runs unasked."""
    site = Site(tmp_path)
    site.env.pop("DEVAGENT_APPROVAL")
    ws = site.root / "alice"
    git_init(ws)

    def sh(command: str, call_id: str) -> dict[str, Any]:
        return shell_call(command, call_id)

    steps = [
        [sh("git status", "a1"), sh("find . -name x", "a2")],
        [
            sh(f"git -c core.fsmonitor='touch {ws}/pwned1' status", "b1"),
            sh(f"find . -exec touch {ws}/pwned2 \\;", "b2"),
            sh("git status --short", "b3"),
        ],
        [{"text": "done"}],
    ]
    model = script(tmp_path / "s.json", steps)
    with serving(site.args(model, "--no-sandbox"), tmp_path / "serve.log", env=site.env) as s:
        async with httpx.AsyncClient(timeout=120) as c:
            first = await rpc_stream(c, s.url, v03_message("look", settings={"workspace_path": str(ws)}))
            task = first[0]["result"]
            answers = [{"tool_call_id": i, "selected_option_id": "proceed_always"} for i in ("a1", "a2")]
            second = await rpc_stream(
                c, s.url, v03_message(data=answers, task_id=task["id"], context_id=task["contextId"])
            )
    final = second[-1]["result"]
    assert final["status"]["state"] == "input-required", final
    waiting = [
        p["data"]["tool_call_id"]
        for p in final["status"]["message"]["parts"]
        if p.get("kind") == "data" and p["data"].get("status") == "PENDING"
    ]
    assert sorted(waiting) == ["b1", "b2"]
    assert any(  # ran unasked
        p.get("data", {}).get("tool_call_id") == "b3" and p["data"].get("status") == "SUCCEEDED"
        for f in second
        for p in ((f.get("result", {}).get("status") or {}).get("message") or {}).get("parts") or []
    )
    assert not (ws / "pwned1").exists() and not (ws / "pwned2").exists()


def git_init(path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(path)], check=True)


async def rpc_stream(client: httpx.AsyncClient, url: str, message: dict[str, Any]) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    body = rpc("message/stream", {"message": message})
    async with client.stream("POST", url, json=body, headers=auth(ALICE)) as r:
        async for line in r.aiter_lines():
            if line.startswith("data:"):
                frames.append(json.loads(line[5:]))
    return frames


async def test_issue20_each_caller_has_its_own_workspace(tmp_path: Path) -> None:
    """issue 20 item 4: with two named tokens, Alice's workspace is her folder under the root (a
    file the model writes lands there, Bob's lands in his); naming the root itself, Bob's folder
    or a path outside is refused with invalid params on JSON-RPC, HTTP+JSON and the legacy route;
    and her read_file of ../bob/secret.txt fails."""
    site = Site(tmp_path)
    steps = [
        [write_call("mine.txt", "x\n")],
        [{"tool_call": {"name": "read_file", "args": {"path": "../bob/secret.txt"}}}],
        [{"text": "done"}],
    ]
    model = script(tmp_path / "s.json", steps)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    with serving(site.args(model), tmp_path / "serve.log", env=site.env) as s:
        async with httpx.AsyncClient(timeout=120) as c:
            frames = await rpc_stream(c, s.url, v03_message("write"))
            assert frames[-1]["result"]["status"]["state"] == "completed", frames[-1]
            for path in (site.root, site.root / "bob", outside, site.root / "alice" / ".." / "bob"):
                msg = v03_message("hi", settings={"workspace_path": str(path)})
                r = await c.post(s.url, json=rpc("message/send", {"message": msg}), headers=auth(ALICE))
                err = r.json()["error"]
                assert err["code"] == -32602 and "outside your allowed workspace roots" in err["message"], err
                body = {"message": {"role": "ROLE_USER", "parts": [{"text": "hi"}], "messageId": "m1"}}
                body["message"]["metadata"] = {EXT: {"workspace_path": str(path)}}
                r = await c.post(
                    s.url + "rest/message:send", json=body, headers={**auth(ALICE), "A2A-Version": "1.0"}
                )
                assert r.status_code == 400 and "outside your allowed" in r.text, r.text
                st = {"kind": "agent-settings", "workspacePath": str(path)}
                r = await c.post(s.url + "tasks", json={"agentSettings": st}, headers=auth(ALICE))
                assert r.status_code == 400 and "outside your allowed" in r.text, r.text
    assert (site.root / "alice" / "mine.txt").read_text() == "x\n"
    assert not (site.root / "mine.txt").exists()
    output = tool_outputs(json.dumps(frames))
    assert "outside the workspace roots" in output and "leak-bob-file" not in output
