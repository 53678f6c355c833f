"""deploy/kubernetes/ checked offline: every object against the Kubernetes API schemas shipped by
the kubernetes-validate package (strict: an unknown field fails), the agent-sandbox resources
against the fields of that project's v1beta1 types, and what only the manifests together can say
(selectors select the pods, the workers' policy opens exactly the server's port, the worker pods
hold no secret but their token). Nothing here reaches a cluster."""

from __future__ import annotations

import copy
import datetime
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
        "RuntimeClass", "SandboxClaim", "SandboxTemplate", "SandboxWarmPool", "Secret", "Service",
        "ServiceAccount",
    ]  # fmt: skip
    assert len(OBJECTS) == 20


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
            lambda d: d["spec"]["template"]["spec"]["containers"][0]["securityContext"].update(runAsNonRoot="yes"),
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
