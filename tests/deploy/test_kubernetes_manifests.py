"""deploy/kubernetes/ checked offline: every object against the Kubernetes API schemas shipped by
the kubernetes-validate package (strict: an unknown field fails), the agent-sandbox resources
against the fields of that project's v1beta1 types, and what only the manifests together can say
(selectors select the pods, the workers' policy opens exactly the server's port, the worker pods
hold no secret but their token). Nothing here reaches a cluster."""

from __future__ import annotations

import copy
from pathlib import Path
from urllib.parse import urlsplit

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.deploy import manifests as m
from tests.deploy.podsecurity import restricted_problems
from tests.deploy.sandbox_schema import SCHEMAS

OBJECTS = [o for _p, o in m.all_objects()]
CORE = [o for o in OBJECTS if o["kind"] not in m.SANDBOX_KINDS]
SANDBOX = [o for o in OBJECTS if o["kind"] in m.SANDBOX_KINDS]
SERVER_NS, WORKER_NS = "devagent", "devagent-workers"


def worker_deployment() -> dict:
    return copy.deepcopy(m.find(OBJECTS, "Deployment", "devagent-worker"))


def test_issue41_item4_the_manifests_hold_every_piece() -> None:
    kinds = sorted({o["kind"] for o in OBJECTS})
    assert kinds == [
        "ConfigMap", "Deployment", "Ingress", "Namespace", "NetworkPolicy", "PodDisruptionBudget",
        "Role", "RoleBinding", "RuntimeClass", "SandboxClaim", "SandboxTemplate", "SandboxWarmPool",
        "Secret", "Service", "ServiceAccount",
    ]  # fmt: skip
    assert len(OBJECTS) == 26


@pytest.mark.parametrize("version", [m.OLDEST, m.NEWEST])
def test_issue41_item4_every_object_validates_against_the_kubernetes_schemas(version: str) -> None:
    for obj in CORE:
        m.validate(obj, version)
    for obj in SANDBOX:
        if obj["kind"] == "SandboxTemplate":
            m.validate_pod_spec(obj["spec"]["podTemplate"]["spec"], version)
            m.validate_policy_rules(obj["spec"]["networkPolicy"], version)


@pytest.mark.parametrize(
    "break_it",
    [
        pytest.param(lambda d: d["spec"].update(replicas="3"), id="replicas-as-text"),
        pytest.param(lambda d: d["spec"]["template"]["spec"].update(contianers=[]), id="misspelled-field"),
        pytest.param(
            lambda d: d["spec"]["template"]["spec"]["containers"][0]["securityContext"].update(
                runAsNonRoot="yes"
            ),
            id="boolean-as-text",
        ),
        pytest.param(lambda d: d["spec"].pop("selector"), id="missing-selector"),
    ],
)
def test_issue41_item4_a_broken_manifest_fails_validation(break_it) -> None:
    broken = worker_deployment()
    m.validate(broken, m.NEWEST)  # whole, it passes
    break_it(broken)
    with pytest.raises(kubernetes_validate.ValidationError):
        m.validate(broken, m.NEWEST)


def test_issue41_item4_an_unknown_kind_or_a_broken_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(kubernetes_validate.utils.SchemaNotFoundError):
        m.validate({"apiVersion": "apps/v1", "kind": "Deploymnet", "metadata": {"name": "x"}}, m.NEWEST)
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n data: {}\n")
    with pytest.raises(yaml.YAMLError):
        m.all_objects(tmp_path)
    bad.write_text("- apiVersion: v1\n  kind: ConfigMap\n")
    with pytest.raises(ValueError, match="not a Kubernetes object"):
        m.all_objects(tmp_path)


def pod_selector(obj: dict) -> dict | None:
    """The LabelSelector with which an object picks its pods, None for a kind that picks none."""
    spec = obj.get("spec", {})
    return {
        "Service": {"matchLabels": spec.get("selector")},
        "PodDisruptionBudget": spec.get("selector"),
        "NetworkPolicy": spec.get("podSelector"),
    }.get(obj["kind"])


