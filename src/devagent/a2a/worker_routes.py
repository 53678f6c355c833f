"""The workers' door on the server's HTTP app, under /workers/v1/: where `devagent worker`
processes (on other machines, connecting out) say what they offer, long-poll for the calls queued
for the sessions they hold, and send back output, results and workspace snapshots. Only a
worker's token opens it (a caller's is refused here, and a worker's everywhere else); every
result is checked against the lease it was taken under (store/workers.py).

Workers' tokens: the operator's `worker_tokens` (NAME=TOKEN, read at start) and those kept hashed
in the store by `devagent workers token add NAME` (looked up on every request, so a token added
or revoked there counts at once on every replica, without a restart).
"""

from __future__ import annotations

import base64
import hmac
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from devagent.agent.api import LARGEST_SNAPSHOT

if TYPE_CHECKING:
    from devagent.store.workers import CallRow, WorkerQueue

PREFIX = "/workers/v1"
MAX_SNAPSHOT = LARGEST_SNAPSHOT  # a workspace's compressed snapshot, at most
WORKER_BODY_BYTES = MAX_SNAPSHOT * 4 // 3 + 2**20  # a result with its snapshot, in base64


def parse_worker_tokens(values: Sequence[str]) -> dict[str, str]:
    """`NAME=TOKEN` entries (repeatable, or comma-separated in one) as token -> name;
    ValueError names a bad one."""
    out: dict[str, str] = {}
    for value in values:
        for item in value.split(","):
            item = item.strip()
            if not item:
                continue
            name, sep, token = item.partition("=")
            if not sep or not name.strip() or not token.strip():
                raise ValueError("a worker token is NAME=TOKEN (--worker-token, DEVAGENT_WORKER_TOKENS)")
            out[token.strip()] = name.strip()
    return out


@dataclass(slots=True)
class WorkerCaller:
    token_name: str
    pool: str  # "" for a token that may serve any pool
    role: str = "worker"  # worker | dispatcher | session (a one-session worker's)
    session: str = ""  # the session of a one-session worker's token


class WorkerTokens:
    """Who a worker's bearer token names: the operator's static ones, else the store's."""

    def __init__(self, static: dict[str, str], queue: Callable[[], WorkerQueue]) -> None:
        self._static = [(t.encode(), name) for t, name in static.items()]
        self._queue = queue

    async def identify(self, request: Request) -> WorkerCaller | None:
        header = request.headers.get("authorization", "")
        if header[:7].lower() != "bearer " or not header[7:].strip():
            return None
        given = header[7:].strip()
        found = None
        for tok, name in self._static:  # every one compared: constant time
            if hmac.compare_digest(given.encode(), tok):
                found = name
        if found is not None:
            return WorkerCaller(found, "")
        stored = await self._queue().token_named(given)
        return WorkerCaller(*stored) if stored is not None else None


Handler = Callable[[Request, WorkerCaller, "WorkerQueue"], Awaitable[Response]]


def _refused(status: int, message: str) -> Response:
    headers = {"WWW-Authenticate": 'Bearer realm="devagent-workers"'} if status == 401 else None
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _b64(data: bytes | None) -> str | None:
    return base64.b64encode(data).decode() if data is not None else None


def _unb64(text: Any) -> bytes | None:
    return base64.b64decode(text) if isinstance(text, str) else None


def _call_json(row: CallRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "session": row.session_id,
        "epoch": row.epoch,
        "kind": row.kind,
        "spec": row.spec,
        "data": _b64(row.data),
    }


# What parsing a malformed body raises in a handler (not JSON, not an object, a field of the wrong
# type): the caller gets 400 with it, not a server error.
MALFORMED = (ValueError, TypeError, KeyError, AttributeError)


