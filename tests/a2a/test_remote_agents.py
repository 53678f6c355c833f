"""Remote A2A agents as subagent types: a `devagent serve` delegates a `task` call to a second real
`devagent serve` (scripted model) over A2A, and to fake A2A servers that record what reaches them,
hang, or answer garbage. The parent is driven by a plain A2A client."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.a2a.helpers import auth, results, stream_message, v03_message
from tests.a2a.procs import TOKEN, send_stream, serve_args, serving, start_serve, status_text
from tests.a2a.test_stream_limit import until
from tests.a2a.test_subagents import _reply
from tests.conftest import folder_with
from tests.core_helpers import task_call, write_call, write_script
from tests.fakes.bare_a2a_agent import bare_a2a_agent
from tests.fakes.otlp_receiver import OtlpReceiver

PLAIN = auth(TOKEN, ext=False)
SECRET = "sk-server-secret-that-must-stay"  # in the parent's environment, never sent


def _parent(
    tmp_path: Path, agent: str, settings: str, more_env: dict[str, str] | None = None
) -> tuple[list[str], dict[str, str]]:
    """A parent server whose model starts a `task` of type `agent`, then says its result; its
    settings file holds `settings`. Its arguments and environment."""
    import os

    spec = write_script(
        tmp_path / "parent.json",
        [
            {"items": [task_call("ask the remote", "write notes.txt with hello", "t1", agent=agent)]},
            {"items": [{"text": "parent: {last_tool_results}"}]},
        ],
    )
    config = tmp_path / "parent.toml"
    config.write_text(settings)
    ws = _folder(tmp_path / "parent" / "ws", "parent\n")
    args = serve_args(f"sqlite+aiosqlite:///{tmp_path / 'parent.db'}", ws, spec, "ask")
    env = {
        **os.environ,
        "DEVAGENT_CONFIG": str(config),
        "REMOTE_TOKEN": TOKEN,
        "OPENAI_API_KEY": SECRET,
        **(more_env or {}),
    }
    return args, env


def _remote_settings(name: str, card_url: str, more: str = "") -> str:
    return f"""
