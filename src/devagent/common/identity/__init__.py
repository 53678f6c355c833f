"""Callers known through the operator's identity provider (OpenID Connect): devagent is a
resource server that checks the IdP's signed access tokens (JWTs), never an authorization server.

Here rather than in a door: every door served over HTTP (A2A's three bindings, MCP, the console,
/metrics) checks a token the same way, and the check knows no protocol and nothing of the core;
each door turns a refusal into its own protocol's error."""

from devagent.common.identity.keys import IdpKeys, IdpUnavailable
from devagent.common.identity.settings import OidcSettings, oidc_settings_from_env
from devagent.common.identity.verifier import Caller, OidcVerifier, TokenRefused

__all__ = [
    "Caller",
    "IdpKeys",
    "IdpUnavailable",
    "OidcSettings",
    "OidcVerifier",
    "TokenRefused",
    "oidc_settings_from_env",
]
