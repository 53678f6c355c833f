"""The container backend's sweep (issue 40 item 2) on real Podman against a real store: a session
idle in the store for `sandbox_keep_seconds` loses its container and volume, a fresh or busy one
keeps them, an orphan (its session not stored) goes on the second pass that finds it, and what
another installation made is never touched. The clock is the store's: a session is made idle by
writing its row's last activity back, never by waiting."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from sqlalchemy import update

from devagent.agent.core import AgentCore
from devagent.agent.sandbox.base import SandboxError
from devagent.agent.sandbox.container import ContainerProvider
from devagent.agent.sandbox.podman import POOL_LABEL, SESSION_LABEL, TEMPLATE_LABEL
from devagent.agent.sandbox.sweep import INSTALLATION_LABEL, Sweeper, attach
from devagent.agent.settings import CoreConfig
from devagent.config import ConfigError, load_config
from devagent.store.db import Store
from devagent.store.sandboxes import SandboxRecords
from devagent.store.tables import sessions_table
from tests.a2a.helpers import context_of, turn
from tests.a2a.procs import serving
from tests.a2a.test_hostile import ALICE, Site, script, tool_outputs
from tests.core_helpers import shell_call
from tests.sandbox.image import UID
from tests.sandbox.test_issue40_serve import WITHIN, bound_to, serve_args, site

__all__ = ["site"]  # the fixture: a server's site on the container backend, left clean

Make = Callable[..., ContainerProvider]
GUARD = 120.0  # a hang guard for commands, never a pace
KEEP = 3600.0


def sid(what: str) -> str:
    """A session id no other test (of any process sharing the engine) uses."""
    return f"{what}-{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'devagent.db'}")
    try:
        yield s
    finally:
        await s.close()


async def stored(store: Store, *ids: str) -> None:
    for i in ids:
        await store.create_session(i, {"workspace_roots": []})


async def idle_for(store: Store, session_id: str, seconds: float) -> None:
    """The session's last activity moved back by `seconds` (what days without a turn leave)."""
    t = sessions_table
    async with store.engine.begin() as conn:
        await conn.execute(update(t).where(t.c.id == session_id).values(updated_at=t.c.updated_at - seconds))


async def sweeping(provider: ContainerProvider, store: Store) -> Sweeper:
    sweeper = await attach(provider, store, KEEP, start=False)
    assert sweeper is not None
    return sweeper


async def used(
    provider: ContainerProvider, session_id: str, roots: list[Path] | None = None
) -> tuple[str, str]:
    """The session's sandbox opened, a file written by a command, then let go as a door does
    (its container stopped, its workspace kept): its container's and its volume's names."""
    sandbox = await provider.open(session_id, roots or [])
    done = await sandbox.run("echo kept > note.txt", time_limit=GUARD)
    assert done.code == 0, done
    name, volume = sandbox.name, sandbox.volume
    for _ in range(int(GUARD * 100)):  # the command's bookkeeping ends just after its process
        if sandbox.running_commands == 0:
            break
        await asyncio.sleep(0.01)
    await sandbox.release(keep=True)
    assert await provider.engine.running(name) is False
    return name, volume


async def present(provider: ContainerProvider, container: str, volume: str) -> tuple[bool, bool]:
    engine = provider.engine
    return await engine.running(container) is not None, bool(volume) and await engine.volume_exists(volume)


