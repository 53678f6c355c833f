"""Issue 38 item 4: Claude Code's hooks work unchanged. A real `devagent run` process with a
scripted model and a HOME of the test's own: a published plugin's `hooks/hooks.json` (naming
`${CLAUDE_PLUGIN_ROOT}`) blocks a dangerous command as it does in Claude Code; a Stop hook reads
the conversation at `transcript_path` (in Claude Code's line shape); PostToolUseFailure fires
after a call that failed; `if` narrows a hook to the calls its permission rule matches; an
`async` hook neither blocks nor decides; `"type": "http"` hooks post through the outbound address
policy (loopback only where the operator's `outbound_allow` lists it, else the guard blocks)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from devagent.agent.hooks.config import load_hooks
from devagent.agent.hooks.rules import rule_matches
from tests.a2a.test_hostile import bwrap_works
from tests.core_helpers import call, shell_call
from tests.hook_files import command, group
from tests.sandbox_user import for_sandbox_user
from tests.unit.agent.hooks.test_hooks_guards import devagent_run, final_call, notices, settings_for, stream
from tests.unit.test_cli import write_script

ECHO = {"text": "Got: {last_tool_results}"}
ROOT = Path(__file__).resolve().parents[4]
_PLUGIN = Path("shared", "data", "claude-formats", "hooks", "block-dangerous-commands")
# The published plugin, read where the shared data is (never copied into the project).
PLUGIN = next(
    (p for p in (*(f / _PLUGIN for f in ROOT.parents), Path("/work") / _PLUGIN) if p.is_dir()),
    None,
)


def sandbox_args(sandboxed: bool, workspace: Path) -> tuple[str, ...]:
    if not sandboxed:
        return ()
    if not bwrap_works():
        pytest.skip("needs a working bubblewrap")
    for_sandbox_user(workspace)
    return ("--sandbox",)


@pytest.mark.parametrize("sandboxed", [False, True])
def test_issue38_item4_a_published_plugin_guard_blocks_a_dangerous_command(
    tmp_path: Path, workspace: Path, sandboxed: bool
) -> None:
    """block-dangerous-commands as published: its hooks.json names its script through
    `${CLAUDE_PLUGIN_ROOT}`, which is now the plugin's folder (before, it was empty, the script
    could not start and the guard only failed closed). Its `deny` refuses `chmod 777`; a safe
    command runs."""
    if PLUGIN is None:
        pytest.skip("the shared claude-formats data is not on this machine")
    if shutil.which("node") is None:
        pytest.skip("needs node, which the plugin's script runs on")
    hooks_file = PLUGIN / "hooks" / "hooks.json"
    settings = tmp_path / "config.toml"
    settings.write_text(f'hooks_file = "{hooks_file}"\n')
    (workspace / "notes.txt").write_text("private\n")
    (workspace / "notes.txt").chmod(0o600)
    more = sandbox_args(sandboxed, workspace)
    spec = write_script(
        tmp_path,
        [[shell_call("chmod 777 notes.txt", cid="s1")], [shell_call("touch ok.txt", cid="s2")], [ECHO]],
    )
    events = stream(tmp_path, settings, workspace, spec, *more)
    refused = final_call(events, "s1")
    assert refused["status"] == "failed" and refused["error"]["type"] == "blocked_by_hook"
    assert "[chmod-777] chmod 777 is a security risk" in refused["error"]["message"]
    assert stat.S_IMODE((workspace / "notes.txt").stat().st_mode) == 0o600  # never ran
    assert final_call(events, "s2")["status"] == "succeeded" and (workspace / "ok.txt").exists()
    assert "failed" not in notices(events)
    if not sandboxed:  # the script's own log, in the (test's) home folder
        logs = list((tmp_path / "home" / ".claude" / "hooks-logs").glob("*.jsonl"))
        assert logs and "chmod-777" in logs[0].read_text()


LAST_ANSWER = """import json, os, shutil, sys
event = json.load(sys.stdin)
if event["stop_hook_active"]:
    sys.exit(0)
