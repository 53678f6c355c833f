"""Issue 22: the MCP door over streamable HTTP (`devagent serve --mcp`, at /mcp beside A2A,
behind the same bearer tokens), with the official `mcp` Python client: a task run by Alice in
her own workspace folder, Bob unable to see or continue her session, no token refused."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.a2a.procs import TOKEN, serving

Script = Callable[[list[Any]], str]


def client(url: str, token: str) -> Client:
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(60, read=120)
    )
    return Client(streamable_http_client(url, http_client=http))


async def test_issue22_mcp_over_http_behind_the_servers_tokens(
    script: Script, sqlite_url: str, workspace: Path, tmp_path: Path
) -> None:
    steps = [
        [{"tool_call": {"name": "write_file", "args": {"path": "h.txt", "content": "http\n"}}}],
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
