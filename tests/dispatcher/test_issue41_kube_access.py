"""Issue 41 item 4: the dispatcher's Kubernetes client (src/devagent/dispatcher/kube.py) over
HTTPS, against the loopback stand-in for the API server (kube_standin.py, no cluster): a
kubeconfig with the cluster's CA inline and a bearer token; a pod's service account (its token
file, CA file and namespace, the in-cluster address from the environment); a kubeconfig with a
client certificate and a CA file beside it, refused without the certificate; a kubeconfig whose
user is an exec credential plugin (a script here, run as kubectl runs one). The certificates are
made for the test by openssl."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import ssl
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from devagent.common.errors import DevagentError
from devagent.dispatcher.kube import Claims, KubeError, from_kubeconfig, in_cluster
from devagent.dispatcher.kube_exec import ExecPluginError
from devagent.dispatcher.loop import Dispatcher, claim_for
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


# --- a kubeconfig whose user is an exec credential plugin (client.authentication.k8s.io) ---------

PLUGIN = """#!{python}
import json, os, pathlib, sys
here = pathlib.Path(__file__).parent
with open(here / "runs", "a") as f:  # what each run saw
    f.write(json.dumps({{"info": os.environ.get("KUBERNETES_EXEC_INFO"), "args": sys.argv[1:],
                        "env": os.environ.get("PLUGIN_SETTING")}}) + "\\n")
answer = json.loads((here / "answer.json").read_text())
if answer.get("exit"):
    sys.stderr.write(answer["stderr"])
    sys.exit(answer["exit"])
print(json.dumps(answer))
"""


def plugin_answer(folder: Path, token: str = "", expires: str | None = None, **more: Any) -> None:
    status: dict[str, Any] = {"token": token} if token else {}
    if expires is not None:
        status["expirationTimestamp"] = expires
    answer = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status}
    (folder / "answer.json").write_text(json.dumps({**answer, **more}))


def plugin_runs(folder: Path) -> list[dict[str, Any]]:
    runs = folder / "runs"
    return [json.loads(line) for line in runs.read_text().splitlines()] if runs.exists() else []


def exec_kubeconfig(tmp_path: Path, api_url: str, **exec_more: Any) -> Path:
    """A kubeconfig beside the plugin (`./plugin/get-token`, relative to the kubeconfig's folder)
    and the server's certificate, the cluster naming its CA file and an exec extension."""
    folder = tmp_path / "plugin"
    folder.mkdir(exist_ok=True)
    script = folder / "get-token"
    script.write_text(PLUGIN.format(python=sys.executable))
    script.chmod(0o755)
    spec = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": "./plugin/get-token",
        "args": ["--cluster", "here"],
        "env": [{"name": "PLUGIN_SETTING", "value": "from-kubeconfig"}],
        "provideClusterInfo": True,
        "interactiveMode": "IfAvailable",
        **exec_more,
    }
    cluster = {
        "server": api_url,
        "certificate-authority": "server.crt",
        "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": {"audience": "devagent"}}],
    }
    return kubeconfig(tmp_path / "kc", cluster, {"exec": spec})


async def test_issue41_item4_kubeconfig_exec_plugin_token_kept_until_refused(
    api: StandIn, certs: dict[str, Path], tmp_path: Path
) -> None:
    """The plugin runs once for a round trip of eight requests (its token has no expiry), with
    what kubectl gives it; when the API refuses its token (rotated), it runs again once and the
    request goes through."""
    path = exec_kubeconfig(tmp_path, api.url)
    folder = tmp_path / "plugin"
    plugin_answer(folder, api.token)
    await round_trip(Claims(from_kubeconfig(path), NAMESPACE))
    (run,) = plugin_runs(folder)
    assert run["args"] == ["--cluster", "here"] and run["env"] == "from-kubeconfig"
    info = json.loads(run["info"])
    assert info["apiVersion"] == "client.authentication.k8s.io/v1" and info["kind"] == "ExecCredential"
    assert info["spec"]["interactive"] is False
    cluster = info["spec"]["cluster"]
    assert cluster["server"] == api.url
    assert base64.b64decode(cluster["certificate-authority-data"]) == certs["server"].read_bytes()
    assert cluster["config"] == {"audience": "devagent"}

    claims = Claims(from_kubeconfig(path), NAMESPACE)
    assert await claims.list("") == [] and len(plugin_runs(folder)) == 2
    api.token = "rotated-token"
    plugin_answer(folder, api.token)
    assert await claims.list("") == []  # refused once (401), the plugin ran again, then answered
    assert len(plugin_runs(folder)) == 3
    assert await claims.list("") == [] and len(plugin_runs(folder)) == 3
    statuses = [st for _m, _p, st in api.requests]
    assert statuses.count(401) == 1
    await claims.close()