last = ""
with open(event["transcript_path"], encoding="utf-8") as f:
    for line in f:
        entry = json.loads(line)
        if entry["type"] == "assistant":
            texts = [b["text"] for b in entry["message"]["content"] if b["type"] == "text"]
            last = "\\n".join(texts) or last
project = os.environ["CLAUDE_PROJECT_DIR"]
shutil.copyfile(event["transcript_path"], os.path.join(project, "seen.jsonl"))
with open(os.path.join(project, "path.txt"), "w") as f:
    f.write(event["transcript_path"])
print(json.dumps({"decision": "block", "reason": "you said: " + last}))
"""


@pytest.mark.parametrize("sandboxed", [False, True])
def test_issue38_item4_a_stop_hook_reads_the_last_answer_from_transcript_path(
    tmp_path: Path, workspace: Path, sandboxed: bool
) -> None:
    """The loop pattern of Claude Code's Stop hooks: the hook reads `transcript_path` (JSONL in
    Claude Code's shape), finds the last assistant message and sends the model back with it. The
    file is outside the workspace, private, readable by the hook in the sandbox too, holds the
    session's own conversation and is gone when the session ends."""
    scripts = tmp_path / "hooks"
    scripts.mkdir()
    (scripts / "last_answer.py").write_text(LAST_ANSWER)
    hooks = {"Stop": [{"hooks": [command(f"{sys.executable} {scripts / 'last_answer.py'}")]}]}
    settings = settings_for(tmp_path, tmp_path / "hooks.json", hooks)
    more = sandbox_args(sandboxed, workspace)
    spec = write_script(
        tmp_path,
        [
            [shell_call("echo from the shell", cid="s1")],
            [{"text": "The answer is 42."}],
            [{"text": "{last_user}"}],
        ],
    )
    events = stream(tmp_path, settings, workspace, spec, *more)
    assert events[-1]["result"] == "[Stop hook] you said: The answer is 42."  # read back
    lines = [json.loads(line) for line in (workspace / "seen.jsonl").read_text().splitlines()]
    assert [line["type"] for line in lines] == ["user", "assistant", "user", "assistant"]
    session = events[-1]["session_id"]
    assert all(line["sessionId"] == session and line["cwd"] == str(workspace.resolve()) for line in lines)
    assert [line["parentUuid"] for line in lines[1:]] == [line["uuid"] for line in lines[:-1]]
    assert lines[0]["message"] == {"role": "user", "content": [{"type": "text", "text": "go"}]}
    tool_use = lines[1]["message"]["content"][0]
    assert tool_use["type"] == "tool_use" and tool_use["name"] == "Bash" and tool_use["id"] == "s1"
    assert tool_use["input"] == {"command": "echo from the shell"}
    result = lines[2]["message"]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "s1"
    assert "from the shell" in result["content"]
    assert lines[3]["message"]["role"] == "assistant" and lines[3]["message"]["content"] == [
        {"type": "text", "text": "The answer is 42."}
    ]
    assert all(line["timestamp"].endswith("Z") for line in lines)
    path = Path((workspace / "path.txt").read_text())
    assert path.is_relative_to(tmp_path / "data") and not path.is_relative_to(workspace)
    assert not path.exists()  # removed when the session ended


FAILURE_LOG = """import json, os, sys
event = json.load(sys.stdin)
with open(os.path.join(os.environ["CLAUDE_PROJECT_DIR"], "..", "failures.jsonl"), "a") as f:
    f.write(json.dumps(event) + "\\n")
out = {"hookEventName": "PostToolUseFailure", "additionalContext": "check the path with glob first"}
print(json.dumps({"hookSpecificOutput": out}))
"""