async def test_issue40_item2_a_session_idle_past_keep_loses_its_container_and_volume_a_fresh_one_not(
    make_provider: Make, store: Store
) -> None:
    provider = make_provider()
    sweeper = await sweeping(provider, store)
    old, fresh, busy = sid("old"), sid("fresh"), sid("busy")
    await stored(store, old, fresh, busy)
    things = {s: await used(provider, s) for s in (old, fresh, busy)}
    await idle_for(store, old, KEEP + 1)
    await idle_for(store, fresh, KEEP - 60)
    await idle_for(store, busy, KEEP * 10)
    await store.claim(busy, store.owner, 600, 0)  # a turn of it runs (a live lease): never swept

    swept = await sweeper.once()
    assert swept.idle == [old] and swept.orphans == []
    assert await present(provider, *things[old]) == (False, False)
    assert await present(provider, *things[fresh]) == (True, True)
    assert await present(provider, *things[busy]) == (True, True)
    # the session's next command is refused, saying its files are gone, and no empty workspace
    # takes the place of the removed one (the engine would have made one for the name)
    with pytest.raises(SandboxError, match=r"workspace was removed on .* idle for 60 minutes") as refused:
        await provider.for_session(old, []).run("ls", time_limit=GUARD)
    assert "start a new session" in str(refused.value)
    assert await present(provider, *things[old]) == (False, False)
    assert (await SandboxRecords(store).removed(old)) is not None
    assert (await sweeper.once()).idle == []  # nothing more to remove


async def test_issue40_item2_another_replica_sweeps_and_the_first_one_is_told_the_files_are_gone(
    make_provider: Make, store: Store
) -> None:
    """Idle is the store's, not a replica's memory: replica B removes what replica A made and still
    holds (stopped by A's idle reaper); A's next command is refused, not run on a new volume."""
    labels = {"devagent.part": "replicas"}
    a, b = make_provider(labels=labels), make_provider(labels=labels)
    await sweeping(a, store)
    sweeper_b = await sweeping(b, store)
    assert a.labels[INSTALLATION_LABEL] == b.labels[INSTALLATION_LABEL]  # one database, one installation
    session = sid("replica")
    await stored(store, session)
    sandbox = await a.open(session, [])
    assert (await sandbox.run("echo one > f", time_limit=GUARD)).code == 0
    assert await sandbox.stop_if_idle(0) is True
    await idle_for(store, session, KEEP * 2)
    assert (await sweeper_b.once()).idle == [session]
    with pytest.raises(SandboxError, match="workspace was removed"):
        await sandbox.run("cat f", time_limit=GUARD)
    assert not await a.engine.volume_exists(sandbox.volume)


async def test_issue40_item2_orphans_go_on_the_second_pass_pool_and_held_ones_stay(
    make_provider: Make, store: Store
) -> None:
    """Containers and volumes of sessions the store does not have: found once, removed the next
    pass (a pooled container a session claimed is told by its name, its volume by the container);
    a pooled container still waiting and a session being made here are no orphans."""
    provider = make_provider(warm=1)
    sweeper = await sweeping(provider, store)
    orphan, claimed, making = sid("orphan"), sid("claimed"), sid("making")
    await provider.pool(provider.template()).fill()
    claimed_things = await used(provider, claimed)  # from the pool: labelled as the pool's
    await provider.pool(provider.template()).fill()  # its refill done: nothing is being made
    labels = await provider.engine.run(
        "container", "inspect", "--format", "{{json .Config.Labels}}", claimed_things[0]
    )
    assert f'"{POOL_LABEL}":"1"' in labels.out and f'"{SESSION_LABEL}":""' in labels.out
    provider.warm = 0
    orphan_things = await used(provider, orphan)
    await provider.open(making, [])  # held here, not yet stored (a repository's clone under way)
    loose = f"devagent-ws-pool-{uuid.uuid4().hex[:12]}"  # a pooled volume whose container never came
    await provider.engine.create_volume(
        loose, {**provider.labels, POOL_LABEL: "1", TEMPLATE_LABEL: "default", SESSION_LABEL: ""}
    )

    first = await sweeper.once()
    assert first.orphans == [] and set(first.suspected) >= {claimed_things[0], orphan_things[0], loose}
    assert await present(provider, *orphan_things) == (True, True)
    second = await sweeper.once()
    assert set(second.orphans) == {*claimed_things, *orphan_things, loose}
    for name, volume in (claimed_things, orphan_things):
        assert await present(provider, name, volume) == (False, False)
    assert not await provider.engine.volume_exists(loose)
    assert await provider.engine.running(f"devagent-s-{making}") is True
    pooled = await provider.engine.labelled({**provider.labels, POOL_LABEL: "1"})
    assert [n for n in pooled if n.startswith("devagent-pool-")], "the waiting pooled container stays"