def test_issue41_item4_selectors_select_their_pods() -> None:
    pods = list(m.pods(OBJECTS))
    for o in CORE:
        ns, what = o["metadata"].get("namespace"), f"{o['kind']}/{o['metadata']['name']}"
        if o["kind"] == "Deployment":
            assert m.selects(o["spec"]["selector"], o["spec"]["template"]["metadata"]["labels"]), what
        selector = pod_selector(o)
        if selector is not None:
            assert [w for w, pns, labels, _ in pods if pns == ns and m.selects(selector, labels)], (
                f"{what} selects no pod"
            )
    typo = copy.deepcopy(m.find(OBJECTS, "Service", "devagent-server"))
    typo["spec"]["selector"]["app.kubernetes.io/component"] = "srever"
    assert not [w for w, _ns, labels, _ in pods if m.selects(pod_selector(typo) or {}, labels)]


def test_issue41_item4_the_service_the_ingress_and_the_probes_reach_the_server_port() -> None:
    server = m.find(OBJECTS, "Deployment", "devagent-server")["spec"]["template"]["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in server["ports"]}
    service = m.find(OBJECTS, "Service", "devagent-server")
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["http"] and "http" in ports
    backend = m.find(OBJECTS, "Ingress", "devagent-server")["spec"]["rules"][0]["http"]["paths"][0]["backend"]
    assert backend["service"] == {"name": "devagent-server", "port": {"name": "http"}}
    assert ["--port", str(ports["http"])] == server["args"][server["args"].index("--port") :][:2]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        how = server[probe].get("httpGet") or server[probe]["tcpSocket"]
        assert how["port"] == "http"
        # /healthz wants the bearer token, which a kubelet cannot send: only public paths.
        assert how.get("path", "/.well-known/agent-card.json") == "/.well-known/agent-card.json"


def worker_pods() -> list[tuple[str, str, dict, dict]]:
    found = [
        p for p in m.pods(OBJECTS) if p[2].get("app.kubernetes.io/component") in ("worker", "sandbox-worker")
    ]
    assert [w for w, *_ in found] == ["SandboxTemplate/devagent-worker", "Deployment/devagent-worker"]
    return found


def test_issue41_item4_worker_pods_reach_the_server_through_its_service_and_hold_only_their_token() -> None:
    service = m.find(OBJECTS, "Service", "devagent-server")
    for what, ns, labels, spec in worker_pods():
        assert ns == WORKER_NS != service["metadata"]["namespace"], what
        (c,) = spec["containers"]
        assert labels["devagent/pool"] == c["args"][c["args"].index("--pool") + 1], what
        assert "ports" not in c, f"{what}: a worker listens on nothing"
        url = urlsplit(c["args"][c["args"].index("--server") + 1])
        assert url.hostname == f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc"
        assert url.port == service["spec"]["ports"][0]["port"]
        assert spec["runtimeClassName"] == "gvisor"
        if what.startswith("Deployment/"):
            assert m.secret_problems(spec, frozenset({"DEVAGENT_WORKER_TOKEN"})) == [], what
            (token,) = [e for e in c["env"] if e["name"] == "DEVAGENT_WORKER_TOKEN"]
            assert token["valueFrom"]["secretKeyRef"]["name"] == "devagent-worker"
            continue
        # A sandbox pod holds no token of its own: its session's comes with its claim.
        assert m.secret_problems(spec, frozenset()) == [], what
        assert not any(e["name"] == "DEVAGENT_WORKER_TOKEN" for e in c.get("env", [])), what
        assert session_token_file(spec) == c["args"][c["args"].index("--token-file") + 1], what


def session_token_file(spec: dict) -> str:
    """Where a sandbox pod finds its session's token: the downward-API file of the annotation the
    dispatcher puts on its claims (devagent.dispatcher.loop.TOKEN)."""
    from devagent.dispatcher.loop import TOKEN

    (c,) = spec["containers"]
    for v in spec["volumes"]:
        for item in v.get("downwardAPI", {}).get("items", []):
            if item["fieldRef"]["fieldPath"] == f"metadata.annotations['{TOKEN}']":
                (mount,) = [vm for vm in c["volumeMounts"] if vm["name"] == v["name"]]
                assert mount.get("readOnly") is True
                return f"{mount['mountPath']}/{item['path']}"
    raise AssertionError("no downward-API file of the session's token")


def test_issue41_item4_the_worker_check_sees_a_secret_handed_to_a_worker() -> None:
    spec = worker_deployment()["spec"]["template"]["spec"]
    spec["containers"][0]["envFrom"] = [{"secretRef": {"name": "devagent-server"}}]
    spec["containers"][0]["env"].append({"name": "OPENAI_API_KEY", "value": "x"})
    spec["volumes"].append({"name": "keys", "secret": {"secretName": "devagent-server"}})
    assert len(m.secret_problems(spec, frozenset({"DEVAGENT_WORKER_TOKEN"}))) == 3


def test_issue41_item4_every_pod_meets_the_restricted_pod_security_standard() -> None:
    namespaces = [o for o in OBJECTS if o["kind"] == "Namespace"]
    assert {n["metadata"]["name"] for n in namespaces} == {SERVER_NS, WORKER_NS}
    assert all(
        n["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted" for n in namespaces
    )
    for what, _ns, _labels, spec in m.pods(OBJECTS):
        assert restricted_problems(spec, api_client=what == "Deployment/devagent-dispatcher") == [], what
    spec = worker_deployment()["spec"]["template"]["spec"]
    spec["containers"][0]["securityContext"].update(
        allowPrivilegeEscalation=True, readOnlyRootFilesystem=False
    )
    spec["securityContext"]["runAsUser"] = 0
    spec["volumes"].append({"name": "host", "hostPath": {"path": "/"}})
    assert len(restricted_problems(spec)) == 4


def egress_peers(rules: list[dict]) -> list[tuple[str, str, tuple[tuple[str, int], ...]]]:
    """Each egress rule as (namespace, pod component or k8s-app, ports), for comparison."""
    out = []
    for rule in rules:
        for peer in rule["to"]:
            assert set(peer) == {"namespaceSelector", "podSelector"}, f"an egress peer by address: {peer}"
            ns = peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
            pod = peer["podSelector"]["matchLabels"]
            who = pod.get("app.kubernetes.io/component") or pod["k8s-app"]
            out.append((ns, who, tuple((p["protocol"], p["port"]) for p in rule["ports"])))
    return sorted(out)


def test_issue41_item4_workers_may_reach_only_the_server_port_and_dns() -> None:
    server = m.find(OBJECTS, "Deployment", "devagent-server")["spec"]["template"]["spec"]["containers"][0]
    port = server["ports"][0]["containerPort"]
    want = [("devagent", "server", (("TCP", port),)), ("kube-system", "kube-dns", (("UDP", 53), ("TCP", 53)))]
    policy = m.find(OBJECTS, "NetworkPolicy", "devagent-worker")["spec"]
    assert policy["policyTypes"] == ["Ingress", "Egress"] and policy["ingress"] == []
    assert egress_peers(policy["egress"]) == want
    template = m.find(OBJECTS, "SandboxTemplate", "devagent-worker")["spec"]
    assert template["networkPolicyManagement"] == "Managed" and "ingress" not in template["networkPolicy"]
    assert egress_peers(template["networkPolicy"]["egress"]) == want
    deny = m.find(OBJECTS, "NetworkPolicy", "default-deny")
    assert deny["metadata"]["namespace"] == WORKER_NS
    assert deny["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    for _what, _ns, labels, _spec in worker_pods():
        assert m.selects(policy["podSelector"], labels)
    allowed = m.find(OBJECTS, "NetworkPolicy", "devagent-worker-allowed-egress")["spec"]
    assert allowed["podSelector"] == policy["podSelector"] and allowed["policyTypes"] == ["Egress"]


def test_issue41_item4_the_policy_and_embedded_checks_fail_on_broken_copies() -> None:
    policy = copy.deepcopy(m.find(OBJECTS, "NetworkPolicy", "devagent-worker")["spec"])
    policy["egress"].append({"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"port": 443}]})
    with pytest.raises(AssertionError, match="by address"):
        egress_peers(policy["egress"])
    template = copy.deepcopy(m.find(OBJECTS, "SandboxTemplate", "devagent-worker")["spec"])
    template["podTemplate"]["spec"]["runtimeClass"] = "gvisor"  # the field is runtimeClassName
    with pytest.raises(kubernetes_validate.ValidationError):
        m.validate_pod_spec(template["podTemplate"]["spec"], m.NEWEST)
    template["networkPolicy"]["egress"][0]["ports"][0]["endPort"] = "41243"  # an integer
    with pytest.raises(kubernetes_validate.ValidationError):
        m.validate_policy_rules(template["networkPolicy"], m.NEWEST)


def test_issue41_item4_the_server_policy_opens_its_port_and_reaches_out_only_to_dns_postgres_https() -> None:
    policy = m.find(OBJECTS, "NetworkPolicy", "devagent-server")["spec"]
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    assert policy["ingress"] == [{"ports": [{"protocol": "TCP", "port": 41242}]}]
    ports = sorted(p["port"] for rule in policy["egress"] for p in rule["ports"])
    assert ports == [53, 53, 443, 5432]
    (https,) = [r for r in policy["egress"] if r["ports"] == [{"protocol": "TCP", "port": 443}]]
    assert "169.254.0.0/16" in https["to"][0]["ipBlock"]["except"]  # no cloud metadata endpoint


def cli_options(command: str) -> set[str] | None:
    """The option names of `devagent COMMAND`, None when this devagent has no such command."""
    import typer.main

    from devagent.cli import app

    group = typer.main.get_command(app)
    cmd = group.commands.get(command)  # type: ignore[attr-defined]
    if cmd is None:
        return None
    return {o for p in cmd.params for o in [*getattr(p, "opts", []), *getattr(p, "secondary_opts", [])]}


def flags(args: list[str]) -> set[str]:
    return {a for a in args if a.startswith("--")}


def test_issue41_item4_the_server_is_started_with_flags_and_settings_devagent_has() -> None:
    from devagent.config import SETTINGS

    server = m.find(OBJECTS, "Deployment", "devagent-server")["spec"]["template"]["spec"]["containers"][0]
    assert server["args"][0] == "serve" and flags(server["args"]) <= (cli_options("serve") or set())
    config = m.find(OBJECTS, "ConfigMap", "devagent-server")["data"]
    assert config["DEVAGENT_SANDBOX_BACKEND"] == "worker"
    known = {env for env, _key in SETTINGS.values()} | {"CODER_AGENT_WORKSPACE_PATH", "DEVAGENT_LOG_FORMAT"}
    used_by_args = {a[2:-1] for a in server["args"] if a.startswith("$(")}
    assert set(config) - known == used_by_args == {"PUBLIC_URL"}
    assert [e["configMapRef" if "configMapRef" in e else "secretRef"]["name"] for e in server["envFrom"]] == [
        "devagent-server",
        "devagent-server",
    ]
    secret = m.find(OBJECTS, "Secret", "devagent-server")["stringData"]
    assert SETTINGS["db_url"][0] in secret and secret[SETTINGS["db_url"][0]].startswith(
        "postgresql+asyncpg://"
    )
    assert {"DEVAGENT_TOKEN", "DEVAGENT_WORKER_TOKENS"} <= secret.keys()
    assert SETTINGS["worker_tokens"][0] == "DEVAGENT_WORKER_TOKENS"
    assert set(m.find(OBJECTS, "Secret", "devagent-worker")["stringData"]) == {"DEVAGENT_WORKER_TOKEN"}


def test_issue41_item4_the_workers_are_started_with_flags_devagent_worker_has() -> None:
    options = cli_options("worker")
    assert options is not None, "devagent has no `worker` command"
    for what, _ns, _labels, spec in worker_pods():
        args = spec["containers"][0]["args"]
        assert args[0] == "worker" and flags(args) <= options, what


def test_issue41_item4_agent_sandbox_resources_have_the_fields_of_its_v1beta1_api() -> None:
    for obj in SANDBOX:
        assert obj["apiVersion"] == m.SANDBOX_API
        jsonschema.validate(obj, SCHEMAS[obj["kind"]])
        assert obj["metadata"]["namespace"] == WORKER_NS
    pool = m.find(OBJECTS, "SandboxWarmPool", "devagent-worker")
    assert (
        pool["spec"]["sandboxTemplateRef"]["name"]
        == m.find(OBJECTS, "SandboxTemplate", "devagent-worker")["metadata"]["name"]
    )
    (claim,) = [o for o in SANDBOX if o["kind"] == "SandboxClaim"]
    assert claim["spec"]["warmPoolRef"]["name"] == pool["metadata"]["name"]
    template = m.find(OBJECTS, "SandboxTemplate", "devagent-worker")["spec"]
    assert template["envVarsInjectionPolicy"] == "Disallowed"
    args = template["podTemplate"]["spec"]["containers"][0]["args"]
    assert args[args.index("--capacity") + 1] == "1"  # one session per pod


def test_issue41_item4_the_dispatchers_claims_have_the_fields_of_its_v1beta1_api() -> None:
    """The claim `devagent dispatcher` makes (its own code, not a copy) has SandboxClaim's v1beta1
    fields, takes a pod of the warm pool of the manifests, passes the session and its token as
    annotations only (the controller takes a claim's labels only from an allowed domain, and a
    claim with env is never served from the warm pool), under a name the API accepts; the example
    claim is one of them."""
    import re

    from devagent.dispatcher.loop import SESSION, TOKEN, claim_for

    pool = m.find(OBJECTS, "SandboxWarmPool", "devagent-worker")["metadata"]["name"]
    dispatcher = m.find(OBJECTS, "Deployment", "devagent-dispatcher")["spec"]["template"]["spec"]
    args = dispatcher["containers"][0]["args"]
    assert args[args.index("--warm-pool") + 1] == pool
    claim = claim_for("5f0c2a9e-0000-4000-8000-000000000000", "t0ken", "pods", pool)
    claim["metadata"]["namespace"] = WORKER_NS
    jsonschema.validate(claim, SCHEMAS["SandboxClaim"])
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", claim["metadata"]["name"])
    assert len(claim["metadata"]["name"]) <= 63
    extra = claim["spec"]["additionalPodMetadata"]
    assert set(extra) == {"annotations"} and set(extra["annotations"]) == {SESSION, TOKEN}
    assert "env" not in claim["spec"]
    (example,) = [o for o in SANDBOX if o["kind"] == "SandboxClaim"]
    assert set(example["spec"]) == set(claim["spec"])
    assert example["metadata"]["labels"] == claim["metadata"]["labels"]
    assert set(example["spec"]["additionalPodMetadata"]["annotations"]) == {SESSION, TOKEN}


def test_issue41_item4_the_dispatcher_may_touch_only_claims_and_reach_only_server_dns_and_api() -> None:
    deployment = m.find(OBJECTS, "Deployment", "devagent-dispatcher")
    spec = deployment["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    options = cli_options("dispatcher")
    assert options is not None and c["args"][0] == "dispatcher" and flags(c["args"]) <= options
    assert c["args"][c["args"].index("--namespace") + 1] == WORKER_NS
    service = m.find(OBJECTS, "Service", "devagent-server")
    url = urlsplit(c["args"][c["args"].index("--server") + 1])
    assert url.hostname == f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc"
    assert {e["name"] for e in c["env"]} == {"DEVAGENT_DISPATCHER_TOKEN", "HOME"} and "envFrom" not in c
    (token,) = [e for e in c["env"] if e["name"] == "DEVAGENT_DISPATCHER_TOKEN"]
    assert token["valueFrom"]["secretKeyRef"]["name"] == "devagent-dispatcher"
    account = m.find(OBJECTS, "ServiceAccount", spec["serviceAccountName"])
    binding = m.find(OBJECTS, "RoleBinding", "devagent-dispatcher")
    assert binding["metadata"]["namespace"] == WORKER_NS
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": SERVER_NS}
    ]
    role = m.find(OBJECTS, "Role", binding["roleRef"]["name"])
    assert role["metadata"]["namespace"] == WORKER_NS and binding["roleRef"]["kind"] == "Role"
    assert role["rules"] == [
        {
            "apiGroups": ["extensions.agents.x-k8s.io"],
            "resources": ["sandboxclaims"],
            "verbs": ["get", "list", "create", "delete"],
        }
    ]
    policy = m.find(OBJECTS, "NetworkPolicy", "devagent-dispatcher")
    assert policy["metadata"]["namespace"] == deployment["metadata"]["namespace"] == SERVER_NS
    assert m.selects(policy["spec"]["podSelector"], deployment["spec"]["template"]["metadata"]["labels"])
    assert policy["spec"]["ingress"] == [] and policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    ports = sorted(p["port"] for rule in policy["spec"]["egress"] for p in rule["ports"])
    assert ports == [53, 53, 443, 6443, 41242]


@pytest.mark.parametrize(
    ("kind", "break_it"),
    [
        # v1alpha1's way of naming the template: v1beta1 claims go through a warm pool.
        ("SandboxClaim", lambda s: s.update(sandboxTemplateRef={"name": "devagent-worker"})),
        ("SandboxClaim", lambda s: s.pop("warmPoolRef")),
        ("SandboxWarmPool", lambda s: s.update(replicas=-1)),
        ("SandboxTemplate", lambda s: s.update(networkPolicyManagement="Off")),
        ("SandboxTemplate", lambda s: s["podTemplate"].update(spec=None)),
    ],
)
def test_issue41_item4_a_broken_agent_sandbox_resource_fails(kind: str, break_it) -> None:
    (obj,) = copy.deepcopy([o for o in SANDBOX if o["kind"] == kind])
    break_it(obj["spec"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(obj, SCHEMAS[kind])


def test_issue41_item4_the_kustomization_lists_the_default_set_and_nothing_optional() -> None:
    listed = yaml.safe_load((m.K8S / "kustomization.yaml").read_text())["resources"]
    optional = {
        "server-ingress.yaml",
        "runtimeclass-gvisor.yaml",
        "workers-egress-allow.example.yaml",
        "secrets.example.yaml",
    }
    files = {str(p.relative_to(m.K8S)) for p in m.manifest_files()}
    assert set(listed) == files - optional - {f for f in files if f.startswith("agent-sandbox/")}
    assert listed[0] == "namespaces.yaml"  # the namespaces before what goes in them
    sandbox = yaml.safe_load((m.K8S / "agent-sandbox" / "kustomization.yaml").read_text())["resources"]
    examples = {f for f in files if f.endswith(".example.yaml")}
    assert {f"agent-sandbox/{f}" for f in sandbox} == {
        f for f in files if f.startswith("agent-sandbox/")
    } - examples


@pytest.mark.parametrize("folder", [".", "agent-sandbox"])
def test_issue41_item4_kubectl_kustomize_renders_each_kustomization_unchanged(folder: str) -> None:
    """Where kubectl is installed (it is not one of the project's dependencies), its built-in
    kustomize renders each kustomization (the default set, and the agent-sandbox path's), offline,
    to exactly its listed files' objects."""
    import shutil
    import subprocess

    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    root = m.K8S / folder
    out = subprocess.run(
        ["kubectl", "kustomize", str(root)], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    rendered = [o for o in yaml.safe_load_all(out) if o]
    listed = yaml.safe_load((root / "kustomization.yaml").read_text())["resources"]
    objects = [o for name in listed for o in m.load(root / name)]
    key = lambda o: (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])  # noqa: E731
    assert sorted(rendered, key=key) == sorted(objects, key=key)


def test_issue41_item4_the_image_runs_as_the_uid_the_pods_ask_for() -> None:
    lines = [
        line.split(None, 1) for line in m.CONTAINERFILE.read_text().splitlines() if line and line[0] != "#"
    ]
    user = [rest for word, *rest in lines if word == "USER"]
    assert user == [["10001:10001"]]
    assert any(word == "ENTRYPOINT" and "devagent" in rest[0] for word, *rest in lines)
    for what, _ns, _labels, spec in m.pods(OBJECTS):
        assert spec["securityContext"]["runAsUser"] == 10001, what
        image = spec["containers"][0]["image"]
        assert image == "registry.example.com/devagent:0.1.0", what
