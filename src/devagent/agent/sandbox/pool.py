"""A warm pool of session containers: `size` containers of one template, each with its empty
workspace volume, created and started ahead of need. A new session claims one by renaming it to
its own name (the engine's rename is atomic, so two replicas never claim the same one); the pool
refills in the background. Pooled containers carry `devagent.pool=1` and the template's name;
after a server restart the new pool adopts those it finds."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping

from devagent.agent.sandbox.podman import (
    POOL_LABEL,
    SESSION_LABEL,
    TEMPLATE_LABEL,
    Engine,
    EngineError,
    Template,
    new_id,
)

log = logging.getLogger(__name__)
RETRY_SECONDS = 5.0  # after a failed refill


async def provision(
    engine: Engine,
    name: str,
    volume: str,
    template: Template,
    labels: Mapping[str, str],
    *,
    volume_exists: bool = False,
    bind: str = "",
) -> None:
    """Creates (unless `volume_exists` or `bind`) the workspace volume, then the container around
    it (around the host folder `bind` instead where given), and starts it. On failure nothing
    created here is left behind."""
    made_volume = False
    try:
        if not volume_exists and not bind:
            await engine.create_volume(volume, labels, template.workspace_mb)
            made_volume = True
        await engine.create_container(name, volume, template, labels, bind)
        await engine.start(name)
    except BaseException:
        await asyncio.shield(_undo(engine, name, volume if made_volume else ""))
        raise


async def _undo(engine: Engine, name: str, volume: str) -> None:
    await engine.remove(name)
    if volume:
        await engine.remove_volume(volume)


class WarmPool:
    def __init__(
        self, engine: Engine, template: Template, size: int, labels: Mapping[str, str] | None = None
    ) -> None:
        self.engine = engine
        self.template = template
        self.size = size
        self.labels = {**(labels or {}), POOL_LABEL: "1", TEMPLATE_LABEL: template.name, SESSION_LABEL: ""}
        self._ready: list[tuple[str, str]] = []  # (container, volume), oldest first
        self._filling: asyncio.Task[None] | None = None
        self._fill_lock = asyncio.Lock()  # one filler at a time: never more than `size` made
        self._adopted = False

    @property
    def ready(self) -> int:
        return len(self._ready)

    async def fill(self) -> None:
        """Creates containers until `size` are ready (waits for a refill under way)."""
        async with self._fill_lock:
            await self._adopt()
            while len(self._ready) < self.size:
                key = new_id()
                name, volume = f"devagent-pool-{key}", f"devagent-ws-pool-{key}"
                await provision(self.engine, name, volume, self.template, self.labels)
                self._ready.append((name, volume))

    def start_filling(self) -> None:
        """Refills in the background (one refill at a time)."""
        if self._filling is None or self._filling.done():
            self._filling = asyncio.get_running_loop().create_task(self._keep_filled())

    async def _keep_filled(self) -> None:
        while True:
            try:
                await self.fill()
                return
            except (EngineError, OSError) as e:
                log.warning("the warm pool of template %s could not refill: %s", self.template.name, e)
                await asyncio.sleep(RETRY_SECONDS)

    async def claim(self, name: str) -> str | None:
        """A ready container renamed to `name` (running), or None when none is ready; its volume's
        name. The pool refills behind it."""
        try:
            while self._ready:
                pooled, volume = self._ready.pop(0)
                try:
                    await self.engine.rename(pooled, name)
                except EngineError:
                    continue  # claimed by another replica, or gone
                if await self.engine.running(name):
                    return volume
                await self.engine.remove(name)  # stopped while it waited: not worth reviving
                await self.engine.remove_volume(volume)
            return None
        finally:
            if self.size > 0:
                self.start_filling()

    async def _adopt(self) -> None:
        """Pooled containers of this template a previous server left, ready to claim."""
        if self._adopted:
            return
        self._adopted = True
        known = {n for n, _ in self._ready}
        wanted = {
            POOL_LABEL: "1",
            TEMPLATE_LABEL: self.template.name,
            **{k: v for k, v in self.labels.items() if v},
        }
        for name in await self.engine.labelled(wanted):
            if name in known or not name.startswith("devagent-pool-"):
                continue
            volume = await self.engine.volume_of(name)
            if volume and await self.engine.running(name):
                self._ready.append((name, volume))

    async def close(self, drain: bool = True) -> None:
        """Stops refilling; `drain`: removes the containers (and volumes) nobody claimed."""
        if self._filling is not None:
            self._filling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._filling
            self._filling = None
        if drain:
            while self._ready:
                name, volume = self._ready.pop()
                await self.engine.remove(name)
                await self.engine.remove_volume(volume)
