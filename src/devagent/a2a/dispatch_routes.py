"""The dispatcher's door on the server's HTTP app, under /workers/v1/dispatch/: what a
`devagent dispatcher` (which gives each waiting session a pod of its own on Kubernetes) asks of
the server. Only a dispatcher's token opens it (`devagent workers token add NAME --pool P
--dispatcher`); the token names the one pool it dispatches for. It learns which sessions of that
pool wait for a sandbox and which of the sessions it started pods for no longer need one, and it
gets, for each pod, a token that opens the workers' door for that one session only, for as long as
the session waits for a sandbox or holds one. It never sees a session's calls or workspace."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from devagent.a2a.worker_routes import MALFORMED, PREFIX, WorkerTokens

if TYPE_CHECKING:
    from devagent.store.worker_dispatch import DispatchQueue
    from devagent.store.workers import WorkerQueue

DISPATCH = f"{PREFIX}/dispatch"
MAX_SESSIONS = 10_000  # sessions named in one poll


class DispatchDoor:
    def __init__(
        self,
        queue: Callable[[], WorkerQueue],
        dispatch: Callable[[], DispatchQueue],
        static_tokens: dict[str, str],
    ) -> None:
        self.tokens = WorkerTokens(static_tokens, queue)
        self.dispatch = dispatch

    def routes(self) -> list[Route]:
        return [
            Route(f"{DISPATCH}/poll", self._guard(self.poll), methods=["POST"]),
            Route(f"{DISPATCH}/sessions/{{session}}/token", self._guard(self.token), methods=["POST"]),
            Route(f"{DISPATCH}/sessions/{{session}}/retire", self._guard(self.retire), methods=["POST"]),
        ]

    def _guard(
        self, handler: Callable[[Request, str], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            caller = await self.tokens.identify(request)
            if caller is None or caller.role != "dispatcher" or not caller.pool:
                status = 401 if caller is None else 403
                headers = {"WWW-Authenticate": 'Bearer realm="devagent-workers"'} if status == 401 else None
                return JSONResponse(
                    {"error": "a dispatcher's token (with its pool) is required here"},
                    status_code=status,
                    headers=headers,
                )
            try:
                return await handler(request, caller.pool)
            except MALFORMED as e:
                return JSONResponse({"error": f"a malformed request: {type(e).__name__}"}, status_code=400)

        return endpoint

    async def poll(self, request: Request, pool: str) -> Response:
        """The pool's sessions waiting for a sandbox; those of `sessions` (the dispatcher's pods)
        that need theirs no more."""
        body = await request.json()
        given = body.get("sessions") or []
        if not isinstance(given, list) or len(given) > MAX_SESSIONS:
            return JSONResponse({"error": f"sessions: a list of at most {MAX_SESSIONS}"}, status_code=400)
        d = self.dispatch()
        ended = await d.ended(pool, [str(s) for s in given])
        return JSONResponse({"pool": pool, "waiting": await d.waiting(pool), "ended": ended})

    async def token(self, request: Request, pool: str) -> Response:
        token = await self.dispatch().mint(pool, request.path_params["session"])
        if token is None:
            return JSONResponse(
                {"error": "this session does not wait for a sandbox of this pool"}, status_code=409
            )
        return JSONResponse({"token": token})

    async def retire(self, request: Request, pool: str) -> Response:
        await self.dispatch().retire(pool, request.path_params["session"])
        return JSONResponse({})
