"""The worker's HTTP client of the server's workers' door (/workers/v1/): every request carries
the worker's token and its name; a request that cannot reach the server is tried again, with
a growing pause, until it is answered (the worker reconnects by itself)."""

from __future__ import annotations

import asyncio
import base64
import logging
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
        pause = 0.2
        why = ""
        while True:
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
                await asyncio.sleep(pause)
                pause = min(pause * 2, 3.0)
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
