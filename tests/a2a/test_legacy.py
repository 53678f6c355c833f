"""B16: clients of Gemini CLI's a2a-server keep working: the `coderAgent` dialect (settings,
kebab-case kinds, gemini-core ToolCall DataParts, `{callId, outcome, newContent}` confirmations,
live output as artifact-update, turns ending `input-required` final) and the REST command routes.
The requests are those the dialect's clients send (research doc §2, §3, §4.3); the responses are
checked field by field against the captured shapes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx

from devagent.a2a.extension import EXTENSION_URI
from tests.a2a.helpers import TOKEN, call, results, rpc, running_server, stream, v03_message
from tests.conftest import Script
from tests.core_helpers import call_then_text, shell_call, write_call

H = {"Authorization": f"Bearer {TOKEN}"}  # no X-A2A-Extensions: these clients never activate it


def legacy_message(
    text: str | None = None,
    *,
    data: list[dict[str, Any]] | None = None,
    task_id: str | None = None,
    context_id: str | None = None,
    workspace: Path | None = None,
    auto_execute: bool | None = None,
) -> dict[str, Any]:
    msg = v03_message(text, data=data, task_id=task_id, context_id=context_id)
    if workspace is not None:
        settings: dict[str, Any] = {"kind": "agent-settings", "workspacePath": str(workspace)}
        if auto_execute is not None:
            settings["autoExecute"] = auto_execute
        msg["metadata"] = {"coderAgent": settings}
    return msg


def kind(ev: dict[str, Any]) -> str | None:
    md = ev.get("metadata") or {}
    ca = md.get("coderAgent")
    return ca.get("kind") if isinstance(ca, dict) else None


def parts_of(ev: dict[str, Any]) -> list[dict[str, Any]]:
    p: list[dict[str, Any]] = ((ev.get("status") or {}).get("message") or {}).get("parts") or []
    return p


def tool_calls(evs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [parts_of(e)[0]["data"] for e in evs if kind(e) in ("tool-call-update", "tool-call-confirmation")]


def text_of(evs: list[dict[str, Any]]) -> str:
    return "".join(parts_of(e)[0]["text"] for e in evs if kind(e) == "text-content")


async def send(
    c: httpx.AsyncClient, url: str, msg: dict[str, Any], headers: dict[str, str] = H
) -> list[dict[str, Any]]:
    return results(await stream(c, url, rpc("message/stream", {"message": msg}, "req-1"), headers))


async def answer(c: httpx.AsyncClient, url: str, task_id: str, outcome: str) -> list[dict[str, Any]]:
    """The dialect's answer `outcome` to the waiting call `w` of the task; the events it streams."""
    return await send(c, url, legacy_message(data=[{"callId": "w", "outcome": outcome}], task_id=task_id))


def assert_turn_end(ev: dict[str, Any]) -> None:
    """§3.5: every normal turn ends input-required, state-change, final."""
    assert ev["kind"] == "status-update" and ev["final"] is True
    assert ev["status"]["state"] == "input-required"
    assert kind(ev) == "state-change" and ev["metadata"]["model"]


TEXT = [{"items": [{"thinking": "**Planning** Say hello."}, {"text": "Hello "}, {"text": "there."}]}]


