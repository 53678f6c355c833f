"""Push notifications: queued in the database, delivered once by one replica, never slowing
the stream.

The SDK's sender POSTs inline, one webhook after another, before the event reaches the SSE
subscribers, and never retries. This sender only appends the event to an in-memory list and
returns; a stager task (one per process) turns what has gathered into rows of the database's push
queue (`devagent.store.push_queue`) in one INSERT, the payload already built for each config in the
protocol version it was registered with (1.0 `StreamResponse`, or the v0.3 `Task` object the 0.3
SDKs posted), so any replica can send it without knowing the task. A worker per process claims due
rows with a lease and delivers them, with a timeout, retries and exponential backoff; it is woken
at once by its own stager and polls for the rows other replicas queued or left behind when they
died. Webhook addresses are checked against an allowlist when registered and again when sent:
loopback, private, link-local and reserved addresses are refused unless the operator allows them.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from a2a.server.tasks import PushNotificationSender
from a2a.server.tasks.database_push_notification_config_store import DatabasePushNotificationConfigStore
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]

from devagent.a2a.auth import NamedUser
from devagent.common.faults import crash_point
from devagent.common.lru import LRU
from devagent.common.netpolicy import IPNetwork, check_outbound_url, pinned_request, resolve_outbound_url
from devagent.store import push_queue

if TYPE_CHECKING:
    import httpx
    from a2a.server.context import ServerCallContext
    from a2a.server.tasks import PushNotificationEvent, TaskStore
    from a2a.types import TaskPushNotificationConfig
    from sqlalchemy.ext.asyncio import AsyncEngine

log = logging.getLogger(__name__)


_PRIVATE_HINT = "start the server with --allow-private-webhooks, or list its network in outbound_allow"

# Per-process caches of the push tables: registrations read or written, and
# tasks known to have configs or none.
REGISTRATIONS_IN_MEMORY = 4096
TASKS_KNOWN_IN_MEMORY = 10_000

# The header naming a queued notification: a webhook may use it to drop the rare duplicate (a
# delivery that outlived its lease, or cut short by a shutdown, is sent again).
NOTIFICATION_ID_HEADER = "X-Devagent-Notification-Id"


async def check_webhook_url(url: str, allow_private: bool, allow: tuple[IPNetwork, ...] = ()) -> str | None:
    """None if the URL may be called, else the reason it may not."""
    return await check_outbound_url(
        url, allow_private=allow_private, what="webhook URL", hint=_PRIVATE_HINT, allow=allow
    )


def _is_v03(context: ServerCallContext) -> bool:
    method = context.state.get("method")
    return isinstance(method, str) and "/" in method


class VersionedPushConfigStore(DatabasePushNotificationConfigStore):
    """Remembers, per config, the protocol version and owner it was registered with (in a small
    table of its own, `devagent.store.push_queue`, so a restarted server still sends each webhook
    the shape it expects)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Both are caches of the database, bounded: what one drops is read
        # again from the configs and registrations tables when next needed.
        # (task id, config id) -> (protocol version, owner) it was registered with
        self.registered: LRU[tuple[str, str], tuple[str, str]] = LRU(REGISTRATIONS_IN_MEMORY)
        # task id -> whether it has configs; spares a database query per event for the many
        # tasks that have none
        self._has_configs: LRU[str, bool] = LRU(TASKS_KNOWN_IN_MEMORY)

    def new_task(self, task_id: str) -> None:
        """A task created in this process has no configs until one is set (the SDK sets the
        configs given with the message right after creating the task)."""
        if task_id not in self._has_configs:
            self._has_configs[task_id] = False

    def known_without_configs(self, task_id: str) -> bool:
        return self._has_configs.get(task_id) is False

    async def get_info_for_dispatch(self, task_id: str) -> list[TaskPushNotificationConfig]:
        if self._has_configs.get(task_id) is False:
            return []
        configs: list[TaskPushNotificationConfig] = await super().get_info_for_dispatch(task_id)
        self._has_configs[task_id] = bool(configs)
        return configs

    async def delete_info(
        self, task_id: str, context: ServerCallContext, config_id: str | None = None
    ) -> None:
        await super().delete_info(task_id, context, config_id)
        self._has_configs.pop(task_id, None)
        # what was queued for the deleted config is not sent any more
        await push_queue.drop(self.engine, task_id, config_id)

    async def initialize(self) -> None:
        await super().initialize()
        await push_queue.create_tables(self.engine)

    async def set_info(
        self, task_id: str, notification_config: TaskPushNotificationConfig, context: ServerCallContext
    ) -> Any:
        stored = await super().set_info(task_id, notification_config, context)
        self._has_configs[task_id] = True
        cid = (stored.id if stored is not None else notification_config.id) or task_id
        entry = ("0.3" if _is_v03(context) else "1.0", context.user.user_name)
        self.registered[(task_id, cid)] = entry
        await push_queue.save_registration(self.engine, task_id, cid, entry[0], entry[1])
        return stored

    async def registration(self, task_id: str, config_id: str) -> tuple[str, str]:
        """(protocol version, owner) of a config; 1.0 for configs registered elsewhere."""
        key = (task_id, config_id)
        entry = self.registered.get(key)
        if entry is None:
            found = await push_queue.load_registration(self.engine, task_id, config_id)
            entry = found if found is not None else ("1.0", "")
            self.registered[key] = entry
        return entry


