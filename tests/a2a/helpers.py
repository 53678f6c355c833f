"""Helpers for the A2A tests: a real server on a loopback port, and an SSE JSON-RPC client."""

from __future__ import annotations

import asyncio
import json
import socket
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import httpx

from devagent.a2a.extension import EXTENSION_URI
from tests.fakes.local_server import serving_app
from tests.npm import ensure_installed

TOKEN = "test-token"
JS = Path(__file__).parent / "js"  # the npm clients (package.json and lock)


@dataclass
class Server:
    url: str
    token: str
    app: Any
    headers: dict[str, str] = field(default_factory=dict)


@asynccontextmanager
async def running_server(
    model: str,
    db_url: str,
    workspace: Path,
    *,
    tokens: dict[str, str] | None = None,
    allow_private_webhooks: bool = True,
    core_kw: dict[str, Any] | None = None,
    a2a_kw: dict[str, Any] | None = None,
) -> AsyncIterator[Server]:
    """devagent's A2A app under uvicorn on 127.0.0.1:<free port>, with a core of its own."""
    import uvicorn

    from devagent.a2a import A2ASettings, create_app
    from devagent.a2a.shared_port import share_port
    from devagent.agent.core import AgentCore
    from devagent.agent.settings import CoreConfig

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    core = await AgentCore.open(CoreConfig(db_url=db_url, default_model=model, **(core_kw or {})))
    settings = A2ASettings(
        host="127.0.0.1",
        port=port,
        workspace_roots=[workspace.parent],
        tokens={TOKEN: "alice"} if tokens is None else tokens,
        allow_private_webhooks=allow_private_webhooks,
        push_backoff=0.05,
        **(a2a_kw or {}),
    )
    app = create_app(core, settings)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    share_port(config, settings)  # as `devagent serve` does: gRPC on this port too
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield Server(url=f"http://127.0.0.1:{port}/", token=TOKEN, app=app)
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)
        await core.close()


@asynccontextmanager
async def server_and_client(
    model: str, db_url: str, workspace: Path, *, client_timeout: float = 30, **kw: Any
) -> AsyncIterator[tuple[Server, httpx.AsyncClient]]:
    """`running_server(model, db_url, workspace, **kw)` and an HTTP client for it (at most
    `client_timeout` seconds a request) for the block."""
    async with running_server(model, db_url, workspace, **kw) as srv:
        async with httpx.AsyncClient(timeout=client_timeout) as c:
            yield srv, c


def auth(token: str = TOKEN, *, ext: bool = True, v1: bool = False) -> dict[str, str]:
    h = {"Authorization": f"Bearer {token}"}
    if ext:
        h["X-A2A-Extensions" if not v1 else "A2A-Extensions"] = EXTENSION_URI
    if v1:
        h["A2A-Version"] = "1.0"
    return h


def client_tool(
    name: str, description: str, properties: dict[str, Any], required: list[str] | None = None
) -> dict[str, Any]:
    """A client tool's definition as LangChain and OpenAI write it (`type: function`)."""
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:
        parameters["required"] = required
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def v03_message(
    text: str | None = None,
    *,
    data: list[dict[str, Any]] | None = None,
    task_id: str | None = None,
    context_id: str | None = None,
    settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if text is not None:
        parts.append({"kind": "text", "text": text})
    for d in data or []:
        parts.append({"kind": "data", "data": d})
    msg: dict[str, Any] = {"kind": "message", "messageId": str(uuid.uuid4()), "role": "user", "parts": parts}
    if task_id:
        msg["taskId"] = task_id
    if context_id:
        msg["contextId"] = context_id
    if settings is not None:
        msg["metadata"] = {EXTENSION_URI: settings}
    return msg


def rpc(method: str, params: dict[str, Any], rid: Any = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


async def call(client: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str]) -> Any:
    r = await client.post(url, json=body, headers=headers)
    return r.json()


async def stream(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str]
) -> list[dict[str, Any]]:
    """All `data:` frames of an SSE JSON-RPC response, parsed."""
    out: list[dict[str, Any]] = []
    async with client.stream("POST", url, json=body, headers=headers) as r:
        assert r.status_code == 200, await r.aread()
        async for line in r.aiter_lines():
            if line.startswith("data:"):
                out.append(json.loads(line[5:]))
    return out


