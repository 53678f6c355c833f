"""The push-notification queue and the protocol version of each push config, in the core's
database, so that any replica can deliver what another one queued.

`devagent_push_queue` holds one row per (notification, webhook): the payload already built, the
URL and headers, the attempts made and when the next may start. A row is a *stream* member, a
stream being one webhook config of one task; only the oldest row of a stream may be claimed, so
each webhook receives a task's notifications in order, and a failing webhook holds back only its
own stream.

A replica claims rows with a lease (`claimed_by`, `claimed_until`). A delivered row is deleted; a
failed one is released with its next attempt time (exponential backoff) or deleted once the
attempts run out. The row of a replica that died keeps its claim until the lease runs out, then
any replica claims it again: notifications survive a replica's death, and while a lease is live no
other replica sends the same row. (A delivery that outlives its lease may be sent twice; the lease
is kept well above the HTTP timeout.)

Claiming is one UPDATE over a sub-select of the claimable rows: on PostgreSQL the sub-select takes
row locks with `FOR UPDATE SKIP LOCKED`, so concurrent replicas never wait for each other nor claim
the same row; on SQLite the statement runs under the database's single write lock, which makes it
atomic. Times are wall-clock seconds (`time.time()`): replicas' clocks must agree to well within
the lease.

`devagent_push_versions` remembers, per config, the protocol version and owner it was registered
with, so a restarted server still sends each webhook the shape it expects.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sqlalchemy.ext.asyncio import AsyncEngine

metadata = sa.MetaData()

# BIGINT on PostgreSQL; SQLite only auto-increments a column declared INTEGER PRIMARY KEY.
_Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

queue_table = sa.Table(
    "devagent_push_queue",
    metadata,
    sa.Column("id", _Id, primary_key=True, autoincrement=True),
    sa.Column("task_id", sa.String(64), nullable=False),
    sa.Column("config_id", sa.String(255), nullable=False),
    sa.Column("url", sa.Text, nullable=False),
    sa.Column("headers", sa.Text, nullable=False),  # JSON object
    sa.Column("body", sa.Text, nullable=False),  # the JSON posted, as sent
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    sa.Column("next_attempt_at", sa.Float, nullable=False),
    sa.Column("claimed_by", sa.String(128), nullable=True),
    sa.Column("claimed_until", sa.Float, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Index("ix_devagent_push_queue_stream", "task_id", "config_id", "id"),
    sa.Index("ix_devagent_push_queue_due", "next_attempt_at"),
)

versions_table = sa.Table(
    "devagent_push_versions",
    metadata,
    sa.Column("task_id", sa.String(64), primary_key=True),
    sa.Column("config_id", sa.String(255), primary_key=True),
    sa.Column("version", sa.String(8), nullable=False),
    sa.Column("owner", sa.String(255), nullable=False),
)


@dataclass(slots=True)
class NewItem:
    """A notification to queue for one webhook."""

    task_id: str
    config_id: str
    url: str
    headers: dict[str, str]
    body: str


@dataclass(slots=True)
class Item:
    """A claimed notification."""

    id: int
    task_id: str
    config_id: str
    url: str
    headers: dict[str, str]
    body: str
    attempts: int  # this one included


async def create_tables(engine: AsyncEngine) -> None:
    try:
        async with engine.begin() as conn:
            await conn.run_sync(metadata.create_all)
    except sa.exc.DBAPIError:
        # Two replicas starting together both saw the tables missing; the other one made them.
        async with engine.begin() as conn:
            await conn.run_sync(metadata.create_all)


# --- push config versions -------------------------------------------------------------------


async def save_registration(
    engine: AsyncEngine, task_id: str, config_id: str, version: str, owner: str
) -> None:
    t = versions_table
    async with engine.begin() as conn:
        await conn.execute(t.delete().where(t.c.task_id == task_id, t.c.config_id == config_id))
        await conn.execute(
            t.insert().values(task_id=task_id, config_id=config_id, version=version, owner=owner)
        )


async def load_registration(engine: AsyncEngine, task_id: str, config_id: str) -> tuple[str, str] | None:
    """(protocol version, owner) a config was registered with, None if unknown."""
    t = versions_table
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                sa.select(t.c.version, t.c.owner).where(t.c.task_id == task_id, t.c.config_id == config_id)
            )
        ).first()
    return None if row is None else (str(row[0]), str(row[1]))


# --- the queue ------------------------------------------------------------------------------


async def enqueue(engine: AsyncEngine, items: Sequence[NewItem], *, now: float | None = None) -> None:
    """Queue notifications, in the order given (ids grow with it), in one transaction."""
    if not items:
        return
    at = time.time() if now is None else now
    rows = [
        {
            "task_id": i.task_id,
            "config_id": i.config_id,
            "url": i.url,
            "headers": json.dumps(i.headers),
            "body": i.body,
            "attempts": 0,
            "next_attempt_at": at,
            "created_at": at,
        }
        for i in items
    ]
    async with engine.begin() as conn:
        await conn.execute(queue_table.insert(), rows)


async def claim(
    engine: AsyncEngine, worker: str, *, lease: float, limit: int, now: float | None = None
) -> list[Item]:
    """Claim up to `limit` due rows for `worker` until now + `lease`, counting an attempt on each:
    the oldest row of each stream, when it is not claimed by a live lease."""
    if limit <= 0:
        return []
    at = time.time() if now is None else now
    q = queue_table
    c = q.alias("candidate")  # an alias of its own, not correlated with the UPDATE's table
    older = q.alias("older")
    candidates = (
        sa.select(c.c.id)
        .where(
            c.c.next_attempt_at <= at,
            sa.or_(c.c.claimed_until.is_(None), c.c.claimed_until < at),
            ~sa.exists().where(
                older.c.task_id == c.c.task_id,
                older.c.config_id == c.c.config_id,
                older.c.id < c.c.id,
            ),
        )
        .order_by(c.c.id)
        .limit(limit)
    )
    if engine.dialect.name == "postgresql":
        candidates = candidates.with_for_update(skip_locked=True, of=c)
    stmt = (
        sa.update(q)
        .where(q.c.id.in_(candidates.scalar_subquery()))
        # repeated here: on PostgreSQL these are checked again on the row as locked
        .where(sa.or_(q.c.claimed_until.is_(None), q.c.claimed_until < at))
        .values(claimed_by=worker, claimed_until=at + lease, attempts=q.c.attempts + 1)
        .returning(q.c.id, q.c.task_id, q.c.config_id, q.c.url, q.c.headers, q.c.body, q.c.attempts)
    )
    async with engine.begin() as conn:
        rows = (await conn.execute(stmt)).all()
    items = [
        Item(
            id=int(r[0]),
            task_id=r[1],
            config_id=r[2],
            url=r[3],
            headers=dict(json.loads(r[4])),
            body=r[5],
            attempts=int(r[6]),
        )
        for r in rows
    ]
    items.sort(key=lambda i: i.id)
    return items


async def delivered(engine: AsyncEngine, item_id: int) -> None:
    """The row was sent (or given up on): it leaves the queue, letting its stream's next row go."""
    async with engine.begin() as conn:
        await conn.execute(queue_table.delete().where(queue_table.c.id == item_id))