def test_issue38_item4_posttoolusefailure_fires_after_a_failed_call(tmp_path: Path, workspace: Path) -> None:
    """A read of a missing file fails: PostToolUseFailure (not PostToolUse) fires with Claude
    Code's fields, `error` the error the model reads; its context reaches the model."""
    (tmp_path / "failure_log.py").write_text(FAILURE_LOG)
    post = tmp_path / "post.log"
    hooks = {
        "PostToolUseFailure": [group("Read", command(f"{sys.executable} {tmp_path / 'failure_log.py'}"))],
        "PostToolUse": [group("", command(f"cat >> {post}"))],
    }
    settings = settings_for(tmp_path, tmp_path / "hooks.json", hooks)
    read_missing = call("read_file", {"path": "missing.txt"}, "r1")
    spec = write_script(tmp_path, [[read_missing], [shell_call("echo fine", cid="s1")], [ECHO]])
    events = stream(tmp_path, settings, workspace, spec)
    failed = final_call(events, "r1")
    assert failed["status"] == "failed"
    seen = [json.loads(line) for line in (tmp_path / "failures.jsonl").read_text().splitlines()]
    assert len(seen) == 1
    event = seen[0]
    assert event["hook_event_name"] == "PostToolUseFailure" and event["tool_name"] == "Read"
    assert event["tool_use_id"] == "r1" and event["is_interrupt"] is False
    assert event["tool_input"]["file_path"] == str(workspace.resolve() / "missing.txt")
    assert "missing.txt" in event["error"] and event["error"] in failed["error"]["message"]
    assert "check the path with glob first" in failed["error"]["message"]
    assert "run_shell_command" in post.read_text() and "missing.txt" not in post.read_text()


def test_issue38_item4_if_narrows_a_hook_to_the_calls_its_rule_matches(
    tmp_path: Path, workspace: Path
) -> None:
    """`"if": "Bash(git *)"` on a blocking hook: `echo` runs, `git status`, a git command behind
    an assignment and one in a compound command are blocked. A key devagent does not know is
    said once, by name; Claude Code's `statusMessage` is accepted quietly."""
    guard = command("echo 'no git here' >&2; exit 2", **{"if": "Bash(git *)", "statusMessage": "checking"})
    odd = command("true", asyncRewake=True)
    hooks = {
        "PreToolUse": [group("Bash", guard, odd)],
        "PostToolUse": [group("", command(":", asyncRewake=True))],
    }
    settings = settings_for(tmp_path, tmp_path / "hooks.json", hooks)
    steps = [
        [shell_call("echo plain > plain.txt", cid="s1")],
        [shell_call("git status > status.txt", cid="s2")],
        [shell_call("GIT_PAGER=cat git log > log.txt", cid="s3")],
        [shell_call("echo x > x.txt && git init -q", cid="s4")],
        [ECHO],
    ]
    spec = write_script(tmp_path, steps)
    args = ["go", "-w", str(workspace), "-m", spec, "-a", "yolo", "--output-format", "stream-json"]
    out = devagent_run(tmp_path, settings, args)
    events = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert final_call(events, "s1")["status"] == "succeeded" and (workspace / "plain.txt").exists()
    for cid in ("s2", "s3", "s4"):
        refused = final_call(events, cid)
        assert refused["status"] == "failed" and "no git here" in refused["error"]["message"]
    assert not any((workspace / n).exists() for n in ("status.txt", "log.txt", "x.txt", ".git"))
    assert out.stderr.count("devagent does not know the key 'asyncRewake'") == 1
    assert "statusMessage" not in out.stderr


