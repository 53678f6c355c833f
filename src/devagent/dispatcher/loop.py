"""The dispatcher's look, every `interval` seconds: its claims (SandboxClaims labelled as its own),
the server's answer (which sessions of its pool wait for a sandbox, which of its claims' sessions
need theirs no more), then a claim made for each waiting session that has none (with a token for
that session alone, minted by the server, in an annotation the pod reads through the downward API)
and the claims of ended sessions deleted (their tokens with them). Each look starts again from
what the API and the server say, so a dispatcher restarted, or two running, make no claim twice:
a claim's name is its session's."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import Any

import httpx

from devagent.common.errors import DevagentError
from devagent.dispatcher.kube import Claims, KubeError
from devagent.dispatcher.kube_exec import ExecPluginError

log = logging.getLogger("devagent.dispatcher")
DISPATCH = "/workers/v1/dispatch"
MANAGED = "app.kubernetes.io/managed-by"
ME = "devagent-dispatcher"
POOL_LABEL = "devagent/pool"
SESSION = "devagent/session"  # annotations: labels' values are too short for a session's id
TOKEN = "devagent/session-token"


class Refused(DevagentError):
    """The server refused the dispatcher's token: it stops."""


def claim_name(session_id: str) -> str:
    return "devagent-" + hashlib.sha256(session_id.encode()).hexdigest()[:24]


def claim_for(session_id: str, token: str, pool: str, warm_pool: str) -> dict[str, Any]:
    """The SandboxClaim of one session: a pod from the warm pool, the session's id and token in the
    pod's annotations (annotations, not env: a claim with env is never served from the warm pool;
    not labels: the controller takes only labels of an allowed domain)."""
    return {
        "apiVersion": "extensions.agents.x-k8s.io/v1beta1",
        "kind": "SandboxClaim",
        "metadata": {
            "name": claim_name(session_id),
            "labels": {MANAGED: ME, POOL_LABEL: pool},
            "annotations": {SESSION: session_id},
        },
        "spec": {
            "warmPoolRef": {"name": warm_pool},
            "additionalPodMetadata": {"annotations": {SESSION: session_id, TOKEN: token}},
        },
    }


class Server:
    """The server's dispatcher routes, with the dispatcher's token."""

    def __init__(self, url: str, token: str) -> None:
        self._http = httpx.AsyncClient(
            base_url=url.rstrip("/") + DISPATCH, headers={"Authorization": f"Bearer {token}"}, timeout=30.0
        )

    async def close(self) -> None:
        await self._http.aclose()

    async def _post(self, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        r = await self._http.post(path, json=body or {})
        if r.status_code in (401, 403):
            raise Refused(f"{r.status_code}: {r.text[:200]}")
        return r

    async def poll(self, sessions: list[str]) -> dict[str, Any]:
        r = await self._post("/poll", {"sessions": sessions})
        r.raise_for_status()
        return dict(r.json())

    async def token(self, session_id: str) -> str | None:
        r = await self._post(f"/sessions/{session_id}/token")
        if r.status_code == 409:
            return None  # it waits no more
        r.raise_for_status()
        return str(r.json()["token"])

    async def retire(self, session_id: str) -> None:
        (await self._post(f"/sessions/{session_id}/retire")).raise_for_status()


class Dispatcher:
    def __init__(self, server: Server, claims: Claims, warm_pool: str) -> None:
        self.server = server
        self.claims = claims
        self.warm_pool = warm_pool
        self.pool = ""

    async def run(self, stop: asyncio.Event, interval: float) -> None:
        """Looks until `stop`; a look that fails (the server or the API out of reach, the
        kubeconfig's credential plugin failing) is logged and the next one tries again. Refused
        ends it."""
        while not stop.is_set():
            try:
                await self.look()
            # OSError: a TLS alert on read
            except (httpx.HTTPError, KubeError, ExecPluginError, OSError, ValueError) as e:
                log.warning("this look failed (%s): trying again", e)
            try:
                await asyncio.wait_for(stop.wait(), interval)
            except TimeoutError:
                pass

    async def look(self) -> None:
        if not self.pool:  # the pool is the token's: the server says which
            self.pool = str((await self.server.poll([]))["pool"])
            log.warning("dispatching the pool %r to the warm pool %r", self.pool, self.warm_pool)
        mine = await self.claims.list(f"{MANAGED}={ME},{POOL_LABEL}={self.pool}")
        live: dict[str, str] = {}
        leaving: set[str] = set()
        for c in mine:
            session = (c["metadata"].get("annotations") or {}).get(SESSION, "")
            if c["metadata"].get("deletionTimestamp"):
                leaving.add(session)  # its pod is going: a new claim waits until it is gone
            elif session:
                live[session] = c["metadata"]["name"]
        answer = await self.server.poll(sorted(live))
        for session in answer.get("ended") or []:
            if session in live:
                await self.claims.delete(live.pop(session))
                await self.server.retire(session)
                log.warning("session %s: its sandbox is let go, claim deleted", session)
        for want in answer.get("waiting") or []:
            session = str(want["session"])
            if session in live or session in leaving:
                continue
            token = await self.server.token(session)
            if token is None:
                continue
            if await self.claims.create(claim_for(session, token, self.pool, self.warm_pool)):
                log.warning("session %s waits for a sandbox: claim %s made", session, claim_name(session))
