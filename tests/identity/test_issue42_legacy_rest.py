"""Issue 42 item 4 on the legacy REST dialect (Gemini CLI's a2a-server routes: `POST /tasks`,
`GET /tasks/{id}/metadata`, `GET /tasks/metadata`), with tokens of a real OpenID Connect
provider on loopback: the operator reads another identity's task and lists its tasks
(`?tenant=`), as over A2A; a member and a static token read nothing of Alice's (404 as an unknown
task) and naming her in `tenant` is refused 403 in the dialect's error shape."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.a2a.helpers import TOKEN, running_server
from tests.conftest import Script
from tests.identity.idp import Idp
from tests.identity.test_issue42_doors import server_kw


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_issue42_item4_operator_reads_on_the_legacy_rest_routes(
    idp: Idp, script: Script, sqlite_url: str, workspace: Path
) -> None:
    async with running_server(script([]), sqlite_url, workspace, **server_kw(idp)) as srv:
        base = srv.url.rstrip("/")
        alice, bob, ops = (idp.token(c, base) for c in ("alice", "bob", "ops"))
        async with httpx.AsyncClient(timeout=60) as c:
            r = await c.post(base + "/tasks", json={"contextId": "ctx-a"}, headers=bearer(alice))
            assert r.status_code == 201, r.text
            task_id = r.json()
            r = await c.post(base + "/tasks", json={"contextId": "ctx-ci"}, headers=bearer(TOKEN))
            ci_task = r.json()

            # the operator reads Alice's task and lists her tasks, as she does
            own = await c.get(f"{base}/tasks/{task_id}/metadata", headers=bearer(alice))
            read = await c.get(f"{base}/tasks/{task_id}/metadata", headers=bearer(ops))
            assert read.status_code == 200 and read.json() == own.json(), read.text
            assert read.json()["metadata"]["contextId"] == "ctx-a"
            listed = await c.get(
                f"{base}/tasks/metadata", params={"tenant": "oidc:alice"}, headers=bearer(ops)
            )
            assert listed.status_code == 200 and [m["id"] for m in listed.json()] == [task_id], listed.text
            listed = await c.get(f"{base}/tasks/metadata", params={"tenant": "ci"}, headers=bearer(ops))
            assert [m["id"] for m in listed.json()] == [ci_task], listed.text
            mine = await c.get(f"{base}/tasks/metadata", headers=bearer(ops))
            assert mine.status_code == 204  # the operator's own: none
            herself = await c.get(
                f"{base}/tasks/metadata", params={"tenant": "oidc:alice"}, headers=bearer(alice)
            )
            assert [m["id"] for m in herself.json()] == [task_id]

            # a member, a static token: another's task is unknown, another's list refused
            for token in (bob, TOKEN):
                r = await c.get(f"{base}/tasks/{task_id}/metadata", headers=bearer(token))
                assert (r.status_code, r.json()) == (404, {"error": "Task not found"}), r.text
                r = await c.get(
                    f"{base}/tasks/metadata", params={"tenant": "oidc:alice"}, headers=bearer(token)
                )
                assert r.status_code == 403 and "operator" in r.json()["error"], r.text
            r = await c.get(f"{base}/tasks/{ci_task}/metadata", headers=bearer(alice))
            assert r.status_code == 404  # a member reads no static token's task either
            assert (await c.get(f"{base}/tasks/metadata", headers=bearer(bob))).status_code == 204
