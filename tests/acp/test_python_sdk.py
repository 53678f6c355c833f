"""Issue 15 item 3 (b): a real `devagent acp` subprocess driven over stdio by the Python SDK's
client side (`acp.spawn_agent_process`, `ClientSideConnection`): initialize, new session, a
prompt that asks permission (allowed, then rejected), a cancel during a running command, fs
methods delegated to the client, the mode switch, and session/load after a restart (a pending
permission included)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("acp", reason="agent-client-protocol is installed by scripts/test (pyproject.toml)")

from acp import PROTOCOL_VERSION, RequestError, spawn_agent_process, text_block
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    CreateTerminalResponse,
    DeniedOutcome,
    EnvVariable,
    FileSystemCapabilities,
    InitializeResponse,
    KillTerminalResponse,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

from tests.acp.conftest import acp_argv
from tests.conftest import ScriptFile
from tests.core_helpers import shell_call, write_call

TIMEOUT = 300  # a hang guard only (generous: a loaded machine); nothing waits for time to pass


class EditorClient:
    """An editor as the SDK's Client: records every update, answers permission requests from a
    list of option ids (None: the user dismissed it), and holds file buffers for fs/*."""

    def __init__(
        self, answers: list[str | None] | None = None, buffers: dict[str, str] | None = None
    ) -> None:
        self.updates: list[dict[str, Any]] = []
        self.permissions: list[dict[str, Any]] = []
        self.answers = list(answers or [])
        self.buffers = dict(buffers or {})
        self.reads: list[str] = []
        self.writes: list[tuple[str, str]] = []
        self.asked = asyncio.Event()
        self.changed = asyncio.Event()
        # Permission requests left unanswered from now on (a flag read at each request: the SDK's
        # router holds the bound method it found when the connection was made, so replacing the
        # method on the instance afterwards would not be seen)
        self.hanging = False

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        self.updates.append(update.model_dump(by_alias=True, exclude_none=True))
        self.changed.set()

    async def request_permission(
        self, options: list[Any], session_id: str, tool_call: Any, **kw: Any
    ) -> RequestPermissionResponse:
        self.permissions.append(
            {
                "options": [o.model_dump(by_alias=True) for o in options],
                "toolCall": tool_call.model_dump(by_alias=True, exclude_none=True),
            }
        )
        self.asked.set()
        if self.hanging:
            await asyncio.Event().wait()
        answer = self.answers.pop(0) if self.answers else None
        if answer is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=answer))

    async def read_text_file(self, path: str, session_id: str, **kw: Any) -> ReadTextFileResponse:
        self.reads.append(path)
        if path not in self.buffers:
            raise RequestError.resource_not_found(path)
        return ReadTextFileResponse(content=self.buffers[path])

    async def write_text_file(
        self, content: str, path: str, session_id: str, **kw: Any
    ) -> WriteTextFileResponse:
        self.writes.append((path, content))
        self.buffers[path] = content
        return WriteTextFileResponse()

    def kinds(self) -> list[str]:
        return [u["sessionUpdate"] for u in self.updates]

    def text(self, kind: str = "agent_message_chunk") -> str:
        return "".join(u["content"]["text"] for u in self.updates if u["sessionUpdate"] == kind)

    def calls(self, call_id: str) -> list[dict[str, Any]]:
        return [u for u in self.updates if u.get("toolCallId") == call_id]

    async def until(self, pred: Callable[[], bool]) -> None:
        while not pred():
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), TIMEOUT)


@contextlib.asynccontextmanager
async def agent(
    client: EditorClient, argv: list[str], env: dict[str, str], cwd: Path, log: Path
) -> AsyncIterator[tuple[Any, Any]]:
    # shutdown_timeout: the SDK waits that long for the agent to exit once its stdin is closed
    # (2 s by default) before it terminates it, and raises ProcessLookupError when the agent
    # exits just then; on a loaded machine closing the agent's core can take longer
    with log.open("ab") as err:
        transport = {"stderr": err, "shutdown_timeout": float(TIMEOUT)}
        async with spawn_agent_process(
            client, argv[0], *argv[1:], env=env, cwd=cwd, transport_kwargs=transport
        ) as (conn, proc):
            yield conn, proc


async def start(conn: Any, *, fs: bool = False) -> InitializeResponse:
    caps = ClientCapabilities(
        fs=FileSystemCapabilities(read_text_file=fs, write_text_file=fs), terminal=False
    )
    return await asyncio.wait_for(
        conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=caps), TIMEOUT
    )


async def new_session_id(conn: Any, cwd: Path) -> str:
    """A new session of the agent in `cwd`, with no MCP servers of the editor's: its id."""
    return (await asyncio.wait_for(conn.new_session(cwd=str(cwd), mcp_servers=[]), TIMEOUT)).session_id


async def test_issue15_initialize_new_session_and_permission_allowed_then_rejected(
    acp_env: dict[str, str], work_dir: Path, script: ScriptFile, tmp_path: Path
) -> None:
    steps = [
        [
            {"thinking": "Write the file."},
            {"text": "Writing a.txt."},
            {
                "tool_call": {
                    "name": "write_file",
                    "args": {"path": "a.txt", "content": "hello\n"},
                    "id": "w1",
                }
            },
        ],
        [{"text": "Result: {last_tool_results}"}],
        [write_call("b.txt", "no\n", "w2")],
        [{"text": "Refused: {last_tool_results}"}],
        [write_call("c.txt", "no\n", "w3")],
        [write_call("c.txt", "again\n", "w4")],
        [{"text": "Gave up."}],
    ]
    client = EditorClient(answers=["proceed_once", "cancel", "cancel_always"])
    async with agent(client, acp_argv(script(steps)), acp_env, work_dir, tmp_path / "err.log") as (conn, _):
        init = await start(conn)
        assert init.protocol_version == 1
        assert init.agent_capabilities is not None and init.agent_capabilities.load_session is True
        prompt_caps = init.agent_capabilities.prompt_capabilities
        assert prompt_caps is not None and prompt_caps.image is False and prompt_caps.embedded_context is True
        assert init.auth_methods == []

        new = await asyncio.wait_for(conn.new_session(cwd=str(work_dir), mcp_servers=[]), TIMEOUT)
        assert new.modes is not None and new.modes.current_mode_id == "ask"
        assert [m.id for m in new.modes.available_modes] == ["ask", "plan"]  # nothing beyond the server's
        await client.until(lambda: "available_commands_update" in client.kinds())
        cmds = next(u for u in client.updates if u["sessionUpdate"] == "available_commands_update")
        assert "help" in [c["name"] for c in cmds["availableCommands"]]

        # Allowed: nothing runs before the answer, then the file is written and the turn ends.
        resp = await asyncio.wait_for(
            conn.prompt(session_id=new.session_id, prompt=[text_block("write a")]), TIMEOUT
        )
        assert resp.stop_reason == "end_turn"
        assert (work_dir / "a.txt").read_text() == "hello\n"
        assert client.text("agent_thought_chunk") == "Write the file."
        assert client.text().startswith("Writing a.txt.Result: Created a.txt")
        ask = client.permissions[0]
        kinds = {o["optionId"]: o["kind"] for o in ask["options"]}
        assert kinds == {
            "proceed_once": "allow_once",
            "proceed_always": "allow_always",
            "cancel": "reject_once",
            "cancel_always": "reject_always",
        }
        assert ask["toolCall"]["toolCallId"] == "w1" and ask["toolCall"]["kind"] == "edit"
        assert ask["toolCall"]["content"][0] == {
            "type": "diff",
            "path": str(work_dir / "a.txt"),
            "newText": "hello\n",
        }
        w1 = client.calls("w1")
        assert w1[0]["sessionUpdate"] == "tool_call" and w1[0]["status"] == "pending"
        assert w1[0]["locations"] == [{"path": str(work_dir / "a.txt")}]
        assert w1[0]["rawInput"] == {"path": "a.txt", "content": "hello\n"}
        assert [u["status"] for u in w1[1:]] == ["in_progress", "completed"]
        assert w1[-1]["content"][0]["type"] == "diff"

        # Rejected: the call fails without running, the model reads the refusal.
        resp = await asyncio.wait_for(
            conn.prompt(session_id=new.session_id, prompt=[text_block("write b")]), TIMEOUT
        )
        assert resp.stop_reason == "end_turn"
        assert not (work_dir / "b.txt").exists()
        assert client.calls("w2")[-1]["status"] == "failed"
        assert "Refused: " in client.text()

        # Rejected always: this call and every later write_file of the session, without asking.
        resp = await asyncio.wait_for(
            conn.prompt(session_id=new.session_id, prompt=[text_block("write c")]), TIMEOUT
        )
        assert resp.stop_reason == "end_turn"
        assert [p["toolCall"]["toolCallId"] for p in client.permissions] == ["w1", "w2", "w3"]
        assert client.calls("w4")[-1]["status"] == "failed"
        assert "refused write_file" in str(client.calls("w4")[-1]["rawOutput"])
        assert not (work_dir / "c.txt").exists()


async def test_issue15_cancel_stops_a_running_command(
    acp_env: dict[str, str], work_dir: Path, script: ScriptFile, tmp_path: Path
) -> None:
    # The command records its process id, then waits for a file nobody creates until after the cancel.
    command = "echo started; echo $$ > pid; while [ ! -f release ]; do sleep 0.05; done; echo released"
    steps = [[shell_call(command, "sh")]]
    client = EditorClient()
    argv = acp_argv(script(steps), "--approval", "yolo")
    async with agent(client, argv, acp_env, work_dir, tmp_path / "err.log") as (conn, _):
        await start(conn)
        new = await conn.new_session(cwd=str(work_dir), mcp_servers=[])
        prompt = asyncio.ensure_future(conn.prompt(session_id=new.session_id, prompt=[text_block("run it")]))
        await client.until(lambda: any("started" in str(u.get("content")) for u in client.calls("sh")))
        pid = int((work_dir / "pid").read_text())
        await conn.cancel(session_id=new.session_id)
        resp = await asyncio.wait_for(prompt, TIMEOUT)
        assert resp.stop_reason == "cancelled"
        assert client.calls("sh")[-1]["status"] == "failed"
        with pytest.raises(ProcessLookupError):  # the command was killed, not left running
            os.kill(pid, 0)


async def test_issue15_file_tools_go_through_the_editor(
    acp_env: dict[str, str], work_dir: Path, script: ScriptFile, tmp_path: Path
) -> None:
    readme = str(work_dir / "README.md")
    steps = [
        [{"tool_call": {"name": "read_file", "args": {"path": "README.md"}, "id": "r"}}],
        [
            {"text": "Read: {last_tool_results}"},
            {
                "tool_call": {
                    "name": "edit",
                    "args": {"path": "README.md", "old_string": "unsaved", "new_string": "edited"},
                    "id": "e",
                }
            },
        ],
        [{"text": "Done."}],
    ]
    client = EditorClient(answers=["proceed_once"], buffers={readme: "# Demo in an unsaved buffer\n"})
    async with agent(client, acp_argv(script(steps)), acp_env, work_dir, tmp_path / "err.log") as (conn, _):
        await start(conn, fs=True)
        new = await conn.new_session(cwd=str(work_dir), mcp_servers=[])
        resp = await conn.prompt(session_id=new.session_id, prompt=[text_block("fix the readme")])
        assert resp.stop_reason == "end_turn"
    assert "Read: 1\t# Demo in an unsaved buffer" in client.text()  # the buffer, not the disk
    assert client.permissions[0]["toolCall"]["content"][0]["oldText"] == "# Demo in an unsaved buffer\n"
    assert client.writes == [(readme, "# Demo in an edited buffer\n")]  # the edit landed in the editor
    assert (work_dir / "README.md").read_text() == "# Demo on disk\n"  # and not behind its back
    assert client.reads and all(p == readme for p in client.reads)


async def test_issue15_modes_are_approval_modes_within_server_policy(
    acp_env: dict[str, str], work_dir: Path, script: ScriptFile, tmp_path: Path
) -> None:
    steps = [[write_call("p.txt", "x", "p")], [{"text": "ok"}]]
    client = EditorClient()
    argv = acp_argv(script(steps), "--approval", "auto-edit")
    async with agent(client, argv, acp_env, work_dir, tmp_path / "err.log") as (conn, _):
        await start(conn)
        new = await conn.new_session(cwd=str(work_dir), mcp_servers=[])
        assert new.modes is not None and new.modes.current_mode_id == "auto-edit"
        assert [m.id for m in new.modes.available_modes] == ["ask", "auto-edit", "plan"]
        with pytest.raises(RequestError):  # more than the operator allows
            await conn.set_session_mode(session_id=new.session_id, mode_id="yolo")
        await conn.set_session_mode(session_id=new.session_id, mode_id="plan")
        await client.until(lambda: "current_mode_update" in client.kinds())
        resp = await conn.prompt(session_id=new.session_id, prompt=[text_block("write p")])
        assert resp.stop_reason == "end_turn"
    assert not (work_dir / "p.txt").exists()  # plan mode refuses edits, unasked
    assert client.permissions == []
    assert client.calls("p")[-1]["status"] == "failed"


async def test_issue15_load_after_restart_replays_and_asks_the_pending_permission_again(
    acp_env: dict[str, str], work_dir: Path, script: ScriptFile, tmp_path: Path
) -> None:
    steps = [
        [{"text": "First answer."}],
        [write_call("later.txt", "ok\n", "lw")],
        [{"text": "Written after the restart."}],
    ]
    path = script(steps)
    first = EditorClient(answers=[])  # never answers the permission: the process dies first
    async with agent(first, acp_argv(path), acp_env, work_dir, tmp_path / "err.log") as (conn, proc):
        await start(conn)
        new = await conn.new_session(cwd=str(work_dir), mcp_servers=[])
        sid = new.session_id
        assert (await conn.prompt(session_id=sid, prompt=[text_block("hello")])).stop_reason == "end_turn"
        first.hanging = True
        pending = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("write later")]))
        await asyncio.wait_for(first.asked.wait(), TIMEOUT)
        proc.kill()  # a crash while the permission request is open
        await proc.wait()
        with contextlib.suppress(Exception):
            await pending
    assert not (work_dir / "later.txt").exists()

    second = EditorClient(answers=["proceed_once"])
    async with agent(second, acp_argv(path), acp_env, work_dir, tmp_path / "err.log") as (conn, _):
        init = await start(conn)
        assert init.agent_capabilities is not None and init.agent_capabilities.load_session
        await asyncio.wait_for(conn.load_session(cwd=str(work_dir), session_id=sid, mcp_servers=[]), TIMEOUT)
        # The history came before the answer to session/load, the commands after it: once they
        # are seen (an event), the whole history is (whenever the answer's waiter ran).
        await second.until(lambda: "available_commands_update" in second.kinds())
        history = second.kinds()[: second.kinds().index("available_commands_update")]
        assert "user_message_chunk" in history and "tool_call" in history, history
        assert second.text("user_message_chunk") == "hellowrite later"
        assert "First answer." in second.text()
        await second.until(lambda: (work_dir / "later.txt").exists() and "Written after" in second.text())
        assert second.permissions[0]["toolCall"]["toolCallId"] == "lw"
        assert (work_dir / "later.txt").read_text() == "ok\n"
        with pytest.raises(RequestError):
            await conn.load_session(cwd=str(work_dir), session_id="no-such-session", mcp_servers=[])


class TerminalEditor(EditorClient):
    """An editor that offers terminal/*: it runs each command itself and records what it was asked."""

    def __init__(self) -> None:
        super().__init__()
        self.procs: dict[str, asyncio.subprocess.Process] = {}
        self.output: dict[str, bytearray] = {}
        self.readers: dict[str, asyncio.Task[None]] = {}
        self.calls_made: list[str] = []

    def note(self, call: str) -> None:
        # Every call and every chunk of output wakes `until`: its predicates look at both.
        self.calls_made.append(call)
        self.changed.set()

    async def create_terminal(
        self,
        command: str,
        session_id: str,
        args: list[str] | None = None,
        cwd: str | None = None,
        env: list[EnvVariable] | None = None,
        **kw: Any,
    ) -> CreateTerminalResponse:
        self.note("create")
        tid = f"term-{len(self.procs)}"
        proc = await asyncio.create_subprocess_exec(
            command,
            *(args or []),
            cwd=cwd,
            env={**os.environ, **{v.name: v.value for v in env or []}},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs[tid] = proc
        self.output[tid] = bytearray()

        async def read() -> None:
            assert proc.stdout is not None
            while chunk := await proc.stdout.read(4096):
                self.output[tid] += chunk
                self.changed.set()

        self.readers[tid] = asyncio.ensure_future(read())
        return CreateTerminalResponse(terminal_id=tid)

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str, **kw: Any) -> Any:
        self.note("wait")
        code = await self.procs[terminal_id].wait()
        await self.readers[terminal_id]
        return WaitForTerminalExitResponse(exit_code=code if code >= 0 else None, signal=None)

    async def terminal_output(self, session_id: str, terminal_id: str, **kw: Any) -> TerminalOutputResponse:
        self.note("output")
        code = self.procs[terminal_id].returncode
        status = TerminalExitStatus(exit_code=code) if code is not None and code >= 0 else None
        return TerminalOutputResponse(
            output=self.output[terminal_id].decode(), truncated=False, exit_status=status
        )

    async def kill_terminal(self, session_id: str, terminal_id: str, **kw: Any) -> KillTerminalResponse:
        self.note("kill")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.procs[terminal_id].pid, 9)
        return KillTerminalResponse()

    async def release_terminal(self, session_id: str, terminal_id: str, **kw: Any) -> ReleaseTerminalResponse:
        self.note("release")
        return ReleaseTerminalResponse()


async def test_issue15_commands_run_in_the_editors_terminal_and_cancel_kills_them(
    acp_env: dict[str, str], work_dir: Path, script: ScriptFile, tmp_path: Path
) -> None:
    slow = "echo started > started.txt; echo started; while [ ! -f release ]; do sleep 0.05; done"
    steps = [
        [shell_call("echo hi; exit 3", "t1")],
        [{"text": "Got: {last_tool_results}"}],
        [shell_call(slow, "t2")],
    ]
    client = TerminalEditor()
    argv = acp_argv(script(steps), "--approval", "yolo")
    async with agent(client, argv, acp_env, work_dir, tmp_path / "err.log") as (conn, _):
        caps = ClientCapabilities(terminal=True)
        await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=caps)
        new = await conn.new_session(cwd=str(work_dir), mcp_servers=[])
        resp = await asyncio.wait_for(
            conn.prompt(session_id=new.session_id, prompt=[text_block("run")]), TIMEOUT
        )
        assert resp.stop_reason == "end_turn"
        assert client.calls_made == ["create", "wait", "output", "release"]
        assert "Got: hi\nexit code 3" in client.text()
        t1 = client.calls("t1")
        assert {"type": "terminal", "terminalId": "term-0"} in t1[-1]["content"]
        assert t1[-1]["status"] == "completed" and t1[-1]["kind"] == "execute"

        client.calls_made.clear()
        running = asyncio.ensure_future(conn.prompt(session_id=new.session_id, prompt=[text_block("slow")]))
        # The command says "started" on stdout after creating its file: each chunk wakes `until`.
        await client.until(
            lambda: "wait" in client.calls_made and b"started" in client.output.get("term-1", b"")
        )
        assert (work_dir / "started.txt").exists()
        await conn.cancel(session_id=new.session_id)
        assert (await asyncio.wait_for(running, TIMEOUT)).stop_reason == "cancelled"
        assert "kill" in client.calls_made and client.calls_made[-1] == "release"
        assert await asyncio.wait_for(client.procs["term-1"].wait(), TIMEOUT) < 0  # killed


def repo_with_fsmonitor(work_dir: Path, marker: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=work_dir, check=True)
    with (work_dir / ".git" / "config").open("a") as f:
        f.write(f'[core]\n\tfsmonitor = "echo ran >> {marker}; false"\n')


async def test_issue28_item1_granted_git_in_the_editors_terminal_runs_no_fsmonitor(
    acp_env: dict[str, str], work_dir: Path, script: ScriptFile, tmp_path: Path
) -> None:
    """Issue 28 item 1 on ACP, where commands run in the editor's terminal: a workspace arriving
    with its own .git/config `core.fsmonitor`; `git status` allowed always (that run is the
    user's); the next, granted `git status` runs it no more."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    marker = tmp_path / "pwned"
    repo_with_fsmonitor(work_dir, marker)
    status = {"name": "run_shell_command", "args": {"command": "git status --short"}}
    steps = [
        [{"tool_call": {**status, "id": "s1"}}],
        [{"text": "first"}],
        [{"tool_call": {**status, "id": "s2"}}],
        [{"text": "second: {last_tool_results}"}],
    ]
    client = TerminalEditor()
    client.answers = ["proceed_always"]
    async with agent(client, acp_argv(script(steps)), acp_env, work_dir, tmp_path / "err.log") as (conn, _):
        await conn.initialize(
            protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities(terminal=True)
        )
        new = await conn.new_session(cwd=str(work_dir), mcp_servers=[])
        resp = await asyncio.wait_for(
            conn.prompt(session_id=new.session_id, prompt=[text_block("a")]), TIMEOUT
        )
        assert resp.stop_reason == "end_turn" and marker.exists()  # the approved run: the trap is live
        marker.unlink()
        resp = await asyncio.wait_for(
            conn.prompt(session_id=new.session_id, prompt=[text_block("b")]), TIMEOUT
        )
        assert resp.stop_reason == "end_turn"
        assert [p["toolCall"]["toolCallId"] for p in client.permissions] == ["s1"]
        assert "README.md" in client.text()
        assert not marker.exists()


async def test_issue15_stop_reasons_refusal_max_tokens_and_max_turn_requests(
    acp_env: dict[str, str], work_dir: Path, script: ScriptFile, tmp_path: Path
) -> None:
    steps = [
        [{"refusal": "I can't help with that."}],
        [{"truncated": "The answer goes on and on and"}],
        [{"tool_call": {"name": "list_directory", "args": {"path": "."}, "id": "l1"}}],
        [{"tool_call": {"name": "list_directory", "args": {"path": "."}, "id": "l2"}}],
    ]
    client = EditorClient()
    env = {**acp_env, "DEVAGENT_MAX_STEPS": "2"}
    async with agent(client, acp_argv(script(steps)), env, work_dir, tmp_path / "err.log") as (conn, _):
        await start(conn)
        new = await conn.new_session(cwd=str(work_dir), mcp_servers=[])
        resp = await asyncio.wait_for(
            conn.prompt(session_id=new.session_id, prompt=[text_block("bad")]), TIMEOUT
        )
        assert resp.stop_reason == "refusal"
        assert client.text() == "I can't help with that."
        resp = await asyncio.wait_for(
            conn.prompt(session_id=new.session_id, prompt=[text_block("long")]), TIMEOUT
        )
        assert resp.stop_reason == "max_tokens"  # cut off at the model's output token limit
        assert "The answer goes on and on and" in client.text()
        resp = await asyncio.wait_for(
            conn.prompt(session_id=new.session_id, prompt=[text_block("loop")]), TIMEOUT
        )
        assert resp.stop_reason == "max_turn_requests"
        assert client.calls("l1")[-1]["status"] == "completed" and client.calls("l1")[-1]["kind"] == "read"


async def test_issue15_plan_from_todos_and_session_flag_continues(
    acp_env: dict[str, str], work_dir: Path, script: ScriptFile, tmp_path: Path
) -> None:
    todos = [
        {"description": "Read the code", "status": "completed"},
        {"description": "Fix the bug", "status": "in_progress"},
    ]
    steps = [
        [{"tool_call": {"name": "write_todos", "args": {"todos": todos}, "id": "t"}}],
        [{"text": "Planned."}],
        [{"text": "Still here: {last_user}"}],
    ]
    path = script(steps)
    first = EditorClient()
    async with agent(first, acp_argv(path), acp_env, work_dir, tmp_path / "err.log") as (conn, _):
        await start(conn)
        sid = (await conn.new_session(cwd=str(work_dir), mcp_servers=[])).session_id
        resp = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("plan it")]), TIMEOUT)
        assert resp.stop_reason == "end_turn"
    plans = [u for u in first.updates if u["sessionUpdate"] == "plan"]
    assert plans[-1]["entries"] == [
        {"content": "Read the code", "priority": "medium", "status": "completed"},
        {"content": "Fix the bug", "priority": "medium", "status": "in_progress"},
    ]
    assert first.calls("t")[0]["kind"] == "think"

    # `devagent acp --session SID`: the editor's session/new continues the stored conversation.
    second = EditorClient()
    argv = acp_argv(path, "--session", sid)
    async with agent(second, argv, acp_env, work_dir, tmp_path / "err.log") as (conn, _):
        await start(conn)
        assert (await conn.new_session(cwd=str(work_dir), mcp_servers=[])).session_id == sid
        await second.until(lambda: "plan" in second.kinds())  # the stored todo list, shown again
        resp = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("again")]), TIMEOUT)
        assert resp.stop_reason == "end_turn"
        assert second.text() == "Still here: again"  # step 2 of the script: the same conversation
        other = await conn.new_session(cwd=str(work_dir), mcp_servers=[])
        assert other.session_id != sid  # later sessions are new ones


async def test_issue24_acp_prompt_over_the_daily_budget_is_refused(
    acp_env: dict[str, str], work_dir: Path, script: ScriptFile, tmp_path: Path
) -> None:
    """Budgets (issue 24 item 3) through ACP: once the local user's tokens for the day are spent,
    a prompt is refused with a JSON-RPC error that says why. The prompt's response carries the
    turn's tokens, cached ones included (issue 24 item 2)."""
    usage = {
        "usage": {"input_tokens": 120, "output_tokens": 30, "cache_read_tokens": 90, "cache_write_tokens": 20}
    }
    steps = [[{"text": "one"}, usage], [{"text": "two"}, usage]]
    env = {**acp_env, "DEVAGENT_BUDGET_TOKENS_PER_DAY": "100"}
    client = EditorClient()
    async with agent(client, acp_argv(script(steps)), env, work_dir, tmp_path / "err.log") as (conn, _):
        await start(conn)
        new = await asyncio.wait_for(conn.new_session(cwd=str(work_dir), mcp_servers=[]), TIMEOUT)
        first = await asyncio.wait_for(
            conn.prompt(session_id=new.session_id, prompt=[text_block("a")]), TIMEOUT
        )
        assert first.stop_reason == "end_turn"
        u = first.usage
        assert u is not None and (u.input_tokens, u.output_tokens, u.total_tokens) == (120, 30, 150)
        assert (u.cached_read_tokens, u.cached_write_tokens) == (90, 20)
        with pytest.raises(RequestError) as refused:
            await asyncio.wait_for(conn.prompt(session_id=new.session_id, prompt=[text_block("b")]), TIMEOUT)
    assert "refused by the server's budget" in str(refused.value), refused.value
    assert "150 of its 100 tokens" in str(refused.value)