outbound_allow = ["127.0.0.1/32"]
{more}
[remote_agents.{name}]
card_url = "{card_url}"
bearer_token_env = "REMOTE_TOKEN"
"""


def _folder(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return folder_with(path, {"README.md": text})


async def _delegate(
    tmp_path: Path, agent: str, settings: str, more_env: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """Start the parent with `settings`, send it one prompt (it starts a task of type `agent`),
    and return the results of its turn (the parent stopped)."""
    args, env = _parent(tmp_path, agent, settings, more_env)
    async with httpx.AsyncClient(timeout=60) as c:
        with serving(args, tmp_path / "parent.log", env=env) as parent:
            return results(await stream_message(c, parent.url, v03_message("delegate"), PLAIN))


@contextmanager
def _remote_devagent(tmp_path: Path, steps: list[Any]) -> Iterator[tuple[Path, Any, Any]]:
    """A remote `devagent serve` (ask mode) whose model plays `steps`, and a parent whose
    `reviewer` type is that remote: (the remote's workspace, the remote, the parent). The
    parent's `again()` stops it and starts another on the same store."""
    remote_ws = _folder(tmp_path / "remote" / "ws", "remote\n")
    remote_spec = write_script(tmp_path / "remote.json", steps)
    remote_args = serve_args(f"sqlite+aiosqlite:///{tmp_path / 'remote.db'}", remote_ws, remote_spec, "ask")
    with serving(remote_args, tmp_path / "remote.log") as remote:
        card = remote.url + ".well-known/agent-card.json"
        args, env = _parent(tmp_path, "reviewer", _remote_settings("reviewer", card))
        with serving(args, tmp_path / "parent.log", env=env) as parent:
            later: list[Any] = []

            def again() -> Any:
                parent.stop()
                later.append(start_serve(args, tmp_path / "parent2.log", env=env))
                return later[-1]

            parent.again = again
            try:
                yield remote_ws, remote, parent
            finally:
                for p in later:
                    p.stop()


@pytest.mark.parametrize("restart", [False, True])
async def test_issue31_item4_delegates_to_a_remote_devagent_and_relays_its_question(
    tmp_path: Path, restart: bool
) -> None:
    """The remote's write asks permission (input-required, in words); the parent's user answers
    through the parent's door (also after the parent restarted: the remote task is stored with
    the question), the answer goes back on the remote task, the remote writes and its answer is
    the task call's result. The bearer token from REMOTE_TOKEN is what lets the remote (served
    with --token) accept the call."""
    steps = [
        {"items": [write_call("notes.txt", "hello\n", "w1")]},
        {"items": [{"text": "I wrote notes.txt."}]},
    ]
    async with httpx.AsyncClient(timeout=60) as c:
        with _remote_devagent(tmp_path, steps) as (remote_ws, _remote, parent):
            first = results(await stream_message(c, parent.url, v03_message("delegate"), PLAIN))
            assert first[-1]["status"]["state"] == "input-required", first
            asked = status_text(first[-1])
            assert "reviewer" in asked and "notes.txt" in asked, asked
            assert not (remote_ws.parent / "notes.txt").exists()
            if restart:
                parent = parent.again()
            answer = v03_message("yes", task_id=first[0]["id"], context_id=first[0]["contextId"])
            second = results(await stream_message(c, parent.url, answer, PLAIN))
            assert second[-1]["status"]["state"] == "completed", second
            assert (remote_ws.parent / "notes.txt").read_text() == "hello\n"
            assert _reply(second) == "parent: I wrote notes.txt."


# the interfaces a card keeps: gRPC (1.0), HTTP+JSON (1.0), JSON-RPC of A2A 0.3
INTERFACES = {
    "grpc": ("GRPC", "1.0"),
    "http_json": ("HTTP+JSON", "1.0"),
    "jsonrpc_0.3": ("JSONRPC", "0.3"),
}


@pytest.mark.parametrize("interface", sorted(INTERFACES))
async def test_issue31_item4_over_the_binding_the_card_names(tmp_path: Path, interface: str) -> None:
    """A remote `devagent serve` whose card (served by a fake, as the operator's card URL) names
    only one of its endpoints: the call goes there (gRPC with the bearer token in its metadata;
    HTTP+JSON; A2A 0.3's JSON-RPC), and the remote's answer is the result."""
    binding, version = INTERFACES[interface]
    remote_ws = _folder(tmp_path / "remote" / "ws", "remote\n")
    remote_spec = write_script(tmp_path / "remote.json", [{"items": [{"text": f"hello over {interface}"}]}])
    db = f"sqlite+aiosqlite:///{tmp_path / 'remote.db'}"
    remote_args = [*serve_args(db, remote_ws, remote_spec, "ask"), "--grpc-port", "0"]
    async with httpx.AsyncClient(timeout=60) as c:
        with serving(remote_args, tmp_path / "remote.log") as remote:
            card = (await c.get(remote.url + ".well-known/agent-card.json", headers=PLAIN)).json()
            only = [
                i
                for i in card["supportedInterfaces"]
                if i["protocolBinding"] == binding and i.get("protocolVersion") == version
            ]
            assert len(only) == 1, card
            card["supportedInterfaces"] = only
            with _fake("garbage", card) as fake:
                url = f"http://127.0.0.1:{fake.server_port}/.well-known/agent-card.json"
                frames = await _delegate(tmp_path, "remote", _remote_settings("remote", url))
            assert fake.seen == []  # only the card came from the fake
    assert frames[-1]["status"]["state"] == "completed", frames
    assert _reply(frames) == f"parent: hello over {interface}"


async def _remote_states(c: httpx.AsyncClient, url: str) -> list[str]:
    """The states of the remote server's tasks (A2A 1.0 ListTasks)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
    got = (await c.post(url, json=body, headers={**PLAIN, "A2A-Version": "1.0"})).json()
    return [t["status"]["state"] for t in got["result"].get("tasks", [])]


async def test_issue31_item4_a_cancel_of_the_parents_turn_cancels_the_remote_task(tmp_path: Path) -> None:
    """The remote works (its model waits for a file that never comes); the parent's task is
    cancelled: the remote task ends canceled too."""
    started = tmp_path / "remote-started"
    steps = [{"items": [{"touch": str(started)}, {"wait_for": str(tmp_path / "never")}, {"text": "late"}]}]
    async with httpx.AsyncClient(timeout=60) as c:
        with _remote_devagent(tmp_path, steps) as (_ws, remote, parent):
            tasks: list[str] = []

            def first(frame: dict[str, Any]) -> None:
                if not tasks and "id" in frame.get("result", {}):
                    tasks.append(frame["result"]["id"])

            turn = asyncio.create_task(send_stream(c, parent.url, v03_message("delegate"), first))
            await until(lambda: started.exists() and bool(tasks), "the remote agent started")
            assert await _remote_states(c, remote.url) == ["TASK_STATE_WORKING"]
            cancel = {"jsonrpc": "2.0", "id": 2, "method": "tasks/cancel", "params": {"id": tasks[0]}}
            assert "result" in (await c.post(parent.url, json=cancel, headers=PLAIN)).json()
            assert (await turn).last_state == "canceled"
            await until_async(
                lambda: _remote_states(c, remote.url), ["TASK_STATE_CANCELED"], "the remote task canceled"
            )


async def test_issue31_item4_a_cancel_while_the_remote_waits_for_an_answer_cancels_its_task(
    tmp_path: Path,
) -> None:
    """The remote asks (input-required, relayed); instead of an answer the parent's task is
    cancelled: the remote task is cancelled too, never left waiting."""
    steps = [{"items": [write_call("notes.txt", "hello\n", "w1")]}, {"items": [{"text": "never"}]}]
    async with httpx.AsyncClient(timeout=60) as c:
        with _remote_devagent(tmp_path, steps) as (remote_ws, remote, parent):
            first = results(await stream_message(c, parent.url, v03_message("delegate"), PLAIN))
            assert first[-1]["status"]["state"] == "input-required", first
            assert await _remote_states(c, remote.url) == ["TASK_STATE_INPUT_REQUIRED"]
            cancel = {"jsonrpc": "2.0", "id": 2, "method": "tasks/cancel", "params": {"id": first[0]["id"]}}
            assert "result" in (await c.post(parent.url, json=cancel, headers=PLAIN)).json()
            await until_async(
                lambda: _remote_states(c, remote.url), ["TASK_STATE_CANCELED"], "the remote task canceled"
            )
            assert not (remote_ws.parent / "notes.txt").exists()


async def until_async(read: Any, expected: Any, what: str) -> None:
    """Waits until `await read()` gives `expected` (a state the test observes, not a time)."""
    for _ in range(3000):
        if await read() == expected:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never happened: {what}: {await read()}")


class _Fake(BaseHTTPRequestHandler):
    """An A2A server's card, and a message endpoint that answers garbage or never answers."""

    server: Any

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.server.card is not None:
            self._send(json.dumps(self.server.card).encode(), "application/json")
            return
        base = f"http://127.0.0.1:{self.server.server_port}/"
        card = {
            "name": "Fake reviewer",
            "description": "Reviews things, badly.",
            "version": "1",
            "supportedInterfaces": [{"url": base, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
            "capabilities": {"streaming": True},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "poke", "name": "poke", "description": "pokes a diff", "tags": ["x"]}],
        }
        self._send(json.dumps(card).encode(), "application/json")

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.path == "/token":  # an OAuth 2.0 token endpoint
            self.server.token_requests.append(body.decode())
            self._send(
                json.dumps({"access_token": "access-from-oauth", "token_type": "Bearer"}).encode(),
                "application/json",
            )
            return
        self.server.seen.append(({k.lower(): v for k, v in self.headers.items()}, body))
        if self.server.mode == "hang":
            self.server.release.wait()
            return
        self._send(b"data: this is not JSON-RPC at all\n\n", "text/event-stream")

    def _send(self, data: bytes, kind: str) -> None:
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def _fake(mode: str, card: dict[str, Any] | None = None) -> Iterator[Any]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Fake)
    server.daemon_threads = True
    server.mode, server.seen, server.release = mode, [], threading.Event()  # type: ignore[attr-defined]
    server.token_requests, server.card = [], card  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("mode", ["garbage", "hang"])
