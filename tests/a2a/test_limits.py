"""Limits on every door of the A2A server (issue 12 item 2): body size, JSON nesting, parts and
tool definitions per message, each refused in JSON-RPC terms while the server goes on serving."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from devagent.a2a.cli import LIMIT_ENV, limit_settings_from_env
from tests.a2a.helpers import TOKEN, auth, call, rpc, running_server, v03_message
from tests.conftest import Script

TEXT = [{"items": [{"text": "hello there"}]}, {"items": [{"text": "second: {last_user}"}]}]
MiB = 1024 * 1024


async def _still_serves(c: httpx.AsyncClient, url: str) -> None:
    """The next valid request after a refusal gets its answer."""
    r = await call(c, url, rpc("message/send", {"message": v03_message("hi")}), auth())
    assert r["result"]["status"]["state"] == "completed", r


async def _raw_post(url: str, head: dict[str, str], body: bytes = b"") -> tuple[int, dict[str, Any]]:
    """A POST whose headers are sent as given (Content-Length may promise more than is sent)."""
    host, port = httpx.URL(url).host, httpx.URL(url).port
    assert port is not None
    reader, writer = await asyncio.open_connection(host, port)
    lines = ["POST / HTTP/1.1", f"Host: {host}:{port}", *(f"{k}: {v}" for k, v in head.items())]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    await writer.drain()
    raw = await asyncio.wait_for(reader.read(), 30)  # the server answers and closes
    writer.close()
    status_line, _, rest = raw.partition(b"\r\n")
    _, _, payload = rest.partition(b"\r\n\r\n")
    return int(status_line.split()[1]), json.loads(payload)


async def test_body_over_the_limit_is_refused_unread(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """issue 12 item 2: a Content-Length of 50 MB gets HTTP 413 with a JSON-RPC error at once,
    before any of the body is sent; the next request is served."""
    async with running_server(script(TEXT), sqlite_url, workspace) as srv:
        head = {
            "Authorization": f"Bearer {TOKEN}",
            "Content-Type": "application/json",
            "Content-Length": str(50 * 1000 * 1000),
        }
        status, body = await _raw_post(srv.url, head)
        assert status == 413
        assert body == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32600, "message": f"request body larger than {16 * MiB} bytes"},
        }
        async with httpx.AsyncClient(timeout=30) as c:
            await _still_serves(c, srv.url)


async def test_streamed_body_stops_being_read_at_the_limit(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """issue 12 item 2: a 50 MB body without Content-Length (chunked), given to the whole app:
    it is read only until it passes the limit (1 MiB here), then answered with 413; what the app
    would have answered is not sent. The next request is served."""
    async with running_server(script(TEXT), sqlite_url, workspace, a2a_kw={"max_body_bytes": MiB}) as srv:
        chunk = b" " * (64 * 1024)
        chunks = 50 * MiB // len(chunk)
        reads = 0

        async def receive() -> dict[str, Any]:
            nonlocal reads
            reads += 1
            if reads > chunks:  # the test's own bound: never reached when the limit works
                return {"type": "http.disconnect"}
            return {"type": "http.request", "body": chunk, "more_body": reads < chunks}

        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/",
            "raw_path": b"/",
            "query_string": b"",
            "root_path": "",
            "headers": [
                (b"host", b"127.0.0.1"),
                (b"authorization", f"Bearer {TOKEN}".encode()),
                (b"content-type", b"application/json"),
                (b"transfer-encoding", b"chunked"),
            ],
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 80),
        }
        await srv.app(scope, receive, send)
        assert reads == MiB // len(chunk) + 1  # the chunk that passed the limit was the last read
        assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
        assert sent[0]["status"] == 413
        err = json.loads(sent[1]["body"])["error"]
        assert err == {"code": -32600, "message": f"request body larger than {MiB} bytes"}
        async with httpx.AsyncClient(timeout=30) as c:
            await _still_serves(c, srv.url)


async def test_deep_json_is_refused_before_parsing(script: Script, sqlite_url: str, workspace: Path) -> None:
    """issue 12 item 2: JSON nested 100,000 deep gets -32600 "JSON nested deeper than 64 levels"
    (not Python's RecursionError text); 64 levels are still parsed; the server goes on."""
    async with running_server(script(TEXT), sqlite_url, workspace) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            for depth in (100_000, 1_100, 65):
                deep = "[" * depth + "]" * depth
                # the request object and params are two of the levels
                content = '{"jsonrpc": "2.0", "id": 7, "method": "message/send", "params": ' + deep + "}"
                r = await c.post(srv.url, content=content, headers=auth())
                assert r.status_code == 200
                assert r.json() == {
                    "jsonrpc": "2.0",
                    "id": None,
                    "error": {"code": -32600, "message": "JSON nested deeper than 64 levels"},
                }
            ok = "[" * 63 + "]" * 63
            content = '{"jsonrpc": "2.0", "id": 7, "method": "message/send", "params": ' + ok + "}"
            r = await c.post(srv.url, content=content, headers=auth())
            assert r.json()["error"]["code"] == -32602  # parsed: params of the wrong shape
            # brackets inside strings do not count
            msg = v03_message("[" * 10_000 + "{" * 10_000)
            r = await call(c, srv.url, rpc("message/send", {"message": msg}), auth())
            assert r["result"]["status"]["state"] == "completed", r
            await _still_serves(c, srv.url)


async def test_parts_and_tool_definitions_per_message(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """issue 12 item 2: more parts or tool definitions in one message than allowed: -32602 with
    the reason; at the limit the message is accepted; the server goes on."""
    async with running_server(script(TEXT * 3), sqlite_url, workspace) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            msg = v03_message("hi")
            msg["parts"] = [{"kind": "text", "text": "x"}] * 1001
            r = await call(c, srv.url, rpc("message/send", {"message": msg}), auth())
            assert (r["error"]["code"], r["error"]["message"]) == (
                -32602,
                "more than 1000 parts in one message",
            ), r
            msg["parts"] = msg["parts"][:1000]
            r = await call(c, srv.url, rpc("message/send", {"message": msg}), auth())
            assert r["result"]["status"]["state"] == "completed", r

            def tool(i: int) -> dict[str, Any]:
                return {"name": f"tool_{i}", "description": "d", "parameters": {"type": "object"}}

            md = {"type": "tool-definitions", "format": "langchain"}
            tools = [tool(i) for i in range(513)]
            msg = v03_message("hi")
            msg["parts"].append({"kind": "data", "data": {"tools": tools}, "metadata": md})
            r = await call(c, srv.url, rpc("message/send", {"message": msg}), auth())
            err = r["error"]
            assert (err["code"], err["message"]) == (-32602, "more than 512 tool definitions in one message")
            msg["parts"][-1]["data"]["tools"] = tools[:512]
            r = await call(c, srv.url, rpc("message/send", {"message": msg}), auth())
            assert r["result"]["status"]["state"] == "completed", r
            # several parts add up
            msg = v03_message("hi")
            for half in (tools[:300], tools[300:]):
                msg["parts"].append({"kind": "data", "data": {"tools": half}, "metadata": md})
            r = await call(c, srv.url, rpc("message/send", {"message": msg}), auth())
            assert r["error"]["message"] == "more than 512 tool definitions in one message", r
            await _still_serves(c, srv.url)


async def test_limits_are_settings(script: Script, sqlite_url: str, workspace: Path) -> None:
    """issue 12 item 2: each limit is an A2ASettings field, read from DEVAGENT_* by `serve`."""
    env = {
        "DEVAGENT_MAX_BODY_BYTES": "1_000",
        "DEVAGENT_MAX_JSON_DEPTH": "5",
        "DEVAGENT_MAX_PARTS": "2",
        "DEVAGENT_MAX_TOOLS": "1",
    }
    limits = limit_settings_from_env(env)
    assert limits == {"max_body_bytes": 1000, "max_json_depth": 5, "max_parts": 2, "max_tools": 1}
    assert limit_settings_from_env({}) == {}
    with pytest.raises(ValueError, match="DEVAGENT_MAX_PARTS"):
        limit_settings_from_env({"DEVAGENT_MAX_PARTS": "many"})
    with pytest.raises(ValueError, match="DEVAGENT_MAX_JSON_DEPTH"):
        limit_settings_from_env({"DEVAGENT_MAX_JSON_DEPTH": "0"})
    async with running_server(script(TEXT), sqlite_url, workspace, a2a_kw=limits) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            r = await c.post(srv.url, content=b"{" + b" " * 1000 + b"}", headers=auth())
            assert r.status_code == 413
            assert r.json()["error"]["message"] == "request body larger than 1000 bytes"
            body = rpc("message/send", {"message": v03_message("hi")})
            body["params"]["x"] = [[[[[]]]]]
            r = await c.post(srv.url, json=body, headers=auth())
            assert r.json()["error"]["message"] == "JSON nested deeper than 5 levels"
            msg = v03_message("a")
            msg["parts"] *= 3
            r = await call(c, srv.url, rpc("message/send", {"message": msg}), auth())
            assert r["error"]["message"] == "more than 2 parts in one message"
            await _still_serves(c, srv.url)


def test_every_limit_is_in_the_readme() -> None:
    """issue 12 item 2: the limits are in README.md's settings table."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    for var in [*LIMIT_ENV.values(), "DEVAGENT_MAX_LINE_BYTES"]:
        assert f"`{var}`" in readme, var
