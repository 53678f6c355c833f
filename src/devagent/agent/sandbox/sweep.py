"""The container backend's sweep: what sessions no longer need is removed from the engine.

A server never learns that a conversation is over (an A2A context has no end), so each session
would keep its stopped container, and its workspace volume, forever. Every pass removes:

- a session's container and volume once the session has been idle for the operator's
  `sandbox_keep_seconds`, idle meaning no activity in the store (its row's last save, by any
  replica) and no turn running anywhere (no live lease) nor command running here; so any replica
  may sweep, a restarted one too, and one that took over a dead replica's sessions;
- the containers and volumes of sessions the store does not have (orphans), once two passes in a
  row found them so: a repository session's workspace is made before its session is stored, and a
  pooled volume before its container, so what one pass finds unclaimed may be just being made.

Only what carries this installation's label (`devagent.installation`, the database's id, which
every replica on that database shares) is ever looked at: two servers on one engine never remove
each other's. A pooled container still waiting for a session is the pool's, never swept. A
session whose workspace volume went is remembered in the store, and its next command is refused
saying its files are gone, never given an empty workspace in their place; a session whose
workspace is a host folder just gets a new container around that folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from devagent.agent.sandbox.podman import LABEL, POOL_LABEL, SESSION_LABEL, WORKSPACE, Engine

if TYPE_CHECKING:
    from devagent.agent.sandbox.container import ContainerProvider
    from devagent.store.db import Store
    from devagent.store.sandboxes import Activity, Removed, SandboxRecords

INSTALLATION_LABEL = "devagent.installation"
SESSION_PREFIX = "devagent-s-"  # a session's container (ContainerProvider.for_session)
POOL_PREFIX = "devagent-pool-"  # a pooled container still waiting for a session
HASHED = re.compile(r"-[0-9a-f]{10}$")  # the tail of a name made from an id engines refuse as it is
EVERY_SECONDS = 3600.0  # between two passes at most (a quarter of the keep period where shorter)
log = logging.getLogger(__name__)


@dataclass(slots=True)
class Held:
    """A container or volume of this installation's."""

    kind: str  # "container" | "volume"
    name: str
    session: str = ""  # the session it serves where its label or its name tells
    volume: str = ""  # a container's named volume at /workspace ("" where a host folder is)


@dataclass(slots=True)
class Swept:
    """What a pass did: the sessions whose things it removed as idle, the names of the orphans'
    containers and volumes it removed, and those it found orphaned for the first time."""

    idle: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    suspected: list[str] = field(default_factory=list)


