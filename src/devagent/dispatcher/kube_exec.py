"""A kubeconfig user's `exec` credential plugin (client.authentication.k8s.io v1 and v1beta1), as
kubectl runs one: the command the kubeconfig names (a path with a slash is relative to the
kubeconfig's folder, a bare name is looked up on PATH), with the dispatcher's environment plus
the plugin's `env`, and `KUBERNETES_EXEC_INFO` holding an ExecCredential that says no one is
there to answer a prompt (and, with `provideClusterInfo`, the cluster). Its ExecCredential answer
gives a bearer token, used until its `expirationTimestamp` (a minute before it) or, without one,
until the API server refuses it once (401): then the plugin runs again. A plugin that answers with
a client certificate is refused (the dispatcher's HTTPS client is made once), as is one that must
always ask someone (`interactiveMode: Always`).

Managed clusters' kubeconfigs name such plugins (`gke-gcloud-auth-plugin`, `aws eks get-token`,
`kubelogin`); the operator configures them, so the command runs as the dispatcher's own user with
its environment, as under kubectl."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from devagent.common.errors import DevagentError
from devagent.common.scrub import scrub

API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
EXEC_EXTENSION = "client.authentication.k8s.io/exec"  # a cluster's data for its plugins
RUN_WITHIN = 120.0  # seconds a plugin may take (a hang guard: the dispatcher waits for it)
EARLY = 60.0  # seconds before its expiry a token is fetched again
STDERR_SHOWN = 500  # characters of a failing plugin's stderr in the error


class ExecPluginError(DevagentError):
    """The plugin could not be run, failed, or answered what is not a usable ExecCredential."""


@dataclass(slots=True)
class ExecPlugin:
    command: str
    args: list[str]
    env: dict[str, str]
    api_version: str
    install_hint: str = ""
    cluster: dict[str, Any] | None = None  # the ExecCredential's spec.cluster (provideClusterInfo)
    _token: str = ""
    _expires: float | None = None  # epoch seconds
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def token(self) -> str:
        """A token the plugin gave, run again when there is none or it is about to expire."""
        async with self._lock:
            fresh = self._expires is None or time.time() < self._expires - EARLY
            if not self._token or not fresh:
                self._token, self._expires = await self._run()
            return self._token

    def refused(self, token: str) -> None:
        """The API server refused `token` (401): the next request runs the plugin again."""
        if token == self._token:
            self._token = ""

    @property
    def named(self) -> str:
        return f"the kubeconfig's exec plugin {self.command!r}"

    async def _run(self) -> tuple[str, float | None]:
        spec: dict[str, Any] = {"interactive": False}
        if self.cluster is not None:
            spec["cluster"] = self.cluster
        info = {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec}
        env = {**os.environ, **self.env, "KUBERNETES_EXEC_INFO": json.dumps(info)}
        try:
            proc = await asyncio.create_subprocess_exec(
                self.command,
                *self.args,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as e:
            hint = f" ({self.install_hint.strip()})" if self.install_hint.strip() else ""
            raise ExecPluginError(f"cannot run {self.named}: {e}{hint}") from e
        try:
            out, err = await asyncio.wait_for(proc.communicate(), RUN_WITHIN)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            raise ExecPluginError(f"{self.named} gave no answer in {RUN_WITHIN:.0f} s") from None
        if proc.returncode != 0:
            said = _shown(err.decode(errors="replace"))
            raise ExecPluginError(f"{self.named} failed (exit {proc.returncode}): {said}")
        return self._credential(out)

    def _credential(self, out: bytes) -> tuple[str, float | None]:
        """The token and its expiry in the plugin's answer."""
        try:
            answer = json.loads(out)
        except ValueError as e:
            raise ExecPluginError(f"{self.named} did not answer in JSON") from e
        if not isinstance(answer, dict) or answer.get("kind") != "ExecCredential":
            raise ExecPluginError(f"{self.named} did not answer with an ExecCredential")
        if answer.get("apiVersion") != self.api_version:
            raise ExecPluginError(
                f"{self.named} answered in {answer.get('apiVersion')!r}, "
                f"not the {self.api_version!r} the kubeconfig asks for"
            )
        status = answer.get("status")
        status = status if isinstance(status, dict) else {}
        token = status.get("token")
        if not isinstance(token, str) or not token:
            what = "a client certificate" if status.get("clientCertificateData") else "no token"
            raise ExecPluginError(f"{self.named} answered with {what}; devagent takes a token")
        return token, _expiry(status.get("expirationTimestamp"), self.named)


def _shown(stderr: str) -> str:
    """A plugin's stderr in an error: no credential it may quote, no terminal control sequence."""
    return "".join(c if c.isprintable() else " " for c in scrub(stderr.strip()))[:STDERR_SHOWN]


def _expiry(stamp: object, named: str) -> float | None:
    """An RFC 3339 `expirationTimestamp` as epoch seconds (None: the token does not expire)."""
    if stamp is None or stamp == "":
        return None
    try:
        moment = datetime.fromisoformat(str(stamp))
    except ValueError as e:
        raise ExecPluginError(f"{named} gave an expiry that is not a time: {stamp!r}") from e
    if moment.tzinfo is None:
        raise ExecPluginError(f"{named} gave an expiry without a time zone: {stamp!r}")
    return moment.timestamp()


def exec_plugin(spec: dict[str, Any], base: Path, cluster: dict[str, Any]) -> ExecPlugin:
    """The plugin a kubeconfig user's `exec` names; `base` is the kubeconfig's folder."""
    api_version = str(spec.get("apiVersion", ""))
    if api_version not in API_VERSIONS:
        known = " or ".join(API_VERSIONS)
        raise DevagentError(
            f"kubeconfig: an exec plugin of apiVersion {api_version!r} (devagent reads {known})"
        )
    command = str(spec.get("command") or "")
    if not command:
        raise DevagentError("kubeconfig: the user's exec plugin names no command")
    if spec.get("interactiveMode") == "Always":
        raise DevagentError("kubeconfig: the exec plugin must always ask someone (interactiveMode: Always)")
    if "/" in command and not Path(command).is_absolute():
        command = str(base / command)
    env = {str(e.get("name")): str(e.get("value", "")) for e in spec.get("env") or [] if isinstance(e, dict)}
    return ExecPlugin(
        command,
        [str(a) for a in spec.get("args") or []],
        env,
        api_version,
        install_hint=str(spec.get("installHint") or ""),
        cluster=_cluster_info(base, cluster) if spec.get("provideClusterInfo") else None,
    )


def _cluster_info(base: Path, cluster: dict[str, Any]) -> dict[str, Any]:
    """The ExecCredential's `spec.cluster`: the kubeconfig's cluster, its CA always as data, and
    the data its `extensions` hold for exec plugins."""
    info: dict[str, Any] = {"server": str(cluster.get("server", ""))}
    for key in ("tls-server-name", "insecure-skip-tls-verify", "proxy-url", "disable-compression"):
        if cluster.get(key):
            info[key] = cluster[key]
    if cluster.get("certificate-authority-data"):
        info["certificate-authority-data"] = cluster["certificate-authority-data"]
    elif cluster.get("certificate-authority"):
        ca = Path(str(cluster["certificate-authority"]))
        pem = (ca if ca.is_absolute() else base / ca).read_bytes()
        info["certificate-authority-data"] = base64.b64encode(pem).decode()
    for entry in cluster.get("extensions") or []:
        if isinstance(entry, dict) and entry.get("name") == EXEC_EXTENSION:
            info["config"] = entry.get("extension")
    return info
