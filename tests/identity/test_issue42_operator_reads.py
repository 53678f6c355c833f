"""Issue 42 item 4: the IdP's operator role over A2A itself, with real tokens of a real OpenID
Connect provider on loopback, over JSON-RPC (1.0 and 0.3): an operator reads another identity's
task (`GetTask` / `tasks/get`) and lists another identity's tasks (`ListTasks` naming it in
`tenant`); a member's token reads neither, a static token neither; the operator may not act on
the task (cancel stays the owner's)."""

from __future__ import annotations

from pathlib import Path

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
    (gRPC carries the role in the call's metadata token too) and lists it where the binding
    carries `tenant` in the request (JSON-RPC, gRPC; HTTP+JSON puts it in the path, which devagent
    does not route); Bob's token reads it on none."""
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
            if binding != "HTTP+JSON":
                page = await client.list_tasks(ListTasksRequest(tenant="oidc:alice"), context=ctx(token=ops))
                assert [t.id for t in page.tasks] == [task_id], page
        async with client_for(srv.url, binding, bob) as client:
            with pytest.raises(Exception) as refused:
                await client.get_task(GetTaskRequest(id=task_id), context=ctx(token=bob))
            said = str(refused.value)
            assert "not found" in said.lower() or "NOT_FOUND" in said, said
            if binding != "HTTP+JSON":
                with pytest.raises(Exception) as refused:
                    await client.list_tasks(ListTasksRequest(tenant="oidc:alice"), context=ctx(token=bob))
                assert "operator" in str(refused.value), refused.value
