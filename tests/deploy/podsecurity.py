"""The rules of the "restricted" Pod Security Standard that the namespaces enforce
(kubernetes.io/docs/concepts/security/pod-security-standards), checked before a cluster would
refuse the pods, plus devagent's own: a read-only root filesystem, resource limits, and no
Kubernetes API token in the pod (but the dispatcher's, whose work is API calls: `api_client`)."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

# The volume types the restricted profile allows.
_VOLUME_TYPES = frozenset(
    (
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    )
)


def restricted_problems(spec: Obj, api_client: bool = False) -> list[str]:
    problems = [f"{k} is set" for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k)]
    for v in spec.get("volumes", []):
        kinds = set(v) - {"name"}
        if not kinds <= _VOLUME_TYPES:
            problems.append(f"volume {v['name']} is of type {sorted(kinds - _VOLUME_TYPES)}")
    pod_sc = spec.get("securityContext", {})
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        problems += [f"{c['name']}: {p}" for p in _container_problems(c, pod_sc)]
    if spec.get("automountServiceAccountToken") is not api_client:
        problems.append(f"automountServiceAccountToken is not {str(api_client).lower()}")
    return problems


def _container_problems(c: Obj, pod_sc: Obj) -> list[str]:
    sc = c.get("securityContext", {})
    problems: list[str] = []

    def setting(key: str) -> Any:
        return sc.get(key, pod_sc.get(key))

    if setting("runAsNonRoot") is not True:
        problems.append("runAsNonRoot is not true")
    if setting("runAsUser") == 0:
        problems.append("runs as uid 0")
    if (setting("seccompProfile") or {}).get("type") not in ("RuntimeDefault", "Localhost"):
        problems.append("no RuntimeDefault or Localhost seccomp profile")
    if sc.get("allowPrivilegeEscalation") is not False:
        problems.append("allowPrivilegeEscalation is not false")
    if sc.get("privileged"):
        problems.append("privileged")
    caps = sc.get("capabilities", {})
    if "ALL" not in caps.get("drop", []):
        problems.append("does not drop ALL capabilities")
    if set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
        problems.append(f"adds capabilities {caps['add']}")
    if sc.get("readOnlyRootFilesystem") is not True:
        problems.append("root filesystem is writable")
    limits = c.get("resources", {}).get("limits", {})
    if not {"cpu", "memory"} <= limits.keys():
        problems.append("no cpu and memory limits")
    return problems