async def give_up(engine: AsyncEngine, item_id: int) -> None:
    """The row will never be sent (attempts exhausted, webhook refused it): it leaves the queue."""
    await delivered(engine, item_id)


async def retry_later(engine: AsyncEngine, item_id: int, worker: str, at: float) -> bool:
    """Release a failed row until `at`; False if `worker` no longer held it (its lease ran out and
    another replica claimed it)."""
    q = queue_table
    async with engine.begin() as conn:
        res = await conn.execute(
            sa.update(q)
            .where(q.c.id == item_id, q.c.claimed_by == worker)
            .values(claimed_by=None, claimed_until=None, next_attempt_at=at)
        )
    return bool(res.rowcount)


async def release(engine: AsyncEngine, worker: str) -> None:
    """Release every row `worker` holds (a clean shutdown), due at once for the next replica."""
    q = queue_table
    async with engine.begin() as conn:
        await conn.execute(
            sa.update(q).where(q.c.claimed_by == worker).values(claimed_by=None, claimed_until=None)
        )


async def drop(engine: AsyncEngine, task_id: str, config_id: str | None = None) -> None:
    """Forget the queued rows of a task's config (or of all its configs): the config was deleted."""
    q = queue_table
    cond: list[Any] = [q.c.task_id == task_id]
    if config_id is not None:
        cond.append(q.c.config_id == config_id)
    async with engine.begin() as conn:
        await conn.execute(q.delete().where(*cond))


async def pending(engine: AsyncEngine) -> int:
    """How many rows are queued (delivered rows are gone)."""
    async with engine.connect() as conn:
        v = (await conn.execute(sa.select(sa.func.count()).select_from(queue_table))).scalar()
    return int(v or 0)