async def test_settings_and_text_turn(script: Script, sqlite_url: str, workspace: Path) -> None:
    """B16: agent-settings in message.metadata.coderAgent select the legacy dialect (§2.1); the
    stream is task(submitted), working state-change, thought and text-content pieces sharing one
    messageId, then input-required final (§3.3-§3.6, §4.3); no RFC metadata; tasks/get history
    holds the streamed text (where the original loses it)."""
    async with running_server(script(TEXT), sqlite_url, workspace) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            evs = await send(c, srv.url, legacy_message("hi", workspace=workspace))
            first = evs[0]
            assert first["kind"] == "task" and first["status"]["state"] == "submitted"
            assert first["history"][0]["parts"] == [{"kind": "text", "text": "hi"}]
            assert first["history"][0]["metadata"]["coderAgent"]["kind"] == "agent-settings"
            working = evs[1]
            assert working["kind"] == "status-update" and working["status"]["state"] == "working"
            assert working["final"] is False and kind(working) == "state-change"
            assert "message" not in working["status"]
            assert set(working["metadata"]) == {"coderAgent", "model"}
            for e in evs[1:]:
                assert EXTENSION_URI not in (e.get("metadata") or {})
                assert e["taskId"] == first["id"] and e["contextId"] == first["contextId"]
            thoughts = [e for e in evs if kind(e) == "thought"]
            assert thoughts and parts_of(thoughts[0])[0]["data"]["subject"] == "Planning"
            assert set(parts_of(thoughts[0])[0]["data"]) == {"subject", "description"}
            texts = [e for e in evs if kind(e) == "text-content"]
            assert text_of(evs) == "Hello there."
            for e in texts:
                assert e["status"]["state"] == "working" and e["final"] is False
                assert e["status"]["message"]["role"] == "agent"
            assert len({e["status"]["message"]["messageId"] for e in [*thoughts, *texts]}) == 1
            assert_turn_end(evs[-1])
            assert [e["final"] for e in evs[1:]].count(True) == 1
            got = (await call(c, srv.url, rpc("tasks/get", {"id": first["id"]}), H))["result"]
            assert got["status"]["state"] == "input-required"
            hist = "".join(
                p.get("text", "") for m in got["history"] if m["role"] == "agent" for p in m["parts"]
            )
            assert "Hello there." in hist


WRITE = [
    {"items": [write_call("f.txt", "model\n", "w")]},
    {"items": [{"text": "done: {last_tool_results}"}]},
    {"items": [{"text": "again"}]},
]


def assert_tool_call(tc: dict[str, Any], call_id: str, name: str, status: str) -> None:
    """§3.7: a serialized gemini-core ToolCall."""
    assert tc["status"] == status
    req = tc["request"]
    assert req["callId"] == call_id and req["name"] == name and isinstance(req["args"], dict)
    tool = tc["tool"]
    assert tool["name"] == name and tool["displayName"] == name and "kind" in tool
    assert "tool_call_id" not in tc and "PENDING" not in json.dumps(tc)


async def test_edit_confirmation_with_new_content(script: Script, sqlite_url: str, workspace: Path) -> None:
    """B16: a write asks with confirmationDetails type `edit` (fileName, filePath, fileDiff,
    originalContent, newContent) in a tool-call-confirmation after a `scheduled` update (§4.3);
    `autoExecute` does not skip it (server policy keeps `ask`); `{callId, outcome: proceed_once,
    newContent}` writes the client's content; the result is a FileDiff resultDisplay."""
    async with running_server(script(WRITE), sqlite_url, workspace) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            evs = await send(c, srv.url, legacy_message("write", workspace=workspace, auto_execute=True))
            task = evs[0]
            kinds = [kind(e) for e in evs[1:]]
            assert kinds == ["state-change", "tool-call-update", "tool-call-confirmation", "state-change"], (
                kinds
            )
            scheduled, asking = tool_calls(evs)
            assert_tool_call(scheduled, "w", "write_file", "scheduled")
            assert_tool_call(asking, "w", "write_file", "awaiting_approval")
            det = asking["confirmationDetails"]
            assert det["type"] == "edit" and det["fileName"] == "f.txt"
            assert det["filePath"] == str(workspace / "f.txt")
            assert det["originalContent"] is None and det["newContent"] == "model\n"
            assert "+model" in det["fileDiff"] and det["title"]
            assert "options" not in json.dumps(asking)  # the dialect sends no options list
            assert_turn_end(evs[-1])
            assert not (workspace / "f.txt").exists()

            ok = {"callId": "w", "outcome": "proceed_once", "newContent": "user edit\n"}
            evs2 = await send(
                c, srv.url, legacy_message(data=[ok], task_id=task["id"], context_id=task["contextId"])
            )
            assert evs2[0]["kind"] == "status-update"  # a continuation has no task event (§3.3)
            tcs = tool_calls(evs2)
            assert [t["status"] for t in tcs] == ["scheduled", "executing", "success"]
            for t in tcs:
                assert_tool_call(t, "w", "write_file", t["status"])
                assert t["outcome"] == "proceed_once"
            resp = tcs[-1]["response"]
            assert resp["callId"] == "w"
            assert resp["responseParts"][0]["functionResponse"]["id"] == "w"
            assert resp["resultDisplay"]["newContent"] == "user edit\n"
            assert resp["resultDisplay"]["fileName"] == "f.txt" and "fileDiff" in resp["resultDisplay"]
            assert "error" not in resp
            assert (workspace / "f.txt").read_text() == "user edit\n"
            assert text_of(evs2).startswith("done:")
            assert_turn_end(evs2[-1])
            # the task stays usable for the next turn
            evs3 = await send(c, srv.url, legacy_message("more", task_id=task["id"]))
            assert text_of(evs3) == "again" and evs3[-1]["status"]["state"] == "input-required"