class WorkerDoor:
    """The routes, over the core's store and its settings (`lease_seconds`: worker_lease_seconds)."""

    def __init__(
        self,
        queue: Callable[[], WorkerQueue],
        static_tokens: dict[str, str],
        lease_seconds: float,
        poll_seconds: float = 25.0,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.queue = queue
        self.stopping = stopping  # the server stops: a held poll answers at once
        self.tokens = WorkerTokens(static_tokens, queue)
        self.ttl = lease_seconds
        self.longest_poll = poll_seconds  # below proxies' idle limits

    def routes(self) -> list[Route]:
        return [
            Route(f"{PREFIX}/hello", self._guard(self.hello, registered=False), methods=["POST"]),
            Route(f"{PREFIX}/poll", self._guard(self.poll, registered=False), methods=["POST"]),
            Route(f"{PREFIX}/leave", self._guard(self.leave), methods=["POST"]),
            Route(f"{PREFIX}/calls/{{call:int}}/output", self._guard(self.output), methods=["POST"]),
            Route(f"{PREFIX}/calls/{{call:int}}/done", self._guard(self.done), methods=["POST"]),
            Route(f"{PREFIX}/sessions/{{session}}/snapshot", self._guard(self.snapshot), methods=["GET"]),
            Route(f"{PREFIX}/sessions/{{session}}/release", self._guard(self.release), methods=["POST"]),
        ]

    def _guard(self, handler: Handler, registered: bool = True) -> Callable[[Request], Awaitable[Response]]:
        """A worker's token, and for every request but `hello` the worker it names registered
        under that token and not stopped (its token revoked)."""

        async def endpoint(request: Request) -> Response:
            caller = await self.tokens.identify(request)
            if caller is None:
                return _refused(401, "a worker's token is required here")
            if caller.role == "dispatcher":
                return _refused(403, "a dispatcher's token opens only /workers/v1/dispatch/")
            q = self.queue()
            if registered:
                worker = request.headers.get("x-devagent-worker", "")
                known = await q.worker_of(worker) if worker else None
                if known is None or known[0] != caller.token_name or known[2]:
                    return _refused(409, "this worker is not registered (or was stopped): say hello again")
            try:
                return await handler(request, caller, q)
            except MALFORMED as e:
                return _refused(400, f"a malformed request: {type(e).__name__}: {str(e)[:200]}")

        return endpoint

    async def hello(self, request: Request, caller: WorkerCaller, q: WorkerQueue) -> Response:
        body = await request.json()
        worker, pool = str(body.get("worker", "")), str(body.get("pool", "default"))
        if not worker or len(worker) > 64:
            return _refused(400, "worker: a name of at most 64 characters")
        if caller.pool and pool != caller.pool:
            return _refused(403, f"this token serves the pool {caller.pool!r} only")
        templates = [str(t) for t in body.get("templates") or []]
        capacity = max(1, int(body.get("capacity", 1)))
        known = await q.worker_of(worker)
        if known is not None and known[0] != caller.token_name:
            return _refused(409, "this worker name is another token's")
        backend = str(body.get("backend", "local"))
        if caller.role == "session":  # a pod started for one session: that session, and only it
            capacity = 1
        await q.hello(worker, caller.token_name, pool, templates, capacity, backend, caller.session)
        return JSONResponse({"lease_seconds": self.ttl, "longest_poll": self.longest_poll})

    async def poll(self, request: Request, caller: WorkerCaller, q: WorkerQueue) -> Response:
        """Renews the worker's leases (first: in the same transaction as the check that the
        worker is registered under this token) and waits (up to `wait` seconds) for calls to
        take, renewing them every second meanwhile; says which of its running commands no
        replica follows any more (to be killed)."""
        worker = request.headers.get("x-devagent-worker", "")
        held = await q.heartbeat(worker, self.ttl, caller.token_name) if worker else None
        if held is None:
            return _refused(409, "this worker is not registered (or was stopped): say hello again")
        body = await request.json()
        wait = min(float(body.get("wait", self.longest_poll)), self.longest_poll)
        deadline = time.monotonic() + wait
        with q.listening(f"w:{worker}") as bell:
            orphans, renewed = await q.orphans(worker), time.monotonic()
            while True:
                calls = await q.take(worker)
                done = calls or orphans or time.monotonic() >= deadline or self.stopping()
                if done or await request.is_disconnected():
                    body = {"held": held, "calls": [_call_json(c) for c in calls], "orphans": orphans}
                    return JSONResponse(body)
                await q.doze(bell, max(0.0, deadline - time.monotonic()))
                if time.monotonic() - renewed >= 1.0:  # the leases renewed every second, not every wake
                    held = await q.heartbeat(worker, self.ttl, caller.token_name) or {}
                    orphans, renewed = await q.orphans(worker), time.monotonic()

    async def leave(self, request: Request, caller: WorkerCaller, q: WorkerQueue) -> Response:
        await q.leave(request.headers["x-devagent-worker"])
        return JSONResponse({})

    async def output(self, request: Request, caller: WorkerCaller, q: WorkerQueue) -> Response:
        worker = request.headers["x-devagent-worker"]
        seq = int(request.query_params.get("seq", "0"))
        data = await request.body()
        if not await q.output(worker, int(request.path_params["call"]), seq, data, self.ttl):
            return _refused(409, "this call is not one this worker holds")
        return JSONResponse({})

    async def done(self, request: Request, caller: WorkerCaller, q: WorkerQueue) -> Response:
        worker = request.headers["x-devagent-worker"]
        body = await request.json()
        snapshot = _unb64(body.get("snapshot"))
        if snapshot is not None and len(snapshot) > MAX_SNAPSHOT:
            return _refused(413, "the workspace's snapshot is too large")
        error = body.get("error")
        finished = await q.finish(
            worker,
            int(request.path_params["call"]),
            int(body.get("code", 0)),
            _unb64(body.get("result")),
            str(error) if error else None,
            snapshot,
            self.ttl,
        )
        if not finished:
            return _refused(409, "this call is not one this worker holds")
        return JSONResponse({})

    async def snapshot(self, request: Request, caller: WorkerCaller, q: WorkerQueue) -> Response:
        holds, data = await q.snapshot_for(
            request.headers["x-devagent-worker"], request.path_params["session"]
        )
        if not holds:
            return _refused(409, "this session is not one this worker holds")
        if data is None:
            return Response(status_code=204)
        return Response(data, media_type="application/gzip")

    async def release(self, request: Request, caller: WorkerCaller, q: WorkerQueue) -> Response:
        await q.give_back(request.headers["x-devagent-worker"], request.path_params["session"])
        return JSONResponse({})
