"""Client helpers for the replica tests: SSE streams read in the background (so a test can act
while a turn runs), with the replica that served them."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import httpx

from tests.a2a.helpers import dev_meta, parts_of
from tests.fakes.balancer import BACKEND_HEADER

WITHIN = 60.0  # generous bound for anything a test waits on (2 shared cores)


class SSE:
    """A `message/stream` / `tasks/resubscribe` response read into `frames` as it arrives."""

    def __init__(self, client: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str]):
        self.frames: list[dict[str, Any]] = []
        self.status: int | None = None
        self.backend: int | None = None  # the balancer's backend index, when sent through it
        self.error: BaseException | None = None
        self.done = False
        self._changed = asyncio.Event()
        self._task = asyncio.create_task(self._run(client, url, body, headers))

    def _notify(self) -> None:
        old, self._changed = self._changed, asyncio.Event()
        old.set()

    async def _run(
        self, client: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str]
    ) -> None:
        try:
            async with client.stream("POST", url, json=body, headers=headers) as r:
                self.status = r.status_code
                if BACKEND_HEADER in r.headers:
                    self.backend = int(r.headers[BACKEND_HEADER])
                self._notify()
                if r.status_code != 200:
                    self.frames.append({"http_error": r.status_code, "body": (await r.aread()).decode()})
                    return
                async for line in r.aiter_lines():
                    if line.startswith("data:"):
                        self.frames.append(json.loads(line[5:]))
                        self._notify()
        except httpx.HTTPError as e:  # a replica killed under the stream
            self.error = e
        finally:
            self.done = True
            self._notify()

    async def wait_for(self, pred: Callable[[list[dict[str, Any]]], bool], within: float = WITHIN) -> None:
        deadline = time.monotonic() + within
        while True:
            changed = self._changed
            if pred(self.frames):
                return
            if self.done:
                raise AssertionError(f"stream ended first (error {self.error!r}); last: {self.frames[-3:]}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"not seen within {within} s; last frames: {self.frames[-3:]}")
            try:
                await asyncio.wait_for(changed.wait(), left)
            except TimeoutError:
                pass

    async def finish(self, within: float = WITHIN) -> list[dict[str, Any]]:
        await asyncio.wait_for(asyncio.shield(self._task), within)
        return self.frames

    async def aclose(self) -> None:
        self._task.cancel()
        try:
            await self._task
        except (asyncio.CancelledError, Exception):
            pass

    def results(self) -> list[dict[str, Any]]:
        for f in self.frames:
            assert "error" not in f and "http_error" not in f, f
        return [f["result"] for f in self.frames]


def tool_update(ev: dict[str, Any]) -> dict[str, Any] | None:
    if dev_meta(ev).get("kind") != "TOOL_CALL_UPDATE":
        return None
    data: dict[str, Any] = parts_of(ev)[0]["data"]
    return data


def tool_status(frames: list[dict[str, Any]], call_id: str) -> list[str]:
    """The statuses a call went through in these frames, in order."""
    out = []
    for f in frames:
        tc = tool_update(f.get("result") or {})
        if tc is not None and tc["tool_call_id"] == call_id:
            out.append(tc["status"])
    return out


def final_state(evs: list[dict[str, Any]]) -> str | None:
    finals = [e for e in evs if e.get("final")]
    return finals[-1]["status"]["state"] if finals else None


def event_key(ev: dict[str, Any]) -> str:
    """What makes two status updates the same event, wherever they were read (not timestamps)."""
    status = ev.get("status") or {}
    return json.dumps(
        [
            ev.get("taskId"),
            status.get("state"),
            bool(ev.get("final")),
            dev_meta(ev).get("kind"),
            [{k: v for k, v in p.items() if k != "metadata"} for p in parts_of(ev)],
        ],
        sort_keys=True,
    )


def status_text(task: dict[str, Any]) -> str:
    msg = task["status"].get("message") or {}
    return "".join(p.get("text", "") for p in msg.get("parts") or [])
