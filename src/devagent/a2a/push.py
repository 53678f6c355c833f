"""Push notifications (A4) that never slow the stream.

The SDK's sender POSTs inline, one webhook after another, before the event reaches the SSE
subscribers, and never retries. This sender only appends the event to a per-task queue; a worker
per task delivers in order, with a timeout, retries and exponential backoff, and each config gets
the payload of the protocol version it was registered with (1.0 `StreamResponse`, or the v0.3
`Task` object the 0.3 SDKs posted). Webhook addresses are checked against an allowlist when
registered and again when sent: loopback, private, link-local and reserved addresses are refused
unless the operator allows them.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from a2a.auth.user import User
from a2a.server.tasks import PushNotificationSender
from a2a.server.tasks.database_push_notification_config_store import DatabasePushNotificationConfigStore
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]

from devagent.netpolicy import check_outbound_url, pinned_request, resolve_outbound_url

if TYPE_CHECKING:
    import httpx
    from a2a.server.context import ServerCallContext
    from a2a.server.tasks import PushNotificationEvent, TaskStore
    from a2a.types import TaskPushNotificationConfig

log = logging.getLogger(__name__)


_PRIVATE_HINT = "start the server with --allow-private-webhooks"


async def check_webhook_url(url: str, allow_private: bool) -> str | None:
    """None if the URL may be called, else the reason it may not."""
    return await check_outbound_url(url, allow_private=allow_private, what="webhook URL", hint=_PRIVATE_HINT)


def _is_v03(context: ServerCallContext) -> bool:
    method = context.state.get("method")
    return isinstance(method, str) and "/" in method


class _Owner(User):
    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def is_authenticated(self) -> bool:
        return bool(self._name)

    @property
    def user_name(self) -> str:
        return self._name


class VersionedPushConfigStore(DatabasePushNotificationConfigStore):
    """Remembers, per config, the protocol version and owner it was registered with (in a small
    table of its own, so a restarted server still sends each webhook the shape it expects)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.registered: dict[tuple[str, str], tuple[str, str]] = {}
        meta = sa.MetaData()
        self._versions = sa.Table(
            "devagent_push_versions",
            meta,
            sa.Column("task_id", sa.String(64), primary_key=True),
            sa.Column("config_id", sa.String(255), primary_key=True),
            sa.Column("version", sa.String(8), nullable=False),
            sa.Column("owner", sa.String(255), nullable=False),
        )
        self._meta = meta
        # task id -> whether it has configs; spares a database query per event for the many
        # tasks that have none
        self._has_configs: dict[str, bool] = {}

    def new_task(self, task_id: str) -> None:
        """A task created in this process has no configs until one is set (the SDK sets the
        configs given with the message right after creating the task)."""
        if len(self._has_configs) > 10_000:
            self._has_configs.clear()
        self._has_configs.setdefault(task_id, False)

    def known_without_configs(self, task_id: str) -> bool:
        return self._has_configs.get(task_id) is False

    async def get_info_for_dispatch(self, task_id: str) -> list[TaskPushNotificationConfig]:
        if self._has_configs.get(task_id) is False:
            return []
        configs: list[TaskPushNotificationConfig] = await super().get_info_for_dispatch(task_id)
        if len(self._has_configs) > 10_000:
            self._has_configs.clear()
        self._has_configs[task_id] = bool(configs)
        return configs

    async def delete_info(
        self, task_id: str, context: ServerCallContext, config_id: str | None = None
    ) -> None:
        await super().delete_info(task_id, context, config_id)
        self._has_configs.pop(task_id, None)

    async def initialize(self) -> None:
        await super().initialize()
        async with self.engine.begin() as conn:
            await conn.run_sync(self._meta.create_all)

    async def set_info(
        self, task_id: str, notification_config: TaskPushNotificationConfig, context: ServerCallContext
    ) -> Any:
        stored = await super().set_info(task_id, notification_config, context)
        self._has_configs[task_id] = True
        cid = (stored.id if stored is not None else notification_config.id) or task_id
        entry = ("0.3" if _is_v03(context) else "1.0", context.user.user_name)
        self.registered[(task_id, cid)] = entry
        t = self._versions
        async with self.engine.begin() as conn:
            await conn.execute(t.delete().where(t.c.task_id == task_id, t.c.config_id == cid))
            await conn.execute(
                t.insert().values(task_id=task_id, config_id=cid, version=entry[0], owner=entry[1])
            )
        return stored

    async def registration(self, task_id: str, config_id: str) -> tuple[str, str]:
        """(protocol version, owner) of a config; 1.0 for configs registered elsewhere."""
        key = (task_id, config_id)
        if key not in self.registered:
            t = self._versions
            async with self.engine.connect() as conn:
                row = (
                    await conn.execute(
                        sa.select(t.c.version, t.c.owner).where(
                            t.c.task_id == task_id, t.c.config_id == config_id
                        )
                    )
                ).first()
            self.registered[key] = (row[0], row[1]) if row is not None else ("1.0", "")
        return self.registered[key]