async def test_modify_with_editor_then_proceed(script: Script, sqlite_url: str, workspace: Path) -> None:
    """B16: modify_with_editor with newContent decides nothing: the call is announced again with
    the edited content and keeps waiting; the next proceed_once writes that content."""
    async with running_server(script(WRITE), sqlite_url, workspace) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            evs = await send(c, srv.url, legacy_message("write", workspace=workspace))
            tid = evs[0]["id"]
            mod = {"callId": "w", "outcome": "modify_with_editor", "newContent": "edited\n"}
            evs2 = await send(c, srv.url, legacy_message(data=[mod], task_id=tid))
            (again,) = tool_calls(evs2)
            assert again["status"] == "awaiting_approval" and again["outcome"] == "modify_with_editor"
            assert again["confirmationDetails"]["newContent"] == "edited\n"
            assert "+edited" in again["confirmationDetails"]["fileDiff"]
            assert_turn_end(evs2[-1])
            assert not (workspace / "f.txt").exists()
            evs3 = await answer(c, srv.url, tid, "proceed_once")
            assert tool_calls(evs3)[-1]["status"] == "success"
            assert (workspace / "f.txt").read_text() == "edited\n"


async def test_modify_with_editor_content_survives_a_restart(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """B16, G6: the content a client edited with modify_with_editor is stored with the session, so
    a proceed sent to a restarted server writes it."""
    model = script(WRITE)
    async with running_server(model, sqlite_url, workspace) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            evs = await send(c, srv.url, legacy_message("write", workspace=workspace))
            tid = evs[0]["id"]
            mod = {"callId": "w", "outcome": "modify_with_editor", "newContent": "edited before restart\n"}
            await send(c, srv.url, legacy_message(data=[mod], task_id=tid))
    async with running_server(model, sqlite_url, workspace) as srv:  # a fresh core and app
        async with httpx.AsyncClient(timeout=30) as c:
            evs3 = await answer(c, srv.url, tid, "proceed_once")
            assert tool_calls(evs3)[-1]["status"] == "success"
    assert (workspace / "f.txt").read_text() == "edited before restart\n"


async def test_cancel_outcome_unknown_call_and_task_cancel(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """B16: outcome `cancel` skips the call (status cancelled, a readable error in `response`, never
    `{}`); an unknown callId or outcome is reported as a JSON-RPC error, not ignored; tasks/cancel
    on a waiting legacy task ends it `canceled`."""
    steps = [WRITE[0], {"items": [{"text": "skipped"}]}, WRITE[0]]
    async with running_server(script(steps), sqlite_url, workspace) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            evs = await send(c, srv.url, legacy_message("write", workspace=workspace))
            tid = evs[0]["id"]
            for bad, needle in (
                ({"callId": "nope", "outcome": "proceed_once"}, "nope"),
                ({"callId": "w", "outcome": "allow_forever"}, "allow_forever"),
            ):
                frames = await stream(
                    c, srv.url, rpc("message/stream", {"message": legacy_message(data=[bad], task_id=tid)}), H
                )
                assert frames[0]["error"]["code"] == -32602 and needle in frames[0]["error"]["message"]
            evs2 = await answer(c, srv.url, tid, "cancel")
            tcs = tool_calls(evs2)
            assert "executing" not in [t["status"] for t in tcs]
            last = tcs[-1]
            assert_tool_call(last, "w", "write_file", "cancelled")
            assert last["outcome"] == "cancel"
            err = last["response"]["error"]
            assert isinstance(err, dict) and err["message"] and "declined" in err["message"]
            assert last["response"]["resultDisplay"] == err["message"]
            assert_turn_end(evs2[-1])
            assert not (workspace / "f.txt").exists()
            # a new write waits; tasks/cancel ends the task canceled, in the dialect
            evs3 = await send(c, srv.url, legacy_message("write again", task_id=tid))
            assert tool_calls(evs3)[-1]["status"] == "awaiting_approval"
            res = (await call(c, srv.url, rpc("tasks/cancel", {"id": tid}), H))["result"]
            assert res["status"]["state"] == "canceled"
            assert not (workspace / "f.txt").exists()


SHELL = call_then_text(shell_call("echo line1; sleep 0.3; echo line2; sleep 0.3; echo line3", "sh"), "ok")


async def test_shell_live_output_as_artifacts(script: Script, sqlite_url: str, workspace: Path) -> None:
    """B16: a shell command asks with type `exec` (command, rootCommand); after proceed_once its
    output streams as artifact-update events `tool-<callId>-output` whose flags are truthful: the
    first creates the artifact (append false), later ones carry only the new text (append true),
    the last says lastChunk; the parts add up to the output exactly (§3.8, fixed)."""
    async with running_server(script(SHELL), sqlite_url, workspace) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            evs = await send(c, srv.url, legacy_message("run", workspace=workspace))
            asking = tool_calls(evs)[-1]
            assert_tool_call(asking, "sh", "run_shell_command", "awaiting_approval")
            det = asking["confirmationDetails"]
            assert det["type"] == "exec" and det["command"].startswith("echo line1")
            assert det["rootCommand"] == "echo" and det["rootCommands"] == ["echo"]
            assert asking["tool"]["kind"] == "execute" and asking["tool"]["canUpdateOutput"] is True
            evs2 = await send(
                c,
                srv.url,
                legacy_message(data=[{"callId": "sh", "outcome": "proceed_once"}], task_id=evs[0]["id"]),
            )
            arts = [e for e in evs2 if e["kind"] == "artifact-update"]
            assert len(arts) >= 2, evs2
            for a in arts:
                assert a["artifact"]["artifactId"] == "tool-sh-output"
                assert a["taskId"] == evs[0]["id"]
            assert arts[0].get("append") is False and all(a.get("append") is True for a in arts[1:])
            assert [a.get("lastChunk") for a in arts] == [False] * (len(arts) - 1) + [True]
            whole = "".join(p["text"] for a in arts for p in a["artifact"]["parts"])
            assert whole == "line1\nline2\nline3\n"
            tcs = tool_calls(evs2)
            assert [t["status"] for t in tcs] == ["scheduled", "executing", "success"]
            assert "line3" in tcs[-1]["response"]["resultDisplay"]
            out = tcs[-1]["response"]["responseParts"][0]["functionResponse"]["response"]["output"]
            assert "line3" in out
            # order: executing, the artifacts, then success
            idx = [i for i, e in enumerate(evs2) if e["kind"] == "artifact-update"]
            pos = {t["status"]: i for i, e in enumerate(evs2) for t in tool_calls([e])}
            assert pos["executing"] < idx[0] and idx[-1] < pos["success"]
            assert_turn_end(evs2[-1])
            got = (await call(c, srv.url, rpc("tasks/get", {"id": evs[0]["id"]}), H))["result"]
            (stored,) = [a for a in got["artifacts"] if a["artifactId"] == "tool-sh-output"]
            assert "".join(p["text"] for p in stored["parts"]) == "line1\nline2\nline3\n"


async def test_connection_close_keeps_the_pending_call(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """B16 (where the original fails, §1.13): a client that sends `Connection: close` and closes
    after the first stream still finds its tool call waiting when it confirms."""
    async with running_server(script(SHELL), sqlite_url, workspace) as srv:
        closing = {**H, "Connection": "close"}
        async with httpx.AsyncClient(timeout=30) as c1:
            evs = await send(c1, srv.url, legacy_message("run", workspace=workspace), closing)
        assert tool_calls(evs)[-1]["status"] == "awaiting_approval"
        await asyncio.sleep(0.3)  # the server has seen the socket close
        async with httpx.AsyncClient(timeout=30) as c2:
            ok = legacy_message(data=[{"callId": "sh", "outcome": "proceed_once"}], task_id=evs[0]["id"])
            evs2 = await send(c2, srv.url, ok, closing)
        assert [t["status"] for t in tool_calls(evs2)] == ["scheduled", "executing", "success"]
        assert_turn_end(evs2[-1])


ERR = [{"items": [{"error": {"message": "quota exceeded", "status": 429}}]}, {"items": [{"text": "back"}]}]


async def test_model_error_leaves_task_usable(script: Script, sqlite_url: str, workspace: Path) -> None:
    """B16 (where the original fails, §3.11): a model error is reported (text and
    `metadata.error`) and the turn ends input-required, not `failed`; the same task continues."""
    async with running_server(script(ERR), sqlite_url, workspace) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            evs = await send(c, srv.url, legacy_message("hi", workspace=workspace))
            assert any("quota exceeded" in (e.get("metadata") or {}).get("error", "") for e in evs[1:-1])
            assert_turn_end(evs[-1])
            assert "quota exceeded" in evs[-1]["metadata"]["error"]
            assert all(e["status"]["state"] != "failed" for e in evs[1:])
            evs2 = await send(c, srv.url, legacy_message("retry", task_id=evs[0]["id"]))
            assert text_of(evs2) == "back"
            assert_turn_end(evs2[-1])
            assert "error" not in evs2[-1]["metadata"]


# `/memory add` below makes AGENTS.md first, so /init reads it before writing it, as its prompt says
INIT = [
    {"items": [{"tool_call": {"name": "read_file", "args": {"path": "AGENTS.md"}}}]},
    *call_then_text(write_call("AGENTS.md", "# Guide\n", "init-w"), "Wrote AGENTS.md."),
]


async def test_rest_commands(script: Script, sqlite_url: str, workspace: Path) -> None:
    """B16 REST mirrors (§1.4, §3.13): GET /listCommands in the original's shape with `init`
    listed; POST /executeCommand with the original's status codes and error bodies, `{name, data}`
    for plain commands, and `init` streaming as valid SSE (blank-line separated frames of JSON-RPC
    responses) whose permission request can be answered on its task; all behind the bearer token."""
    async with running_server(script(INIT), sqlite_url, workspace) as srv:
        base = srv.url.rstrip("/")
        async with httpx.AsyncClient(timeout=30) as c:
            for method, path in (("GET", "/listCommands"), ("POST", "/executeCommand"), ("POST", "/tasks")):
                r = await c.request(method, base + path, json={})
                assert r.status_code == 401
            r = await c.get(base + "/listCommands", headers=H)
            assert r.status_code == 200
            cmds = r.json()["commands"]
            names = [x["name"] for x in cmds]
            assert "init" in names and "memory" in names and "restore" in names
            for x in cmds:
                assert set(x) == {"name", "description", "arguments", "subCommands"}
            memory = next(x for x in cmds if x["name"] == "memory")
            assert {s["name"] for s in memory["subCommands"]} >= {"memory show", "memory add"}
            add = next(s for s in memory["subCommands"] if s["name"] == "memory add")
            assert add["arguments"] == [
                {"name": "text", "description": add["arguments"][0]["description"], "isRequired": True}
            ]

            ex = base + "/executeCommand"
            for body, code, err in (
                ({"command": 5}, 400, 'Invalid "command" field.'),
                ({"command": "memory show", "args": "x"}, 400, '"args" field must be an array.'),
                ({"command": "nope"}, 404, "Command not found: nope"),
            ):
                r = await c.post(ex, json=body, headers=H)
                assert (r.status_code, r.json()) == (code, {"error": err})
            r = await c.post(ex, json={"command": "memory add", "args": ["use", "tabs"]}, headers=H)
            assert r.status_code == 200 and r.json()["name"] == "memory add"
            r = await c.post(ex, json={"command": "memory show", "args": []}, headers=H)
            assert r.status_code == 200
            body = r.json()
            assert (
                body["name"] == "memory show" and isinstance(body["data"], str) and "use tabs" in body["data"]
            )
            r = await c.post(ex, json={"command": "restore list"}, headers=H)
            assert r.status_code == 200 and r.json()["name"] == "restore list"

            r = await c.post(ex, json={"command": "init", "args": []}, headers=H)
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
            raw = r.text
            assert raw.endswith("\n\n")
            frames = [f for f in raw.split("\n\n") if f]
            evs = []
            for f in frames:
                assert f.startswith("data: ") and "\n" not in f
                msg = json.loads(f[6:])
                assert msg["jsonrpc"] == "2.0" and "result" in msg
                evs.append(msg["result"])
            assert evs[0]["kind"] == "task" and msg["id"] == evs[0]["id"]
            asking = tool_calls(evs)[-1]
            assert asking["status"] == "awaiting_approval"
            assert asking["confirmationDetails"]["fileName"] == "AGENTS.md"
            assert_turn_end(evs[-1])
            ok = legacy_message(data=[{"callId": "init-w", "outcome": "proceed_once"}], task_id=evs[0]["id"])
            evs2 = await send(c, srv.url, ok)
            assert tool_calls(evs2)[-1]["status"] == "success"
            # commands run in the server's first workspace root, as the original's do in its workspace
            assert (workspace.parent / "AGENTS.md").read_text() == "# Guide\n"


async def test_rest_tasks(script: Script, sqlite_url: str, workspace: Path) -> None:
    """B16 REST mirrors: POST /tasks answers 201 with the id as a JSON string and creates a task
    that message/stream then runs in the dialect; GET /tasks/{id}/metadata and GET /tasks/metadata
    in the original's shape (404 `{"error": "Task not found"}`); `autoExecute`/`isTrusted` in the
    settings do not widen the approval mode beyond server policy."""
    async with running_server(script(WRITE), sqlite_url, workspace) as srv:
        base = srv.url.rstrip("/")
        async with httpx.AsyncClient(timeout=30) as c:
            r = await c.get(base + "/tasks/metadata", headers=H)
            assert r.status_code == 204
            st = {
                "kind": "agent-settings",
                "workspacePath": str(workspace),
                "autoExecute": True,
                "isTrusted": True,
            }
            r = await c.post(base + "/tasks", json={"contextId": "ctx-1", "agentSettings": st}, headers=H)
            assert r.status_code == 201
            tid = r.json()
            assert isinstance(tid, str) and tid
            r = await c.get(f"{base}/tasks/{tid}/metadata", headers=H)
            assert r.status_code == 200
            md = r.json()["metadata"]
            assert md["id"] == tid and md["contextId"] == "ctx-1" and md["taskState"] == "submitted"
            assert md["model"] and md["mcpServers"] == []
            tools = {t["name"]: t for t in md["availableTools"]}
            assert "write_file" in tools and set(tools["write_file"]) == {
                "name",
                "description",
                "parameterSchema",
            }
            r = await c.get(base + "/tasks/metadata", headers=H)
            assert r.status_code == 200 and [m["id"] for m in r.json()] == [tid]
            r = await c.get(base + "/tasks/nope/metadata", headers=H)
            assert (r.status_code, r.json()) == (404, {"error": "Task not found"})
            other = {"Authorization": "Bearer other"}
            assert (await c.get(f"{base}/tasks/{tid}/metadata", headers=other)).status_code == 401

            evs = await send(c, srv.url, legacy_message("write", task_id=tid))
            assert evs[0]["kind"] == "status-update" and evs[0]["status"]["state"] == "working"
            assert tool_calls(evs)[-1]["status"] == "awaiting_approval"  # autoExecute did not skip asking
            assert_turn_end(evs[-1])
            r = await c.post(
                base + "/executeCommand", json={"command": "stats", "contextId": "ctx-1"}, headers=H
            )
            assert "Approval mode: ask" in r.json()["data"]
            r = await c.get(f"{base}/tasks/{tid}/metadata", headers=H)
            assert r.json()["metadata"]["taskState"] == "input-required"


def test_dialect_choice() -> None:
    """B16: legacy settings always choose the dialect; other `coderAgent` metadata chooses it only
    for a client that did not activate the extension; RFC settings or activation choose the RFC."""
    from devagent.a2a.legacy import is_legacy_message

    settings = {"coderAgent": {"kind": "agent-settings", "workspacePath": "/w"}}
    other = {"coderAgent": {"kind": "something"}}
    rfc = {EXTENSION_URI: {"workspace_path": "/w"}}
    on = frozenset((EXTENSION_URI,))
    assert is_legacy_message(settings, None, frozenset())
    assert is_legacy_message(settings, None, on)
    assert is_legacy_message(None, settings, frozenset())  # request metadata is read too
    assert is_legacy_message(other, None, frozenset())
    assert not is_legacy_message(other, None, on)
    assert not is_legacy_message(rfc, None, frozenset())
    assert not is_legacy_message(None, None, frozenset())


def test_outcomes_map_onto_offered_options() -> None:
    """B16: each legacy outcome becomes the nearest option the core offered, never a wider one."""
    import pytest

    from devagent.a2a.extension import SettingsError
    from devagent.a2a.legacy import map_outcome

    plain = ["proceed_once", "proceed_always", "cancel"]
    mcp = ["proceed_once", "proceed_always_tool", "proceed_always_server", "cancel"]
    expect = {
        "proceed_once": ("proceed_once", "proceed_once"),
        "proceed_always": ("proceed_always", "proceed_always_tool"),
        "proceed_always_and_save": ("proceed_always", "proceed_always_tool"),
        "proceed_always_tool": ("proceed_always", "proceed_always_tool"),
        "proceed_always_server": ("proceed_always", "proceed_always_server"),
        "cancel": ("cancel", "cancel"),
    }
    for outcome, (for_plain, for_mcp) in expect.items():
        assert map_outcome(outcome, plain) == for_plain
        assert map_outcome(outcome, mcp) == for_mcp
    assert map_outcome("proceed_always", ["proceed_once", "cancel"]) == "proceed_once"
    with pytest.raises(SettingsError, match="unknown outcome"):
        map_outcome("yes_please", plain)


def test_tool_call_shapes_mcp_info_error() -> None:
    """B16 §3.7: `mcp` and `info` confirmation details; a failed call's response carries its
    message (`error.message`, `resultDisplay`, the functionResponse) and errorType, never `{}`."""
    from devagent.a2a.legacy import tool_call_json
    from devagent.agent.events import (
        ConfirmationRequest,
        GenericDetails,
        McpDetails,
        PermissionOption,
        ToolCall,
        ToolCallStatus,
        ToolError,
        ToolKind,
    )

    opts = [PermissionOption("proceed_once", "Allow once", ""), PermissionOption("cancel", "Cancel", "")]
    m = ToolCall(
        "m1",
        "docs__search",
        {"q": "x"},
        ToolKind.MCP,
        confirmation=ConfirmationRequest(opts, McpDetails("docs", "search")),
    )
    tc = tool_call_json(m)
    assert tc["status"] == "awaiting_approval"
    assert tc["confirmationDetails"] == {
        "type": "mcp",
        "title": "Confirm MCP Tool Execution",
        "serverName": "docs",
        "toolName": "search",
        "toolDisplayName": "search",
        "toolArgs": {"q": "x"},
    }
    g = ToolCall(
        "g1", "thing", {}, ToolKind.CLIENT, confirmation=ConfirmationRequest(opts, GenericDetails("Do it?"))
    )
    det = tool_call_json(g)["confirmationDetails"]
    assert det["type"] == "info" and det["prompt"] == "Do it?" and det["title"]
    failed = ToolCall(
        "e1",
        "read_file",
        {"path": "/etc"},
        ToolKind.READ,
        status=ToolCallStatus.FAILED,
        error=ToolError("path is outside the workspace", "path_outside_workspace"),
    )
    tc = tool_call_json(failed)
    assert tc["status"] == "error" and "confirmationDetails" not in tc
    r = tc["response"]
    assert r["error"] == {"message": "path is outside the workspace"}
    assert r["errorType"] == "path_outside_workspace"
    assert r["resultDisplay"] == "path is outside the workspace"
    assert r["responseParts"][0]["functionResponse"]["response"] == {"error": "path is outside the workspace"}
