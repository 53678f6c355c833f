"""The fields of kubernetes-sigs/agent-sandbox's resources that deploy/kubernetes/agent-sandbox/
uses, as JSON Schema, written for these tests from the project's v1beta1 Go types
(extensions/api/v1beta1/*_types.go and api/v1beta1/sandbox_types.go at v0.5.6, commit 2fd412d;
the Python SDK k8s-agent-sandbox 1.0.8 names the same group and version). No package ships the
controller's CRDs, so this is not the CRDs' own schema: it refuses any field the Go types do not
have at the levels written out here, and the embedded Kubernetes types (the pod spec, the
network policy rules) are checked against the Kubernetes schemas separately (manifests.py)."""

from __future__ import annotations

from typing import Any

_META = {
    "type": "object",
    "required": ["name"],
    "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}, "labels": {"type": "object"}},
}
_REF = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {"name": {"type": "string"}},
}
_POD_METADATA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"labels": {"type": "object"}, "annotations": {"type": "object"}},
}


def _resource(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "additionalProperties": False,
        "properties": {
            "apiVersion": {"const": "extensions.agents.x-k8s.io/v1beta1"},
            "kind": {"const": kind},
            "metadata": _META,
            "spec": spec,
        },
    }


SANDBOX_TEMPLATE = _resource(
    "SandboxTemplate",
    {
        "type": "object",
        "required": ["podTemplate"],
        "additionalProperties": False,
        "properties": {
            "podTemplate": {
                "type": "object",
                "required": ["spec"],
                "additionalProperties": False,
                "properties": {"metadata": _POD_METADATA, "spec": {"type": "object"}},
            },
            "volumeClaimTemplates": {"type": "array"},
            "service": {"type": "boolean"},
            "networkPolicy": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"ingress": {"type": "array"}, "egress": {"type": "array"}},
            },
            "networkPolicyManagement": {"enum": ["Managed", "Unmanaged"]},
            "envVarsInjectionPolicy": {"enum": ["Allowed", "Overrides", "Disallowed"]},
            "volumeClaimTemplatesPolicy": {"enum": ["Disallowed", "Allowed", "Overrides"]},
        },
    },
)

SANDBOX_WARM_POOL = _resource(
    "SandboxWarmPool",
    {
        "type": "object",
        "required": ["sandboxTemplateRef"],
        "additionalProperties": False,
        "properties": {
            "replicas": {"type": "integer", "minimum": 0},
            "sandboxTemplateRef": _REF,
            "updateStrategy": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"type": {"enum": ["Recreate", "OnReplenish"]}},
            },
        },
    },
)

SANDBOX_CLAIM = _resource(
    "SandboxClaim",
    {
        "type": "object",
        "required": ["warmPoolRef"],
        "additionalProperties": False,
        "properties": {
            "warmPoolRef": _REF,
            "additionalPodMetadata": _POD_METADATA,
            "lifecycle": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "shutdownTime": {"type": "string", "format": "date-time"},
                    "ttlSecondsAfterFinished": {"type": "integer", "minimum": 0},
                    "shutdownPolicy": {"enum": ["Delete", "DeleteForeground", "Retain"]},
                },
            },
            "env": {"type": "array"},
            "volumeClaimTemplates": {"type": "array"},
        },
    },
)

SCHEMAS = {
    "SandboxTemplate": SANDBOX_TEMPLATE,
    "SandboxWarmPool": SANDBOX_WARM_POOL,
    "SandboxClaim": SANDBOX_CLAIM,
}
