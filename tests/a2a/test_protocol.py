"""A2A protocol behaviour over real HTTP: card, auth, both versions, B14, settings."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import pytest

from devagent.a2a.extension import EXTENSION_URI
from devagent.a2a.settings import A2ASettings
from tests.a2a.helpers import (
    TOKEN,
    auth,
    call,
    dev_meta,
    parts_of,
    results,
    rpc,
    running_server,
    stream,
    stream_message,
    v03_message,
)
from tests.conftest import Script
from tests.core_helpers import call_then_text, write_call

WRITE = [
    *call_then_text(write_call("a.txt", "A\n", "w1"), "done"),
    {"items": [{"text": "again: {last_user}"}]},
]
TEXT = [{"items": [{"text": "hello there"}]}, {"items": [{"text": "second: {last_user}"}]}]


async def test_card_on_both_paths_public(script: Script, sqlite_url: str, workspace: Path) -> None:
    """A1 A5 B1: the card on both well-known paths, without credentials, declaring the extension."""
    from a2a.server.request_handlers.response_helpers import agent_card_to_dict

    from devagent.a2a.card import build_card, card_json

    async with running_server(script(TEXT), sqlite_url, workspace) as srv:
        async with httpx.AsyncClient() as c:
            for path in (".well-known/agent-card.json", ".well-known/agent.json"):
                card = (await c.get(srv.url + path)).json()
                assert card["capabilities"]["streaming"] is True
                assert card["capabilities"]["pushNotifications"] is True
                ext = card["capabilities"]["extensions"][0]
                assert ext["uri"] == EXTENSION_URI and "required" in ext and ext["params"]["version"]
                assert card["protocolVersion"] == "0.3" and card["url"] == srv.url
                assert {i["protocolVersion"] for i in card["supportedInterfaces"]} == {"0.3", "1.0"}
                assert card["securitySchemes"]["bearer"]["scheme"] == "bearer"
                assert card["skills"]
    s = A2ASettings(port=1234)
    assert agent_card_to_dict(build_card(s, "1.0.0")) == card_json(s, "1.0.0")


async def test_auth_refusals(script: Script, sqlite_url: str, workspace: Path) -> None:
    """A5: no token and a wrong token are refused on every route but the card; owners are separate."""
    async with running_server(
        script(TEXT), sqlite_url, workspace, tokens={TOKEN: "alice", "bob-token": "bob"}
    ) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            body = rpc("message/send", {"message": v03_message("hi")})
            r = await c.post(srv.url, json=body)
            assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
            assert r.json()["error"]["message"].startswith("authentication required")
            r = await c.post(srv.url, json=body, headers={"Authorization": "Bearer nope"})
            assert r.status_code == 401
            assert r.json()["error"]["message"].startswith("invalid token")  # not "required"
            r = await c.post(srv.url, json=body, headers={"Authorization": f"Basic {TOKEN}"})
            assert r.status_code == 401
            r = await c.post(srv.url, json=rpc("commands/get", {}))
            assert r.status_code == 401
            # every other route too: /healthz and the legacy REST routes (B16)
            for method, path in [
                ("GET", "/healthz"),
                ("GET", "/listCommands"),
                ("POST", "/executeCommand"),
                ("POST", "/tasks"),
                ("GET", "/tasks/metadata"),
                ("GET", "/tasks/x/metadata"),
            ]:
                r = await c.request(method, srv.url.rstrip("/") + path, json={})
                assert r.status_code == 401, (method, path, r.status_code)
            r = await c.get(srv.url.rstrip("/") + "/healthz", headers=auth())
            assert r.status_code == 200
            for path in ("/.well-known/agent-card.json", "/.well-known/agent.json"):
                assert (await c.get(srv.url.rstrip("/") + path)).status_code == 200, path
            res = await call(c, srv.url, body, auth())
            task = res["result"]
            assert task["status"]["state"] == "completed"
            # bob cannot see alice's task
            got = await call(c, srv.url, rpc("tasks/get", {"id": task["id"]}), auth("bob-token"))
            assert got["error"]["code"] == -32001
            got = await call(c, srv.url, rpc("tasks/get", {"id": task["id"]}), auth())
            assert got["result"]["id"] == task["id"]


def test_refuses_public_bind_without_token() -> None:
    """A5: beyond loopback without credentials the server refuses to start."""
    with pytest.raises(ValueError, match="token"):
        A2ASettings(host="0.0.0.0").check_bind()
    A2ASettings(host="127.0.0.1").check_bind()
    A2ASettings(host="0.0.0.0", tokens={"t": "u"}).check_bind()


async def test_v1_appendix_flow(script: Script, sqlite_url: str, workspace: Path) -> None:
    """A2 B4-B10: the appendix with the A2A 1.0 method names and shapes on the same endpoint."""
    async with running_server(script(WRITE), sqlite_url, workspace) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            msg = {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"text": "write a"}],
                "metadata": {EXTENSION_URI: {"workspace_path": str(workspace)}},
            }
            evs = results(
                await stream(c, srv.url, rpc("SendStreamingMessage", {"message": msg}), auth(v1=True))
            )
            assert evs[0]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
            task_id = evs[0]["task"]["id"]
            ups = [e["statusUpdate"] for e in evs[1:]]
            assert ups[0]["status"]["state"] == "TASK_STATE_WORKING"
            assert dev_meta(ups[0])["kind"] == "STATE_CHANGE"
            pending = [u for u in ups if dev_meta(u).get("kind") == "TOOL_CALL_UPDATE"][-1]
            tc = parts_of(pending)[0]["data"]
            assert (
                tc["status"] == "PENDING"
                and tc["confirmation_request"]["file_edit_details"]["new_content"] == "A\n"
            )
            assert ups[-1]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
            conf = {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "taskId": task_id,
                "parts": [{"data": {"tool_call_id": "w1", "selected_option_id": "proceed_once"}}],
            }
            evs = results(
                await stream(c, srv.url, rpc("SendStreamingMessage", {"message": conf}), auth(v1=True))
            )
            ups = [e["statusUpdate"] for e in evs if "statusUpdate" in e]
            assert ups[-1]["status"]["state"] == "TASK_STATE_COMPLETED"
            # the reply as an artifact, before the final event
            assert any("artifactUpdate" in e for e in evs[:-1])
            assert (workspace / "a.txt").read_text() == "A\n"
            got = await call(c, srv.url, rpc("GetTask", {"id": task_id}), auth(v1=True))
            assert got["result"]["status"]["state"] == "TASK_STATE_COMPLETED"
            assert len(got["result"]["history"]) >= 6  # A6: the whole history


async def test_b14_plain_client_gets_32004_and_continues_in_context(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """B14 A3: without the extension a finished task refuses (-32004); a new task in the same
    contextId continues the conversation (one session per contextId)."""
    async with running_server(script(TEXT), sqlite_url, workspace) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            h = auth(ext=False)
            t1 = (await call(c, srv.url, rpc("message/send", {"message": v03_message("one")}), h))["result"]
            assert t1["status"]["state"] == "completed"
            again = v03_message("two", task_id=t1["id"], context_id=t1["contextId"])
            res = await call(c, srv.url, rpc("message/send", {"message": again}), h)
            assert res["error"]["code"] == -32004
            res = await call(
                c,
                srv.url,
                rpc("message/send", {"message": v03_message("two", context_id=t1["contextId"])}),
                h,
            )
            t2 = res["result"]
            assert t2["id"] != t1["id"] and t2["contextId"] == t1["contextId"]
            assert t2["status"]["state"] == "completed"
            # the answer is where A2A puts results, once (issue 21 item 2)
            answer = [p["text"] for a in t2["artifacts"] for p in a["parts"] if "text" in p]
            assert answer == ["second: two"], t2


async def test_settings_validation(script: Script, sqlite_url: str, workspace: Path, tmp_path: Path) -> None:
    """B3: workspace_path must be absolute and inside the allowed roots; approval mode only
    within server policy (G3: nothing more permissive than the server's default unless the operator
    lists it; this server lists auto-edit)."""
    outside = tmp_path.parent / f"outside-{uuid.uuid4().hex[:6]}"
    outside.mkdir()
    async with running_server(
        script(WRITE), sqlite_url, workspace, core_kw={"allowed_approval_modes": ("auto-edit",)}
    ) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            for bad in ("relative/path", str(outside), str(workspace / "missing")):
                m = v03_message("hi", settings={"workspace_path": bad})
                res = await call(c, srv.url, rpc("message/send", {"message": m}), auth())
                assert res["error"]["code"] == -32602, (bad, res)
            link = workspace / "escape"
            link.symlink_to(outside)
            m = v03_message("hi", settings={"workspace_path": str(link)})
            res = await call(c, srv.url, rpc("message/send", {"message": m}), auth())
            assert res["error"]["code"] == -32602
            # yolo is not allowed by default: the write still asks
            m = v03_message("w", settings={"workspace_path": str(workspace), "approval_mode": "yolo"})
            res = await call(c, srv.url, rpc("message/send", {"message": m}), auth())
            assert res["result"]["status"]["state"] == "input-required"
            # auto-edit is listed by the operator: the write runs without asking
            m = v03_message("w", settings={"workspace_path": str(workspace), "approval_mode": "auto-edit"})
            res = await call(c, srv.url, rpc("message/send", {"message": m}), auth())
            assert res["result"]["status"]["state"] == "completed", res
            assert (workspace / "a.txt").read_text() == "A\n"


async def test_bad_confirmations(script: Script, sqlite_url: str, workspace: Path) -> None:
    """B10: an unknown tool_call_id is refused with -32602 and the task keeps waiting."""
    async with running_server(script(WRITE), sqlite_url, workspace) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            m = v03_message("w", settings={"workspace_path": str(workspace)})
            t = (await call(c, srv.url, rpc("message/send", {"message": m}), auth()))["result"]
            bad = v03_message(
                data=[{"tool_call_id": "nope", "selected_option_id": "proceed_once"}], task_id=t["id"]
            )
            frames = await stream_message(c, srv.url, bad)
            assert frames[0]["error"]["code"] == -32602
            got = await call(c, srv.url, rpc("tasks/get", {"id": t["id"]}), auth())
            assert got["result"]["status"]["state"] == "input-required"
            # a taskId-only follow-up keeps the task's contextId (a2a-python #1206)
            ok = v03_message(
                data=[{"tool_call_id": "w1", "selected_option_id": "proceed_once"}], task_id=t["id"]
            )
            evs = results(await stream_message(c, srv.url, ok))
            assert all(e["contextId"] == t["contextId"] for e in evs)
            assert evs[-1]["status"]["state"] == "completed"


async def test_v03_error_shapes(script: Script, sqlite_url: str, workspace: Path) -> None:
    """A2: v0.3 invalid params answer -32602; unknown methods -32601; a v0.3 delete has a result."""
    async with running_server(script(TEXT), sqlite_url, workspace) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            res = await call(c, srv.url, rpc("message/send", {"message": {"nope": 1}}), auth())
            assert res["error"]["code"] == -32602
            res = await call(c, srv.url, rpc("nope/unknown", {}), auth())
            assert res["error"]["code"] == -32601
            t = (await call(c, srv.url, rpc("message/send", {"message": v03_message("x")}), auth()))["result"]
            cfg = {
                "taskId": t["id"],
                "pushNotificationConfig": {"url": "https://example.com/hook", "token": "tk"},
            }
            res = await call(c, srv.url, rpc("tasks/pushNotificationConfig/set", cfg), auth())
            assert res["result"]["pushNotificationConfig"]["url"] == "https://example.com/hook", res
            res = await call(c, srv.url, rpc("tasks/pushNotificationConfig/get", {"id": t["id"]}), auth())
            assert res["result"]["pushNotificationConfig"]["token"] == "tk", res
            cid = res["result"]["pushNotificationConfig"]["id"]
            d = {"id": t["id"], "pushNotificationConfigId": cid}
            r = await c.post(srv.url, json=rpc("tasks/pushNotificationConfig/delete", d), headers=auth())
            assert json.loads(r.content) == {"jsonrpc": "2.0", "id": 1, "result": None}


async def test_extended_card_and_long_ids(script: Script, sqlite_url: str, workspace: Path) -> None:
    """A2: the authenticated extended card (v0.3 and 1.0); ids the task table cannot hold are
    refused with -32602 rather than a database error."""
    async with running_server(script(TEXT), sqlite_url, workspace) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            r = await c.post(srv.url, json=rpc("agent/getAuthenticatedExtendedCard", {}), headers=auth())
            assert r.headers["x-a2a-extensions"] == EXTENSION_URI  # activation echo (B1)
            r = await c.post(
                srv.url, json=rpc("agent/getAuthenticatedExtendedCard", {}), headers=auth(ext=False)
            )
            assert "x-a2a-extensions" not in r.headers
            res = await call(c, srv.url, rpc("agent/getAuthenticatedExtendedCard", {}), auth())
            assert res["result"]["capabilities"]["extensions"][0]["uri"] == EXTENSION_URI
            res = await call(c, srv.url, rpc("GetExtendedAgentCard", {}), auth(v1=True))
            assert res["result"]["name"] == "devagent"
            m = v03_message("hi", context_id="c" * 68)
            res = await call(c, srv.url, rpc("message/send", {"message": m}), auth())
            assert res["error"]["code"] == -32602 and "36" in res["error"]["message"]
