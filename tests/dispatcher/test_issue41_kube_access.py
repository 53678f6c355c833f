"""Issue 41 item 4: the dispatcher's Kubernetes client (src/devagent/dispatcher/kube.py) over
HTTPS, against the loopback stand-in for the API server (kube_standin.py, no cluster): a
kubeconfig with the cluster's CA inline and a bearer token; a pod's service account (its token
file, CA file and namespace, the in-cluster address from the environment); a kubeconfig with a
client certificate and a CA file beside it, refused without the certificate. The certificates
are made for the test by openssl."""

from __future__ import annotations

import base64
import shutil
import ssl
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from devagent.dispatcher.kube import Claims, KubeError, from_kubeconfig, in_cluster
from devagent.dispatcher.loop import claim_for
from tests.dispatcher.kube_standin import StandIn

NAMESPACE = "devagent-workers"


def self_signed(folder: Path, name: str) -> tuple[Path, Path]:
    cert, key = folder / f"{name}.crt", folder / f"{name}.key"
    subprocess.run(
        [
            *(
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                str(key),
                "-out",
                str(cert),
            ),
            *("-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


@pytest.fixture
def certs(tmp_path: Path) -> dict[str, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    server_cert, server_key = self_signed(tmp_path, "server")
    client_cert, client_key = self_signed(tmp_path, "client")
    return {"server": server_cert, "server_key": server_key, "client": client_cert, "client_key": client_key}


def no_pod(*_args: Any) -> subprocess.Popen[bytes]:
    raise AssertionError("no pod is started here")


@contextmanager
def standin_tls(tmp_path: Path, certs: dict[str, Path], client_cert: bool = False) -> Iterator[StandIn]:
    """The stand-in over HTTPS; `client_cert`: it asks for a client certificate (the test's own)
    instead of a token."""
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(certs["server"], certs["server_key"])
    if client_cert:
        tls.verify_mode = ssl.CERT_REQUIRED
        tls.load_verify_locations(certs["client"])
    s = StandIn("" if client_cert else "sa-token-h-dispatch", NAMESPACE, "devagent-worker", no_pod, tmp_path)
    s.replicas, s.tls = 0, tls
    s.start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def api(tmp_path: Path, certs: dict[str, Path]) -> Iterator[StandIn]:
    with standin_tls(tmp_path, certs) as s:
        yield s


async def round_trip(claims: Claims) -> None:
    """Create, list (by label), create again (already there), delete, delete again (gone)."""
    claim = claim_for("session-1", "t", "pods", "no-such-pool")  # left pending: no pod started
    try:
        assert await claims.create(claim) is True
        listed = await claims.list("app.kubernetes.io/managed-by=devagent-dispatcher,devagent/pool=pods")
        assert [c["metadata"]["name"] for c in listed] == [claim["metadata"]["name"]]
        assert await claims.list("devagent/pool=other") == []
        assert await claims.create(claim) is False
        await claims.delete(claim["metadata"]["name"])
        await claims.delete(claim["metadata"]["name"])
        assert await claims.list("devagent/pool=pods") == []
    finally:
        await claims.close()


def kubeconfig(path: Path, cluster: dict[str, Any], user: dict[str, Any]) -> Path:
    conf = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "here",
        "contexts": [{"name": "here", "context": {"cluster": "c", "user": "u", "namespace": NAMESPACE}}],
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": user}],
    }
    path.write_text(yaml.safe_dump(conf))
    return path


async def test_issue41_item4_kubeconfig_with_inline_ca_and_token(
    api: StandIn, certs: dict[str, Path], tmp_path: Path
) -> None:
    ca = base64.b64encode(certs["server"].read_bytes()).decode()
    path = kubeconfig(
        tmp_path / "kc", {"server": api.url, "certificate-authority-data": ca}, {"token": api.token}
    )
    access = from_kubeconfig(path)
    assert access.namespace == NAMESPACE
    await round_trip(Claims(access, access.namespace))
    assert {st for _m, _p, st in api.requests} == {200, 201, 404, 409}
    wrong = from_kubeconfig(
        kubeconfig(tmp_path / "kc2", {"server": api.url, "certificate-authority-data": ca}, {"token": "x"})
    )
    claims = Claims(wrong, NAMESPACE)
    with pytest.raises(KubeError, match="401"):
        await claims.list("")
    await claims.close()


async def test_issue41_item4_in_cluster_service_account(
    api: StandIn, certs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text(api.token + "\n")
    (account / "namespace").write_text(NAMESPACE)
    shutil.copy(certs["server"], account / "ca.crt")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", api.url.rsplit(":", 1)[1])
    access = in_cluster(account)
    assert access.namespace == NAMESPACE
    await round_trip(Claims(access, access.namespace))


async def test_issue41_item4_kubeconfig_with_a_client_certificate(
    certs: dict[str, Path], tmp_path: Path
) -> None:
    with standin_tls(tmp_path, certs, client_cert=True) as api:
        cluster = {"server": api.url, "certificate-authority": "server.crt"}  # beside the kubeconfig
        user = {
            "client-certificate-data": base64.b64encode(certs["client"].read_bytes()).decode(),
            "client-key": str(certs["client_key"]),
        }
        await round_trip(Claims(from_kubeconfig(kubeconfig(tmp_path / "kc", cluster, user)), NAMESPACE))
        anonymous = Claims(from_kubeconfig(kubeconfig(tmp_path / "kc2", cluster, {})), NAMESPACE)
        with pytest.raises((httpx.HTTPError, ssl.SSLError)):  # TLS 1.3: the alert may come on read
            await anonymous.list("")
        await anonymous.close()
