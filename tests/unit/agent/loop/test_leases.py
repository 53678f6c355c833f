"""The store's lease and compare-and-set saves (issue 10 item 2, "one writer per session"), seen
through two `AgentCore` objects on one database, as two processes would see it. Lease owners are
named explicitly where a test needs an owner that is neither core's store: another live process
of this host (a sleeping child) or a process on another host."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.core import AgentCore
from devagent.agent.settings import CoreConfig
from devagent.store.leases import Holder, Lease, StaleSession

TTL = 60.0


@pytest.fixture
async def two_cores(shared_db: str) -> AsyncIterator[tuple[AgentCore, AgentCore]]:
    """Two cores on one database (SQLite, and PostgreSQL where it runs)."""
    a = await AgentCore.open(CoreConfig(db_url=shared_db, default_model="demo"))
    b = await AgentCore.open(CoreConfig(db_url=shared_db, default_model="demo"))
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


async def new_session(core: AgentCore, tmp_path: Path) -> str:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return (await core.create_session([ws])).id


@pytest.fixture
def other_process() -> Iterator[str]:
    """A lease owner naming another live process of this host (a child that sleeps)."""
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    try:
        yield f"{socket.gethostname()}/{p.pid}/0th3r"
    finally:
        p.kill()
        p.wait()


async def stored(core: AgentCore, sid: str) -> tuple[int, dict[str, Any]]:
    row = await core.store.load_session(sid)
    assert row is not None and row[1] is not None
    return row[0], row[1]


def dead_owner() -> str:
    """A lease owner naming a process of this host that has exited (and been reaped)."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return f"{socket.gethostname()}/{p.pid}/deadbeef"


async def test_a_save_on_a_stale_revision_writes_nothing(
    two_cores: tuple[AgentCore, AgentCore], tmp_path: Path
) -> None:
    """Issue 10 item 2: every save is a compare-and-set on the revision it read; a process whose
    view is stale gets StaleSession and neither its state nor its messages are written."""
    a, b = two_cores
    sid = await new_session(a, tmp_path)
    rev_a, state_a = await stored(a, sid)
    rev_b, state_b = await stored(b, sid)
    assert rev_a == rev_b == 0

    new_rev = await a.store.save(sid, {**state_a, "extra": {"by": "a"}}, expected=0, append=[(0, '"a"')])
    assert new_rev == 1
    with pytest.raises(StaleSession):
        await b.store.save(
            sid, {**state_b, "extra": {"by": "b"}}, expected=0, append=[(0, '"b"'), (1, '"b2"')]
        )
    with pytest.raises(StaleSession):  # a replace is refused the same way
        await b.store.save(sid, {**state_b, "extra": {"by": "b"}}, expected=0, replace=['"b"'])

    for core in (a, b):
        rev, state = await stored(core, sid)
        assert rev == 1 and state["extra"] == {"by": "a"}
        assert await core.store.load_messages(sid) == ['"a"']


async def test_a_save_by_a_process_that_lost_the_lease_writes_nothing(
    two_cores: tuple[AgentCore, AgentCore], tmp_path: Path, other_process: str
) -> None:
    """Issue 10 item 2: a save naming its owner is refused while another owner holds the lease,
    even on the current revision."""
    a, b = two_cores
    sid = await new_session(a, tmp_path)
    owner_a, owner_b = a.store.owner, other_process
    assert isinstance(await a.store.claim(sid, owner_a, TTL, 0), Lease)
    rev, state = await stored(b, sid)
    with pytest.raises(StaleSession):
        await b.store.save(sid, {**state, "extra": {"by": "b"}}, expected=rev, owner=owner_b)
    assert await a.store.save(sid, {**state, "extra": {"by": "a"}}, expected=rev, owner=owner_a) == 1
    assert (await stored(b, sid))[1]["extra"] == {"by": "a"}


async def test_a_live_lease_is_not_taken(
    two_cores: tuple[AgentCore, AgentCore], tmp_path: Path, other_process: str
) -> None:
    """Issue 10 item 2: a claim while another owner holds a live lease returns that Holder; the
    holder renews it and gets it back; after its release the other claims it with the state it
    had not seen."""
    a, b = two_cores
    sid = await new_session(a, tmp_path)
    owner_a, owner_b = a.store.owner, other_process
    got_a = await a.store.claim(sid, owner_a, TTL, 0)
    assert isinstance(got_a, Lease) and got_a.revision == 0 and got_a.state is None

    held = await b.store.claim(sid, owner_b, TTL, 0)
    assert isinstance(held, Holder) and held.owner == owner_a
    assert held.until > time.time() + TTL / 2  # (the database's clock is this machine's)
    read = await b.store.read_session(sid)
    assert read is not None and read.lease_owner == owner_a and read.lease_live

    again = await a.store.claim(sid, owner_a, TTL, 0)  # the holder's own claim renews it
    assert isinstance(again, Lease)
    assert await b.store.renew(sid, owner_b, TTL) is None  # not b's to renew

    _, state = await stored(a, sid)
    await a.store.save(sid, {**state, "extra": {"by": "a"}}, expected=0, owner=owner_a, release=True)
    got_b = await b.store.claim(sid, owner_b, TTL, 0)
    assert isinstance(got_b, Lease) and got_b.revision == 1
    assert got_b.state is not None and got_b.state["extra"] == {"by": "a"}
    assert isinstance(await a.store.claim(sid, owner_a, TTL, 1), Holder)


