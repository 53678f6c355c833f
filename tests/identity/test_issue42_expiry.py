"""Issue 42 item 2: a stream opened with an access token ends when the token expires, with the
protocol's own authentication error as its last word, not a dropped connection: A2A JSON-RPC's
SSE (a JSON-RPC error for the request), the HTTP+JSON binding's SSE (UNAUTHENTICATED), gRPC's
stream (status UNAUTHENTICATED, through the a2a-sdk client) and the MCP door's tool call (a
JSON-RPC error the official `mcp` client raises). The model is held on a gate the whole time, so
every stream is still open when the token expires; the server then answers a fresh token."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from devagent.common.identity import OidcSettings
from tests.a2a.helpers import TOKEN, auth, call, rpc, running_server, v03_message
from tests.a2a.test_bindings import client_for, ctx, message, run
from tests.conftest import Script
from tests.identity.idp import Idp
from tests.identity.test_issue42_doors import mcp_client

EXPIRED = "invalid token: the token has expired"


async def sse_frames(
    c: httpx.AsyncClient, url: str, body: dict[str, Any] | None, headers: dict[str, str]
) -> Any:
    """The parsed `data:` frames of a streamed POST (of `body`, or of nothing), to its end; or the
    refusal of its start."""
    frames: list[Any] = []
    async with c.stream("POST", url, json=body, headers=headers) as r:
        if r.status_code != 200:
            return ("refused", r.status_code, (await r.aread()).decode())
        async for line in r.aiter_lines():
            if line.startswith("data:"):
                frames.append(json.loads(line[5:]))
    return frames


async def grpc_stream(url: str, token: str) -> Any:
    async with client_for(url, "GRPC", token) as client:
        try:
            evs = await run(client, message("held on grpc"), ctx(token=token))
        except Exception as e:  # the a2a-sdk client's error, with the gRPC status in it
            return str(e)
    return f"the stream ended without an error: {evs}"


async def mcp_call(url: str, token: str) -> Any:
    try:
        async with mcp_client(url + "mcp/", token) as m:
            return await m.call_tool("devagent_start", {"prompt": "held on mcp"})
    except MCPError as e:
        return e.error.message
    except Exception as e:  # the client's task group wraps what it raises
        found = _mcp_error(e)
        return found.error.message if found is not None else f"refused: {e!r}"


def _mcp_error(e: BaseException) -> MCPError | None:
    if isinstance(e, MCPError):
        return e
    for inner in getattr(e, "exceptions", ()):
        found = _mcp_error(inner)
        if found is not None:
            return found
    return None


async def all_streams(url: str, token: str) -> list[Any]:
    body_v1 = {
        "message": {"role": "ROLE_USER", "parts": [{"text": "held on rest"}], "messageId": str(uuid.uuid4())}
    }
    async with httpx.AsyncClient(timeout=120) as c:
        return list(
            await asyncio.gather(
                sse_frames(
                    c,
                    url,
                    rpc("message/stream", {"message": v03_message("held")}, rid=7),
                    auth(token, ext=False),
                ),
                sse_frames(
                    c,
                    url + "rest/message:stream",
                    body_v1,
                    {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"},
                ),
                grpc_stream(url, token),
                mcp_call(url, token),
            )
        )


def started(results: list[Any]) -> bool:
    """Whether the streams were under way before the token expired: each SSE stream sent an
    event before its last, and none was refused at its start (else the machine was too slow for
    the token's life, and the test tries again with a longer one)."""
    jsonrpc, rest, grpc_said, mcp_said = results
    under_way = [isinstance(frames, list) and len(frames) >= 2 for frames in (jsonrpc, rest)]
    return all(under_way) and "refused" not in str(mcp_said) and "ended without" not in str(grpc_said)


async def test_issue42_item2_an_expired_token_ends_each_stream_with_the_protocols_error(
    idp: Idp, script: Script, sqlite_url: str, workspace: Path, tmp_path: Path
) -> None:
    gate = tmp_path / "never"
    held = [[{"wait_for": str(gate)}, {"text": "never said"}]]
    oidc = OidcSettings(issuer=idp.issuer, leeway=0)  # the token's own `exp`, exactly
    kw = {"tokens": {TOKEN: "ci"}, "a2a_kw": {"oidc": oidc, "mcp": True, "grpc_port": 0}}
    async with running_server(script(held * 8), sqlite_url, workspace, **kw) as srv:  # type: ignore[arg-type]
        aud = srv.url.rstrip("/")
        life = 6
        for _ in range(3):  # a longer life for the token while the streams could not all start in it
            now = int(time.time())
            token = idp.sign({"iss": idp.issuer, "aud": aud, "sub": "dana", "iat": now, "exp": now + life})
            results = await all_streams(srv.url, token)
            if started(results):
                break
            life *= 3
        else:
            pytest.fail(f"the streams never started within the token's life: {results}")
        jsonrpc, rest, grpc_said, mcp_said = results
        assert len(jsonrpc) >= 2, jsonrpc  # the task's first events, then the error
        assert jsonrpc[-1] == {"jsonrpc": "2.0", "id": 7, "error": {"code": -32600, "message": EXPIRED}}, (
            jsonrpc
        )
        assert "result" in jsonrpc[0]
        assert len(rest) >= 2 and rest[-1] == {
            "error": {"code": 401, "status": "UNAUTHENTICATED", "message": EXPIRED}
        }
        assert "UNAUTHENTICATED" in grpc_said and EXPIRED in grpc_said, grpc_said
        assert mcp_said == EXPIRED, mcp_said
        async with httpx.AsyncClient(timeout=60) as c:  # responsive: a fresh token is served
            fresh = idp.token("alice", aud)
            got = await call(c, srv.url, rpc("tasks/get", {"id": "nope"}), auth(fresh, ext=False))
            assert got["error"]["code"] == -32001, got
        gate.touch()  # the held turns may end


async def all_resubscriptions(url: str, token: str, task_id: str) -> list[Any]:
    """The task followed on each binding: JSON-RPC `tasks/resubscribe` (0.3), HTTP+JSON
    `tasks/{id}:subscribe` (1.0), gRPC `SubscribeToTask` through the a2a-sdk client."""
    from a2a.types import SubscribeToTaskRequest

    async def grpc_follow() -> Any:
        async with client_for(url, "GRPC", token) as client:
            try:
                evs = [
                    e
                    async for e in client.subscribe(
                        SubscribeToTaskRequest(id=task_id), context=ctx(token=token)
                    )
                ]
            except Exception as e:
                return str(e)
        return f"the stream ended without an error: {evs}"

    async with httpx.AsyncClient(timeout=120) as c:
        rest_headers = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}
        return list(
            await asyncio.gather(
                sse_frames(c, url, rpc("tasks/resubscribe", {"id": task_id}, rid=9), auth(token, ext=False)),
                sse_frames(c, f"{url}rest/tasks/{task_id}:subscribe", None, rest_headers),
                grpc_follow(),
            )
        )


