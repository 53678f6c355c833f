"""Issue 42 item 1: access tokens of the operator's identity provider (a real OpenID Connect
provider on loopback, tokens by client credentials) on every door of `devagent serve`: A2A's
JSON-RPC, HTTP+JSON and gRPC bindings through the a2a-sdk client, the MCP door through the
official `mcp` client, the console's API, `/metrics` (its per-caller spend for the IdP's operator
role only); a static token beside them; each identity's workspace and sessions its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from a2a.types import GetTaskRequest, TaskState
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from devagent.common.identity import OidcSettings
from tests.a2a.helpers import TOKEN, auth, call, rpc, running_server, v03_message
from tests.a2a.test_bindings import BINDINGS, client_for, ctx, message, run
from tests.conftest import Script
from tests.identity.idp import Idp

USAGE = {"usage": {"input_tokens": 100, "output_tokens": 10}}


def oidc(idp: Idp) -> OidcSettings:
    return OidcSettings(issuer=idp.issuer, roles_claim="roles")


def server_kw(idp: Idp, **more: Any) -> dict[str, Any]:
    """running_server's arguments: the static token `ci` beside the IdP, MCP and gRPC on."""
    return {"tokens": {TOKEN: "ci"}, "a2a_kw": {"oidc": oidc(idp), "mcp": True, "grpc_port": 0, **more}}


def mcp_client(url: str, token: str) -> Client:
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(60, read=120)
    )
    return Client(streamable_http_client(url, http_client=http))


@pytest.mark.parametrize("binding", BINDINGS)
async def test_issue42_item1_a2a_sdk_client_with_an_idp_token_on_each_binding(
    binding: str, idp: Idp, script: Script, sqlite_url: str, workspace: Path
) -> None:
    steps = [[{"text": "hello from the agent"}]]
    async with running_server(script(steps), sqlite_url, workspace, **server_kw(idp)) as srv:
        token = idp.token("alice", srv.url.rstrip("/"))
        async with client_for(srv.url, binding, token) as client:
            evs = await run(client, message("hi"), ctx(token=token))
            last = evs[-1][1]
            assert last.status.state == TaskState.TASK_STATE_COMPLETED, evs
            task = await client.get_task(GetTaskRequest(id=evs[0][1].id), context=ctx(token=token))
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
        # the identity's own workspace folder, apart from every static token's
        assert (workspace.parent / ".oidc" / "alice").is_dir()
        # Bob, of the same IdP, does not see Alice's task on this binding
        bob = idp.token("bob", srv.url.rstrip("/"))
        async with client_for(srv.url, binding, bob) as client:
            with pytest.raises(Exception) as refused:
                await client.get_task(GetTaskRequest(id=evs[0][1].id), context=ctx(token=bob))
            assert "not found" in str(refused.value).lower() or "NOT_FOUND" in str(refused.value), (
                refused.value
            )


async def test_issue42_item1_grpc_refuses_a_forged_token_unauthenticated(
    idp: Idp, script: Script, sqlite_url: str, workspace: Path
) -> None:
    async with running_server(script([]), sqlite_url, workspace, **server_kw(idp)) as srv:
        forged = idp.sign({"iss": idp.issuer, "aud": srv.url.rstrip("/"), "sub": "mallory", "exp": 1})
        async with client_for(srv.url, "GRPC", forged) as client:
            with pytest.raises(Exception) as refused:
                await client.get_task(GetTaskRequest(id="x"), context=ctx(token=forged))
        # the a2a-sdk client's error carries the gRPC status and the server's reason
        assert "UNAUTHENTICATED: invalid token: the token has expired" in str(refused.value), refused.value


