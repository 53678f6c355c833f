"""Kill tests of issue 10: a real `devagent serve` SIGKILLs itself at a named crash point
(`DEVAGENT_CRASH_AT`, src/devagent/common/faults.py), a new process is started on the same database, and
everything is checked from outside: JSON-RPC v0.3 with the extension header, and the workspace."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.a2a.helpers import auth, call, dev_meta, rpc, v03_message
from tests.a2a.procs import (
    TOKEN,
    confirmation,
    get_task,
    killed_at,
    lines,
    send_stream,
    serve_args,
    serving,
    start_serve,
    status_text,
    status_tool_calls,
)

Script = Callable[[list[Any]], str]

COUNT = "echo x >> count.txt"
FOLLOW_UPS = [{"items": [{"text": f"reply {i}: {{last_user}}"}]} for i in range(4)]


def shell_step(command: str, call_id: str) -> dict[str, Any]:
    return {
        "items": [{"tool_call": {"name": "run_shell_command", "args": {"command": command}, "id": call_id}}]
    }


def tool_updates(results: list[dict[str, Any]], call_id: str) -> list[dict[str, Any]]:
    """The ToolCall objects of the TOOL_CALL_UPDATE events for one call, in order."""
    out = []
    for ev in results:
        if dev_meta(ev).get("kind") != "TOOL_CALL_UPDATE":
            continue
        for p in (ev["status"].get("message") or {}).get("parts") or []:
            if p.get("kind") == "data" and p["data"].get("tool_call_id") == call_id:
                out.append(p["data"])
    return out


def history_tool_calls(task: dict[str, Any]) -> list[dict[str, Any]]:
    """The ToolCall objects in a task's history and status message, in order (not the client's
    confirmations, which name a tool_call_id too)."""
    messages = [*(task.get("history") or []), task["status"].get("message") or {}]
    return [
        p["data"]
        for m in messages
        for p in m.get("parts") or []
        if p.get("kind") == "data" and isinstance(p.get("data"), dict) and "status" in p["data"]
    ]


def gated_step(flag: Path) -> dict[str, Any]:
    """A first step whose shell command waits until the test creates `flag`: the turn cannot reach
    the crash point of a later tool before the client has its task (no race with the SSE flush)."""
    return shell_step(f"while [ ! -e '{flag}' ]; do sleep 0.05; done", "gate")


def open_on_task(flag: Path) -> Callable[[dict[str, Any]], None]:
    """An `on_frame` for `send_stream` that creates `flag` once the client holds its task."""

    def on_frame(frame: dict[str, Any]) -> None:
        if frame.get("result", {}).get("kind") == "task":
            flag.touch()

    return on_frame


async def killed_as_the_command_starts(
    c: httpx.AsyncClient, shared_db: str, script: Script, workspace: Path
) -> tuple[list[str], dict[str, Any]]:
    """A yolo server runs "run it" in `workspace` and dies as the turn's shell command (`touch
    ran.txt`, call s1) starts. The command is the turn's second tool: the first waits until the
    client holds its task, so the kill never races the stream's first frame. The server's
    arguments (to start it again) and the task."""
    gate = workspace / "gate"  # inside the workspace: the shell sandbox sees it
    steps = [gated_step(gate), shell_step("touch ran.txt", "s1"), *FOLLOW_UPS]
    args = serve_args(shared_db, workspace, script(steps), "yolo")
    with killed_at(args, workspace.parent / "a.log", "session.tool_running@2") as a:
        reply = await send_stream(
            c,
            a.url,
            v03_message("run it", settings={"workspace_path": str(workspace)}),
            open_on_task(gate),
        )
    return args, first_task(reply)


async def paused_task(c: httpx.AsyncClient, url: str, text: str, workspace: Path) -> dict[str, Any]:
    """A first message `text` to the server at `url`, in `workspace`, whose turn pauses for a
    permission: its task."""
    paused = await send_stream(c, url, v03_message(text, settings={"workspace_path": str(workspace)}))
    assert paused.last_state == "input-required", paused.frames
    return first_task(paused)


def first_task(reply: Any) -> dict[str, Any]:
    assert reply.results, (reply.frames, reply.cut)
    task: dict[str, Any] = reply.results[0]
    assert task["kind"] == "task", task
    return task


async def test_pause_stored_before_the_task_survives_a_kill(
    script: Script, shared_db: str, workspace: Path
) -> None:
    """Issue 10 item 1, A6 B9 B10: "a task reads input-required exactly when the session holds
    pending permission requests that the server will accept, and its status message shows them".
    The server dies at `a2a.turn_stored` (the session stored the pause, the task store not yet) of
    the task's second pause (the first, for a harmless command, gives the client its task for
    certain: the kill never races the stream's first frame); after a restart tasks/get reads
    input-required with the RFC ToolCall (PENDING, with its confirmation_request) in the status
    message, and confirming it writes the file once."""
    steps = [
        shell_step("true", "t1"),
        {
            "items": [
                {"tool_call": {"name": "write_file", "args": {"path": "w.txt", "content": "W\n"}, "id": "w1"}}
            ]
        },
        {"items": [{"text": "written"}]},
    ]
    args = serve_args(shared_db, workspace, script(steps), "ask")
    logs = workspace.parent
    async with httpx.AsyncClient(timeout=60) as c:
        with killed_at(args, logs / "a.log", "a2a.turn_stored@2") as a:
            task = await paused_task(c, a.url, "write w", workspace)
            reply = await send_stream(c, a.url, confirmation(task, "t1"))
        assert reply.last_state != "input-required"  # it died before announcing the pause
        assert not (workspace / "w.txt").exists()

        with serving(args, logs / "b.log") as b:
            got = await get_task(c, b.url, task["id"])
            assert got["status"]["state"] == "input-required", got["status"]
            calls = status_tool_calls(got)
            assert [tc["tool_call_id"] for tc in calls] == ["w1"], got["status"]
            tc = calls[0]
            assert tc["status"] == "PENDING" and tc["tool_name"] == "write_file"
            cr = tc["confirmation_request"]
            assert {o["id"] for o in cr["options"]} >= {"proceed_once", "cancel"}
            assert cr["file_edit_details"]["new_content"] == "W\n"
            # the same on a second read (the derived status was stored, not made up twice)
            again = await get_task(c, b.url, task["id"])
            assert again["status"]["state"] == "input-required"
            assert [t["tool_call_id"] for t in status_tool_calls(again)] == ["w1"]

            done = await send_stream(c, b.url, confirmation(task, "w1"))
            assert not done.errors and done.cut is None, done.frames
            assert done.last_state == "completed", done.results[-1]
            assert [u["status"] for u in tool_updates(done.results, "w1")].count("SUCCEEDED") == 1
            assert (workspace / "w.txt").read_text() == "W\n"
            assert (await get_task(c, b.url, task["id"]))["status"]["state"] == "completed"
            late = await send_stream(c, b.url, confirmation(task, "w1"))
            assert late.errors and not late.results, late.frames
            assert "already answered" in late.errors[0]["message"], late.errors
            assert (workspace / "w.txt").read_text() == "W\n"
            assert "IntegrityError" not in b.stderr()


async def test_turn_killed_while_a_tool_starts_reads_failed_and_continues(
    script: Script, shared_db: str, workspace: Path
) -> None:
    """Issue 10 item 2, A3 A6 B10: "a turn cut off by a crash reads failed with a message saying
    it was interrupted, and can be continued (extension clients on the same taskId)". The server
    dies at `session.tool_running` of a shell command (yolo: it runs unasked); after a restart the
    task reads failed "interrupted", the command never ran, and a new message on the same taskId
    runs a new turn that completes. (The command is the turn's second tool; the first waits until
    the client holds its task, so the kill never races the stream's first frame.)"""
    logs = workspace.parent
    async with httpx.AsyncClient(timeout=60) as c:
        args, task = await killed_as_the_command_starts(c, shared_db, script, workspace)

        with serving(args, logs / "b.log") as b:
            got = await get_task(c, b.url, task["id"])
            assert got["status"]["state"] == "failed", got["status"]
            assert "interrupted" in status_text(got)
            assert not (workspace / "ran.txt").exists()
            follow = await send_stream(
                c, b.url, v03_message("go on", task_id=task["id"], context_id=task["contextId"])
            )
            assert not follow.errors and follow.cut is None, follow.frames
            assert all(r.get("id", r.get("taskId")) == task["id"] for r in follow.results)
            assert follow.last_state == "completed", follow.results[-1]
            assert not tool_updates(follow.results, "s1")
            assert (await get_task(c, b.url, task["id"]))["status"]["state"] == "completed"
            assert not (workspace / "ran.txt").exists()


async def test_continuation_killed_after_its_first_event(
    script: Script, shared_db: str, workspace: Path
) -> None:
    """Issue 10 item 2 (the issue's minimal repro), A3 A6 B10: a task failed by a crash is
    continued on its taskId, and that server is killed right after the continuation's first
    event (`a2a.working_sent`). After a restart the task must not read input-required with no
    status message (which no client can answer): it reads what the session says, failed
    "interrupted"; a confirmation for the old call id is a JSON-RPC error; it can be continued."""
    logs = workspace.parent
    async with httpx.AsyncClient(timeout=60) as c:
        args, task = await killed_as_the_command_starts(c, shared_db, script, workspace)

        # This process's first execution is the continuation: it dies after its `working` event.
        with killed_at(args, logs / "b.log", "a2a.working_sent") as b:
            cont = await send_stream(
                c, b.url, v03_message("go on", task_id=task["id"], context_id=task["contextId"])
            )
        assert not cont.errors, cont.frames

        with serving(args, logs / "c.log") as srv:
            got = await get_task(c, srv.url, task["id"])
            status = got["status"]
            assert not (status["state"] == "input-required" and not status.get("message")), status
            assert status["state"] == "failed", status
            assert "interrupted" in status_text(got)
            old = await send_stream(c, srv.url, confirmation(task, "s1"))
            assert old.errors and not old.results, old.frames
            assert not (workspace / "ran.txt").exists()
            follow = await send_stream(
                c, srv.url, v03_message("again", task_id=task["id"], context_id=task["contextId"])
            )
            assert not follow.errors and follow.cut is None, follow.frames
            assert follow.last_state == "completed", follow.results[-1]
            assert not (workspace / "ran.txt").exists()


@pytest.mark.parametrize(("point", "runs"), [("session.tool_ran", 1), ("session.answers_stored", 0)])
async def test_a_tool_call_runs_at_most_once(
    script: Script, shared_db: str, workspace: Path, point: str, runs: int
) -> None:
    """Issue 10 item 1 ("a tool call runs at most once"), A6 B9 B10: a permission is answered and
    the server dies at `session.tool_ran` (the command ran, its result not stored) or at
    `session.answers_stored` (the answer stored, the command not run). After a restart the
    counter file has exactly `runs` lines, the task reads failed "interrupted", the same
    confirmation again is a JSON-RPC error, and a follow-up turn never runs the command."""
    args = serve_args(shared_db, workspace, script([shell_step(COUNT, "c1"), *FOLLOW_UPS]), "ask")
    logs = workspace.parent
    counter = workspace / "count.txt"
    async with httpx.AsyncClient(timeout=60) as c:
        with killed_at(args, logs / "a.log", point) as a:
            task = await paused_task(c, a.url, "count", workspace)
            await send_stream(c, a.url, confirmation(task, "c1"))
        assert lines(counter) == runs

        with serving(args, logs / "b.log") as b:
            got = await get_task(c, b.url, task["id"])
            assert got["status"]["state"] == "failed", got["status"]
            assert "interrupted" in status_text(got)
            # issue 21 item 3: the history's last update of the call is final, not the prompt
            settled = [d for d in history_tool_calls(got) if d["tool_call_id"] == "c1"]
            assert [d["status"] for d in settled][-1] == "FAILED", settled
            assert settled[-1]["error"]["type"] == "interrupted" and "confirmation_request" not in settled[-1]
            again = await send_stream(c, b.url, confirmation(task, "c1"))
            assert again.errors and not again.results, again.frames
            assert "already answered" in again.errors[0]["message"], again.errors
            assert lines(counter) == runs
            follow = await send_stream(
                c, b.url, v03_message("go on", task_id=task["id"], context_id=task["contextId"])
            )
            assert not follow.errors and follow.cut is None, follow.frames
            assert follow.last_state == "completed", follow.results[-1]
            assert not tool_updates(follow.results, "c1")
            assert lines(counter) == runs
            # still refused after the conversation went on, and still not run
            late = await send_stream(c, b.url, confirmation(task, "c1"))
            assert late.errors and not late.results, late.frames
            assert "already answered" in late.errors[0]["message"], late.errors
            assert lines(counter) == runs


async def test_issue21_a_first_message_no_process_took_up_reads_failed(
    script: Script, shared_db: str, workspace: Path
) -> None:
    """Issue 21 item 3: the server dies right after storing a new task (`submitted`), its first
    turn not begun or just begun. After a restart the task does not stay submitted or working for
    ever: it reads failed (at once when its turn had begun, "interrupted"; else once the lease
    time has passed, "send it again"), `tasks/resubscribe` on it ends, and a new message in its
    context runs."""
    import asyncio
    import time

    logs = workspace.parent
    args = [*serve_args(shared_db, workspace, script(FOLLOW_UPS), "yolo"), "--lease-seconds", "0.5"]
    async with httpx.AsyncClient(timeout=60) as c:
        context = "ctx-issue21-first-message"  # the client's: found again without the stream
        with killed_at(args, logs / "a.log", "a2a.task_created") as a:
            await send_stream(
                c,
                a.url,
                v03_message("hello", context_id=context, settings={"workspace_path": str(workspace)}),
            )
        with serving(args, logs / "b.log") as b:
            listed = await call(c, b.url, rpc("ListTasks", {"contextId": context}), auth(TOKEN, v1=True))
            assert "result" in listed and len(listed["result"]["tasks"]) == 1, listed
            task = {"id": listed["result"]["tasks"][0]["id"], "contextId": context}
            deadline = time.monotonic() + 30  # a bound on a loaded machine, never a pace
            got = await get_task(c, b.url, task["id"])
            while got["status"]["state"] != "failed" and time.monotonic() < deadline:
                assert got["status"]["state"] in ("submitted", "working"), got["status"]
                await asyncio.sleep(0.1)
                got = await get_task(c, b.url, task["id"])
            assert got["status"]["state"] == "failed", got["status"]
            assert "send it again" in status_text(got) or "interrupted" in status_text(got)
            sub = await c.post(
                b.url,
                json={"jsonrpc": "2.0", "id": 5, "method": "tasks/resubscribe", "params": {"id": task["id"]}},
                headers=auth(TOKEN),
            )
            frames = [json.loads(line[5:]) for line in sub.text.splitlines() if line.startswith("data:")]
            states = [f["result"].get("status", {}).get("state") for f in frames if "result" in f]
            assert states and states[-1] == "failed", frames
            again = await send_stream(c, b.url, v03_message("again", context_id=task["contextId"]))
            assert again.last_state == "completed", again.frames


async def test_issue21_a_stored_task_whose_turn_never_began_reads_failed(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """Issue 21 item 3, the path the kill test above meets when the process died before the
    conversation existed: a task stored `submitted` (with its message) whose conversation has no
    turn, older than the lease, reads failed "send it again" on tasks/get and on a subscription,
    which ends; a newer one is left as it is (a live process may be starting it)."""
    import time

    from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus

    from tests.a2a.helpers import TOKEN as HELPER_TOKEN
    from tests.a2a.helpers import running_server
    from tests.a2a.test_store_cache import _ctx

    async def get(c: httpx.AsyncClient, url: str, task_id: str) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": task_id}}
        got: dict[str, Any] = (await c.post(url, json=body, headers=auth(HELPER_TOKEN))).json()["result"]
        return got

    async with running_server(script(FOLLOW_UPS), sqlite_url, workspace) as srv:
        handler = srv.app.app.state.handler
        for task_id, age in (("t-old", 3600), ("t-new", 0)):
            status = TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)
            status.timestamp.FromSeconds(int(time.time()) - age)
            msg = Message(message_id=f"m-{task_id}", role=Role.ROLE_USER, parts=[Part(text="hi")])
            task = Task(id=task_id, context_id=f"c-{task_id}", status=status, history=[msg])
            await handler.store.save(task, _ctx("alice"))  # the helper server's token is alice's
        async with httpx.AsyncClient(timeout=60) as c:
            assert (await get(c, srv.url, "t-new"))["status"]["state"] == "submitted"
            old = await get(c, srv.url, "t-old")
            assert old["status"]["state"] == "failed" and "send it again" in status_text(old), old
            body = {"jsonrpc": "2.0", "id": 2, "method": "tasks/resubscribe", "params": {"id": "t-old"}}
            sub = await c.post(srv.url, json=body, headers=auth(HELPER_TOKEN))
            frames = [json.loads(line[5:]) for line in sub.text.splitlines() if line.startswith("data:")]
            assert frames[-1]["result"]["status"]["state"] == "failed", frames


async def test_issue21_a_kill_after_a_finished_permission_turn_changes_nothing_in_its_history(
    script: Script, shared_db: str, workspace: Path
) -> None:
    """Issue 21 item 3: a server SIGKILLed right after a turn that stopped for a permission and
    then finished (its task buffered, not yet flushed) reads the same after a restart: the same
    state, history and status, no agent message twice, the write done once."""
    import os
    import signal

    steps = [
        {
            "items": [
                {"text": "Let me write."},
                {
                    "tool_call": {
                        "name": "write_file",
                        "args": {"path": "x.txt", "content": "x\n"},
                        "id": "w1",
                    }
                },
            ]
        },
        {"items": [{"text": "The final answer."}]},
    ]
    logs = workspace.parent
    args = serve_args(shared_db, workspace, script(steps), "ask")
    async with httpx.AsyncClient(timeout=60) as c:
        a = start_serve(args, logs / "a.log")
        try:
            first = await paused_task(c, a.url, "write", workspace)
            done = await send_stream(c, a.url, confirmation(first, "w1"))
            assert done.last_state == "completed", done.frames
            before = await get_task(c, a.url, first["id"])
            os.kill(a.proc.pid, signal.SIGKILL)
            a.proc.wait(30)
        finally:
            a.stop()
        with serving(args, logs / "b.log") as b:
            after = await get_task(c, b.url, first["id"])
    assert after["status"]["state"] == "completed"
    assert after["history"] == before["history"] and after["status"] == before["status"]
    agent_texts = [
        "".join(p.get("text", "") for p in m["parts"]) for m in after["history"] if m["role"] == "agent"
    ]
    assert agent_texts.count("The final answer.") <= 1, agent_texts
    assert (workspace / "x.txt").read_text() == "x\n"


# --- issue 28 item 8 (build item 7): the red team's two-command conversations ---------------------

TWO_COMMANDS = [
    {"items": [{"text": "Let me run the first one."}, shell_step("echo 1 >> one.txt", "c1")["items"][0]]},
    {
        "items": [
            {"text": "The first one ran; now the second."},
            shell_step("echo 2 >> two.txt", "c2")["items"][0],
        ]
    },
    {"items": [{"text": "Both commands ran."}]},
    *FOLLOW_UPS,
]


def agent_texts(task: dict[str, Any]) -> list[str]:
    """The text of each agent message of a task's history, in order."""
    return [
        "".join(p.get("text", "") for p in m.get("parts") or [])
        for m in task.get("history") or []
        if m.get("role") == "agent" and any(p.get("kind") == "text" for p in m.get("parts") or [])
    ]


async def test_issue28_item8_c_a_conversation_cut_off_by_a_kill_reaches_its_second_command(
    script: Script, shared_db: str, workspace: Path
) -> None:
    """Issue 28 item 8 (c), build item 7: "no conversation stalls before its next command". The
    model asks for a command (approval `ask`), the client confirms, and the server dies as the
    command starts (`session.tool_running`). After a restart the task reads failed "interrupted";
    the client says to go on, and the conversation goes on where the crash cut it off: the model
    writes its text and asks for the second command (the note that settled the cut-off turn is not
    an answer of the model), which runs once when confirmed, and the task completes."""
    args = serve_args(shared_db, workspace, script(TWO_COMMANDS), "ask")
    logs = workspace.parent
    async with httpx.AsyncClient(timeout=60) as c:
        with killed_at(args, logs / "a.log", "session.tool_running") as a:
            task = await paused_task(c, a.url, "two", workspace)
            await send_stream(c, a.url, confirmation(task, "c1"))

        with serving(args, logs / "b.log") as b:
            got = await get_task(c, b.url, task["id"])
            assert got["status"]["state"] == "failed" and "interrupted" in status_text(got), got["status"]
            on = await send_stream(
                c, b.url, v03_message("go on", task_id=task["id"], context_id=task["contextId"])
            )
            assert on.last_state == "input-required", on.frames
            assert [t["tool_call_id"] for t in status_tool_calls(on.results[-1])] == ["c2"], on.results[-1]
            done = await send_stream(c, b.url, confirmation(task, "c2"))
            assert done.last_state == "completed", done.frames
            final = await get_task(c, b.url, task["id"])
    assert final["status"]["state"] == "completed"
    assert "Both commands ran." in status_text(final)
    assert lines(workspace / "two.txt") == 1 and lines(workspace / "one.txt") == 0
    assert agent_texts(final).count("The first one ran; now the second.") == 1, agent_texts(final)


async def test_issue28_item8_b_a_continued_task_killed_twice_reads_its_true_state(
    script: Script, shared_db: str, workspace: Path
) -> None:
    """Issue 28 item 8 (b), build item 7: "a continued task killed twice reads its true state". The
    server dies as a new task is stored (`a2a.task_created`), before its first turn begins; after
    a restart the task reads failed ("send it again") once the lease time has passed. The client continues it
    on its taskId, and that server dies before the continuation's turn begins too. After another
    restart the task must not read input-required (nothing waits in its conversation, and no
    answer would be taken): it reads failed "send it again" once the lease time has passed, and a
    new message on it completes."""
    import asyncio
    import time

    logs = workspace.parent
    args = [*serve_args(shared_db, workspace, script(FOLLOW_UPS), "ask"), "--lease-seconds", "0.5"]
    context = "ctx-issue28-item8-b"

    async def settled(url: str, task_id: str) -> dict[str, Any]:
        """The task once its lease time has passed (a bound on a loaded machine, never a pace)."""
        deadline = time.monotonic() + 30
        got = await get_task(c, url, task_id)
        while got["status"]["state"] in ("submitted", "working") and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            got = await get_task(c, url, task_id)
        return got

    async with httpx.AsyncClient(timeout=60) as c:
        with killed_at(args, logs / "a.log", "a2a.task_created") as a:
            msg = v03_message("hello", context_id=context, settings={"workspace_path": str(workspace)})
            await send_stream(c, a.url, msg)
        with killed_at(args, logs / "b.log", "a2a.working_sent") as b:
            listed = await call(c, b.url, rpc("ListTasks", {"contextId": context}), auth(TOKEN, v1=True))
            task_id = listed["result"]["tasks"][0]["id"]
            got = await settled(b.url, task_id)
            assert got["status"]["state"] == "failed" and "send it again" in status_text(got), got["status"]
            await send_stream(c, b.url, v03_message("go on", task_id=task_id, context_id=context))

        with serving(args, logs / "c.log") as srv:
            got = await settled(srv.url, task_id)
            assert got["status"]["state"] == "failed", got["status"]
            assert "send it again" in status_text(got), got["status"]
            again = await send_stream(c, srv.url, v03_message("again", task_id=task_id, context_id=context))
            assert not again.errors and again.last_state == "completed", again.frames
            assert (await get_task(c, srv.url, task_id))["status"]["state"] == "completed"


async def test_issue28_item8_a_an_answer_streamed_again_after_a_kill_is_in_the_history_once(
    script: Script, shared_db: str, workspace: Path
) -> None:
    """Issue 28 item 8 (a), build item 7: "after a crash, task history shows each agent message
    once". The client confirms the first command; the model writes its text and stops before
    asking for the second command (it waits for a file the test creates later). The text is in
    the task store (a tasks/list writes the turn's snapshot, as the write-behind does every few
    seconds), and the server is SIGKILLed there, the model's answer not stored in the
    conversation. After a restart the task reads failed "interrupted" with the text in its
    history; the client says to go on and the model gives that answer again (the scripted model
    plays the step the crash cut off, as a model asked the same again answers the same): the
    history holds the text once, before the second command, which runs once."""
    import asyncio
    import os
    import signal

    gate = workspace / "gate"
    text = "The first one ran; now the second."
    steps = [
        TWO_COMMANDS[0],
        {
            "items": [
                {"text": text},
                {"wait_for": str(gate)},
                shell_step("echo 2 >> two.txt", "c2")["items"][0],
            ]
        },
        *TWO_COMMANDS[2:],
    ]
    args = serve_args(shared_db, workspace, script(steps), "ask")
    logs = workspace.parent
    async with httpx.AsyncClient(timeout=60) as c:
        a = start_serve(args, logs / "a.log")
        try:
            task = await paused_task(c, a.url, "two", workspace)
            confirming = asyncio.create_task(send_stream(c, a.url, confirmation(task, "c1")))
            for _ in range(600):  # until the turn has streamed the text (a bound, not a pace)
                live = await get_task(c, a.url, task["id"])
                if text in "".join(agent_texts(live)) + status_text(live):
                    break
                await asyncio.sleep(0.05)
            listed = await call(
                c, a.url, rpc("ListTasks", {"contextId": task["contextId"]}), auth(TOKEN, v1=True)
            )
            assert "result" in listed, listed
            os.kill(a.proc.pid, signal.SIGKILL)  # the model waits for `gate`: the turn is there
            a.proc.wait(30)
            await confirming
        finally:
            a.stop()
        assert lines(workspace / "one.txt") == 1

        gate.touch()
        with serving(args, logs / "b.log") as b:
            got = await get_task(c, b.url, task["id"])
            assert got["status"]["state"] == "failed" and "interrupted" in status_text(got), got["status"]
            assert "".join(agent_texts(got)).count(text) == 1, agent_texts(got)
            on = await send_stream(
                c, b.url, v03_message("go on", task_id=task["id"], context_id=task["contextId"])
            )
            assert on.last_state == "input-required", on.frames
            done = await send_stream(c, b.url, confirmation(task, "c2"))
            assert done.last_state == "completed", done.frames
            final = await get_task(c, b.url, task["id"])
    texts = agent_texts(final)
    assert "".join(texts).count(text) == 1, texts
    assert texts.count("Both commands ran.") == 1, texts
    assert lines(workspace / "one.txt") == 1 and lines(workspace / "two.txt") == 1


async def test_issue28_item8_a_a_continued_task_killed_twice_shows_its_interruption_once(
    script: Script, shared_db: str, workspace: Path
) -> None:
    """Issue 28 item 8 (a), build item 7: the server dies as the confirmed command starts
    (`session.tool_running`); after a restart the task reads failed "interrupted", and the client
    continues it, but that server dies before the continuation's turn begins
    (`a2a.working_sent`). After another restart the task reads failed "interrupted" again (the
    conversation did not change), and once continued and finished its history tells of the one
    interruption once, the answer once."""
    args = serve_args(shared_db, workspace, script([shell_step(COUNT, "c1"), *FOLLOW_UPS]), "ask")
    logs = workspace.parent
    async with httpx.AsyncClient(timeout=60) as c:
        with killed_at(args, logs / "a.log", "session.tool_running") as a:
            task = await paused_task(c, a.url, "count", workspace)
            await send_stream(c, a.url, confirmation(task, "c1"))
        with killed_at(args, logs / "b.log", "a2a.working_sent") as b:
            got = await get_task(c, b.url, task["id"])
            assert got["status"]["state"] == "failed" and "interrupted" in status_text(got), got["status"]
            await send_stream(
                c, b.url, v03_message("go on", task_id=task["id"], context_id=task["contextId"])
            )
        with serving(args, logs / "c.log") as srv:
            got = await get_task(c, srv.url, task["id"])
            assert got["status"]["state"] == "failed" and "interrupted" in status_text(got), got["status"]
            again = await send_stream(
                c, srv.url, v03_message("again", task_id=task["id"], context_id=task["contextId"])
            )
            assert again.last_state == "completed", again.frames
            final = await get_task(c, srv.url, task["id"])
    texts = agent_texts(final)
    assert "".join(texts).count("The turn was interrupted") == 1, texts
    assert sum(t.startswith("reply ") for t in [*texts, status_text(final)]) == 2, texts  # history, status
    assert lines(workspace / "count.txt") == 0


@pytest.mark.parametrize("point", ["session.calls_stored@2", "a2a.turn_stored@3"])
async def test_issue28_item8_a_text_the_conversation_holds_is_in_the_history_once_after_a_kill(
    script: Script, shared_db: str, workspace: Path, point: str
) -> None:
    """Issue 28 item 8 (a), build item 7: "task history shows each agent message once", also when
    the task store had not written it. The server dies once the conversation has stored the
    model's second answer (`session.calls_stored@2`: its text, and the second command waiting for
    permission) or the end of the turn (`a2a.turn_stored@3`: the final answer), before the task
    store wrote the task (a running turn is written behind). After a restart the task reads as the
    conversation says, its history holds each text of the conversation once, and a finished turn
    reads with its reply in the status message and a `reply` artifact, as if it had not died."""
    args = serve_args(shared_db, workspace, script(TWO_COMMANDS), "ask")
    logs = workspace.parent
    async with httpx.AsyncClient(timeout=60) as c:
        with killed_at(args, logs / "a.log", point) as a:
            task = await paused_task(c, a.url, "two", workspace)
            await send_stream(c, a.url, confirmation(task, "c1"))
            if point.startswith("a2a"):
                await send_stream(c, a.url, confirmation(task, "c2"))

        with serving(args, logs / "b.log") as b:
            got = await get_task(c, b.url, task["id"])
            if point.startswith("session"):
                assert got["status"]["state"] == "input-required", got["status"]
                assert [t["tool_call_id"] for t in status_tool_calls(got)] == ["c2"], got["status"]
                assert agent_texts(got).count("The first one ran; now the second.") == 1, agent_texts(got)
                done = await send_stream(c, b.url, confirmation(task, "c2"))
                assert done.last_state == "completed", done.frames
                got = await get_task(c, b.url, task["id"])
            again = await get_task(c, b.url, task["id"])
    assert (got["history"], got.get("artifacts"), got["status"].get("message")) == (
        again["history"],
        again.get("artifacts"),
        again["status"].get("message"),
    )  # derived the same at every read
    assert got["status"]["state"] == "completed", got["status"]
    texts = agent_texts(got)
    for text in ("Let me run the first one.", "The first one ran; now the second.", "Both commands ran."):
        assert texts.count(text) == 1, texts
    assert status_text(got) == "Both commands ran."
    replies = [a for a in got.get("artifacts") or [] if a.get("name") == "reply"]
    assert [p.get("text") for a in replies for p in a["parts"]] == ["Both commands ran."], replies
    assert lines(workspace / "one.txt") == 1 and lines(workspace / "two.txt") == 1


@pytest.mark.parametrize("second", ["a2a.working_sent", "a2a.task_created"])
async def test_issue37_item6_A6_B10_a_continued_task_killed_twice_reads_its_true_state_at_once(
    script: Script, shared_db: str, workspace: Path, second: str
) -> None:
    """Issue 37 item 6: "a continued task killed twice reads its true state". As in issue 28 item 8
    (b), the server dies as a new task is stored (`a2a.task_created`), then, the task continued on
    its taskId, as the continuation's turn was to begin (`a2a.working_sent`) or as the continued
    task was stored `submitted` again (`a2a.task_created`). With a lease of ten minutes, the lease
    time cannot be what settles it: after each restart the task's first read is already failed
    "send it again" (the process that took its message up is gone: the conversation's lease names
    it), never `submitted`; its history holds each message once, and a new message on it
    completes."""
    from tests.a2a.test_continued_history import assert_history_once

    logs = workspace.parent
    args = [*serve_args(shared_db, workspace, script(FOLLOW_UPS), "ask"), "--lease-seconds", "600"]
    context = "ctx-issue37-item6"
    async with httpx.AsyncClient(timeout=60) as c:
        with killed_at(args, logs / "a.log", "a2a.task_created") as a:
            msg = v03_message("hello", context_id=context, settings={"workspace_path": str(workspace)})
            await send_stream(c, a.url, msg)
        with killed_at(args, logs / "b.log", second) as b:
            listed = await call(c, b.url, rpc("ListTasks", {"contextId": context}), auth(TOKEN, v1=True))
            task_id = listed["result"]["tasks"][0]["id"]
            got = await get_task(c, b.url, task_id)
            assert got["status"]["state"] == "failed" and "send it again" in status_text(got), got["status"]
            assert_history_once(got, ["hello"])
            await send_stream(c, b.url, v03_message("go on", task_id=task_id, context_id=context))

        with serving(args, logs / "c.log") as srv:
            got = await get_task(c, srv.url, task_id)
            assert got["status"]["state"] == "failed", got["status"]
            assert "send it again" in status_text(got), got["status"]
            assert_history_once(got)
            again = await send_stream(c, srv.url, v03_message("again", task_id=task_id, context_id=context))
            assert not again.errors and again.last_state == "completed", again.frames
            final = await get_task(c, srv.url, task_id)
    assert final["status"]["state"] == "completed"
    texts = assert_history_once(final)
    assert texts[0] == "hello" and texts[-2:] == ["again", "reply 0: again"], texts