class Sweeper:
    """Sweeps one provider's engine against one store, every `every` seconds from `start` to
    `close` (`once` is one pass). `keep_seconds` 0 sweeps nothing."""

    def __init__(
        self,
        provider: ContainerProvider,
        records: SandboxRecords,
        keep_seconds: float,
        every: float | None = None,
    ) -> None:
        self.provider = provider
        self.records = records
        self.keep = keep_seconds
        self.every = every if every is not None else max(5.0, min(EVERY_SECONDS, keep_seconds / 4))
        self._suspects: set[str] = set()  # orphans' names found by the last pass
        self._task: asyncio.Task[None] | None = None
        self._passing = False
        self._stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None  # the store's (where `attach` ran)

    # --- the passes --------------------------------------------------------------------------------

    async def once(self, now: float | None = None) -> Swept:
        """One pass; `now` is the clock the sessions' last activity is measured against
        (seconds since the epoch, as the store writes it)."""
        swept = Swept()
        if self.keep <= 0 or INSTALLATION_LABEL not in self.provider.labels:
            return swept
        now = time.time() if now is None else now
        groups, loose = await self._by_session(await _listing(self.provider.engine, self._labels()))
        stored = await self.records.activity(groups)
        stored = await self._resolve_hashed(groups, stored)
        suspects: set[str] = set()
        for sid, things in groups.items():
            if self._stopping:
                return swept
            found = stored.get(sid)
            if found is None:
                if self.provider.sandbox_of(sid) is None:  # a session being made here is no orphan
                    await self._orphaned(things, suspects, swept)
            elif not found.busy and now - found.last_active >= self.keep and not self._running_here(sid):
                if await self._remove(sid, things):
                    await self.records.mark_removed(sid, now, self.keep)
                swept.idle.append(sid)
        for thing in loose:
            await self._orphaned([thing], suspects, swept)
        self._suspects = suspects
        return swept

    def _labels(self) -> dict[str, str]:
        return {LABEL: "1", **self.provider.labels}

    async def _by_session(self, held: list[Held]) -> tuple[dict[str, list[Held]], list[Held]]:
        """What each session has (by its label, else its container's name), and what no session
        can be told for (a pooled volume no container mounts)."""
        groups: dict[str, list[Held]] = {}
        loose: list[Held] = []
        owner_of = {h.volume: h.session for h in held if h.kind == "container" and h.volume}
        for h in held:
            if h.kind == "volume" and h.name in owner_of:
                h.session = owner_of[h.name]
                if not h.session:
                    continue  # a waiting pooled container's: the pool's
            if h.session:
                groups.setdefault(h.session, []).append(h)
            elif h.kind == "volume":
                loose.append(h)
        return groups, loose

    async def _resolve_hashed(
        self, groups: dict[str, list[Held]], stored: dict[str, Activity]
    ) -> dict[str, Activity]:
        """Containers named after an id engines refuse as it is (ContainerProvider's name is then
        a part of it and a hash) that a pooled container became: their session is the stored one
        whose name that is, found among all stored ids, only where such a name is not stored."""
        unknown = [sid for sid in groups if sid not in stored and HASHED.search(sid)]
        if not unknown:
            return stored
        from devagent.agent.sandbox.container import _safe

        by_name = {_safe(sid): sid for sid in await self.records.session_ids()}
        for tail in unknown:
            if (sid := by_name.get(tail)) is not None and sid != tail:
                groups.setdefault(sid, []).extend(groups.pop(tail))
                stored.update(await self.records.activity([sid]))
        return stored

    def _running_here(self, session_id: str) -> bool:
        sandbox = self.provider.sandbox_of(session_id)
        return sandbox is not None and sandbox.running_commands > 0

    async def _orphaned(self, things: list[Held], suspects: set[str], swept: Swept) -> None:
        """Removed if the last pass found them orphaned too, else remembered for the next."""
        names = [t.name for t in things]
        if any(n in self._suspects for n in names):
            await self._remove(things[0].session, things)
            swept.orphans += names
        else:
            suspects.update(names)
            swept.suspected += names

    async def _remove(self, session_id: str, things: list[Held]) -> bool:
        """Removes a session's containers, then its volumes (unforced: one that something else
        still mounts stays); whether a workspace volume went."""
        engine = self.provider.engine
        volumes = {t.volume for t in things if t.kind == "container" and t.volume}
        volumes |= {t.name for t in things if t.kind == "volume"}
        for t in things:
            if t.kind == "container":
                await engine.remove(t.name)
        went = False
        for name in sorted(volumes):
            went |= (await engine.run("volume", "rm", name, check=False)).code == 0
        if session_id and (sandbox := self.provider.sandbox_of(session_id)) is not None:
            self.provider.forget(sandbox)  # opened again from nothing by its next command
        if things:
            log.info("sandbox sweep: removed %s", ", ".join(t.name for t in things))
        return went

    # --- what a session is told --------------------------------------------------------------------

    async def removed(self, session_id: str) -> str | None:
        """Why the session has no workspace any more, when the sweep removed its volume. Not
        asked from another event loop (a blocking file operation opens its sandbox in a thread of
        its own), where the store's connections cannot be used."""
        if self._loop is not None and asyncio.get_running_loop() is not self._loop:
            return None
        found = await self.records.removed(session_id)
        return None if found is None else removed_workspace(found)

    # --- running -----------------------------------------------------------------------------------

    def start(self) -> None:
        """Passes from now on (the first at once), while the process runs; nothing with keep 0."""
        if self._task is None and self.keep > 0:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while not self._stopping:
            self._passing = True
            try:
                swept = await self.once()
                if swept.idle or swept.orphans:
                    log.info(
                        "sandbox sweep: %d idle sessions' and %d orphaned containers/volumes removed",
                        len(swept.idle),
                        len(swept.orphans),
                    )
            except Exception as e:  # the engine or the database failed: tried again next pass
                log.warning("the sandbox sweep failed: %s", e)
            finally:
                self._passing = False
            if not self._stopping:
                await asyncio.sleep(self.every)

    async def close(self) -> None:
        """Stops passing: a pass under way ends after the session it is removing (no container
        is left half removed); one waiting for its time is cancelled."""
        self._stopping = True
        if self._task is None:
            return
        if not self._passing:
            self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None


