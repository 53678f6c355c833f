"""The few Kubernetes API calls the dispatcher makes (list, create and delete SandboxClaims in one
namespace), over httpx: the credentials of the pod's service account (its token file, re-read for
each request as the kubelet rotates it, and the cluster's CA), or a kubeconfig file's current
context (a bearer token, a client certificate, or a token from an exec credential plugin:
kube_exec.py; the older auth providers are not read)."""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from devagent.common.errors import DevagentError
from devagent.dispatcher.kube_exec import ExecPlugin, exec_plugin

GROUP, VERSION, PLURAL = "extensions.agents.x-k8s.io", "v1beta1", "sandboxclaims"
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class KubeError(DevagentError):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"the Kubernetes API answered {status}: {reason}")
        self.status = status


@dataclass(slots=True)
class KubeAccess:
    server: str
    verify: ssl.SSLContext | bool
    token: str = ""
    token_file: Path | None = None
    namespace: str = "default"
    plugin: ExecPlugin | None = None

    async def bearer(self) -> str:
        """The token a request carries now ("" for none)."""
        if self.plugin is not None:
            return await self.plugin.token()
        return self.token_file.read_text().strip() if self.token_file is not None else self.token


def in_cluster(account: Path = SERVICE_ACCOUNT) -> KubeAccess:
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise DevagentError("not in a pod (no KUBERNETES_SERVICE_HOST): give --kubeconfig")
    host = f"[{host}]" if ":" in host else host
    verify = ssl.create_default_context(cafile=str(account / "ca.crt"))
    namespace = (account / "namespace").read_text().strip() if (account / "namespace").exists() else "default"
    return KubeAccess(f"https://{host}:{port}", verify, token_file=account / "token", namespace=namespace)


def from_kubeconfig(path: Path) -> KubeAccess:
    """The current context of a kubeconfig file."""
    conf = yaml.safe_load(path.read_text()) or {}
    current = conf.get("current-context", "")
    context = _named(conf, "contexts", current, "context")
    cluster = _named(conf, "clusters", context.get("cluster", ""), "cluster")
    user = _named(conf, "users", context.get("user", ""), "user")
    server = str(cluster.get("server", "")).rstrip("/")
    if not server.startswith(("https://", "http://")):
        raise DevagentError(f"{path}: the cluster of context {current!r} has no server URL")
    verify: ssl.SSLContext | bool = True
    if server.startswith("https://"):
        verify = _tls(path.parent, cluster, user)
    token_file = user.get("tokenFile")
    plugin = None
    if user.get("exec"):
        plugin = exec_plugin(dict(user["exec"]), path.parent, cluster)
    return KubeAccess(
        server,
        verify,
        token=str(user.get("token", "")),
        token_file=_relative(path.parent, token_file) if token_file else None,
        namespace=str(context.get("namespace", "default")),
        plugin=plugin,
    )


def _named(conf: dict[str, Any], section: str, name: str, key: str) -> dict[str, Any]:
    for entry in conf.get(section) or []:
        if entry.get("name") == name:
            return dict(entry.get(key) or {})
    raise DevagentError(f"kubeconfig: no {section[:-1]} named {name!r}")


def _relative(base: Path, name: str) -> Path:
    p = Path(name)
    return p if p.is_absolute() else base / p


def _tls(base: Path, cluster: dict[str, Any], user: dict[str, Any]) -> ssl.SSLContext:
    """The cluster's CA (a file or inline) and the user's client certificate, if it has one."""
    if cluster.get("insecure-skip-tls-verify"):
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    elif cluster.get("certificate-authority-data"):
        ctx = ssl.create_default_context(
            cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
        )
    elif cluster.get("certificate-authority"):
        ctx = ssl.create_default_context(cafile=str(_relative(base, cluster["certificate-authority"])))
    else:
        ctx = ssl.create_default_context()
    cert, key = _pem(base, user, "client-certificate"), _pem(base, user, "client-key")
    if cert and key:
        with tempfile.TemporaryDirectory(prefix="devagent-kube-") as d:  # 0700, gone once loaded
            cert_file, key_file = Path(d) / "cert.pem", Path(d) / "key.pem"
            cert_file.write_bytes(cert)
            key_file.write_bytes(key)
            ctx.load_cert_chain(str(cert_file), str(key_file))
    return ctx


def _pem(base: Path, user: dict[str, Any], field: str) -> bytes:
    if user.get(f"{field}-data"):
        return base64.b64decode(user[f"{field}-data"])
    if user.get(field):
        return _relative(base, user[field]).read_bytes()
    return b""


def _authorization(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


class Claims:
    """SandboxClaims of one namespace."""

    def __init__(self, access: KubeAccess, namespace: str) -> None:
        self.access = access
        self.path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"
        self._http = httpx.AsyncClient(base_url=access.server, verify=access.verify, timeout=30.0)

    async def close(self) -> None:
        await self._http.aclose()

    async def _ask(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        token = await self.access.bearer()
        r = await self._http.request(method, path, headers=_authorization(token), **kwargs)
        if r.status_code == 401 and self.access.plugin is not None:  # expired early, or revoked
            self.access.plugin.refused(token)
            token = await self.access.bearer()
            r = await self._http.request(method, path, headers=_authorization(token), **kwargs)
        if r.status_code >= 400:
            try:
                reason = str(r.json().get("message", r.text))
            except ValueError:
                reason = r.text
            raise KubeError(r.status_code, reason[:300])
        return r

    async def list(self, selector: str) -> list[dict[str, Any]]:
        r = await self._ask("GET", self.path, params={"labelSelector": selector})
        return list(r.json().get("items") or [])

    async def create(self, claim: dict[str, Any]) -> bool:
        """Made; False when one of that name exists already (made by an earlier look)."""
        try:
            await self._ask("POST", self.path, json=claim)
        except KubeError as e:
            if e.status == 409:
                return False
            raise
        return True

    async def delete(self, name: str) -> None:
        """Deleted (its Sandbox and pod go with it); gone already is fine."""
        try:
            await self._ask("DELETE", f"{self.path}/{name}", params={"propagationPolicy": "Background"})
        except KubeError as e:
            if e.status != 404:
                raise
