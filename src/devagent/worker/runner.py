"""The worker's loop: say hello, then long-poll the server for calls, each run in a task of its
own on the sessions this worker holds (agent/sandbox/hosted.py), its output and result sent back.
Each poll renews the worker's leases and says which sessions are still its own: one that is not
(its lease expired while the server could not be reached, and another worker has it, or the
operator revoked the token) is dropped here, its commands killed. A result the server refuses
(the call is no longer this worker's) is dropped; one it could not reach is sent again until the
server answers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from devagent.common.errors import DevagentError
from devagent.worker.client import Refused, ServerClient, Stopping

log = logging.getLogger("devagent.worker")
FILE_OPS = ("read", "write", "list", "stat", "delete")
CONTROLS = ("signal", "input", "resize")


class Stopped(DevagentError):
    """The server refused this worker's token: it stops."""


class Runner:
    def __init__(
        self, client: ServerClient, hosted: Any, pool: str, templates: list[str], capacity: int, backend: str
    ) -> None:
        self.client = client
        self.hosted = hosted
        self.offer = (pool, templates, capacity, backend)
        self.wait = 20.0
        self.idle_seconds = 300.0  # a session idle this long is given back: its room is another's
        self._tasks: set[asyncio.Task[None]] = set()

    async def hello(self) -> None:
        try:
            answer = await self.client.hello(*self.offer)
        except Refused as e:
            raise Stopped(str(e)) from None
        # A poll answered at least every third of the lease: the worker's leases are renewed on
        # each poll's arrival, so a held poll the server answers late costs no lease.
        lease = float(answer.get("lease_seconds", 60.0))
        self.wait = max(1.0, min(float(answer.get("longest_poll", 20.0)), lease / 3))

    async def run(self, stop: asyncio.Event) -> None:
        """Polls until `stop`; then the sessions held are given back and the worker leaves."""
        try:
            await self._serve(stop)
        except Stopping:
            pass
        await self.leave()

    async def _serve(self, stop: asyncio.Event) -> None:
        await self.hello()
        log.warning("worker %s serving the pool %r", self.client.worker, self.offer[0])
        while not stop.is_set():
            polling = asyncio.ensure_future(self.client.poll(self.wait))
            stopping = asyncio.ensure_future(stop.wait())
            await asyncio.wait({polling, stopping}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if not polling.done():
                polling.cancel()
                break
            try:
                got = polling.result()
            except Refused as e:
                if e.status in (401, 403):
                    raise Stopped(str(e)) from None
                await self.hello()  # not registered (a new database, or stopped): again
                continue
            await self._reconcile(got.get("held") or {})
            await self._give_back_idle()
            for call_id in got.get("orphans") or []:
                self.hosted.kill_call(int(call_id))  # its replica died: nobody follows it
            for call in got.get("calls") or []:
                if call["kind"] in CONTROLS:
                    self._control(call)  # here, in the order sent: its command's input in order
                    continue
                task = asyncio.get_running_loop().create_task(self._handle(call))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def leave(self) -> None:
        for session_id in list(self.hosted.sessions):
            await self.hosted.drop(session_id)
        for task in list(self._tasks):
            task.cancel()
        self.client.stopping.set()  # the server is told once, if it can be reached
        try:
            await asyncio.wait_for(self.client.leave(), 10.0)
        except (Refused, Stopping, TimeoutError):
            pass

    async def _give_back_idle(self) -> None:
        """Sessions idle for `idle_seconds` are given back (their workspace is in the server's
        last snapshot; their next call is granted again, here or elsewhere)."""
        for session_id in self.hosted.idle(self.idle_seconds):
            await self.hosted.drop(session_id)
            with contextlib.suppress(Refused):
                await self.client.release(session_id)

    async def _reconcile(self, held: dict[str, int]) -> None:
        """Sessions this worker no longer holds (or holds under a newer grant) are dropped."""
        for session_id, here in list(self.hosted.sessions.items()):
            if held.get(session_id) != here.epoch:
                log.warning("session %s is no longer this worker's: its commands are stopped", session_id)
                await self.hosted.drop(session_id)

    async def _handle(self, call: dict[str, Any]) -> None:
        session_id, call_id = str(call["session"]), int(call["id"])
        try:
            held = await self.hosted.ensure(
                session_id, int(call["epoch"]), lambda: self.client.snapshot(session_id)
            )
            result = await self._run(held, call)
            await self._done(call_id, result)
            if call["kind"] == "release":
                await self.hosted.drop(session_id)
                await self.client.release(session_id)
        except Stopping:
            pass
        except Refused as e:
            log.warning("call %s is no longer this worker's (%s): dropped", call_id, e)
            if e.status == 409:
                await self.hosted.drop(session_id)
        except Exception:
            log.exception("call %s failed on this worker", call_id)

    def _control(self, call: dict[str, Any]) -> None:
        """A signal, input or resize for a command of a session held here, given in order; its
        end is then sent in a task of its own."""
        import base64

        spec = {**dict(call.get("spec") or {}), "kind": call["kind"]}
        if call.get("data"):
            spec["bytes"] = base64.b64decode(call["data"])
        self.hosted.control_for(str(call["session"]), int(call["epoch"]), spec)
        task = asyncio.get_running_loop().create_task(self._done_quietly(int(call["id"])))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _done_quietly(self, call_id: int) -> None:
        with contextlib.suppress(Refused, Stopping):
            await self.client.done(call_id, 0, None, None, None)

    async def _done(self, call_id: int, result: Any) -> None:
        """The call's end; a snapshot the server will not keep (too large) is left out (logged:
        another worker would not see this call's changes)."""
        try:
            await self.client.done(call_id, result.code, result.result, result.error, result.snapshot)
        except Refused as e:
            if e.status != 413 or result.snapshot is None:
                raise
            log.warning("call %s: the workspace is too large for the server to keep (%s)", call_id, e)
            await self.client.done(call_id, result.code, result.result, result.error, None)

    async def _run(self, held: Any, call: dict[str, Any]) -> Any:
        import base64

        from devagent.agent.api import Hosted

        kind, spec = str(call["kind"]), dict(call.get("spec") or {})
        data = base64.b64decode(call["data"]) if call.get("data") else None
        hosted: Hosted = self.hosted
        if kind == "exec":
            seq = 0

            async def emit(chunk: bytes) -> None:
                nonlocal seq
                seq += 1
                await self.client.output(int(call["id"]), seq, chunk)

            return await hosted.exec(held, int(call["id"]), spec, emit)
        if kind in FILE_OPS:
            return await hosted.file(held, kind, spec, data)
        return _nothing()  # a release: its end is all


def _nothing() -> Any:
    from types import SimpleNamespace

    return SimpleNamespace(code=0, result=None, error=None, snapshot=None)