async def attach(provider: Any, store: Store, keep_seconds: float, *, start: bool = True) -> Sweeper | None:
    """For a container provider (else None): labels everything it makes with the store's
    installation id, lets its sessions learn from the store that their workspace was swept, and
    (`start`) starts sweeping, with `keep_seconds` above 0 and an engine to sweep."""
    if getattr(provider, "kind", "") != "container" or not hasattr(provider, "removed_workspace"):
        return None
    from devagent.store.sandboxes import SandboxRecords  # late: only the container backend's

    records = SandboxRecords(store)
    provider.labels.setdefault(INSTALLATION_LABEL, await records.installation())
    sweeper = Sweeper(provider, records, keep_seconds)
    sweeper._loop = asyncio.get_running_loop()
    provider.removed_workspace = sweeper.removed
    if start and provider.unavailable() is None:
        sweeper.start()
    return sweeper


async def _listing(engine: Engine, labels: Mapping[str, str]) -> list[Held]:
    """The containers carrying all `labels` (but the pool's waiting ones), then the volumes."""
    held: list[Held] = []
    names = await engine.labelled(labels)
    fmt = "{{.Name}}\t{{json .Config.Labels}}\t{{json .Mounts}}"
    for line in await _inspect(engine, ["container", "inspect", "--format", fmt], names):
        name, found, mounts = line.split("\t", 2)
        name, have = name.lstrip("/"), json.loads(found or "null") or {}
        if name.startswith(POOL_PREFIX) and have.get(POOL_LABEL) == "1":
            held.append(Held("container", name, "", _volume_in(mounts)))  # the pool's: no session
            continue
        session = str(have.get(SESSION_LABEL) or "")
        if not session and name.startswith(SESSION_PREFIX):  # a pooled container a session claimed
            session = name[len(SESSION_PREFIX) :]
        held.append(Held("container", name, session, _volume_in(mounts)))
    volumes = await engine.labelled(labels, kind="volume")
    for line in await _inspect(
        engine, ["volume", "inspect", "--format", "{{.Name}}\t{{json .Labels}}"], volumes
    ):
        name, found = line.split("\t", 1)
        held.append(Held("volume", name, str((json.loads(found or "null") or {}).get(SESSION_LABEL) or "")))
    return held


async def _inspect(engine: Engine, argv: list[str], names: Iterable[str]) -> list[str]:
    """One line per thing still there (one gone since it was listed is left out)."""
    names = list(names)
    if not names:
        return []
    done = await engine.run(*argv, *names, check=False)
    return [line for line in done.out.splitlines() if "\t" in line]


def _volume_in(mounts: str) -> str:
    for mount in json.loads(mounts or "[]") or []:
        if mount.get("Destination") == WORKSPACE and mount.get("Type") == "volume":
            return str(mount.get("Name") or "")
    return ""


def removed_workspace(removed: Removed) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(removed.at))
    return (
        f"this session's workspace was removed on {when}: the session had been idle for "
        f"{_duration(removed.idle_seconds)} (the server's sandbox_keep_seconds), and its files went "
        "with its container's volume. Its conversation is still stored; start a new session to "
        "work on files again"
    )


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:g} {unit}" if seconds % size == 0 else f"{seconds / size:.1f} {unit}"
    return f"{seconds:g} seconds"