async def test_issue31_item4_a_remote_that_answers_garbage_or_hangs_fails_the_call_not_the_turn(
    tmp_path: Path, mode: str
) -> None:
    """The call ends with a clear error, the parent's turn goes on to its answer; what reached the
    remote carries the configured bearer token and no other secret of the server's."""
    with _fake(mode) as fake:
        card = f"http://127.0.0.1:{fake.server_port}/.well-known/agent-card.json"
        frames = await _delegate(tmp_path, "fake", _remote_settings("fake", card, "remote_agent_timeout = 3"))
        assert frames[-1]["status"]["state"] == "completed", frames
        said = _reply(frames)
        expected = "did not finish within 3 s" if mode == "hang" else "the remote agent 'fake' failed"
        assert said.startswith("parent: ") and expected in said, said
        assert fake.seen, "the message reached the remote"
        for headers, body in fake.seen:
            assert headers.get("authorization") == f"Bearer {TOKEN}"
            assert SECRET not in json.dumps(headers) and SECRET.encode() not in body
            assert b"write notes.txt with hello" in body


async def test_issue31_item4_a_remote_outside_the_outbound_policy_is_refused(tmp_path: Path) -> None:
    """Without `outbound_allow`, a loopback card URL is refused, clearly, and nothing reaches it;
    the type says it is unavailable and the parent's turn goes on."""
    with _fake("garbage") as fake:
        card = f"http://127.0.0.1:{fake.server_port}/.well-known/agent-card.json"
        settings = _remote_settings("fake", card).replace('outbound_allow = ["127.0.0.1/32"]', "")
        frames = await _delegate(tmp_path, "fake", settings)
        assert frames[-1]["status"]["state"] == "completed", frames
        said = _reply(frames)
        assert "is refused" in said and "outbound_allow" in said, said
        assert fake.seen == []