async def test_issue42_item2_an_expired_token_ends_each_resubscription_with_the_protocols_error(
    idp: Idp, script: Script, sqlite_url: str, workspace: Path, tmp_path: Path
) -> None:
    """A task held working (the model on a gate), started with a long-lived token; followed on
    every binding with a short-lived one: each subscription ends with its protocol's
    authentication error when that token expires, the task still working."""
    gate = tmp_path / "never"
    held = [[{"wait_for": str(gate)}, {"text": "never said"}]]
    oidc = OidcSettings(issuer=idp.issuer, leeway=0)
    kw = {"tokens": {TOKEN: "ci"}, "a2a_kw": {"oidc": oidc, "grpc_port": 0}}
    async with running_server(script(held), sqlite_url, workspace, **kw) as srv:  # type: ignore[arg-type]
        aud = srv.url.rstrip("/")

        def token_for(life: int) -> str:
            now = int(time.time())
            return idp.sign({"iss": idp.issuer, "aud": aud, "sub": "dana", "iat": now, "exp": now + life})

        async with httpx.AsyncClient(timeout=60) as c:
            params = {"message": v03_message("held"), "configuration": {"blocking": False}}
            sent = await call(c, srv.url, rpc("message/send", params), auth(token_for(3600), ext=False))
        task_id = sent["result"]["id"]
        life = 6
        for _ in range(3):  # a longer life while the subscriptions could not all start in it
            jsonrpc, rest, grpc_said = await all_resubscriptions(srv.url, token_for(life), task_id)
            if (
                all(isinstance(f, list) and len(f) >= 2 for f in (jsonrpc, rest))
                and "ended without" not in grpc_said
            ):
                break
            life *= 3
        else:
            pytest.fail(
                f"the subscriptions never started within the token's life: {jsonrpc, rest, grpc_said}"
            )
        assert "result" in jsonrpc[0], jsonrpc
        assert jsonrpc[-1] == {"jsonrpc": "2.0", "id": 9, "error": {"code": -32600, "message": EXPIRED}}, (
            jsonrpc
        )
        assert rest[-1] == {"error": {"code": 401, "status": "UNAUTHENTICATED", "message": EXPIRED}}, rest
        assert "UNAUTHENTICATED" in grpc_said and EXPIRED in grpc_said, grpc_said
        async with httpx.AsyncClient(timeout=60) as c:  # the task goes on, read with a fresh token
            got = await call(c, srv.url, rpc("tasks/get", {"id": task_id}), auth(token_for(3600), ext=False))
            assert got["result"]["status"]["state"] == "working", got
        gate.touch()
