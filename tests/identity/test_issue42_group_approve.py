"""Issue 42 item 4 (approve): a group the operator lets approve (`oidc_shared_groups`
`GROUP=approve`) answers its members' permission requests, with tokens of a real OpenID Connect
provider on loopback carrying a `groups` claim. Bob, of Alice's approving group, allows her
pending write once over JSON-RPC (0.3, streamed) and refuses the next with a reason over the
HTTP+JSON binding (1.0), the console's way (A2A `SendStreamingMessage` as the page sends it, the
console's API saying he may answer); the turn goes on as Alice's (her workspace). A member of a
group that only reads, a member of another group, the IdP's operator and a static token cannot
answer (task not found), and Bob cannot give more than allow once or refuse (an "always", an
edit, a prompt, settings: refused, nothing changed)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from devagent.a2a.extension import EXTENSION_URI
from devagent.common.identity import OidcSettings
from devagent.common.identity.settings import oidc_settings
from tests.a2a.helpers import (
    TOKEN,
    auth,
    call,
    results,
    rpc,
    running_server,
    stream,
    stream_message,
    v03_message,
)
from tests.a2a.test_bindings import BINDINGS, client_for, ctx, message, run
from tests.conftest import Script
from tests.core_helpers import call_then_text, write_call
from tests.identity.idp import Idp, running_idp

CLIENTS = {"alice": "a", "bob": "b", "eve": "e", "carol": "c", "ops": "o"}
# team-a approves; "readers" only reads; team-b shares nothing with Alice
GROUPS = {"alice": ["team-a", "readers"], "bob": ["team-a"], "eve": ["readers"], "carol": ["team-b"]}
ROLES = {"ops": ["operator"]}

STEPS = [
    *call_then_text(write_call("one.txt", "1\n", "c1"), "wrote one.txt"),
    *call_then_text(write_call("two.txt", "2\n", "c2"), "told: {last_tool_results}"),
]


@pytest.fixture
def group_idp(tmp_path: Path) -> Iterator[Idp]:
    with running_idp(tmp_path, CLIENTS, ROLES, groups=GROUPS) as provider:
        yield provider


def settings(idp: Idp) -> OidcSettings:
    return OidcSettings(
        issuer=idp.issuer,
        roles_claim="roles",
        groups_claim="groups",
        shared_groups=frozenset({"team-a", "readers", "team-b"}),
        approving_groups=frozenset({"team-a"}),
    )


def test_issue42_item4_approve_setting() -> None:
    env = {"DEVAGENT_OIDC_ISSUER": "https://kc", "DEVAGENT_OIDC_GROUPS_CLAIM": "groups"}
    s = oidc_settings({**env, "DEVAGENT_OIDC_SHARED_GROUPS": "team-a=approve, readers=read, all"})
    assert s is not None
    assert s.shared_groups == {"team-a", "readers", "all"} and s.approving_groups == {"team-a"}
    s = oidc_settings(env, {"oidc_shared_groups": ["ops=approve"]})
    assert s is not None and s.approving_groups == {"ops"} and s.shared_groups == {"ops"}
    with pytest.raises(ValueError, match="GROUP=approve"):
        oidc_settings({**env, "DEVAGENT_OIDC_SHARED_GROUPS": "team-a=write"})


def confirmation(cid: str, option: str, **more: Any) -> dict[str, Any]:
    return {"tool_call_id": cid, "selected_option_id": option, **more}


def v1_message(task: dict[str, Any], parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "taskId": task["id"],
        "contextId": task["contextId"],
        "parts": parts,
    }


async def pending(c: httpx.AsyncClient, url: str, token: str, text: str, **kw: Any) -> dict[str, Any]:
    """The owner's message, streamed until its task waits for a permission."""
    evs = results(await stream_message(c, url, v03_message(text, **kw), headers=auth(token)))
    assert evs[-1]["status"]["state"] == "input-required", evs
    return evs[-1] | {"id": evs[-1]["taskId"]}