async def stream_message(
    client: httpx.AsyncClient, url: str, message: dict[str, Any], headers: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """All frames of a `message/stream` of `message` (with the extension's headers, or `headers`)."""
    return await stream(
        client, url, rpc("message/stream", {"message": message}), auth() if headers is None else headers
    )


async def completed_turn(url: str, token: str, message: dict[str, Any]) -> list[dict[str, Any]]:
    """One `message/stream` turn of `message` as `token`, in an HTTP client of its own, to its end;
    its SSE frames, parsed. Fails unless the answer is an event stream whose last state is
    `completed`."""
    frames: list[dict[str, Any]] = []
    body = rpc("message/stream", {"message": message})
    async with (
        httpx.AsyncClient(timeout=300) as client,  # a hang guard, not a timing assertion
        client.stream("POST", url, json=body, headers=auth(token)) as r,
    ):
        assert r.status_code == 200, await r.aread()
        assert r.headers["content-type"].startswith("text/event-stream")
        async for line in r.aiter_lines():
            if line.startswith("data:"):
                frames.append(json.loads(line[5:]))
    states = [f["result"]["status"]["state"] for f in frames if "status" in f.get("result", {})]
    assert states and states[-1] == "completed", frames
    return frames


async def turn(
    url: str, token: str, text: str, workspace: Path, context: str | None = None
) -> list[dict[str, Any]]:
    """`completed_turn` of `text` in `workspace` (and in the conversation `context`, if given)."""
    msg = v03_message(text, context_id=context, settings={"workspace_path": str(workspace)})
    return await completed_turn(url, token, msg)


def context_of(frames: list[dict[str, Any]]) -> str:
    """The conversation (context id) the first frame that names one names."""
    return str(next(f["result"]["contextId"] for f in frames if f.get("result", {}).get("contextId")))


def results(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for f in frames:
        assert "error" not in f, f
    return [f["result"] for f in frames]


def dev_meta(ev: dict[str, Any]) -> dict[str, Any]:
    """devagent's metadata of an event or task: under the extension's URI for clients that
    activated it, under `devagent` for the others."""
    raw = ev.get("metadata") or {}
    if EXTENSION_URI in raw:
        md: dict[str, Any] = raw[EXTENSION_URI]
        return md
    # plain clients' form (camelCase, TCK DM-SERIAL-001), read back into the RFC dialect's names
    md = dict(raw.get("devagent") or {})
    assert "tool_stats" not in md and "client_tools" not in md, md
    if "toolStats" in md:
        md["tool_stats"] = {
            s["tool"]: {"calls": s["calls"], "failures": s["failures"]} for s in md["toolStats"]
        }
    if "clientTools" in md:
        md["client_tools"] = md["clientTools"]
    return md


def parts_of(ev: dict[str, Any]) -> list[dict[str, Any]]:
    msg = (ev.get("status") or {}).get("message") or {}
    p: list[dict[str, Any]] = msg.get("parts") or []
    return p


def text_of(evs: list[dict[str, Any]]) -> str:
    """The text the extension's events carry (their TEXT_CONTENT parts), joined."""
    return "".join(parts_of(e)[0]["text"] for e in evs if dev_meta(e).get("kind") == "TEXT_CONTENT")


def tool_updates(
    evs: list[dict[str, Any]], kinds: tuple[str, ...] = ("TOOL_CALL_UPDATE",)
) -> list[dict[str, Any]]:
    """The ToolCall objects of the extension's events of these kinds, in order."""
    return [parts_of(e)[0]["data"] for e in evs if dev_meta(e).get("kind") in kinds]


def need_js_sdk() -> None:
    """Skips the calling test unless @a2a-js/sdk is installed in tests/a2a/js (installing it first)."""
    ensure_installed(JS, JS / "node_modules" / "@a2a-js" / "sdk", "@a2a-js/sdk")


async def run_js_client(script: str, *args: str) -> Any:
    """Runs `node SCRIPT ARGS` in tests/a2a/js to its end (a minute at most); what it printed,
    parsed as JSON."""
    proc = await asyncio.create_subprocess_exec(
        "node", script, *args, cwd=JS, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return json.loads(out)


class _Webhook(Protocol):
    url: str

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None: ...


Hook = TypeVar("Hook", bound=_Webhook)


@asynccontextmanager
async def listening(hook: Hook) -> AsyncIterator[Hook]:
    """`hook` (an ASGI app) served on 127.0.0.1 for the block, its `url` set to its `/hook` there."""
    async with serving_app(hook) as base_url:
        hook.url = f"{base_url}/hook"
        yield hook