AUTH = {
    "api_key": ('api_key_header = "X-Api-Key"\napi_key_env = "REMOTE_TOKEN"', "x-api-key", TOKEN),
    "oauth": (
        'oauth_token_url = "{base}token"\noauth_client_id = "devagent"\n'
        'oauth_client_secret_env = "REMOTE_TOKEN"\noauth_scope = "agents"',
        "authorization",
        "Bearer access-from-oauth",
    ),
}


@pytest.mark.parametrize("kind", sorted(AUTH))
async def test_issue31_item4_api_key_and_oauth_auth_reach_the_remote_and_nothing_else(
    tmp_path: Path, kind: str
) -> None:
    """The API-key header, or the access token of a client-credentials grant (its secret from
    the configured variable), is what the remote gets; with traces on, a `traceparent` too."""
    auth_keys, header, value = AUTH[kind]
    with _fake("garbage") as fake:
        base = f"http://127.0.0.1:{fake.server_port}/"
        settings = f"""
outbound_allow = ["127.0.0.1/32"]
[remote_agents.fake]
card_url = "{base}.well-known/agent-card.json"
{auth_keys.format(base=base)}
"""
        with OtlpReceiver() as receiver:
            traced = {"DEVAGENT_TRACES": "on", "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}
            frames = await _delegate(tmp_path, "fake", settings, traced)
        assert frames[-1]["status"]["state"] == "completed", frames
        assert "the remote agent 'fake' failed" in _reply(frames)
        [(headers, body)] = fake.seen
        assert headers.get(header) == value, headers
        if kind == "api_key":
            assert "authorization" not in headers
        else:
            assert fake.token_requests  # one for reading the card, one for the call
            for form in fake.token_requests:
                assert "grant_type=client_credentials" in form and f"client_secret={TOKEN}" in form
                assert "client_id=devagent" in form and "scope=agents" in form
        assert headers["traceparent"].startswith("00-"), headers
        assert SECRET not in json.dumps(headers) and SECRET.encode() not in body


async def test_issue31_item4_a_bare_a2a_sdk_agent_answers_as_a_subagent(tmp_path: Path) -> None:
    """A remote agent that is not devagent (a minimal agent on a2a-sdk's server classes): the
    parent's `task` call reaches it and its answer is the call's result; the turn finishes."""
    with bare_a2a_agent("pong from the bare agent") as card:
        frames = await _delegate(tmp_path, "bare", _remote_settings("bare", card))
    assert frames[-1]["status"]["state"] == "completed", frames
    assert _reply(frames) == "parent: pong from the bare agent"
