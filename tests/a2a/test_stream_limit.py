"""Open streams per token (issue 12 item 2): every streaming door of the A2A server counts
(JSON-RPC v0.3 and 1.0, HTTP+JSON, the Gemini CLI routes, gRPC), a stream counts until it ends
for any reason, a refused stream is the binding's own error and changes nothing, and the count
never leaks. Real HTTP/SSE and gRPC against a real server; waits are for observable events."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from devagent.a2a.cli import limit_settings_from_env
from devagent.a2a.streams import StreamLimit
from tests.a2a.helpers import (
    TOKEN,
    auth,
    call,
    results,
    rpc,
    running_server,
    stream,
    stream_message,
    v03_message,
)
from tests.conftest import Script

BOB = "bob-token"
TOKENS = {TOKEN: "alice", BOB: "bob"}  # two identities: each works in ROOT/NAME (issue 20)
CALL = {"name": "write_file", "args": {"path": "f.txt", "content": "x\n"}, "id": "w"}
WRITE = [
    {"items": [{"tool_call": CALL}]},
    {"items": [{"text": "written"}]},
]


def refusal(limit: int) -> str:
    return f"too many open streams: at most {limit} per token; close one and try again"


def streams_of(srv: Any) -> StreamLimit:
    limit: StreamLimit = srv.app.app.state.streams  # BearerAuth around the Starlette app
    return limit


async def until(check: Callable[[], bool], what: str) -> None:
    """Waits for a state of the server the test can observe (not for a time)."""
    for _ in range(3000):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


class Held:
    """An SSE stream the client holds open (reading) until `close()`."""

    def __init__(
        self, c: httpx.AsyncClient, method: str, url: str, headers: dict[str, str], body: Any = None
    ) -> None:
        self.frames: list[Any] = []
        self._first = asyncio.Event()
        self._args = (c, method, url, headers, body)
        self._task: asyncio.Task[None] | None = None

    async def _read(self) -> None:
        c, method, url, headers, body = self._args
        async with c.stream(method, url, json=body, headers=headers) as r:
            assert r.status_code == 200, await r.aread()
            async for line in r.aiter_lines():
                if line.startswith("data:"):
                    self.frames.append(json.loads(line[5:]))
                    self._first.set()

    async def open(self) -> Held:
        """Returns once the stream's first event arrived (the server accepted it)."""
        self._task = asyncio.create_task(self._read())
        first = asyncio.create_task(self._first.wait())
        await asyncio.wait([self._task, first], timeout=30, return_when=asyncio.FIRST_COMPLETED)
        first.cancel()
        if self._task.done():
            self._task.result()
            raise AssertionError(f"the stream ended at once: {self.frames}")
        assert self._first.is_set(), "no first event"
        return self

    async def close(self) -> None:
        """The client goes away mid-stream."""
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def ended(self) -> None:
        assert self._task is not None
        await asyncio.wait_for(self._task, 30)


async def _parked_task(c: httpx.AsyncClient, url: str, workspace: Path) -> dict[str, Any]:
    """A task waiting for a permission (input-required): 1.0 subscriptions to it stay open."""
    m = v03_message("write it")  # in the caller's own workspace
    evs = results(await stream_message(c, url, m))
    assert evs[-1]["status"]["state"] == "input-required", evs[-1]
    task: dict[str, Any] = evs[0]
    return task


def _subscribe(c: httpx.AsyncClient, url: str, task_id: str, token: str = TOKEN) -> Held:
    return Held(c, "POST", url, auth(token, v1=True), rpc("SubscribeToTask", {"id": task_id}))


async def _task_count(c: httpx.AsyncClient, url: str) -> int:
    r = await call(c, url, rpc("ListTasks", {}), auth(v1=True))
    return len(r["result"].get("tasks", []))


