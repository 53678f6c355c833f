"""The push queue in the database (A4; issue 10 item 3): claims with a lease, per-webhook order,
delivery once by one of several replicas, and notifications that survive a replica's death.

PostgreSQL cases run on a database of their own (created on the `postgres` database, dropped
afterwards) and are skipped when no server runs on 127.0.0.1:5432."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest

from devagent.store import push_queue
from tests.a2a.helpers import auth, listening, results, rpc, stream, v03_message
from tests.a2a.procs import serve_argv
from tests.conftest import Script, fresh_pg_database, pg_available
from tests.fakes.local_server import request_body

WITHIN = 60.0  # generous bound for anything a test waits on


# --- databases ------------------------------------------------------------------------------


@pytest.fixture
async def pg_db() -> AsyncIterator[str]:
    if not pg_available():
        pytest.skip("PostgreSQL is not running on 127.0.0.1:5432")
    async with fresh_pg_database() as url:
        yield url


def _engine(url: str) -> Any:
    from sqlalchemy.ext.asyncio import create_async_engine

    return create_async_engine(url, connect_args={"timeout": 30} if url.startswith("sqlite") else {})


async def _pending(url: str) -> int:
    engine = _engine(url)
    try:
        await push_queue.create_tables(engine)
        return await push_queue.pending(engine)
    finally:
        await engine.dispose()


# --- a webhook that counts -------------------------------------------------------------------


class CountingHook:
    """Records every request (notification id, status answered, body); answers `status`."""

    def __init__(self) -> None:
        self.status = 200
        self.delay = 0.0
        self.url = ""
        self.attempts: list[tuple[str, int]] = []  # (notification id, status answered)
        self.received: list[tuple[str, Any]] = []  # accepted: (notification id, body)
        self.changed = asyncio.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await request_body(receive)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        nid = headers.get("x-devagent-notification-id", "")
        if self.delay:
            await asyncio.sleep(self.delay)
        status = self.status
        self.attempts.append((nid, status))
        if status < 300:
            self.received.append((nid, json.loads(body)))
        self.changed.set()
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    def ids(self) -> list[str]:
        return [nid for nid, _ in self.received]

    async def wait_for(self, pred: Callable[[], bool], within: float = WITHIN) -> None:
        deadline = time.monotonic() + within
        while not pred():
            self.changed.clear()
            left = deadline - time.monotonic()
            assert left > 0, (self.attempts, [(n, b.get("kind"), b.get("status")) for n, b in self.received])
            try:
                await asyncio.wait_for(self.changed.wait(), min(left, 0.2))
            except TimeoutError:
                pass


def counting_webhook() -> AbstractAsyncContextManager[CountingHook]:
    return listening(CountingHook())


async def _is_zero(n: Any) -> bool:
    return bool(await n == 0)


async def _wait_until(pred: Callable[[], Any], within: float = WITHIN, what: str = "") -> None:
    deadline = time.monotonic() + within
    while not await pred():
        assert time.monotonic() < deadline, f"not within {within} s: {what}"
        await asyncio.sleep(0.1)


# --- the queue's own rules -------------------------------------------------------------------


def _item(task: str, n: int, cfg: str = "c") -> push_queue.NewItem:
    return push_queue.NewItem(
        task, cfg, "http://hook.invalid/", {"X-A2A-Notification-Token": "t"}, f'{{"n":{n}}}'
    )


async def test_claims_keep_order_and_leases(shared_db: str) -> None:
    """A4: only the oldest row of a (task, webhook) stream is claimable, and not while claimed
    under a live lease; a lapsed lease lets another replica claim it again (attempts counted); a
    replica that lost its claim cannot reschedule the row."""
    engine = _engine(shared_db)
    try:
        await push_queue.create_tables(engine)
        await push_queue.enqueue(
            engine, [_item("t1", 1), _item("t1", 2), _item("t2", 1), _item("t1", 1, "d")]
        )
        now = time.time()
        a = await push_queue.claim(engine, "A", lease=10, limit=10, now=now)
        assert [(i.task_id, i.config_id, i.body) for i in a] == [
            ("t1", "c", '{"n":1}'),
            ("t2", "c", '{"n":1}'),
            ("t1", "d", '{"n":1}'),
        ]
        assert all(i.attempts == 1 for i in a) and a[0].headers == {"X-A2A-Notification-Token": "t"}
        # everything claimable is held; the second row of t1/c waits for the first
        assert await push_queue.claim(engine, "B", lease=10, limit=10, now=now + 1) == []
        await push_queue.delivered(engine, a[0].id)
        b = await push_queue.claim(engine, "B", lease=10, limit=10, now=now + 1)
        assert [(i.task_id, i.body) for i in b] == [("t1", '{"n":2}')]
        # A failed on t2: retried no sooner than asked
        assert await push_queue.retry_later(engine, a[1].id, "A", now + 5)
        assert await push_queue.claim(engine, "B", lease=10, limit=10, now=now + 2) == []
        again = await push_queue.claim(engine, "B", lease=10, limit=10, now=now + 5)
        assert [(i.id, i.attempts) for i in again] == [(a[1].id, 2)]
        # A died holding t1/d: once the lease is over, B takes it, and A can no longer reschedule it
        late = await push_queue.claim(engine, "B", lease=10, limit=10, now=now + 12)
        assert [i.id for i in late] == [b[0].id, a[2].id]  # B's own t1/c lease lapsed too
        assert not await push_queue.retry_later(engine, a[2].id, "A", now + 20)
        await push_queue.release(engine, "B")
        assert len(await push_queue.claim(engine, "C", lease=10, limit=10, now=now + 13)) == 3
        await push_queue.drop(engine, "t1")
        assert await push_queue.pending(engine) == 1
    finally:
        await engine.dispose()


async def test_two_replicas_deliver_each_notification_once(shared_db: str) -> None:
    """A4, issue 10 item 3: two senders with engines of their own (two replicas) on one database
    share a queue of 120 notifications over 24 webhook streams: each is delivered exactly once,
    in order within its stream, and both replicas take part."""
    from a2a.server.tasks import DatabaseTaskStore

    from devagent.a2a.push import QueuedPushSender, VersionedPushConfigStore

    engines = [_engine(shared_db), _engine(shared_db)]
    senders: list[QueuedPushSender] = []
    async with counting_webhook() as hook, httpx.AsyncClient(timeout=10) as client:
        try:
            await push_queue.create_tables(engines[0])
            items = [
                push_queue.NewItem(f"task{t}", "c", hook.url, {}, json.dumps({"task": t, "n": n}))
                for n in range(5)
                for t in range(24)
            ]
            await push_queue.enqueue(engines[0], items)
            hook.delay = 0.02
            for e in engines:
                store = VersionedPushConfigStore(e)
                s = QueuedPushSender(
                    client,
                    store,
                    DatabaseTaskStore(e),
                    allow_private=True,
                    poll_interval=0.05,
                    lease=30,
                    max_in_flight=4,
                    engine=e,
                )
                senders.append(s)
                s.start()
            await hook.wait_for(lambda: len(hook.received) >= len(items))
            ids = hook.ids()
            assert len(ids) == len(set(ids)) == len(items), "a notification was delivered twice"
            # the last deliveries are still being recorded
            await _wait_until(lambda: _is_zero(push_queue.pending(engines[0])), what="the queue to empty")
            per_task: dict[int, list[int]] = {}
            for _, body in hook.received:
                per_task.setdefault(body["task"], []).append(body["n"])
            assert per_task == {t: [0, 1, 2, 3, 4] for t in range(24)}
            assert all(s.delivered > 0 for s in senders), [s.delivered for s in senders]
            assert sum(s.delivered for s in senders) == len(items)
        finally:
            for s in senders:
                await s.aclose()
            for e in engines:
                await e.dispose()


# --- a replica's death ------------------------------------------------------------------------


def _serve_args(db: str, model: str, workspace: Path) -> list[str]:
    return serve_argv(db, workspace.parent, model, "--allow-private-webhooks")


def _push_env(monkeypatch: pytest.MonkeyPatch, **extra: str) -> None:
    """Short poll and lease, quick retries that do not run out while the test looks."""
    monkeypatch.setenv("DEVAGENT_PUSH_POLL_INTERVAL", "0.2")
    monkeypatch.setenv("DEVAGENT_PUSH_LEASE", "3")
    monkeypatch.setenv("DEVAGENT_PUSH_BACKOFF", "0.2")
    monkeypatch.setenv("DEVAGENT_PUSH_MAX_ATTEMPTS", "1000")
    monkeypatch.delenv("DEVAGENT_CRASH_AT", raising=False)
    for k, v in extra.items():
        monkeypatch.setenv(k, v)


def _completed(body: Any) -> bool:
    return body.get("kind") == "task" and body["status"]["state"] == "completed"


async def test_push_queue_survives_a_killed_replica(
    script: Script,
    shared_db: str,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A4, issue 10 item 3 (push queue survives a replica's death): a `devagent serve` whose
    webhook answers 500 keeps the task's notifications queued in the database; it is SIGKILLed;
    a second `devagent serve` on the same database, the webhook now answering 200, delivers
    them, each exactly once."""
    from tests.a2a.test_restart import PROCS, serve_process

    _push_env(monkeypatch)
    args = _serve_args(shared_db, script([{"items": [{"text": "hello"}]}]), workspace)
    async with counting_webhook() as hook, httpx.AsyncClient(timeout=30) as c:
        hook.status = 500
        with serve_process(args) as url:
            m = v03_message("go", settings={"workspace_path": str(workspace)})
            cfg = {"url": hook.url, "token": "pt"}
            params = {"message": m, "configuration": {"pushNotificationConfig": cfg}}
            evs = results(await stream(c, url, rpc("message/stream", params), auth("tok")))
            assert evs[-1]["status"]["state"] == "completed"
            await hook.wait_for(lambda: len(hook.attempts) >= 1)
            proc = PROCS[url]
            proc.kill()  # no shutdown of any kind
            proc.wait(30)
        failed = {nid for nid, status in hook.attempts if status == 500}
        assert failed and not hook.received
        assert await _pending(shared_db) >= 1, "nothing stayed queued"
        hook.status = 200
        with serve_process(args) as url:
            await hook.wait_for(lambda: any(_completed(b) for _, b in hook.received))
            await _wait_until(lambda: _is_zero(_pending(shared_db)), what="the queue to empty")
        ids = hook.ids()
        assert len(ids) == len(set(ids)), f"delivered twice: {ids}"
        assert failed <= set(ids), (failed, ids)
        _, last = hook.received[-1]
        assert _completed(last) and last["id"] == evs[0]["id"]


