"""Callers known through the operator's identity provider (OpenID Connect): devagent is a
resource server that checks the IdP's signed access tokens (JWTs), never an authorization server.

Here rather than in a door: every door served over HTTP (A2A's three bindings, MCP, the console,
/metrics) checks a token the same way, and the check knows no protocol and nothing of the core;
each door turns a refusal into its own protocol's error.

The names are loaded when first used: the settings file's reader (devagent.config, on every
command's start) needs `settings` alone, not the JOSE library the verifier loads."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from devagent.common.identity.keys import IdpKeys, IdpUnavailable
    from devagent.common.identity.settings import (
        OidcSettings,
        oidc_settings,
        oidc_settings_from_env,
    )
    from devagent.common.identity.verifier import Caller, OidcVerifier, TokenRefused

_WHERE = {
    "Caller": "verifier",
    "IdpKeys": "keys",
    "IdpUnavailable": "keys",
    "OidcSettings": "settings",
    "OidcVerifier": "verifier",
    "TokenRefused": "verifier",
    "oidc_settings": "settings",
    "oidc_settings_from_env": "settings",
}

__all__ = [
    "Caller",
    "IdpKeys",
    "IdpUnavailable",
    "OidcSettings",
    "OidcVerifier",
    "TokenRefused",
    "oidc_settings",
    "oidc_settings_from_env",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
