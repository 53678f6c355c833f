"""The worker's HTTP client of the server's workers' door (/workers/v1/): every request carries
the worker's token and its name; a request that cannot reach the server is tried again, after
a pause that grows (jittered, at most a few seconds: `Backoff`), until it is answered (the worker
reconnects by itself)."""

from __future__ import annotations

import asyncio
import base64
import logging
import random
import time
from typing import Any

import httpx

from devagent.common.errors import DevagentError

log = logging.getLogger("devagent.worker")
PREFIX = "/workers/v1"


class Refused(DevagentError):
    """The server refused the request (the status and its reason): not to be tried again."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{status}: {reason}")
        self.status = status


class Stopping(DevagentError):
    """The worker is stopping: a request that could not reach the server is not tried again."""


class Backoff:
    """The pauses between the tries of one request the server did not answer. The ceiling starts
    at FIRST and doubles after each failure up to CAP; each pause is drawn from the ceiling's
    upper half, so workers cut off together do not come back in step. A try the server held for
    HELD seconds or more (a long poll cut by the server's restart) shows the server was there a
    moment ago: the ceiling starts over, so a restart costs the worker about one short pause
    however many outages its request went through before."""

    FIRST = 0.2
    CAP = 2.0
    HELD = 1.0

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._ceiling = self.FIRST

    def failed(self, held: float) -> float:
        """The pause (seconds) after a try that failed having been open `held` seconds."""
        if held >= self.HELD:
            self._ceiling = self.FIRST
        pause = self._rng.uniform(self._ceiling / 2, self._ceiling)
        self._ceiling = min(self._ceiling * 2, self.CAP)
        return pause


class ServerClient:
    def __init__(self, server: str, token: str, worker: str, stopping: asyncio.Event | None = None) -> None:
        self.worker = worker
        self.stopping = stopping or asyncio.Event()
        headers = {"Authorization": f"Bearer {token}", "X-Devagent-Worker": worker}
        self._http = httpx.AsyncClient(
            base_url=server.rstrip("/"), headers=headers, timeout=httpx.Timeout(30.0, read=60.0)
        )
        self.connected = False

    async def close(self) -> None:
        await self._http.aclose()

    async def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The request, sent again after each transport failure until the server answers (or,
        the worker stopping, Stopping); Refused for an answer other than 2xx."""
        backoff = Backoff()
        why = ""
        while True:
            sent = time.monotonic()
            try:
                r = await self._http.request(method, PREFIX + path, **kwargs)
                unavailable = r.status_code in (502, 503, 504)  # a balancer without a live replica
            except httpx.TransportError as e:
                unavailable, r = True, None
                why = type(e).__name__
            if unavailable or r is None:
                if self.stopping.is_set():
                    raise Stopping(why)
                if self.connected:
                    log.warning(
                        "the server cannot be reached (%s): trying again", why if r is None else r.status_code
                    )
                self.connected = False
                await asyncio.sleep(backoff.failed(time.monotonic() - sent))
                continue
            if not self.connected:
                log.warning("connected to the server")
            self.connected = True
            if r.status_code >= 400:
                try:
                    reason = str(r.json().get("error", r.text))
                except ValueError:
                    reason = r.text
                raise Refused(r.status_code, reason)
            return r

    async def hello(self, pool: str, templates: list[str], capacity: int, backend: str) -> dict[str, Any]:
        body = {
            "worker": self.worker,
            "pool": pool,
            "templates": templates,
            "capacity": capacity,
            "backend": backend,
        }
        r = await self._send("POST", "/hello", json=body)
        return dict(r.json())

    async def poll(self, wait: float) -> dict[str, Any]:
        r = await self._send("POST", "/poll", json={"wait": wait}, timeout=wait + 30.0)
        return dict(r.json())

    async def output(self, call_id: int, seq: int, data: bytes) -> None:
        await self._send("POST", f"/calls/{call_id}/output", params={"seq": seq}, content=data)

    async def done(
        self, call_id: int, code: int, result: bytes | None, error: str | None, snapshot: bytes | None
    ) -> None:
        def b64(data: bytes | None) -> str | None:
            return base64.b64encode(data).decode() if data is not None else None

        body = {"code": code, "result": b64(result), "error": error, "snapshot": b64(snapshot)}
        await self._send("POST", f"/calls/{call_id}/done", json=body)

    async def snapshot(self, session_id: str) -> bytes | None:
        r = await self._send("GET", f"/sessions/{session_id}/snapshot")
        return r.content if r.status_code == 200 else None

    async def release(self, session_id: str) -> None:
        await self._send("POST", f"/sessions/{session_id}/release")

    async def leave(self) -> None:
        await self._send("POST", "/leave")
