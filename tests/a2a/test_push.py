"""Push notifications (A4) to a local webhook: payload versions, auth headers, a slow webhook
that must not slow the stream, a failing one retried, and the address allowlist."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import httpx

from devagent.a2a.push import check_webhook_url
from tests.a2a.helpers import auth, call, listening, results, rpc, running_server, stream, v03_message
from tests.conftest import Script
from tests.core_helpers import write_call
from tests.fakes.local_server import request_body


class Hook:
    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], Any]] = []
        self.delay = 0.0
        self.fail_first = 0
        self.url = ""
        self.changed = asyncio.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await request_body(receive)
        import json

        if self.fail_first > 0:
            self.fail_first -= 1
            status = 500
        else:
            await asyncio.sleep(self.delay)
            headers = {k.decode(): v.decode() for k, v in scope["headers"]}
            self.received.append((headers, json.loads(body)))
            self.changed.set()
            status = 200
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def wait_for(self, pred: Callable[[list[Any]], bool], within: float = 10) -> None:
        deadline = time.monotonic() + within
        while not pred([b for _, b in self.received]):
            self.changed.clear()
            left = deadline - time.monotonic()
            assert left > 0, self.received
            try:
                await asyncio.wait_for(self.changed.wait(), left)
            except TimeoutError:
                pass


def webhook() -> AbstractAsyncContextManager[Hook]:
    return listening(Hook())


SLOW = [{"items": [{"text": "a"}, {"sleep": 0.2}, {"text": "b"}]}]


def _v03_final_state(bodies: list[Any]) -> bool:
    return any(b.get("kind") == "task" and b["status"]["state"] == "completed" for b in bodies)


async def test_push_v03_with_message_stream(script: Script, sqlite_url: str, workspace: Path) -> None:
    """A4: a config given with message/stream; the webhook gets v0.3 Task payloads with the token
    and the Authorization header the config names; a slow webhook does not slow the stream."""
    async with webhook() as hook, running_server(script(SLOW), sqlite_url, workspace) as srv:
        hook.delay = 1.0
        async with httpx.AsyncClient(timeout=30) as c:
            cfg = {
                "url": hook.url,
                "token": "tok-1",
                "authentication": {"schemes": ["Bearer"], "credentials": "hook-secret"},
            }
            params = {"message": v03_message("go"), "configuration": {"pushNotificationConfig": cfg}}
            t0 = time.monotonic()
            evs = results(await stream(c, srv.url, rpc("message/stream", params), auth()))
            elapsed = time.monotonic() - t0
            assert evs[-1]["status"]["state"] == "completed"
            assert elapsed < 1.0, f"the stream waited for the webhook ({elapsed:.2f}s)"
            await hook.wait_for(_v03_final_state, within=20)
            headers, body = hook.received[-1]
            assert headers["x-a2a-notification-token"] == "tok-1"
            assert headers["authorization"] == "Bearer hook-secret"
            assert body["id"] == evs[0]["id"] and body["kind"] == "task"


async def test_push_v1_config_set_and_retry(script: Script, sqlite_url: str, workspace: Path) -> None:
    """A4: a config set with the 1.0 method gets 1.0 StreamResponse payloads; a webhook failing
    twice is retried with backoff until it takes the event."""
    steps = [
        {"items": [write_call("p.txt", "P", "p")]},
        {"items": [{"text": "pushed"}]},
    ]
    async with webhook() as hook, running_server(script(steps), sqlite_url, workspace) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            msg = {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"text": "write"}],
            }
            res = await call(c, srv.url, rpc("SendMessage", {"message": msg}), auth(v1=True))
            task = res["result"]["task"]
            assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
            hook.fail_first = 2
            cfg = {"taskId": task["id"], "id": "cfg1", "url": hook.url, "token": "t2"}
            res = await call(c, srv.url, rpc("CreateTaskPushNotificationConfig", cfg), auth(v1=True))
            assert res["result"]["url"] == hook.url, res
            conf = {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "taskId": task["id"],
                "parts": [{"data": {"tool_call_id": "p", "selected_option_id": "proceed_once"}}],
            }
            evs = results(
                await stream(c, srv.url, rpc("SendStreamingMessage", {"message": conf}), auth(v1=True))
            )
            assert evs[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"

            def done(bodies: list[Any]) -> bool:
                return any(
                    b.get("statusUpdate", {}).get("status", {}).get("state") == "TASK_STATE_COMPLETED"
                    for b in bodies
                )

            await hook.wait_for(done, within=20)
            states = [
                b["statusUpdate"]["status"]["state"]
                for b in [b for _, b in hook.received]
                if "statusUpdate" in b
            ]
            assert states[0] == "TASK_STATE_WORKING"  # the first event survived two failures


async def test_push_allowlist(script: Script, sqlite_url: str, workspace: Path) -> None:
    """A4: loopback and private webhook addresses are refused unless the operator allows them."""
    assert await check_webhook_url("http://127.0.0.1:9/x", False)
    assert await check_webhook_url("http://10.0.0.5/x", False)
    assert await check_webhook_url("http://169.254.169.254/latest", False)
    assert await check_webhook_url("http://[::1]/x", False)
    assert await check_webhook_url("ftp://example.com/x", False)
    assert await check_webhook_url("http://93.184.215.14/x", False) is None
    assert await check_webhook_url("http://127.0.0.1:9/x", True) is None
    async with running_server(script(SLOW), sqlite_url, workspace, allow_private_webhooks=False) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            t = (await call(c, srv.url, rpc("message/send", {"message": v03_message("x")}), auth()))["result"]
            cfg = {"taskId": t["id"], "pushNotificationConfig": {"url": "http://127.0.0.1:1/hook"}}
            res = await call(c, srv.url, rpc("tasks/pushNotificationConfig/set", cfg), auth())
            assert res["error"]["code"] == -32602, res
            # the refusal says why (the address is private) and how to allow it
            message = res["error"]["message"]
            assert "http://127.0.0.1:1/hook" in message and "--allow-private-webhooks" in message, message