async def test_issue42_item1_mcp_console_metrics_and_tenancy_with_idp_tokens(
    idp: Idp, script: Script, sqlite_url: str, workspace: Path
) -> None:
    steps = [[{"text": "mcp answer"}, USAGE], [{"text": "a2a answer"}, USAGE], [{"text": "ci answer"}, USAGE]]
    async with running_server(script(steps), sqlite_url, workspace, **server_kw(idp)) as srv:
        base = srv.url.rstrip("/")
        alice, bob, ops = (idp.token(c, base) for c in ("alice", "bob", "ops"))
        # the MCP door, with the official client and Alice's IdP token
        async with mcp_client(srv.url + "mcp/", alice) as m:
            res = await m.call_tool("devagent_start", {"prompt": "hi"})
            assert not res.is_error, res
            started = res.structured_content
            assert started["answer"] == "mcp answer", started
            assert started["workspace"] == str((workspace.parent / ".oidc" / "alice").resolve())
        async with mcp_client(srv.url + "mcp/", bob) as m:
            res = await m.call_tool("devagent_continue", {"session_id": started["session_id"], "prompt": "x"})
            assert res.is_error and "no session" in res.content[0].text
            assert (await m.call_tool("devagent_sessions", {})).structured_content["sessions"] == []
        async with httpx.AsyncClient(timeout=60) as c:
            # A2A JSON-RPC, Alice's task; Bob cannot read it
            got = await call(
                c, srv.url, rpc("message/send", {"message": v03_message("hi")}), auth(alice, ext=False)
            )
            assert got["result"]["status"]["state"] == "completed", got
            task_id, context_id = got["result"]["id"], got["result"]["contextId"]
            other = await call(c, srv.url, rpc("tasks/get", {"id": task_id}), auth(bob, ext=False))
            assert other["error"]["code"] == -32001, other
            # the static token still works, beside the IdP
            ci = await call(
                c, srv.url, rpc("message/send", {"message": v03_message("hi")}), auth(TOKEN, ext=False)
            )
            assert ci["result"]["status"]["state"] == "completed", ci
            # the console's API: who is signed in, their sessions only
            me = (await c.get(srv.url + "ui/api/me", headers=auth(alice, ext=False))).json()
            assert me["identity"] == "oidc:alice", me
            listed = (await c.get(srv.url + "ui/api/sessions", headers=auth(alice, ext=False))).json()
            assert [s["context_id"] for s in listed["sessions"]] == [context_id], listed
            assert (await c.get(srv.url + "ui/api/sessions", headers=auth(bob, ext=False))).json()[
                "total"
            ] == 0
            shown = await c.get(srv.url + f"ui/api/sessions/{context_id}", headers=auth(bob, ext=False))
            assert shown.status_code == 404
            # /metrics: a member reads the totals; the IdP's operator reads each caller's spend
            member = (await c.get(srv.url + "metrics", headers=auth(alice, ext=False))).text
            operator = (await c.get(srv.url + "metrics", headers=auth(ops, ext=False))).text
    assert "identity=" not in member and "alice" not in member, member
    assert 'devagent_model_requests_total{identity="oidc:alice"} 2.0' in operator, operator
    assert 'devagent_model_requests_total{identity="ci"} 1.0' in operator, operator


async def test_issue42_item1_bob_with_alices_mcp_session_id_is_an_unknown_session(
    idp: Idp, script: Script, sqlite_url: str, workspace: Path
) -> None:
    """Tenancy of MCP sessions with IdP tokens: Bob's token with Alice's `Mcp-Session-Id` is
    answered as for an unknown session (404) whatever he sends; Alice's session goes on."""
    from tests.mcpdoor.test_http import RawMcp

    async with running_server(script([]), sqlite_url, workspace, **server_kw(idp)) as srv:
        url = srv.url + "mcp/"
        base = srv.url.rstrip("/")
        async with httpx.AsyncClient(timeout=httpx.Timeout(60, read=120)) as http:
            alice, bob = (
                RawMcp(http, url, idp.token("alice", base)),
                RawMcp(http, url, idp.token("bob", base)),
            )
            sid = await alice.open()
            tools = {"jsonrpc": "2.0", "id": 5, "method": "tools/list"}
            refused = [
                await bob.status(m, sid, b) for m, b in (("POST", tools), ("GET", None), ("DELETE", None))
            ]
            assert refused == [404] * 3, refused
            r = await alice.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, sid)
            assert r.status_code == 200 and "devagent_start" in r.text