async def test_issue40_item2_a_claimed_pool_container_of_a_hashed_id_is_told_by_its_stored_session(
    make_provider: Make, store: Store
) -> None:
    """A session id engines refuse in a name (the container's name is then part of it and a
    hash), its container claimed from the pool (no session label): found among the stored ids,
    so it is no orphan; idle past keep it goes like any other."""
    provider = make_provider(warm=1)
    sweeper = await sweeping(provider, store)
    odd = f"ctx/{uuid.uuid4().hex[:8]}:x"
    await stored(store, odd)
    await provider.pool(provider.template()).fill()
    name, volume = await used(provider, odd)
    await provider.pool(provider.template()).fill()  # its refill done: nothing is being made
    assert not name.endswith(odd)
    for _ in range(2):
        swept = await sweeper.once()
        assert swept.orphans == [] and swept.suspected == [] and swept.idle == []
    await idle_for(store, odd, KEEP)
    assert (await sweeper.once()).idle == [odd]
    assert await present(provider, name, volume) == (False, False)


async def test_issue40_item2_another_installations_containers_are_never_swept(
    make_provider: Make, store: Store
) -> None:
    ours = make_provider()
    sweeper = await sweeping(ours, store)
    theirs = make_provider(labels={INSTALLATION_LABEL: "another-database"})
    unlabelled = make_provider()  # an older server's, before installations were labelled
    session = sid("theirs")
    await stored(store, session)  # even an id our store has, idle long ago
    await idle_for(store, session, KEEP * 5)
    their_things = await used(theirs, session)
    old_things = await used(unlabelled, sid("older"))
    for _ in range(2):
        swept = await sweeper.once()
        assert (swept.idle, swept.orphans, swept.suspected) == ([], [], [])
    assert await present(theirs, *their_things) == (True, True)
    assert await present(unlabelled, *old_things) == (True, True)


async def test_issue40_item2_a_swept_session_on_a_host_folder_goes_on_in_a_new_container(
    make_provider: Make, store: Store, tmp_path: Path
) -> None:
    """Where /workspace is the session's host folder the files outlive the container: the swept
    session's next command runs in a new container and finds them; nothing says they are gone."""
    provider = make_provider()
    provider.host_workspace = True  # as a server's: the first workspace root bind-mounted
    sweeper = await sweeping(provider, store)
    folder = tmp_path / "work"
    folder.mkdir()
    if os.geteuid() == 0:
        os.chown(folder, UID, UID)
    session = sid("bound")
    await stored(store, session)
    name, volume = await used(provider, session, [folder])
    assert volume == "" and (folder / "note.txt").read_text() == "kept\n"
    await idle_for(store, session, KEEP)
    assert (await sweeper.once()).idle == [session]
    assert await provider.engine.running(name) is None
    assert await SandboxRecords(store).removed(session) is None
    again = provider.for_session(session, [folder])
    done = await again.run("cat note.txt", time_limit=GUARD)
    assert (done.code, done.output) == (0, b"kept\n")
    await again.release(keep=False)


async def test_issue40_item2_keep_zero_sweeps_nothing(make_provider: Make, store: Store) -> None:
    provider = make_provider()
    sweeper = await attach(provider, store, 0.0, start=False)
    assert sweeper is not None and INSTALLATION_LABEL in provider.labels
    session = sid("forever")
    await stored(store, session)
    things = await used(provider, session)
    await idle_for(store, session, 10 * 365 * 86400.0)
    assert (await sweeper.once()).idle == []
    assert await present(provider, *things) == (True, True)


