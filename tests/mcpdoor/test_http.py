"""Issue 22: the MCP door over streamable HTTP (`devagent serve --mcp`, at /mcp beside A2A,
behind the same bearer tokens), with the official `mcp` Python client: a task run by Alice in
her own workspace folder, Bob unable to see or continue her session, no token refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.a2a.procs import TOKEN, serving
from tests.conftest import Script
from tests.core_helpers import write_call


def client(url: str, token: str) -> Client:
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(60, read=120)
    )
    return Client(streamable_http_client(url, http_client=http))


async def test_issue22_mcp_over_http_behind_the_servers_tokens(
    script: Script, sqlite_url: str, workspace: Path, tmp_path: Path
) -> None:
    steps = [
        [write_call("h.txt", "http\n")],
        [{"text": "done over http"}],
    ]
    root = tmp_path / "root"
    root.mkdir()
    args = [
        "--db", sqlite_url, "--workspace-root", str(root), "--model", script(steps),
        "--approval", "auto-edit", "--token", f"alice={TOKEN}", "--token", "bob=tok-bob", "--mcp",
    ]  # fmt: skip
    with serving(args, tmp_path / "serve.log") as s:
        url = s.url + "mcp/"
        async with client(url, TOKEN) as alice:
            names = {t.name for t in (await alice.list_tools()).tools}
            assert "devagent_start" in names
            res = await alice.call_tool("devagent_start", {"prompt": "write h"})
            assert not res.is_error, res
            data = res.structured_content
            assert data["status"] == "completed" and data["answer"] == "done over http", data
            assert data["workspace"] == str((root / "alice").resolve())
        assert (root / "alice" / "h.txt").read_text() == "http\n"
        async with client(url, "tok-bob") as bob:
            res = await bob.call_tool("devagent_continue", {"session_id": data["session_id"], "prompt": "hi"})
            assert res.is_error and "no session" in res.content[0].text
            listed = (await bob.call_tool("devagent_sessions", {})).structured_content["sessions"]
            assert listed == []
            res = await bob.call_tool("devagent_start", {"prompt": "x", "workspace": str(root / "alice")})
            assert res.is_error and "outside" in res.content[0].text
        async with httpx.AsyncClient(timeout=30) as c:
            r = await c.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            assert r.status_code == 401


class RawMcp:
    """One identity's raw streamable-HTTP requests (MCP 2025-11-25) to `devagent serve --mcp`,
    so that a test can send any request with any `Mcp-Session-Id`."""

    def __init__(self, http: httpx.AsyncClient, url: str, token: str) -> None:
        self.http = http
        self.url = url
        self.headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "Mcp-Protocol-Version": "2025-11-25",
        }
        self.session_id = ""

    def with_session(self, session_id: str) -> dict[str, str]:
        return {**self.headers, "Mcp-Session-Id": session_id}

    async def open(self) -> str:
        """initialize (with elicitation), then notifications/initialized: the session id."""
        init = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "raw", "version": "0"},
        }
        r = await self.http.post(
            self.url,
            headers=self.headers,
            json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init},
        )
        assert r.status_code == 200, r.text
        self.session_id = r.headers["mcp-session-id"]
        r = await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert r.status_code == 202, r.text
        return self.session_id

    async def status(self, method: str, session_id: str, body: dict[str, Any] | None) -> int:
        """The HTTP status of a request (its response, maybe a stream, is not read)."""
        async with self.http.stream(method, self.url, headers=self.with_session(session_id), json=body) as r:
            return r.status_code

    async def post(self, body: dict[str, Any], session_id: str = "") -> httpx.Response:
        return await self.http.post(
            self.url, headers=self.with_session(session_id or self.session_id), json=body
        )


async def sse_messages(response: httpx.Response) -> Any:
    """The JSON-RPC messages of an SSE response, as they arrive."""
    data: list[str] = []
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and data:
            yield json.loads("\n".join(data))
            data = []


async def test_issue28_item2_bob_with_alices_mcp_session_id_is_an_unknown_session(
    script: Script, sqlite_url: str, tmp_path: Path
) -> None:
    """issue 28 item 2: Bob, with his own token and Alice's `Mcp-Session-Id`, is answered as for
    an unknown session (404) whatever he sends: the answer to her pending elicitation, a tool
    call, a GET stream, a DELETE. Nothing of his runs, her write waits for her own answer, and her
    session goes on."""
    steps = [
        [write_call("a.txt", "A\n", "w1")],
        [{"text": "alice's file written"}],
    ]
    root = tmp_path / "root"
    root.mkdir()
    args = [
        "--db", sqlite_url, "--workspace-root", str(root), "--model", script(steps),
        "--token", f"alice={TOKEN}", "--token", "bob=tok-bob", "--mcp",
    ]  # fmt: skip
    with serving(args, tmp_path / "serve.log") as s:
        url = s.url + "mcp/"
        async with httpx.AsyncClient(timeout=httpx.Timeout(60, read=120)) as http:
            alice, bob = RawMcp(http, url, TOKEN), RawMcp(http, url, "tok-bob")
            sid = await alice.open()
            call = {"name": "devagent_start", "arguments": {"prompt": "write a.txt"}}
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}
            async with http.stream("POST", url, headers=alice.with_session(sid), json=body) as stream:
                messages = sse_messages(stream)
                ask = await anext(m async for m in messages if m.get("method") == "elicitation/create")
                answer = {"action": "accept", "content": {"decision": "allow_once"}}
                bobs = [
                    ("POST", {"jsonrpc": "2.0", "id": ask["id"], "result": answer}),
                    ("POST", {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                              "params": {"name": "devagent_start", "arguments": {"prompt": "bob's"}}}),
                    ("GET", None),
                    ("DELETE", None),
                ]  # fmt: skip
                refused = [await bob.status(method, sid, body) for method, body in bobs]
                assert refused == [404] * 4, refused
                assert not (root / "alice" / "a.txt").exists()  # nothing ran on Bob's answer
                r = await alice.post({"jsonrpc": "2.0", "id": ask["id"], "result": answer}, sid)
                assert r.status_code == 202, r.text
                done = await anext(m async for m in messages if m.get("id") == 1)
            assert done["result"]["structuredContent"]["status"] == "completed", done
            assert (root / "alice" / "a.txt").read_text() == "A\n"
            # her session lives on; Bob (in his own MCP session) started nothing
            r = await alice.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, sid)
            assert r.status_code == 200 and "devagent_start" in r.text
            await bob.open()
            r = await bob.post(
                {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                 "params": {"name": "devagent_sessions", "arguments": {}}},
            )  # fmt: skip
            assert r.status_code == 200 and '"sessions":[]' in r.text.replace(" ", ""), r.text