def _json(body: Any) -> str:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _config_headers(cfg: TaskPushNotificationConfig) -> dict[str, str]:
    headers: dict[str, str] = {}
    if cfg.token:
        headers["X-A2A-Notification-Token"] = cfg.token
    if cfg.HasField("authentication") and cfg.authentication.scheme and cfg.authentication.credentials:
        headers["Authorization"] = f"{cfg.authentication.scheme} {cfg.authentication.credentials}"
    return headers


def _settles(event: PushNotificationEvent) -> bool:
    """Whether the event leaves the task in a state a turn stops in."""
    from a2a.types import Task, TaskState, TaskStatusUpdateEvent

    if isinstance(event, Task | TaskStatusUpdateEvent):
        return event.status.state not in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
    return False


class QueuedPushSender(PushNotificationSender):
    def __init__(
        self,
        client: httpx.AsyncClient | Callable[[], httpx.AsyncClient],
        store: VersionedPushConfigStore,
        task_store: TaskStore,
        *,
        allow_private: bool = False,
        allow: tuple[IPNetwork, ...] = (),
        max_attempts: int = 5,
        backoff: float = 0.5,
        poll_interval: float = 2.0,
        lease: float = 60.0,
        max_in_flight: int = 32,
        engine: AsyncEngine | None = None,
    ) -> None:
        # a client (the caller's to close), or what makes one at the first delivery (a server
        # that sends no webhook never pays for one: its TLS context is ~20 ms of start-up), closed
        # by `aclose`
        self._client: httpx.AsyncClient | None = None if callable(client) else client
        self._make_client = client if callable(client) else None
        self._store = store
        self._task_store = task_store
        self._engine: AsyncEngine = engine if engine is not None else store.engine
        self._allow_private = allow_private
        self._allow = allow  # the operator's networks (netpolicy)
        self._max_attempts = max(1, max_attempts)
        self._backoff = backoff
        self._poll = poll_interval
        self._lease = lease
        self._max_in_flight = max(1, max_in_flight)
        # who holds a claim: unique per sender, readable in the table
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.delivered = 0  # notifications this sender delivered
        self._staged: list[tuple[str, PushNotificationEvent]] = []
        self._staged_waiters: list[asyncio.Future[None]] = []  # resolved when those rows are in
        self._stage_wake = asyncio.Event()
        self._wake = asyncio.Event()
        self._due: list[float] = []  # heap of the retry times this sender set
        self._in_flight: dict[int, asyncio.Task[None]] = {}
        self._stager: asyncio.Task[None] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._closed = False

    def start(self) -> None:
        """Start the stager and the worker (the server's start-up: rows queued by replicas that
        stopped are picked up without waiting for an event of this one)."""
        if self._closed or self._worker is not None:
            return
        self._stager = asyncio.create_task(self._stage_loop(), name="push-stager")
        self._worker = asyncio.create_task(self._work_loop(), name="push-worker")

    async def validate_url(self, url: str) -> bool:
        """True for an allowed webhook; a refused one raises InvalidParamsError with the reason
        (the SDK's own error would say only "Invalid push notification URL")."""
        reason = await check_webhook_url(url, self._allow_private, self._allow)
        if reason:
            from a2a.utils.errors import InvalidParamsError

            log.warning("refused webhook %s: %s", url, reason)
            raise InvalidParamsError(message=f"Invalid push notification URL {url}: {reason}")
        return True

    async def send_notification(self, task_id: str, event: PushNotificationEvent) -> None:
        """Stage the event and return at once while the task is working; an event that stops the
        turn (input-required, completed, failed, ...) returns once its rows are committed, so a
        client that saw it knows its notification survives a crash (the SDK calls this before it
        hands the event to the stream's subscribers)."""
        if self._closed or self._store.known_without_configs(task_id):
            return
        self._staged.append((task_id, event))
        self._stage_wake.set()
        if self._worker is None:
            self.start()
        if _settles(event):
            done = asyncio.get_running_loop().create_future()
            self._staged_waiters.append(done)
            await done

    # --- staging: events -> queue rows ------------------------------------------------------

    async def _stage_loop(self) -> None:
        while True:
            await self._stage_wake.wait()
            self._stage_wake.clear()
            await self._stage_all()
            if self._closed:
                return

    async def _stage_all(self) -> None:
        while self._staged:
            batch, self._staged = self._staged, []
            waiters, self._staged_waiters = self._staged_waiters, []
            try:
                items = await self._build(batch)
                if items:
                    await push_queue.enqueue(self._engine, items)
                    self._wake.set()
            except Exception:
                log.exception("cannot queue push notifications (%d events)", len(batch))
            finally:
                for w in waiters:
                    if not w.done():
                        w.set_result(None)

    async def _build(self, batch: list[tuple[str, PushNotificationEvent]]) -> list[push_queue.NewItem]:
        by_task: dict[str, list[PushNotificationEvent]] = {}
        for task_id, event in batch:
            by_task.setdefault(task_id, []).append(event)
        items: list[push_queue.NewItem] = []
        for task_id, events in by_task.items():
            try:
                items += await self._build_task(task_id, events)
            except Exception:
                log.exception("cannot build the push notifications of task %s", task_id)
        return items

    async def _build_task(
        self, task_id: str, events: list[PushNotificationEvent]
    ) -> list[push_queue.NewItem]:
        configs = await self._store.get_info_for_dispatch(task_id)
        if not configs:
            return []
        v1_bodies: list[str] | None = None
        v03_bodies: dict[str, str | None] = {}  # owner -> the task as v0.3 JSON
        out: list[push_queue.NewItem] = []
        for cfg in configs:
            cid = cfg.id or task_id
            version, owner = await self._store.registration(task_id, cid)
            headers = _config_headers(cfg)
            if version == "0.3":
                if owner not in v03_bodies:
                    v03_bodies[owner] = await self._v03_task(task_id, owner)
                body = v03_bodies[owner]
                if body is not None:
                    # A v0.3 webhook gets the whole task: its latest state stands for every
                    # event gathered in this batch.
                    out.append(push_queue.NewItem(task_id, cid, cfg.url, headers, body))
                    continue
            if v1_bodies is None:
                from a2a.utils.proto_utils import to_stream_response

                v1_bodies = [_json(MessageToDict(to_stream_response(e))) for e in events]
            out += [push_queue.NewItem(task_id, cid, cfg.url, headers, b) for b in v1_bodies]
        return out

    async def _v03_task(self, task_id: str, owner: str) -> str | None:
        from a2a.compat.v0_3 import conversions
        from a2a.server.context import ServerCallContext

        task = await self._task_store.get(task_id, ServerCallContext(user=NamedUser(owner)))
        if task is None:
            return None
        return _json(
            conversions.to_compat_task(task).model_dump(mode="json", by_alias=True, exclude_none=True)
        )

    # --- delivery: queue rows -> webhooks ---------------------------------------------------

    def _wait_time(self) -> float:
        now = time.time()
        while self._due and self._due[0] <= now:
            heapq.heappop(self._due)
        if self._due:
            return max(0.0, min(self._poll, self._due[0] - now))
        return self._poll

    async def _work_loop(self) -> None:
        while True:
            self._wake.clear()
            room = self._max_in_flight - len(self._in_flight)
            items: list[push_queue.Item] = []
            if room > 0:
                try:
                    items = await push_queue.claim(
                        self._engine, self.worker_id, lease=self._lease, limit=room
                    )
                except Exception:
                    log.exception("cannot claim push notifications")
            for item in items:
                self._in_flight[item.id] = asyncio.create_task(self._deliver(item), name=f"push:{item.id}")
            if items and len(items) == room:
                continue  # there may be more; the next round claims them or waits for room
            try:
                await asyncio.wait_for(self._wake.wait(), self._wait_time())
            except TimeoutError:
                pass

    async def _deliver(self, item: push_queue.Item) -> None:
        try:
            crash_point("push.claimed")  # kill tests: die holding a claim
            outcome = await self._post(item)
            if outcome == "retry" and item.attempts < self._max_attempts:
                at = time.time() + min(self._backoff * 2 ** (item.attempts - 1), 30.0)
                await push_queue.retry_later(self._engine, item.id, self.worker_id, at)
                heapq.heappush(self._due, at)
                return
            if outcome == "retry":
                log.warning(
                    "giving up on a push for task %s to %s after %d attempts",
                    item.task_id,
                    item.url,
                    item.attempts,
                )
            if outcome == "sent":
                await push_queue.delivered(self._engine, item.id)
                self.delivered += 1
            else:
                await push_queue.give_up(self._engine, item.id)
        except asyncio.CancelledError:
            raise
        except Exception:
            # the claim lapses after the lease and the row is tried again
            log.exception("push delivery of task %s failed", item.task_id)
        finally:
            self._in_flight.pop(item.id, None)
            self._wake.set()

    async def _post(self, item: push_queue.Item) -> str:
        """'sent', 'retry' (worth another attempt) or 'refused' (never worth one)."""
        reason, ip = await resolve_outbound_url(
            item.url,
            allow_private=self._allow_private,
            what="webhook URL",
            hint=_PRIVATE_HINT,
            allow=self._allow,
        )
        if reason:
            log.warning("push for task %s not sent to %s: %s", item.task_id, item.url, reason)
            return "refused"
        target, headers, extensions = pinned_request(item.url, ip) if ip is not None else (item.url, {}, {})
        headers.update(item.headers)
        headers["Content-Type"] = "application/json"
        headers[NOTIFICATION_ID_HEADER] = str(item.id)
        try:
            if self._client is None:
                assert self._make_client is not None
                self._client = self._make_client()
            resp = await self._client.post(
                target, content=item.body.encode(), headers=headers, extensions=extensions
            )
        except Exception as e:
            log.info("webhook %s failed (attempt %d): %s", item.url, item.attempts, e)
            return "retry"
        if resp.status_code < 300:
            return "sent"
        if 400 <= resp.status_code < 500 and resp.status_code not in (408, 425, 429):
            log.warning(
                "webhook %s refused a push for task %s: HTTP %s", item.url, item.task_id, resp.status_code
            )
            return "refused"
        log.info("webhook %s answered HTTP %s (attempt %d)", item.url, resp.status_code, item.attempts)
        return "retry"

    async def aclose(self, grace: float = 2.0) -> None:
        """Queue what was staged, let deliveries under way finish for up to `grace` seconds, stop
        the worker, and release the claims still held (due at once for the next replica)."""
        self._closed = True
        if self._stager is not None:
            self._stage_wake.set()
            try:
                await asyncio.wait_for(self._stager, 10)
            except (TimeoutError, asyncio.CancelledError):
                pass
            except Exception:
                log.exception("push stager failed")
        for w in self._staged_waiters:  # left by a stager that did not finish in time
            if not w.done():
                w.set_result(None)
        self._staged_waiters = []
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
        in_flight = list(self._in_flight.values())
        if in_flight:
            _, late = await asyncio.wait(in_flight, timeout=grace)
            for t in late:
                t.cancel()
            await asyncio.gather(*late, return_exceptions=True)
            if late:
                try:
                    await push_queue.release(self._engine, self.worker_id)
                except Exception:
                    log.exception("cannot release push claims")
        if self._make_client is not None and self._client is not None:  # the one this sender made
            await self._client.aclose()