def test_issue38_item4_if_rules_for_files_and_other_tools() -> None:
    cwd = "/work/project"
    edit = ("edit", "Edit", "MultiEdit")
    assert rule_matches("Edit(src/**)", edit, {"file_path": "/work/project/src/a/b.py"}, cwd)
    assert not rule_matches("Edit(src/**)", edit, {"file_path": "/work/project/docs/b.py"}, cwd)
    assert rule_matches("Edit(*.env)", edit, {"file_path": "/work/project/deep/.env"}, cwd)
    assert rule_matches("Edit(//etc/**)", edit, {"file_path": "/etc/hosts"}, cwd)
    assert not rule_matches("Write(src/**)", edit, {"file_path": "/work/project/src/a.py"}, cwd)
    assert rule_matches("Edit", edit, {"file_path": "/anywhere"}, cwd)
    fetch = ("web_fetch", "WebFetch")
    assert rule_matches("WebFetch(domain:example.com)", fetch, {"url": "https://example.com/x"}, cwd)
    assert not rule_matches("WebFetch(domain:example.com)", fetch, {"url": "https://example.org/"}, cwd)
    bash = ("run_shell_command", "Bash")
    assert rule_matches("Bash(npm run test:*)", bash, {"command": "npm run test -- -k x"}, cwd)
    assert not rule_matches("Bash(git *)", bash, {"command": "gitk"}, cwd)
    assert rule_matches("Bash(git *)", bash, {"command": "git"}, cwd)
    assert rule_matches(
        "mcp__github__create_issue", ("github__create_issue", "mcp__github__create_issue"), {}, cwd
    )


ASYNC_HOOK = """for i in $(seq 600); do [ -e first.txt ] && break; sleep 0.1; done
touch hook-ran
echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
  "permissionDecisionReason": "an async hook decides nothing"}}'
exit 2
"""


def test_issue38_item4_an_async_hook_runs_in_the_background_and_decides_nothing(
    tmp_path: Path, workspace: Path
) -> None:
    """The async hook waits for the file its own call makes: had devagent waited for it, the call
    could not run (and the guard would fail closed at its timeout). The next call waits for the
    hook's mark, so the hook ran while the turn went on; its deny and exit 2 blocked nothing."""
    (tmp_path / "async_hook.sh").write_text(ASYNC_HOOK)
    hook = command(f"sh {tmp_path / 'async_hook.sh'}", timeout=90, **{"async": True, "if": "Bash(touch *)"})
    settings = settings_for(tmp_path, tmp_path / "hooks.json", {"PreToolUse": [group("Bash", hook)]})
    wait = "for i in $(seq 600); do [ -e hook-ran ] && break; sleep 0.1; done; ls hook-ran"
    spec = write_script(
        tmp_path, [[shell_call("touch first.txt", cid="s1")], [shell_call(wait, cid="s2")], [ECHO]]
    )
    events = stream(tmp_path, settings, workspace, spec)
    assert final_call(events, "s1")["status"] == "succeeded" and (workspace / "first.txt").exists()
    assert final_call(events, "s2")["status"] == "succeeded" and (workspace / "hook-ran").exists()
    assert "async hook decides nothing" not in json.dumps(events)