async def test_issue40_item2_replicas_on_one_database_share_the_installation_label_others_differ(
    sandbox_image: str, tmp_path: Path
) -> None:
    """The core labels its container sandboxes with its database's installation id (made by the
    first process, read by the others) and starts its sweep; closing it stops the sweep."""

    def config(db: str) -> CoreConfig:
        return CoreConfig(
            db_url=f"sqlite+aiosqlite:///{tmp_path / db}",
            data_dir=tmp_path / "data",
            default_model="demo",
            sandbox="on",
            sandbox_backend="container",
            sandbox_templates={"default": {"image": sandbox_image}},
        )

    cores = [await AgentCore.open(config(db)) for db in ("one.db", "one.db", "two.db")]
    try:
        ids = [c.sandboxes.labels_for("s")[INSTALLATION_LABEL] for c in cores]  # type: ignore[attr-defined]
        assert ids[0] == ids[1] != ids[2] and all(ids)
        assert all(c.sandbox_sweep is not None and c.sandbox_sweep.keep == 7 * 86400 for c in cores)
    finally:
        for c in cores:
            await c.close()
    assert all(c.sandbox_sweep._task is None for c in cores)


def test_issue40_item2_keep_seconds_comes_from_the_environment_or_the_file(tmp_path: Path) -> None:
    assert load_config(environ={}).sandbox_keep_seconds == 7 * 86400
    assert load_config(environ={"DEVAGENT_SANDBOX_KEEP_SECONDS": "0"}).sandbox_keep_seconds == 0
    settings = tmp_path / "devagent.toml"
    settings.write_text("[devagent]\nsandbox_keep_seconds = 86400\n")
    assert load_config(environ={"DEVAGENT_CONFIG": str(settings)}).sandbox_keep_seconds == 86400
    with pytest.raises(ConfigError, match="sandbox_keep_seconds"):
        load_config(environ={"DEVAGENT_SANDBOX_KEEP_SECONDS": "-1"})


def container_id(name: str) -> str | None:
    done = subprocess.run(
        ["podman", "container", "inspect", "--format", "{{.Id}}", name], capture_output=True, text=True
    )
    return done.stdout.strip() if done.returncode == 0 else None


async def test_issue40_item2_a_server_sweeps_an_idle_conversation_whose_next_message_still_works(
    site: Site,
) -> None:
    """Through `devagent serve` (A2A): a conversation's container, idle in the database past
    the default keep period when a server starts, is removed by that server's sweep; the
    conversation's next message runs in a new container over the same folder, its history read
    from the store (the scripted model answers by the history's length)."""
    steps = [
        [shell_call("echo from-turn-one > kept.txt")],
        [{"text": "one"}],
        [shell_call("cat kept.txt; echo END")],
        [{"text": "two"}],
    ]
    model = script(site.tmp / "s.json", steps)
    alice = site.root / "alice"
    with serving(serve_args(site, model), site.tmp / "serve1.log", env=site.env) as s:
        context = context_of(await turn(s.url, ALICE, "write", alice))
    [name] = bound_to(site.root)
    first = container_id(name)
    with sqlite3.connect(site.db_file) as db:  # eight days without a message
        db.execute("UPDATE devagent_sessions SET updated_at = updated_at - ?", (8 * 86400,))
    with serving(serve_args(site, model), site.tmp / "serve2.log", env=site.env) as s:
        deadline = time.monotonic() + WITHIN
        while container_id(name) is not None:  # the new server's first pass, at its start
            assert time.monotonic() < deadline, s.stderr()
            await asyncio.sleep(0.1)
        frames = await turn(s.url, ALICE, "read", alice, context)
    assert "from-turn-one" in tool_outputs(json.dumps(frames)) and context_of(frames) == context
    again = container_id(name)
    assert again is not None and again != first