async def test_json_rpc_streams_per_token(script: Script, sqlite_url: str, workspace: Path) -> None:
    """issue 12 item 2: with 3 streams per token, a token holding 3 open gets -32000 with the
    reason on every streaming method (v0.3 message/stream and tasks/resubscribe, 1.0
    SendStreamingMessage and SubscribeToTask), no task is created and no turn runs; another
    token and non-streaming requests are served. Streams closed by the client, and streams that
    end with their task, give their slots back: 3 open again, and then 0."""
    kw = {"max_streams_per_token": 3}
    async with running_server(script(WRITE * 3), sqlite_url, workspace, tokens=TOKENS, a2a_kw=kw) as srv:
        limit = streams_of(srv)
        async with httpx.AsyncClient(timeout=30) as c:
            task = await _parked_task(c, srv.url, workspace)
            assert limit.total() == 0  # a stream that ended released its slot before its end was seen
            held = [await _subscribe(c, srv.url, task["id"]).open() for _ in range(3)]
            assert limit.open_count("alice") == 3
            tasks_before = await _task_count(c, srv.url)

            new = v03_message("another")
            refused = [
                (rpc("message/stream", {"message": new}, rid=11), auth()),
                (rpc("tasks/resubscribe", {"id": task["id"]}, rid="r"), auth()),
                (rpc("SubscribeToTask", {"id": task["id"]}, rid=13), auth(v1=True)),
                (
                    rpc(
                        "SendStreamingMessage",
                        {"message": {"role": "ROLE_USER", "parts": [{"text": "hi"}], "messageId": "m2"}},
                        rid=14,
                    ),
                    auth(v1=True),
                ),
            ]
            for body, headers in refused:
                r = await c.post(srv.url, json=body, headers=headers)
                assert r.status_code == 200 and r.headers["content-type"] == "application/json"
                assert r.json() == {
                    "jsonrpc": "2.0",
                    "id": body["id"],
                    "error": {"code": -32000, "message": refusal(3)},
                }, body["method"]
            assert await _task_count(c, srv.url) == tasks_before  # nothing was created
            got = await call(c, srv.url, rpc("tasks/get", {"id": task["id"]}), auth())
            assert got["result"]["status"]["state"] == "input-required"  # no turn ran on it
            assert limit.open_count("alice") == 3

            # another token has its own count
            m = v03_message("bob's")
            bob = results(await stream(c, srv.url, rpc("message/stream", {"message": m}), auth(BOB)))
            assert bob[-1]["status"]["state"] == "input-required"

            # the client goes away: the slots come back, and 3 open again
            for h in held:
                await h.close()
            await until(lambda: limit.open_count("alice") == 0, "closed streams released")
            held = [await _subscribe(c, srv.url, task["id"]).open() for _ in range(3)]
            r = await call(c, srv.url, rpc("tasks/resubscribe", {"id": task["id"]}), auth())
            assert r["error"] == {"code": -32000, "message": refusal(3)}

            # streams that end with their task give their slots back too
            for h in held[:2]:
                await h.close()
            await until(lambda: limit.open_count("alice") == 1, "two closed")
            confirm = {"tool_call_id": "w", "selected_option_id": "proceed_once"}
            answer = v03_message(data=[confirm], task_id=task["id"], context_id=task["contextId"])
            done = results(await stream_message(c, srv.url, answer))
            assert done[-1]["status"]["state"] == "completed"
            await held[2].ended()
            last = held[2].frames[-1]["result"]
            assert (last.get("statusUpdate") or last.get("task"))["status"]["state"] == "TASK_STATE_COMPLETED"
            await until(lambda: limit.total() == 0, "every slot back")


