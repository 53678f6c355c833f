"""The operator's identity-provider settings (`DEVAGENT_OIDC_*`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

# The prefix of every identity an IdP's token names: a static token's name is letters, digits,
# '.', '_' and '-' only, so no token of the IdP can ever act as a static token's identity, or the
# reverse (a user whose `sub` is "ci" is "oidc:ci", not the CI's token "ci").
IDENTITY_PREFIX = "oidc:"


@dataclass(frozen=True, slots=True)
class OidcSettings:
    """`issuer`: the IdP's issuer URL (its discovery document and keys are found from it);
    `audiences`: what a token's `aud` must name (one of them; empty: the server's own URL);
    `identity_claim`: the claim that names the caller (`sub` by default); `roles_claim`: where the
    caller's roles are (a dotted path, e.g. `realm_access.roles` in Keycloak; empty: no roles);
    `operator_role`: the role that makes a caller an operator; `client_id`/`client_secret`: the
    console's registration with the IdP (its sign-in); `timeout`: seconds for each request to the
    IdP; `leeway`: seconds of clock difference forgiven on `exp`, `nbf` and `iat`;
    `refetch_interval`: at most one refetch of the keys in this many seconds, however many tokens
    name a key it does not know; `scopes`: the scopes a client asks the IdP for (the MCP door's
    resource metadata, the console's sign-in)."""

    issuer: str
    audiences: tuple[str, ...] = ()
    identity_claim: str = "sub"
    roles_claim: str = ""
    operator_role: str = "operator"
    client_id: str = ""
    client_secret: str = field(default="", repr=False)
    timeout: float = 5.0
    leeway: int = 30
    refetch_interval: float = 10.0
    scopes: tuple[str, ...] = ("openid",)

    @property
    def discovery_url(self) -> str:
        return self.issuer.rstrip("/") + "/.well-known/openid-configuration"

    def with_audiences(self, default: str) -> OidcSettings:
        """These settings with `default` as the audience when none is set."""
        if self.audiences:
            return self
        from dataclasses import replace

        return replace(self, audiences=(default,))


def _number(env: Mapping[str, str], var: str, default: float) -> float:
    raw = env.get(var, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{var} must be a number, not {raw!r}") from None
    if value < 0:
        raise ValueError(f"{var} must be 0 or more")
    return value


def oidc_settings_from_env(environ: Mapping[str, str] | None = None) -> OidcSettings | None:
    """The settings the environment gives, or None without `DEVAGENT_OIDC_ISSUER`; ValueError
    names a bad one."""
    env = os.environ if environ is None else environ
    issuer = env.get("DEVAGENT_OIDC_ISSUER", "").strip()
    if not issuer:
        return None
    if not issuer.startswith(("https://", "http://")):
        raise ValueError(f"DEVAGENT_OIDC_ISSUER must be an http(s) URL, not {issuer!r}")
    audiences = tuple(a.strip() for a in env.get("DEVAGENT_OIDC_AUDIENCE", "").split(",") if a.strip())
    timeout = _number(env, "DEVAGENT_OIDC_TIMEOUT", 5.0)
    if timeout <= 0:
        raise ValueError("DEVAGENT_OIDC_TIMEOUT must be positive")
    return OidcSettings(
        issuer=issuer.rstrip("/"),
        audiences=audiences,
        identity_claim=env.get("DEVAGENT_OIDC_IDENTITY_CLAIM", "").strip() or "sub",
        roles_claim=env.get("DEVAGENT_OIDC_ROLES_CLAIM", "").strip(),
        operator_role=env.get("DEVAGENT_OIDC_OPERATOR_ROLE", "").strip() or "operator",
        client_id=env.get("DEVAGENT_OIDC_CLIENT_ID", "").strip(),
        client_secret=env.get("DEVAGENT_OIDC_CLIENT_SECRET", "").strip(),
        timeout=timeout,
        leeway=int(_number(env, "DEVAGENT_OIDC_LEEWAY", 30)),
        refetch_interval=_number(env, "DEVAGENT_OIDC_REFETCH_INTERVAL", 10.0),
        scopes=tuple(env.get("DEVAGENT_OIDC_SCOPES", "").split()) or ("openid",),
    )
