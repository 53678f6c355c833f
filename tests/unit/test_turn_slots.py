"""Issue 28 item 5: the callers' turn slots in the store (devagent/store/slots.py), on SQLite and
PostgreSQL: two stores (two replicas) share a caller's slots; a slot of a process that died
(on this host), or one whose holder stopped renewing it (another host's, expired), is free again;
a live other host's slot is not."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import insert, update

from devagent.store.db import Store
from devagent.store.tables import turn_slots_table

TTL = 60.0


@pytest.fixture
async def two_stores(shared_db: str) -> AsyncIterator[tuple[Store, Store]]:
    """Two stores (two replicas) on one database (SQLite, and PostgreSQL where it runs)."""
    a, b = await Store.open(shared_db), await Store.open(shared_db)
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


async def test_issue28_item5_replicas_share_a_callers_slots(two_stores: tuple[Store, Store]) -> None:
    a, b = two_stores
    assert await a.slots.take("ci", "s1", 2, TTL)
    assert await b.slots.take("ci", "s2", 2, TTL)
    assert not await a.slots.take("ci", "s3", 2, TTL)  # both held, one on each replica
    assert not await b.slots.take("ci", "s3", 2, TTL)
    assert await b.slots.take("bob", "s3", 2, TTL)  # another caller's slots are its own
    assert await a.slots.take("ci", "s1", 2, TTL)  # the holder renews its own
    assert await b.slots.held("ci") == 2
    await b.slots.release("s2")
    assert await a.slots.take("ci", "s3", 2, TTL)


async def test_issue28_item5_slots_of_a_dead_process_and_expired_slots_are_free(
    two_stores: tuple[Store, Store],
) -> None:
    a, b = two_stores
    assert await a.slots.take("ci", "s1", 1, TTL)
    await a.close()  # this process's store is gone: its leases and slots are void at once
    assert await b.slots.take("ci", "s2", 1, TTL)
    await b.slots.release("s2")
    far = f"{socket.gethostname()}-elsewhere/4242/f4r"  # a replica on another host: alive for all we know
    async with b.engine.begin() as conn:
        row = {"identity": "ci", "slot": 0, "session_id": "s9", "owner": far, "until": 4e9}
        await conn.execute(insert(turn_slots_table).values(**row))
    assert not await b.slots.take("ci", "s2", 1, TTL)
    async with b.engine.begin() as conn:  # it stopped renewing: its slot expired
        await conn.execute(update(turn_slots_table).values(until=0.0))
    assert await b.slots.take("ci", "s2", 1, TTL)
