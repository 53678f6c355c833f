"""Bounded per-process caches (issue 12 item 5): the LRU helper, and each cache that grew with
the number of sessions, tasks or client-chosen names: an entry is evicted past the capacity and
built again, correctly, from the store or the configuration when next needed."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.events import Event, Notice
from devagent.common.lru import LRU
from tests.mcp_servers import SERVER


def test_lru_evicts_the_least_recently_used() -> None:
    """issue 12 item 5: past the capacity the least recently used entry goes (a `get` or a write
    is a use; `in` and `peek` are not); a smaller capacity evicts at once."""
    evicted: list[tuple[str, int]] = []
    lru: LRU[str, int] = LRU(3, on_evict=lambda k, v: evicted.append((k, v)))
    for i, k in enumerate("abc"):
        lru[k] = i
    assert lru.get("a") == 0  # a is now the most recent
    assert "b" in lru and lru.peek("b") == 1  # not uses
    lru["d"] = 3
    assert evicted == [("b", 1)] and list(lru) == ["c", "a", "d"]
    lru["c"] = 20  # a write is a use
    lru["e"] = 4
    assert evicted[-1] == ("a", 0) and list(lru) == ["d", "c", "e"]
    lru.capacity = 1
    assert list(lru) == ["e"] and lru.evictions == 4 and len(lru) == 1
    assert lru.pop("e") == 4 and lru.pop("e") is None and len(lru) == 0
    with pytest.raises(ValueError):
        LRU(0)


@pytest.fixture
def server_script(tmp_path: Path) -> Path:
    p = tmp_path / "mcp_server.py"
    p.write_text(SERVER)
    return p


def _stdio(script: Path) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(script)]}


async def test_mcp_views_are_evicted_and_rebuilt(
    core_factory: Any, script: Any, workspace: Path, server_script: Path
) -> None:
    """issue 12 item 5: McpManager keeps at most `views.capacity` session views; a session whose
    view was evicted gets it built again from its stored servers and the configuration: the same
    servers, the same (shared) connection, the same tools; a refused server is reported again
    once. Preparing more sessions at once than the capacity holds works (a view evicted while its
    servers start is not looked up again)."""
    core = await core_factory(script([[{"text": "hi"}]]), mcp_client_commands=(sys.executable,))
    manager = core.mcp
    manager.views.capacity = 2
    servers = {"mine": _stdio(server_script), "evil": {"command": "/bin/sh"}}
    sessions = [await core.create_session([workspace], mcp_servers=servers) for _ in range(3)]
    notices: dict[str, list[str]] = {s.id: [] for s in sessions}

    def emit_for(sid: str) -> Any:
        def emit(ev: Event) -> None:
            if isinstance(ev, Notice):
                notices[sid].append(ev.text)

        return emit

    # three sessions prepared at once with room for two views: no KeyError, each reports once
    await asyncio.gather(*(manager.prepare(s, emit_for(s.id)) for s in sessions))
    for s in sessions:
        assert len(notices[s.id]) == 1, notices
        assert notices[s.id][0].startswith("MCP server evil was not connected:"), notices
    assert len(manager.views) == 2
    first = sessions[0]
    tools = {s.id: sorted(manager.tools_for(s)) for s in sessions}
    assert all("mine__add" in t for t in tools.values()), tools
    assert first.id not in manager.views or sessions[1].id not in manager.views
    assert manager.views.evictions >= 1

    # evict the first session's view for certain, then use the session again: rebuilt
    manager.views.capacity = 1
    manager.tools_for(sessions[2])
    assert first.id not in manager.views
    conns_before = {id(e.conn) for s in sessions[1:] for e in manager.session_servers(s) if e.conn}
    again = await core.get_session(first.id)  # (the session's servers are its stored state)
    assert again is not None
    entries = manager.session_servers(again)
    assert first.id in manager.views
    assert [(e.spec.name, e.origin, bool(e.refused)) for e in entries] == [
        ("mine", "session", False),
        ("evil", "session", True),
    ]
    assert {id(e.conn) for e in entries if e.conn} <= conns_before  # no second server process
    assert sorted(manager.tools_for(again)) == tools[first.id]
    reported: list[str] = []
    await manager.prepare(again, lambda ev: reported.append(ev.text) if isinstance(ev, Notice) else None)
    await manager.prepare(again, lambda ev: reported.append(ev.text) if isinstance(ev, Notice) else None)
    assert len([n for n in reported if "evil" in n]) == 1  # once per (rebuilt) view


async def test_push_registrations_are_evicted_and_read_back(core_factory: Any, script: Any) -> None:
    """issue 12 item 5: the push config store's registrations (protocol version and owner of each
    webhook config) are a bounded cache of their table: one evicted is read back as it was
    registered, never taken for the 1.0 default."""
    from a2a.server.context import ServerCallContext
    from a2a.types import TaskPushNotificationConfig

    from devagent.a2a.auth import NamedUser
    from devagent.a2a.push import VersionedPushConfigStore

    core = await core_factory(script([[{"text": "hi"}]]))
    store = VersionedPushConfigStore(core.store.engine)
    await store.initialize()
    store.registered.capacity = 2
    for i, (method, owner) in enumerate(
        [("tasks/pushNotificationConfig/set", "alice"), ("CreateTaskPushNotificationConfig", "bob")] * 2
    ):
        ctx = ServerCallContext(user=NamedUser(owner), state={"method": method})
        config = TaskPushNotificationConfig(task_id=f"t{i}", id=f"c{i}", url="https://example.com/hook")
        await store.set_info(f"t{i}", config, ctx)
    assert len(store.registered) == 2 and ("t0", "c0") not in store.registered
    assert await store.registration("t0", "c0") == ("0.3", "alice")  # read back from the table
    assert await store.registration("t1", "c1") == ("1.0", "bob")
    assert await store.registration("t3", "c3") == ("1.0", "bob")
    assert await store.registration("t2", "c2") == ("0.3", "alice")
    assert len(store.registered) == 2

    # tasks known to have configs or none: bounded too; one evicted is asked of the database
    store._has_configs.capacity = 2
    for i in range(4):
        store.new_task(f"new{i}")
    assert not store.known_without_configs("new0")  # evicted: not known any more
    assert store.known_without_configs("new3")
    assert await store.get_info_for_dispatch("new0") == []
    assert [c.id for c in await store.get_info_for_dispatch("t0")] == ["c0"]


async def test_model_objects_are_bounded(core_factory: Any, script: Any) -> None:
    """issue 12 item 5: model objects by spec (a client may name models) are kept at most
    `models.capacity`; an evicted spec gets a new, working model object."""
    specs = [script([[{"text": f"reply {i}"}]]) for i in range(3)]
    core = await core_factory(specs[0])
    core.models.capacity = 2
    made = [core.model_for(s) for s in specs]
    assert len(core.models) == 2 and specs[0] not in core.models
    assert core.model_for(specs[2]) is made[2]  # still cached
    again = core.model_for(specs[0])
    assert again is not made[0] and type(again) is type(made[0])
    assert specs[1] not in core.models  # the least recently used made room


async def test_fresh_task_ids_are_bounded(core_factory: Any, script: Any) -> None:
    """issue 12 item 5: the task store's ids of tasks created and not saved yet are bounded; an
    id that aged out is looked up in the database, which has no row for it either."""
    from a2a.server.context import ServerCallContext
    from a2a.server.tasks import DatabaseTaskStore

    from devagent.a2a.auth import NamedUser
    from devagent.a2a.store import BufferedTaskStore

    core = await core_factory(script([[{"text": "hi"}]]))
    store = BufferedTaskStore(DatabaseTaskStore(core.store.engine))
    await store.initialize()
    store._fresh.capacity = 3
    for i in range(5):
        store.new_task(f"t{i}")
    assert list(store._fresh) == ["t2", "t3", "t4"]  # the oldest aged out, the newest kept
    ctx = ServerCallContext(user=NamedUser("alice"))
    assert await store.get("t0", ctx) is None  # asked of the database: no such task
    assert await store.get("t4", ctx) is None  # known fresh: not asked


async def test_mcp_client_servers_of_evicted_views_are_stopped(
    core_factory: Any, script: Any, workspace: Path, server_script: Path
) -> None:
    """issue 12 item 5: a client naming ever new MCP servers cannot keep ever more of them
    running: a client-named server that no kept view uses is stopped when its view is evicted; a
    server another view still uses keeps running; the session that comes back starts it again."""
    core = await core_factory(script([[{"text": "hi"}]]), mcp_client_commands=(sys.executable,))
    manager = core.mcp
    manager.views.capacity = 2
    a = await core.create_session([workspace], mcp_servers={"a": _stdio(server_script)})
    b = await core.create_session([workspace], mcp_servers={"b": _stdio(server_script)})
    b2 = await core.create_session([workspace], mcp_servers={"b": _stdio(server_script)})
    await manager.prepare(a)
    conn_a = manager.session_servers(a)[0].conn
    assert conn_a is not None and conn_a.state == "ready"
    await manager.prepare(b)
    conn_b = manager.session_servers(b)[0].conn
    await manager.prepare(b2)  # evicts a's view: its server is used by no one else
    assert a.id not in manager.views
    await asyncio.gather(*manager._closing)
    assert conn_a.state == "closed"
    assert conn_a not in manager._conns.values()

    manager.views.capacity = 1  # evicts b's view; b2 still uses the same server
    assert b.id not in manager.views and b2.id in manager.views
    assert conn_b is not None and conn_b.state == "ready" and conn_b in manager._conns.values()

    await manager.prepare(a)  # back again: started afresh
    conn_a2 = manager.session_servers(a)[0].conn
    assert conn_a2 is not None and conn_a2 is not conn_a and conn_a2.state == "ready"
    assert "a__add" in manager.tools_for(a)


def test_pending_permission_gauge_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 12 item 5: the count of permission requests per paused task (the gauge behind
    /metrics) keeps at most PENDING_TASKS_COUNTED tasks, the most recent; a task answered by a
    new execution leaves it."""
    from devagent.a2a import observe

    monkeypatch.setattr(observe, "PENDING_TASKS_COUNTED", 3)
    metrics = observe.Metrics()

    def gauge() -> float:
        value = metrics.registry.get_sample_value("devagent_pending_permission_requests")
        assert value is not None
        return value

    for i in range(5):
        record = metrics.turn(f"task-{i}")
        record.pending = 2
        record.finish()
    assert len(metrics._pending) == 3 and gauge() == 6  # tasks 2, 3 and 4
    metrics.turn("task-4").finish()  # answered: a new execution of the task
    assert gauge() == 4