async def test_streams_that_fail_give_their_slot_back(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """issue 12 item 2: a stream refused for another reason (unknown task, invalid params)
    holds no slot afterwards: with one stream per token, each of many gets its own error, never
    the limit's, and a valid stream still opens."""
    kw = {"max_streams_per_token": 1}
    async with running_server(script(WRITE), sqlite_url, workspace, a2a_kw=kw) as srv:
        limit = streams_of(srv)
        async with httpx.AsyncClient(timeout=30) as c:
            for i in range(5):
                r = await call(c, srv.url, rpc("SubscribeToTask", {"id": f"nope-{i}"}), auth(v1=True))
                assert r["error"]["code"] == -32001, r  # TaskNotFoundError
                assert limit.total() == 0  # released before the answer's last bytes went out
                empty = v03_message()
                frames = await stream_message(c, srv.url, empty)
                assert [f["error"]["code"] for f in frames] == [-32602], frames  # (v0.3: as SSE)
                assert limit.total() == 0  # released before the answer's last bytes went out
            task = await _parked_task(c, srv.url, workspace)
            assert task["kind"] == "task"
            for _ in range(3):  # one stream after another, each opened as the last one ends
                frames = await stream(c, srv.url, rpc("tasks/resubscribe", {"id": task["id"]}), auth())
                assert results(frames)[-1]["status"]["state"] == "input-required"


async def test_rest_legacy_and_grpc_streams_count(script: Script, sqlite_url: str, workspace: Path) -> None:
    """issue 12 item 2: the HTTP+JSON binding's streaming routes (1.0 and v0.3), the Gemini CLI
    route that streams (`/executeCommand` init) and gRPC's streaming methods count against the
    same per-token limit: a refused one gets HTTP 429 with the binding's error body, or gRPC
    RESOURCE_EXHAUSTED, and creates no task. A gRPC stream the client cancels gives its slot
    back."""
    import grpc
    from a2a.types import Message, Part, Role, SendMessageRequest, SubscribeToTaskRequest, a2a_pb2_grpc

    kw = {"max_streams_per_token": 2, "grpc_port": 0}
    async with running_server(script(WRITE * 2), sqlite_url, workspace, a2a_kw=kw) as srv:
        limit = streams_of(srv)
        meta = [("authorization", f"Bearer {TOKEN}")]
        async with httpx.AsyncClient(timeout=30) as c:
            card = (await c.get(srv.url + ".well-known/agent-card.json")).json()
            grpc_url = next(i["url"] for i in card["supportedInterfaces"] if i["protocolBinding"] == "GRPC")
            task = await _parked_task(c, srv.url, workspace)
            assert limit.total() == 0
            async with grpc.aio.insecure_channel(grpc_url.removeprefix("http://")) as channel:
                stub = a2a_pb2_grpc.A2AServiceStub(channel)
                sub = stub.SubscribeToTask(SubscribeToTaskRequest(id=task["id"]), metadata=meta)
                first = await sub.read()
                assert first.task.id == task["id"]
                held = await _subscribe(c, srv.url, task["id"]).open()
                assert limit.open_count("alice") == 2
                tasks_before = await _task_count(c, srv.url)

                v1 = {"Authorization": f"Bearer {TOKEN}", "A2A-Version": "1.0"}
                v03 = {"Authorization": f"Bearer {TOKEN}"}
                msg1 = {"message": {"role": "ROLE_USER", "parts": [{"text": "hi"}], "messageId": "m1"}}
                msg03 = {"message": v03_message("hi")}
                for method, path, headers, body in (
                    ("POST", "rest/message:stream", v1, msg1),
                    ("GET", f"rest/tasks/{task['id']}:subscribe", v1, None),
                    ("POST", f"rest/tasks/{task['id']}:subscribe", v1, None),
                    ("POST", "rest/v1/message:stream", v03, msg03),
                    ("POST", f"rest/v1/tasks/{task['id']}:subscribe", v03, None),
                ):
                    r = await c.request(method, srv.url + path, json=body, headers=headers)
                    assert r.status_code == 429, (path, r.text)
                    assert r.json() == {
                        "error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": refusal(2)}
                    }, path
                r = await c.post(srv.url + "executeCommand", json={"command": "init"}, headers=v03)
                assert (r.status_code, r.json()) == (429, {"error": refusal(2)})
                for stream_call in (
                    stub.SendStreamingMessage(
                        SendMessageRequest(
                            message=Message(message_id="g1", role=Role.ROLE_USER, parts=[Part(text="hi")])
                        ),
                        metadata=meta,
                    ),
                    stub.SubscribeToTask(SubscribeToTaskRequest(id=task["id"]), metadata=meta),
                ):
                    with pytest.raises(grpc.aio.AioRpcError) as info:
                        await stream_call.read()
                    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                    assert info.value.details() == refusal(2)
                assert await _task_count(c, srv.url) == tasks_before
                assert limit.open_count("alice") == 2

                sub.cancel()  # the gRPC client goes away
                await until(lambda: limit.open_count("alice") == 1, "the cancelled gRPC stream released")
                rest = await Held(c, "GET", srv.url + f"rest/tasks/{task['id']}:subscribe", v1).open()
                assert limit.open_count("alice") == 2
                for h in (rest, held):
                    await h.close()
                await until(lambda: limit.total() == 0, "every slot back")


