"""A stand-in for the Kubernetes API server and the agent-sandbox controller, for the dispatcher's
tests (no cluster runs here): a loopback HTTP server that speaks the part of the API the dispatcher
uses (list with a label selector, create and delete SandboxClaims of one namespace; a bearer
token required), refuses a claim whose fields are not those of agent-sandbox's v1beta1
SandboxClaim (tests/deploy/sandbox_schema.py), and, as the controller would, gives each new claim
a pod of its warm pool: a real `devagent worker --token-file F` process started ahead, waiting
for its file, into which the claim's token annotation is written (what the kubelet does for a
downward-API volume). The warm pool is filled again at once; a deleted claim's pod is stopped
(SIGTERM, as the kubelet stops a pod)."""

from __future__ import annotations

import json
import re
import ssl
import subprocess
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import jsonschema

from tests.deploy.sandbox_schema import SANDBOX_CLAIM
from tests.process_stop import stop_process

PATH = re.compile(
    r"^/apis/extensions\.agents\.x-k8s\.io/v1beta1/namespaces/([a-z0-9-]+)/sandboxclaims(?:/([a-z0-9-]+))?$"
)
TOKEN_ANNOTATION = "devagent/session-token"


@dataclass
class Pod:
    name: str
    proc: subprocess.Popen[bytes]
    token_file: Path
    state_dir: Path
    log: Path
    claim: str = ""

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@dataclass
class StandIn:
    """`start_pod(name, token_file, state_dir, log)` starts one warm pod's worker process; an
    empty `token` lets any client in (with `tls` requiring a client certificate, a verified one)."""

    token: str
    namespace: str
    warm_pool: str
    start_pod: Callable[[str, Path, Path, Path], subprocess.Popen[bytes]]
    folder: Path
    replicas: int = 1
    claims: dict[str, dict[str, Any]] = field(default_factory=dict)
    pods: list[Pod] = field(default_factory=list)
    requests: list[tuple[str, str, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None
    tls: ssl.SSLContext | None = None  # HTTPS with this context (a client certificate may be required)

    @property
    def url(self) -> str:
        assert self.server is not None
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> None:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                standin.answer(self, "GET")

            def do_POST(self) -> None:
                standin.answer(self, "POST")

            def do_DELETE(self) -> None:
                standin.answer(self, "DELETE")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if self.tls is not None:
            self.server.socket = self.tls.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        with self.lock:
            self._fill()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
        for pod in self.pods:
            stop_process(pod.proc, 20)

    # --- the API ----------------------------------------------------------------------------------

    def answer(self, h: BaseHTTPRequestHandler, method: str) -> None:
        url = urlparse(h.path)
        m = PATH.match(url.path)
        body = h.rfile.read(int(h.headers.get("content-length") or 0))
        if self.token and h.headers.get("authorization") != f"Bearer {self.token}":
            status, out = 401, _status(401, "Unauthorized")
        elif m is None or m.group(1) != self.namespace:
            status, out = 404, _status(404, "the server could not find the requested resource")
        else:
            with self.lock:
                status, out = self._route(method, m.group(2), parse_qs(url.query), body)
        self.requests.append((method, url.path, status))
        data = json.dumps(out).encode()
        h.send_response(status)
        h.send_header("content-type", "application/json")
        h.send_header("content-length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _route(
        self, method: str, name: str | None, query: dict[str, list[str]], body: bytes
    ) -> tuple[int, Any]:
        if method == "GET" and name is None:
            wanted = dict(kv.split("=", 1) for kv in (query.get("labelSelector") or [""])[0].split(",") if kv)
            items = [
                c
                for c in self.claims.values()
                if all(c["metadata"].get("labels", {}).get(k) == v for k, v in wanted.items())
            ]
            return 200, {
                "apiVersion": "extensions.agents.x-k8s.io/v1beta1",
                "kind": "SandboxClaimList",
                "items": items,
            }
        if method == "POST" and name is None:
            return self._create(json.loads(body))
        if method == "DELETE" and name is not None:
            claim = self.claims.pop(name, None)
            if claim is None:
                return 404, _status(404, f'sandboxclaims "{name}" not found')
            for pod in self.pods:
                if pod.claim == name:
                    threading.Thread(target=stop_process, args=(pod.proc, 20), daemon=True).start()
            return 200, claim
        return 405, _status(405, "method not allowed")

    def _create(self, claim: dict[str, Any]) -> tuple[int, Any]:
        try:
            jsonschema.validate(claim, SANDBOX_CLAIM)
        except jsonschema.ValidationError as e:
            return 422, _status(422, f"SandboxClaim is invalid: {e.message}")
        name = claim["metadata"]["name"]
        if name in self.claims:
            return 409, _status(409, f'sandboxclaims "{name}" already exists')
        if claim["spec"]["warmPoolRef"]["name"] != self.warm_pool:
            return 201, self._keep(claim)  # no such pool: the controller would leave it pending
        claim = self._keep(claim)
        pod = next(p for p in self.pods if not p.claim)  # adopted from the warm pool
        pod.claim = name
        token = claim["spec"]["additionalPodMetadata"]["annotations"][TOKEN_ANNOTATION]
        pod.token_file.write_text(token)
        claim["status"] = {"sandbox": {"name": pod.name}}
        self._fill()
        return 201, claim

    def _keep(self, claim: dict[str, Any]) -> dict[str, Any]:
        claim["metadata"].update(namespace=self.namespace, uid=str(uuid.uuid4()))
        self.claims[claim["metadata"]["name"]] = claim
        return claim

    def _fill(self) -> None:
        """The warm pool back to `replicas` idle pods."""
        while sum(1 for p in self.pods if not p.claim) < self.replicas:
            name = f"{self.warm_pool}-{uuid.uuid4().hex[:5]}"
            folder = self.folder / name
            folder.mkdir(parents=True)
            token_file, state, log = folder / "token", folder / "state", folder / "worker.log"
            token_file.write_text("")
            self.pods.append(Pod(name, self.start_pod(name, token_file, state, log), token_file, state, log))


def _status(code: int, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "code": code}