async def test_claim_of_a_killed_replica_is_taken_over_after_its_lease(
    script: Script,
    sqlite_url: str,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A4, issue 10 item 3: a replica killed right after claiming a notification (before sending
    it) leaves the claim behind; once the lease has run out another replica sends it, once."""
    from tests.a2a.test_restart import serve_process

    args = _serve_args(sqlite_url, script([{"items": [{"text": "hello"}]}]), workspace)
    async with counting_webhook() as hook, httpx.AsyncClient(timeout=30) as c:
        _push_env(monkeypatch, DEVAGENT_CRASH_AT="push.claimed")
        with serve_process(args) as url:
            m = v03_message("go", settings={"workspace_path": str(workspace)})
            params = {"message": m, "configuration": {"pushNotificationConfig": {"url": hook.url}}}
            try:
                await stream(c, url, rpc("message/stream", params), auth("tok"))
            except httpx.HTTPError:
                pass  # the replica may die under the stream
            from tests.a2a.test_restart import PROCS

            PROCS[url].wait(WITHIN)  # it killed itself at the claim
        assert not hook.attempts
        assert await _pending(sqlite_url) >= 1
        _push_env(monkeypatch)
        t0 = time.monotonic()
        with serve_process(args):
            await hook.wait_for(lambda: len(hook.received) >= 1)
            await _wait_until(lambda: _is_zero(_pending(sqlite_url)), what="the queue to empty")
        ids = hook.ids()
        assert ids and len(ids) == len(set(ids)), ids
        assert time.monotonic() - t0 < WITHIN


@pytest.mark.postgres
async def test_two_server_apps_on_postgres_deliver_each_once(
    script: Script, pg_db: str, workspace: Path
) -> None:
    """A4, issue 10 item 3: two A2A apps, each with its own AgentCore and engine, on one
    PostgreSQL database; turns run on both with 1.0 webhooks, and the replicas poll each other's
    rows: every queued notification reaches the webhook exactly once, each task's completion
    once, and the queue ends empty."""
    from tests.a2a.helpers import running_server

    model = script([{"items": [{"text": "a"}, {"text": "b"}]}])
    async with (
        counting_webhook() as hook,
        running_server(model, pg_db, workspace) as one,
        running_server(model, pg_db, workspace) as two,
        httpx.AsyncClient(timeout=30) as c,
    ):
        hook.delay = 0.02
        senders = [s.app.app.state.push_sender for s in (one, two)]
        for s in senders:
            s._poll = 0.05  # find the other's rows quickly

        async def turn(url: str) -> str:
            msg = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "go"}]}
            conf = {"taskPushNotificationConfig": {"url": hook.url, "token": "t"}}
            body = rpc("SendStreamingMessage", {"message": msg, "configuration": conf})
            evs = results(await stream(c, url, body, auth(v1=True)))
            last = evs[-1]["statusUpdate"]
            assert last["status"]["state"] == "TASK_STATE_COMPLETED", evs[-1]
            return str(last["taskId"])

        tasks = await asyncio.gather(*(turn(srv.url) for srv in [one, two] * 6))
        assert len(set(tasks)) == 12

        def completions() -> dict[str, int]:
            out: dict[str, int] = {}
            for _, b in hook.received:
                su = b.get("statusUpdate", {})
                if su.get("status", {}).get("state") == "TASK_STATE_COMPLETED":
                    out[su["taskId"]] = out.get(su["taskId"], 0) + 1
            return out

        await hook.wait_for(lambda: set(completions()) == set(tasks))
        engine = _engine(pg_db)
        try:
            await _wait_until(lambda: _is_zero(push_queue.pending(engine)), what="the queue to empty")
        finally:
            await engine.dispose()
        ids = hook.ids()
        assert len(ids) == len(set(ids)), "a notification was delivered twice"
        assert completions() == dict.fromkeys(tasks, 1)
        assert sum(s.delivered for s in senders) == len(ids)


def test_push_settings_from_the_environment() -> None:
    """The push settings of `devagent serve` come from DEVAGENT_PUSH_*; a bad value is named."""
    from devagent.a2a.cli import push_settings_from_env

    env = {
        "DEVAGENT_PUSH_POLL_INTERVAL": "0.5",
        "DEVAGENT_PUSH_LEASE": "30",
        "DEVAGENT_PUSH_MAX_ATTEMPTS": "7",
    }
    assert push_settings_from_env(env) == {
        "push_poll_interval": 0.5,
        "push_lease": 30.0,
        "push_max_attempts": 7,
    }
    assert push_settings_from_env({}) == {}
    with pytest.raises(ValueError, match="DEVAGENT_PUSH_LEASE"):
        push_settings_from_env({"DEVAGENT_PUSH_LEASE": "soon"})
    with pytest.raises(ValueError, match="DEVAGENT_PUSH_BACKOFF"):
        push_settings_from_env({"DEVAGENT_PUSH_BACKOFF": "0"})