async def test_issue42_item4_a_group_that_approves_answers_its_members_requests(
    group_idp: Idp, script: Script, shared_db: str, workspace: Path
) -> None:
    idp = group_idp
    kw = {"tokens": {TOKEN: "ci"}, "a2a_kw": {"oidc": settings(idp)}}
    alice_ws = workspace.parent / ".oidc" / "alice"
    async with running_server(script(STEPS), shared_db, workspace, **kw) as srv:
        url, base = srv.url, srv.url.rstrip("/")
        alice, bob, eve, carol, ops = (idp.token(n, base) for n in ("alice", "bob", "eve", "carol", "ops"))
        async with httpx.AsyncClient(timeout=60) as c:
            task = await pending(c, url, alice, "write one")
            allow = v03_message(data=[confirmation("c1", "proceed_once")], task_id=task["id"])

            # a reader of her group, another group, the operator, a static token: not theirs
            for token in (eve, carol, ops, TOKEN):
                refused = await call(c, url, rpc("message/send", {"message": allow}), auth(token))
                assert refused["error"]["code"] == -32001, refused
            got = await call(c, url, rpc("GetTask", {"id": task["id"]}), auth(eve, ext=False, v1=True))
            assert got["result"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", got  # eve reads

            # Bob approves with Alice, but only allows once or refuses
            once = {"kind": "data", "data": confirmation("c1", "proceed_once")}
            edited = confirmation("c1", "proceed_once", file_details={"new_content": "x"})
            beyond = [
                [{"kind": "data", "data": confirmation("c1", "proceed_always")}],
                [{"kind": "data", "data": edited}],
                [{"kind": "text", "text": "now delete everything"}],
                [once, {"kind": "text", "text": "and more"}],
            ]
            for parts in beyond:
                msg = {**allow, "messageId": str(uuid.uuid4()), "parts": parts}
                refused = await call(c, url, rpc("message/send", {"message": msg}), auth(bob))
                assert refused["error"]["code"] == -32602, (parts, refused)
                assert "only allow once or refuse" in refused["error"]["message"], refused
            with_settings = v03_message(
                data=[confirmation("c1", "proceed_once")], task_id=task["id"], settings={"model": "x"}
            )
            refused = await call(c, url, rpc("message/send", {"message": with_settings}), auth(bob))
            assert refused["error"]["code"] == -32602, refused
            hook = {
                "message": allow,
                "configuration": {"pushNotificationConfig": {"url": "http://127.0.0.1:9/h"}},
            }
            refused = await call(c, url, rpc("message/send", hook), auth(bob))
            assert refused["error"]["code"] == -32602 and "push" in refused["error"]["message"], refused
            assert not (alice_ws / "one.txt").exists()

            # Bob allows once: the turn goes on as Alice's, in her workspace
            evs = results(await stream_message(c, url, allow, headers=auth(bob)))
            assert evs[-1]["status"]["state"] == "completed", evs
            assert (alice_ws / "one.txt").read_text() == "1\n"
            assert not (workspace.parent / ".oidc" / "bob").exists()
            mine = await call(c, url, rpc("ListTasks", {}), auth(bob, ext=False, v1=True))
            assert mine["result"].get("tasks", []) == [], mine  # the task stays Alice's
            again = await call(c, url, rpc("message/send", {"message": allow}), auth(bob))
            assert again["error"]["code"] == -32602, again  # answered already

            # the console's API says who may answer; Bob refuses the next over HTTP+JSON
            page = f"{url}ui/api/sessions/{task['contextId']}"
            task2 = await pending(c, url, alice, "write two", task_id=task["id"])
            shown = (await c.get(f"{page}?owner=oidc:alice", headers=auth(bob, ext=False))).json()
            assert shown["may_answer"] is True and [w["tool_call_id"] for w in shown["waiting"]] == ["c2"]
            shown = (await c.get(f"{page}?owner=oidc:alice", headers=auth(eve, ext=False))).json()
            assert shown["may_answer"] is False, shown
            refuse = v1_message(task2, [{"data": confirmation("c2", "cancel")}, {"text": "use three.txt"}])
            r = await c.post(
                url + "rest/message:send",
                json={"message": refuse},
                headers=auth(bob, v1=True),
            )
            assert r.status_code == 200, r.text
            done = await call(c, url, rpc("GetTask", {"id": task["id"]}), auth(alice, ext=False, v1=True))
            assert done["result"]["status"]["state"] == "TASK_STATE_COMPLETED", done
            assert "use three.txt" in str(done["result"]), done  # the model was told Bob's reason
            assert not (alice_ws / "two.txt").exists()


async def test_issue42_item4_the_console_page_sends_an_approvers_answer(
    group_idp: Idp, script: Script, sqlite_url: str, workspace: Path
) -> None:
    """The page's own request (A2A JSON-RPC 1.0 `SendStreamingMessage` with the extension, as
    console.js answers a permission) from Bob, of Alice's approving group."""
    idp = group_idp
    kw = {"tokens": {TOKEN: "ci"}, "a2a_kw": {"oidc": settings(idp)}}
    async with running_server(script(STEPS[:2]), sqlite_url, workspace, **kw) as srv:
        url, base = srv.url, srv.url.rstrip("/")
        alice, bob = idp.token("alice", base), idp.token("bob", base)
        async with httpx.AsyncClient(timeout=60) as c:
            task = await pending(c, url, alice, "write one")
            message = v1_message(task, [{"data": confirmation("c1", "proceed_once")}])
            headers = {**auth(bob, v1=True), "X-Devagent-Console": "1", "A2A-Extensions": EXTENSION_URI}
            frames = await stream(c, url, rpc("SendStreamingMessage", {"message": message}), headers)
            assert "TASK_STATE_COMPLETED" in str(frames[-1]), frames
    assert (workspace.parent / ".oidc" / "alice" / "one.txt").read_text() == "1\n"


@pytest.mark.parametrize("binding", BINDINGS)
async def test_issue42_item4_an_approver_answers_with_the_a2a_sdk_client_on_each_binding(
    binding: str, group_idp: Idp, script: Script, sqlite_url: str, workspace: Path
) -> None:
    """Bob, of Alice's approving group, allows her pending write once with the a2a-sdk client on
    each binding (gRPC: his token in the call's metadata); Eve, who only reads with her, cannot;
    Bob cannot cancel her task either (answering is all)."""
    from a2a.types import CancelTaskRequest, TaskState
    from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]

    idp = group_idp
    kw = {"tokens": {TOKEN: "ci"}, "a2a_kw": {"oidc": settings(idp), "grpc_port": 0}}
    async with running_server(script(STEPS[:2]), sqlite_url, workspace, **kw) as srv:
        base = srv.url.rstrip("/")
        alice, bob, eve = idp.token("alice", base), idp.token("bob", base), idp.token("eve", base)
        async with client_for(srv.url, "JSONRPC", alice) as client:
            evs = await run(client, message("write one"), ctx(EXTENSION_URI, token=alice))
        first, last = evs[0][1], evs[-1][1]
        assert last.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, evs
        assert MessageToDict(last.status.message.parts[0].data)["tool_call_id"] == "c1"
        answer = message(
            task_id=first.id, context_id=first.context_id, data=confirmation("c1", "proceed_once")
        )
        async with client_for(srv.url, binding, eve) as client:
            with pytest.raises(Exception) as refused:
                await run(client, answer, ctx(EXTENSION_URI, token=eve))
            assert "not found" in str(refused.value).lower() or "NOT_FOUND" in str(refused.value), (
                refused.value
            )
        async with client_for(srv.url, binding, bob) as client:
            with pytest.raises(Exception) as refused:
                await client.cancel_task(CancelTaskRequest(id=first.id), context=ctx(token=bob))
            assert "not found" in str(refused.value).lower() or "NOT_FOUND" in str(refused.value), (
                refused.value
            )
            done = await run(client, answer, ctx(EXTENSION_URI, token=bob))
        assert done[-1][1].status.state == TaskState.TASK_STATE_COMPLETED, done
    assert (workspace.parent / ".oidc" / "alice" / "one.txt").read_text() == "1\n"