class _Recorder(BaseHTTPRequestHandler):
    answer: bytes = b"{}"
    seen: ClassVar[list[tuple[dict[str, str], dict[str, Any]]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        type(self).seen.append((dict(self.headers), json.loads(body)))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.answer)))
        self.end_headers()
        self.wfile.write(self.answer)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def hook_server() -> Iterator[tuple[str, type[_Recorder]]]:
    """A loopback HTTP server answering every POST with a deny, recording what it was sent."""
    deny = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny"}}
    deny["hookSpecificOutput"]["permissionDecisionReason"] = "the policy service says no"
    handler = type("Handler", (_Recorder,), {"answer": json.dumps(deny).encode(), "seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hooks/pre", handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_issue38_item4_an_http_hook_on_an_allowed_loopback_address_denies(
    tmp_path: Path, workspace: Path, hook_server: tuple[str, type[_Recorder]]
) -> None:
    """The operator lists 127.0.0.0/8 in outbound_allow: the http hook is posted the event (with
    its header, the variable it may name filled in) and its deny refuses the call."""
    url, handler = hook_server
    hook = {
        "type": "http",
        "url": url,
        "headers": {"Authorization": "Bearer $HOOK_TOKEN", "X-Other": "[$SECRET_NOT_LISTED]"},
        "allowedEnvVars": ["HOOK_TOKEN"],
    }
    settings = settings_for(tmp_path, tmp_path / "hooks.json", {"PreToolUse": [group("Bash", hook)]})
    settings.write_text(settings.read_text() + 'outbound_allow = ["127.0.0.0/8"]\n')
    spec = write_script(tmp_path, [[shell_call("touch ran.txt", cid="s1")], [ECHO]])
    os.environ["HOOK_TOKEN"], os.environ["SECRET_NOT_LISTED"] = "t0k3n", "hidden"
    try:
        events = stream(tmp_path, settings, workspace, spec)
    finally:
        del os.environ["HOOK_TOKEN"], os.environ["SECRET_NOT_LISTED"]
    refused = final_call(events, "s1")
    assert refused["status"] == "failed" and "the policy service says no" in refused["error"]["message"]
    assert not (workspace / "ran.txt").exists()
    [(headers, body)] = handler.seen
    assert body["hook_event_name"] == "PreToolUse" and body["tool_input"]["command"] == "touch ran.txt"
    assert headers["Authorization"] == "Bearer t0k3n" and headers["X-Other"] == "[]"


def test_issue38_item4_an_http_hook_to_a_refused_address_blocks(
    tmp_path: Path, workspace: Path, hook_server: tuple[str, type[_Recorder]]
) -> None:
    """Without outbound_allow, loopback is refused: the http guard cannot answer, so it blocks
    (fails closed), names itself and the policy, and the server was never called."""
    url, handler = hook_server
    settings = settings_for(
        tmp_path, tmp_path / "hooks.json", {"PreToolUse": [group("Bash", {"type": "http", "url": url})]}
    )
    spec = write_script(tmp_path, [[shell_call("touch ran.txt", cid="s1")], [ECHO]])
    events = stream(tmp_path, settings, workspace, spec)
    refused = final_call(events, "s1")
    assert refused["status"] == "failed" and refused["error"]["type"] == "blocked_by_hook"
    said = refused["error"]["message"]
    assert url in said and "outbound_allow" in said and "loopback/private" in said
    assert not (workspace / "ran.txt").exists() and handler.seen == []


def test_issue38_item4_the_plugin_folder_of_a_hooks_file(tmp_path: Path) -> None:
    """`hooks/hooks.json` of a plugin (with its manifest): CLAUDE_PLUGIN_ROOT is the plugin's
    folder, shown whole to the sandbox. A user's ~/.claude/hooks/hooks.json (no manifest) gets
    the folder too, for the variable, but only the scripts it names are shown, never ~/.claude."""
    plugin = tmp_path / "cache" / "guard-plugin"
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text('{"name": "guard-plugin"}')
    (plugin / "hooks").mkdir()
    (plugin / "scripts").mkdir()
    (plugin / "scripts" / "check.sh").write_text("exit 0\n")
    hook = command('"${CLAUDE_PLUGIN_ROOT}/scripts/check.sh"')
    (plugin / "hooks" / "hooks.json").write_text(json.dumps({"hooks": {"PreToolUse": [group("Bash", hook)]}}))
    [loaded] = load_hooks(plugin / "hooks" / "hooks.json").commands("PreToolUse", ["Bash"])
    assert loaded.plugin_root == plugin.resolve()
    assert plugin.resolve() in loaded.folders and plugin.resolve() / "scripts" in loaded.folders

    claude = tmp_path / "home" / ".claude"
    (claude / "hooks").mkdir(parents=True)
    (claude / "hooks" / "guard.sh").write_text("exit 0\n")
    mine = command(f"{claude / 'hooks' / 'guard.sh'}", once=True)
    (claude / "hooks" / "hooks.json").write_text(json.dumps({"PreToolUse": [{**group("", mine), "note": 1}]}))
    hook_set = load_hooks(claude / "hooks" / "hooks.json")
    [loaded] = hook_set.commands("PreToolUse", ["Bash"])
    assert loaded.plugin_root == claude.resolve() and claude.resolve() not in loaded.folders
    assert claude.resolve() / "hooks" in loaded.folders
    assert [w.split(": ")[-1] for w in hook_set.warnings] == [
        "devagent does not know the key 'note'; it is ignored",
        "devagent does not know the key 'once'; it is ignored",
    ]
