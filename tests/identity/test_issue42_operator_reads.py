"""Issue 42 item 4: the IdP's operator role over A2A itself, with real tokens of a real OpenID
Connect provider on loopback, over JSON-RPC (1.0 and 0.3): an operator reads another identity's
task (`GetTask` / `tasks/get`) and lists another identity's tasks (`ListTasks` naming it in
`tenant`); a member's token reads neither, a static token neither; the operator may not act on
the task (cancel stays the owner's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types import GetTaskRequest, ListTasksRequest, TaskState

from tests.a2a.helpers import TOKEN, auth, call, rpc, running_server, v03_message
from tests.a2a.test_bindings import BINDINGS, client_for, ctx, message, run
from tests.conftest import Script
from tests.identity.idp import Idp
from tests.identity.test_issue42_doors import server_kw


def v1(token: str) -> dict[str, str]:
    return auth(token, ext=False, v1=True)


async def test_issue42_item4_operator_reads_another_identitys_task_over_jsonrpc(
    idp: Idp, script: Script, sqlite_url: str, workspace: Path
) -> None:
    steps = [[{"text": "alice's answer"}]]
    async with running_server(script(steps), sqlite_url, workspace, **server_kw(idp)) as srv:
        base = srv.url.rstrip("/")
        alice, bob, ops = (idp.token(c, base) for c in ("alice", "bob", "ops"))
        url = srv.url
        async with httpx.AsyncClient(timeout=60) as c:
            sent = await call(
                c, url, rpc("message/send", {"message": v03_message("hi")}), auth(alice, ext=False)
            )
            assert sent["result"]["status"]["state"] == "completed", sent
            task_id, context_id = sent["result"]["id"], sent["result"]["contextId"]

            # the operator reads it, on 1.0 and on 0.3, as its owner reads it
            got = await call(c, url, rpc("GetTask", {"id": task_id}), v1(ops))
            assert got["result"]["id"] == task_id, got
            assert got["result"]["status"]["state"] == "TASK_STATE_COMPLETED", got
            assert "alice's answer" in str(got["result"]), got
            own = await call(c, url, rpc("GetTask", {"id": task_id}), v1(alice))
            assert own["result"]["status"] == got["result"]["status"], (own, got)
            got03 = await call(c, url, rpc("tasks/get", {"id": task_id}), auth(ops, ext=False))
            assert got03["result"]["status"]["state"] == "completed", got03

            # a member of the same IdP, and a static token, do not
            for token in (bob, TOKEN):
                refused = await call(c, url, rpc("GetTask", {"id": task_id}), v1(token))
                assert refused["error"]["code"] == -32001, refused
                refused03 = await call(c, url, rpc("tasks/get", {"id": task_id}), auth(token, ext=False))
                assert refused03["error"]["code"] == -32001, refused03

            # listing: the operator names the identity; a member may not
            listed = await call(c, url, rpc("ListTasks", {"tenant": "oidc:alice"}), v1(ops))
            assert [t["id"] for t in listed["result"]["tasks"]] == [task_id], listed
            assert listed["result"]["tasks"][0]["contextId"] == context_id
            mine = await call(c, url, rpc("ListTasks", {}), v1(ops))
            assert mine["result"].get("tasks", []) == [], mine  # the operator's own: none
            nobody = await call(c, url, rpc("ListTasks", {"tenant": "oidc:nobody"}), v1(ops))
            assert nobody["result"].get("tasks", []) == [], nobody
            for token in (bob, TOKEN):
                refused = await call(c, url, rpc("ListTasks", {"tenant": "oidc:alice"}), v1(token))
                assert refused["error"]["code"] == -32602, refused
                assert "operator" in refused["error"]["message"], refused
            bobs = await call(c, url, rpc("ListTasks", {}), v1(bob))
            assert bobs["result"].get("tasks", []) == [], bobs
            alices = await call(c, url, rpc("ListTasks", {"tenant": "oidc:alice"}), v1(alice))
            assert [t["id"] for t in alices["result"]["tasks"]] == [task_id], alices

            # reading is all: cancelling another's task stays refused as unknown
            cancel = await call(c, url, rpc("CancelTask", {"id": task_id}), v1(ops))
            assert cancel["error"]["code"] == -32001, cancel
            unknown = await call(c, url, rpc("GetTask", {"id": "no-such-task"}), v1(ops))
            assert unknown["error"]["code"] == -32001, unknown


@pytest.mark.parametrize("binding", BINDINGS)
async def test_issue42_item4_operator_reads_on_each_binding_with_the_a2a_sdk_client(
    binding: str, idp: Idp, script: Script, sqlite_url: str, workspace: Path
) -> None:
    """The a2a-sdk client with the operator's IdP token reads Alice's task on every binding
    (gRPC carries the role in the call's metadata token too) and lists it naming her in `tenant`
    (HTTP+JSON carries it in the path, `GET /rest/{tenant}/tasks`); Bob's token reads it on none
    and may not list it."""
    steps = [[{"text": "alice's answer"}]]
    async with running_server(script(steps), sqlite_url, workspace, **server_kw(idp)) as srv:
        base = srv.url.rstrip("/")
        alice, bob, ops = (idp.token(c, base) for c in ("alice", "bob", "ops"))
        async with client_for(srv.url, "JSONRPC", alice) as client:
            evs = await run(client, message("hi"), ctx(token=alice))
        task_id = evs[0][1].id
        async with client_for(srv.url, binding, ops) as client:
            task = await client.get_task(GetTaskRequest(id=task_id), context=ctx(token=ops))
            assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
            page = await client.list_tasks(ListTasksRequest(tenant="oidc:alice"), context=ctx(token=ops))
            assert [t.id for t in page.tasks] == [task_id], page
            own = await client.list_tasks(ListTasksRequest(), context=ctx(token=ops))
            assert list(own.tasks) == [], own
        async with client_for(srv.url, binding, bob) as client:
            with pytest.raises(Exception) as refused:
                await client.get_task(GetTaskRequest(id=task_id), context=ctx(token=bob))
            said = str(refused.value)
            assert "not found" in said.lower() or "NOT_FOUND" in said, said
            with pytest.raises(Exception) as refused:
                await client.list_tasks(ListTasksRequest(tenant="oidc:alice"), context=ctx(token=bob))
            assert "operator" in str(refused.value), refused.value
            mine = await client.list_tasks(ListTasksRequest(), context=ctx(token=bob))
            assert list(mine.tasks) == [], mine  # Alice's never listed as Bob's


async def test_issue42_item2_list_tasks_over_http_json_is_scoped_as_over_jsonrpc(
    idp: Idp, script: Script, sqlite_url: str, workspace: Path
) -> None:
    """`GET /rest/tasks` and `GET /rest/{tenant}/tasks` (and `?tenant=`) of the HTTP+JSON binding,
    raw: each caller's own tasks; another identity's only for the operator, refused to a member
    (INVALID_ARGUMENT) and to a static token; the IdP's token of a member never lists a static
    token's tasks nor the reverse."""
    steps = [[{"text": "alice's answer"}], [{"text": "ci's answer"}]]
    async with running_server(script(steps), sqlite_url, workspace, **server_kw(idp)) as srv:
        base = srv.url.rstrip("/")
        alice, bob, ops = (idp.token(c, base) for c in ("alice", "bob", "ops"))
        async with httpx.AsyncClient(timeout=60) as c:
            ids = {}
            for who, token in (("alice", alice), ("ci", TOKEN)):
                sent = await call(
                    c, srv.url, rpc("message/send", {"message": v03_message("hi")}), auth(token, ext=False)
                )
                ids[who] = sent["result"]["id"]

            async def listed(token: str, path: str) -> tuple[int, Any]:
                r = await c.get(srv.url + "rest/" + path, headers=v1(token))
                return r.status_code, r.json()

            def task_ids(answer: tuple[int, Any]) -> list[str]:
                assert answer[0] == 200, answer
                return [t["id"] for t in answer[1].get("tasks", [])]

            assert task_ids(await listed(alice, "tasks")) == [ids["alice"]]
            assert task_ids(await listed(TOKEN, "tasks")) == [ids["ci"]]
            assert task_ids(await listed(bob, "tasks")) == []
            assert task_ids(await listed(ops, "tasks")) == []  # the operator's own: none
            assert task_ids(await listed(ops, "oidc:alice/tasks")) == [ids["alice"]]
            assert task_ids(await listed(ops, "tasks?tenant=oidc:alice")) == [ids["alice"]]
            assert task_ids(await listed(ops, "ci/tasks")) == [ids["ci"]]
            assert task_ids(await listed(alice, "oidc:alice/tasks")) == [ids["alice"]]  # herself
            for token, path in (
                (bob, "oidc:alice/tasks"),
                (bob, "tasks?tenant=oidc:alice"),
                (TOKEN, "oidc:alice/tasks"),
                (alice, "ci/tasks"),
            ):
                status, body = await listed(token, path)
                assert status == 400 and body["error"]["status"] == "INVALID_ARGUMENT", (path, body)
                assert "operator" in body["error"]["message"], body
            # the binding's other routes are as before (a task's own route is not a tenant's)
            r = await c.get(srv.url + f"rest/tasks/{ids['alice']}", headers=v1(alice))
            assert r.status_code == 200 and r.json()["id"] == ids["alice"], r.text