def test_stream_limit_unit() -> None:
    """issue 12 item 2: counts per key, released once however often release is called; 0 is no
    limit; a key with nothing open holds no entry."""
    limit = StreamLimit(2)
    a, b = limit.acquire("a"), limit.acquire("a")
    assert a is not None and b is not None
    assert limit.acquire("a") is None and limit.acquire("b") is not None
    a.release()
    a.release()
    assert limit.open_count("a") == 1
    b.release()
    assert limit.open_count("a") == 0 and "a" not in limit._open
    unlimited = StreamLimit(0)
    assert all(unlimited.acquire("a") is not None for _ in range(1000))


def test_stream_limit_setting() -> None:
    """issue 12 item 2: DEVAGENT_MAX_STREAMS_PER_TOKEN, where 0 means no limit."""
    var = "DEVAGENT_MAX_STREAMS_PER_TOKEN"
    assert limit_settings_from_env({var: "0"}) == {"max_streams_per_token": 0}
    assert limit_settings_from_env({var: "5"}) == {"max_streams_per_token": 5}
    with pytest.raises(ValueError, match=var):
        limit_settings_from_env({var: "-1"})


def test_serve_flag_over_environment(
    script: Script, sqlite_url: str, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """issue 12 item 2: a real `devagent serve --max-streams-per-token 1` (over
    DEVAGENT_MAX_STREAMS_PER_TOKEN=5): while one stream is open, a second is refused; once it is
    closed, a stream opens again."""
    from tests.a2a.procs import TOKEN as PTOKEN
    from tests.a2a.procs import serve_args, serving

    monkeypatch.setenv("DEVAGENT_MAX_STREAMS_PER_TOKEN", "5")
    args = [*serve_args(sqlite_url, workspace, script(WRITE * 2), "ask"), "--max-streams-per-token", "1"]
    with serving(args, tmp_path / "serve.log") as srv, httpx.Client(timeout=60) as c:
        m = v03_message("write it", settings={"workspace_path": str(workspace)})
        frames: list[dict[str, Any]] = []
        with c.stream("POST", srv.url, json=rpc("message/stream", {"message": m}), headers=auth(PTOKEN)) as r:
            frames += [json.loads(ln[5:])["result"] for ln in r.iter_lines() if ln.startswith("data:")]
        task = frames[0]
        assert frames[-1]["status"]["state"] == "input-required", frames[-1]
        sub = rpc("SubscribeToTask", {"id": task["id"]})
        for _ in range(2):  # the second time: the first stream's slot came back
            with c.stream("POST", srv.url, json=sub, headers=auth(PTOKEN, v1=True)) as held:
                assert held.status_code == 200
                lines = held.iter_lines()  # (kept: a discarded iterator would close the stream)
                for line in lines:
                    if line.startswith("data:"):
                        break
                with httpx.Client(timeout=60) as other:
                    again = other.post(srv.url, json=sub, headers=auth(PTOKEN, v1=True)).json()
                assert again["error"] == {"code": -32000, "message": refusal(1)}
            # closed by the client: wait (observably) until the server has let the slot go
            probe_body = rpc("tasks/resubscribe", {"id": task["id"]})  # (v0.3: ends at input-required)
            for _ in range(3000):
                with httpx.Client(timeout=60) as probe:
                    r = probe.post(srv.url, json=probe_body, headers=auth(PTOKEN))
                if r.headers["content-type"].startswith("text/event-stream"):
                    break
                assert r.json()["error"]["code"] == -32000
                time.sleep(0.01)
            else:
                raise AssertionError("the closed stream's slot never came back")