async def test_the_lease_of_a_dead_process_is_taken_at_once(
    two_cores: tuple[AgentCore, AgentCore], tmp_path: Path
) -> None:
    """Issue 10 item 2: a lease whose owner is a process of this host that no longer runs is taken
    at once, however long it had left."""
    a, b = two_cores
    sid = await new_session(a, tmp_path)
    ghost = dead_owner()
    assert isinstance(await a.store.claim(sid, ghost, 3600.0, 0), Lease)
    read = await b.store.read_session(sid)
    assert read is not None and read.lease_owner == ghost and not read.lease_live

    owner_b = b.store.owner
    got = await b.store.claim(sid, owner_b, TTL, 0)
    assert isinstance(got, Lease), got
    read = await a.store.read_session(sid)
    assert read is not None and read.lease_owner == owner_b and read.lease_live


async def test_an_expired_lease_is_taken(two_cores: tuple[AgentCore, AgentCore], tmp_path: Path) -> None:
    """Issue 10 item 2: the lease of an owner that stopped renewing it (on another host, so its
    pid says nothing) is taken once it has expired, by the database's clock; not before."""
    a, b = two_cores
    sid = await new_session(a, tmp_path)
    elsewhere_live = "another-host.invalid/1/aaaa"
    assert isinstance(await a.store.claim(sid, elsewhere_live, 3600.0, 0), Lease)
    owner_b = b.store.owner
    held = await b.store.claim(sid, owner_b, TTL, 0)
    assert isinstance(held, Holder) and held.owner == elsewhere_live

    elsewhere_gone = "another-host.invalid/2/bbbb"
    await a.store.release(sid, elsewhere_live)
    # a lease whose last renewal was a minute ago and lasted a second: long expired
    assert isinstance(await a.store.claim(sid, elsewhere_gone, -60.0, 0), Lease)
    read = await b.store.read_session(sid)
    assert read is not None and read.lease_owner == elsewhere_gone and not read.lease_live
    got = await b.store.claim(sid, owner_b, TTL, 0)
    assert isinstance(got, Lease), got
    assert await a.store.renew(sid, elsewhere_gone, TTL) is None  # the old owner lost it


async def test_a_session_created_leased_holds_its_lease(
    two_cores: tuple[AgentCore, AgentCore], tmp_path: Path, other_process: str
) -> None:
    """Issue 14: a session created `leased` (a new A2A conversation whose turn starts at once) is
    stored holding its creator's lease, in the insert: another owner cannot claim it, its turn
    needs no claim of its own (no write), and a lease its turn never used is given up."""
    a, b = two_cores
    ws = tmp_path / "ws"
    ws.mkdir()
    session = await a.create_session([ws], leased=True)
    read = await b.store.read_session(session.id)
    assert read is not None and read.lease_owner == a.store.owner and read.lease_live
    held = await b.store.claim(session.id, other_process, TTL, 0)
    assert isinstance(held, Holder) and held.owner == a.store.owner

    await session.release_unused_lease()
    read = await b.store.read_session(session.id)
    assert read is not None and read.lease_owner is None
    got = await b.store.claim(session.id, other_process, TTL, 0)
    assert isinstance(got, Lease) and got.revision == 0

    plain = await a.create_session([ws])  # not leased: the lease is free
    read = await b.store.read_session(plain.id)
    assert read is not None and read.lease_owner is None


async def test_writes_passed_to_a_save_share_its_transaction(
    two_cores: tuple[AgentCore, AgentCore], tmp_path: Path
) -> None:
    """Issue 14: a checkpoint written with a session save (`also`) commits with it, and a save
    refused as stale writes neither."""
    from devagent.store import checkpoints as rows

    a, _ = two_cores
    sid = await new_session(a, tmp_path)
    await rows.ensure_table(a.store)
    seqs: list[int] = []

    async def add(conn: Any) -> None:
        seqs.append(await rows.add_in(conn, sid, time.time(), '{"n": 1}'))

    _, state = await stored(a, sid)
    with pytest.raises(StaleSession):
        await a.store.save(sid, state, expected=5, owner=a.store.owner, also=[add])
    assert seqs == [] and await rows.list_rows(a.store, sid) == []

    assert await a.store.save(sid, state, expected=0, owner=a.store.owner, also=[add]) == 1
    assert seqs == [1] and [r[0] for r in await rows.list_rows(a.store, sid)] == [1]


async def test_a_usage_table_of_an_earlier_version_gains_the_cache_write_column(tmp_path: Path) -> None:
    """Issue 24 item 2, G6 (a database of an earlier version stays usable): the per-caller usage
    table made before cache writes were kept is given
    the column when the store opens; its rows keep their sums and new writes add to them."""
    import sqlite3

    from devagent.store.db import Store

    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE devagent_usage (identity VARCHAR(200) NOT NULL, day VARCHAR(10) NOT NULL,"
            " input_tokens BIGINT NOT NULL, cached_tokens BIGINT NOT NULL,"
            " output_tokens BIGINT NOT NULL, requests BIGINT NOT NULL, PRIMARY KEY (identity, day))"
        )
        db.execute("INSERT INTO devagent_usage VALUES ('alice', '2026-11-24', 100, 50, 10, 1)")
    store = await Store.open(f"sqlite:///{path}")
    try:
        amounts = {"input_tokens": 7, "cached_tokens": 3, "cache_write_tokens": 2, "output_tokens": 1}
        write = store.usage_write("alice", "2026-11-24", {**amounts, "requests": 1})
        async with store.engine.begin() as conn:
            await write(conn)
        (row,) = await store.usage(identity="alice")
    finally:
        await store.close()
    assert (row["input_tokens"], row["cached_tokens"], row["cache_write_tokens"]) == (107, 53, 2)
    assert (row["output_tokens"], row["requests"]) == (11, 2)
