"""Reading and checking deploy/kubernetes/: the manifests as Python objects, their validation
against the Kubernetes API's schemas (the `kubernetes-validate` package ships them, for each
Kubernetes minor version, so nothing is fetched), and the few relations between objects that no
schema can see (a selector and the pods it should select, a policy's port and the pod's port)."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "kubernetes"
CONTAINERFILE = ROOT / "deploy" / "Containerfile"
# The oldest Kubernetes minor the manifests are meant for, and the newest the package knows.
OLDEST = "1.30"
NEWEST = kubernetes_validate.utils.latest_version()
SANDBOX_API = "extensions.agents.x-k8s.io/v1beta1"
SANDBOX_KINDS = frozenset(("SandboxTemplate", "SandboxWarmPool", "SandboxClaim"))
Obj = dict[str, Any]


def load(path: Path) -> list[Obj]:
    """The objects of one YAML file; ValueError for a document that is not a Kubernetes object
    (so a typo that makes a document a string or a list fails rather than vanishing)."""
    out: list[Obj] = []
    for doc in yaml.safe_load_all(path.read_text()):
        if doc is None:
            continue
        if not isinstance(doc, dict) or not {"apiVersion", "kind", "metadata"} <= doc.keys():
            raise ValueError(f"{path.name}: a document that is not a Kubernetes object: {doc!r:.80}")
        out.append(doc)
    return out


def manifest_files(root: Path = K8S) -> list[Path]:
    """Every manifest file (kustomization.yaml lists files; it is not one)."""
    return [p for p in sorted(root.rglob("*.yaml")) if p.name != "kustomization.yaml"]


def all_objects(root: Path = K8S) -> list[tuple[Path, Obj]]:
    return [(p, o) for p in manifest_files(root) for o in load(p)]


def validate(obj: Obj, version: str) -> None:
    """Strict validation (unknown fields refused) against the API schema of `version`; an
    object whose kind has no schema there raises SchemaNotFoundError rather than passing."""
    kubernetes_validate.validate(copy.deepcopy(obj), version, strict=True)


def validate_pod_spec(spec: Obj, version: str) -> None:
    """A PodSpec embedded in another kind (agent-sandbox's podTemplate), checked as a Pod's."""
    validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "embedded"}, "spec": spec}, version)


def validate_policy_rules(rules: Obj, version: str) -> None:
    """NetworkPolicy ingress/egress rules embedded in another kind, checked as a policy's."""
    spec = {"podSelector": {}, **rules}
    validate(
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": "x"},
            "spec": spec,
        },
        version,
    )


def find(objects: list[Obj], kind: str, name: str) -> Obj:
    hits = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(hits) == 1, f"{kind}/{name}: {len(hits)} found"
    return hits[0]


def pods(objects: list[Obj]) -> Iterator[tuple[str, str, Obj, Obj]]:
    """(what, namespace, pod labels, pod spec) of every pod the manifests make."""
    for o in objects:
        ns = o["metadata"].get("namespace", "")
        what = f"{o['kind']}/{o['metadata']['name']}"
        if o["kind"] == "Deployment":
            tpl = o["spec"]["template"]
            yield what, ns, tpl["metadata"].get("labels", {}), tpl["spec"]
        elif o["kind"] == "SandboxTemplate":
            tpl = o["spec"]["podTemplate"]
            yield what, ns, tpl.get("metadata", {}).get("labels", {}), tpl["spec"]


def selects(selector: Obj, labels: Obj) -> bool:
    """Whether a LabelSelector selects a pod with `labels` (the API's own rules)."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for e in selector.get("matchExpressions", []):
        key, op, values = e["key"], e["operator"], e.get("values", [])
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|DB|DATABASE", re.IGNORECASE)


def secret_problems(spec: Obj, allowed: frozenset[str]) -> list[str]:
    """What in a worker pod's spec could hand it a secret other than the names in `allowed`:
    whole Secrets or ConfigMaps as environment, Secret volumes, and variables named like secrets."""
    problems: list[str] = []
    for v in spec.get("volumes", []):
        if "secret" in v or "projected" in v:
            problems.append(f"volume {v['name']} mounts a secret")
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        if c.get("envFrom"):
            problems.append(f"{c['name']}: envFrom hands over a whole Secret or ConfigMap")
        for e in c.get("env", []):
            if e["name"] in allowed:
                continue
            if _SECRET_NAME.search(e["name"]) or "secretKeyRef" in e.get("valueFrom", {}):
                problems.append(f"{c['name']}: variable {e['name']} may carry a secret")
    return problems