class QueuedPushSender(PushNotificationSender):
    def __init__(
        self,
        client: httpx.AsyncClient,
        store: VersionedPushConfigStore,
        task_store: TaskStore,
        *,
        allow_private: bool = False,
        max_attempts: int = 5,
        backoff: float = 0.5,
    ) -> None:
        self._client = client
        self._store = store
        self._task_store = task_store
        self._allow_private = allow_private
        self._max_attempts = max_attempts
        self._backoff = backoff
        self._queues: dict[str, deque[PushNotificationEvent]] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}

    async def validate_url(self, url: str) -> bool:
        reason = await check_webhook_url(url, self._allow_private)
        if reason:
            log.warning("refused webhook %s: %s", url, reason)
        return reason is None

    async def send_notification(self, task_id: str, event: PushNotificationEvent) -> None:
        if self._store.known_without_configs(task_id):
            return
        q = self._queues.get(task_id)
        if q is None:
            q = self._queues[task_id] = deque()
        q.append(event)
        if task_id not in self._workers:
            self._workers[task_id] = asyncio.create_task(self._drain(task_id), name=f"push:{task_id}")

    async def _drain(self, task_id: str) -> None:
        q = self._queues[task_id]
        try:
            while q:
                event = q.popleft()
                try:
                    configs = await self._store.get_info_for_dispatch(task_id)
                except Exception:
                    log.exception("cannot read push configs of task %s", task_id)
                    continue
                for cfg in configs:
                    await self._deliver(task_id, cfg, event)
        finally:
            # No await between the loop's last check and here, so no event can slip in between.
            self._workers.pop(task_id, None)
            if not q:
                self._queues.pop(task_id, None)

    async def _payload(
        self, task_id: str, cfg: TaskPushNotificationConfig, event: PushNotificationEvent
    ) -> Any:
        version, owner = await self._store.registration(task_id, cfg.id or task_id)
        if version == "0.3":
            from a2a.compat.v0_3 import conversions
            from a2a.server.context import ServerCallContext

            task = await self._task_store.get(task_id, ServerCallContext(user=_Owner(owner)))
            if task is not None:
                return conversions.to_compat_task(task).model_dump(
                    mode="json", by_alias=True, exclude_none=True
                )
        from a2a.utils.proto_utils import to_stream_response

        return MessageToDict(to_stream_response(event))

    async def _deliver(
        self, task_id: str, cfg: TaskPushNotificationConfig, event: PushNotificationEvent
    ) -> None:
        reason, ip = await resolve_outbound_url(
            cfg.url, allow_private=self._allow_private, what="webhook URL", hint=_PRIVATE_HINT
        )
        if reason:
            log.warning("push for task %s not sent to %s: %s", task_id, cfg.url, reason)
            return
        target, headers, extensions = pinned_request(cfg.url, ip) if ip is not None else (cfg.url, {}, {})
        if cfg.token:
            headers["X-A2A-Notification-Token"] = cfg.token
        if cfg.HasField("authentication") and cfg.authentication.scheme and cfg.authentication.credentials:
            headers["Authorization"] = f"{cfg.authentication.scheme} {cfg.authentication.credentials}"
        try:
            body = await self._payload(task_id, cfg, event)
        except Exception:
            log.exception("cannot build push payload for task %s", task_id)
            return
        delay = self._backoff
        for attempt in range(1, self._max_attempts + 1):
            try:
                resp = await self._client.post(target, json=body, headers=headers, extensions=extensions)
                if resp.status_code < 300:
                    return
                if 400 <= resp.status_code < 500 and resp.status_code not in (408, 425, 429):
                    log.warning(
                        "webhook %s refused a push for task %s: HTTP %s", cfg.url, task_id, resp.status_code
                    )
                    return
                log.info("webhook %s answered HTTP %s (attempt %d)", cfg.url, resp.status_code, attempt)
            except Exception as e:
                log.info("webhook %s failed (attempt %d): %s", cfg.url, attempt, e)
            if attempt < self._max_attempts:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
        log.warning(
            "giving up on a push for task %s to %s after %d attempts", task_id, cfg.url, self._max_attempts
        )

    async def aclose(self) -> None:
        workers = list(self._workers.values())
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