async def test_issue41_item4_kubeconfig_exec_plugin_token_fetched_again_before_it_expires(
    api: StandIn, tmp_path: Path
) -> None:
    """A token that expires within a minute is fetched again for each request; one valid for an
    hour is kept."""
    path = exec_kubeconfig(tmp_path, api.url)
    folder = tmp_path / "plugin"
    soon = (datetime.now(UTC) + timedelta(seconds=30)).isoformat().replace("+00:00", "Z")
    plugin_answer(folder, api.token, expires=soon)
    claims = Claims(from_kubeconfig(path), NAMESPACE)
    await claims.list("")
    await claims.list("")
    assert len(plugin_runs(folder)) == 2
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    plugin_answer(folder, api.token, expires=later)
    await claims.list("")
    await claims.list("")
    assert len(plugin_runs(folder)) == 3
    await claims.close()


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (
            {"exit": 3, "stderr": "login needed: token: supersecretvalue42 \x1b[31mred\x1b[0m"},
            r"failed \(exit 3\): login needed: token: \[redacted\]  \[31mred \[0m$",
        ),
        ({"apiVersion": "client.authentication.k8s.io/v1beta1"}, "answered in .*v1beta1"),
        ({"status": {"clientCertificateData": "x", "clientKeyData": "y"}}, "a client certificate"),
        ({"status": {"token": "t", "expirationTimestamp": "tomorrow"}}, "not a time"),
        ({"kind": "Secret"}, "did not answer with an ExecCredential"),
    ],
)
async def test_issue41_item4_kubeconfig_exec_plugin_failures_are_said(
    api: StandIn, tmp_path: Path, answer: dict[str, Any], message: str
) -> None:
    """A plugin that fails, or answers what is not a token, is an error that says so (with its
    stderr, credentials and control characters taken out); nothing is sent to the API."""
    path = exec_kubeconfig(tmp_path, api.url)
    plugin_answer(tmp_path / "plugin", "t", **answer)
    claims = Claims(from_kubeconfig(path), NAMESPACE)
    with pytest.raises(ExecPluginError, match=message):
        await claims.list("")
    await claims.close()
    assert api.requests == []


async def test_issue41_item4_kubeconfig_exec_plugin_refused_or_missing(api: StandIn, tmp_path: Path) -> None:
    """A plugin that must always ask someone, or of an unknown apiVersion, is refused when the
    kubeconfig is read; one that is not installed is an error with the kubeconfig's hint."""
    with pytest.raises(DevagentError, match="interactiveMode: Always"):
        from_kubeconfig(exec_kubeconfig(tmp_path, api.url, interactiveMode="Always"))
    with pytest.raises(DevagentError, match="v1alpha1"):
        from_kubeconfig(
            exec_kubeconfig(tmp_path, api.url, apiVersion="client.authentication.k8s.io/v1alpha1")
        )
    missing = exec_kubeconfig(tmp_path, api.url, command="no-such-auth-plugin", installHint="apt install it")
    claims = Claims(from_kubeconfig(missing), NAMESPACE)
    with pytest.raises(ExecPluginError, match=r"no-such-auth-plugin.*\(apt install it\)"):
        await claims.list("")
    await claims.close()


async def test_issue41_item4_dispatcher_goes_on_when_the_exec_plugin_fails(
    api: StandIn, tmp_path: Path
) -> None:
    """The dispatcher logs a look whose credential plugin failed and looks again; it ends when
    told to stop."""
    path = exec_kubeconfig(tmp_path, api.url)
    folder = tmp_path / "plugin"
    plugin_answer(folder, "", exit=1, stderr="expired session")

    class PoolServer:  # the devagent server's side of a look, as far as the failing one goes
        async def poll(self, _calls: list[Any]) -> dict[str, Any]:
            return {"pool": "pods"}

    claims = Claims(from_kubeconfig(path), NAMESPACE)
    stop = asyncio.Event()
    running = asyncio.create_task(Dispatcher(PoolServer(), claims, "devagent-worker").run(stop, 0.01))  # type: ignore[arg-type]
    for _ in range(3000):  # a hang guard, not a timing assertion
        if len(plugin_runs(folder)) >= 3 or running.done():
            break
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(running, 30)
    assert len(plugin_runs(folder)) >= 3 and api.requests == []
    await claims.close()
