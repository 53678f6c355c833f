"""The operator's identity-provider settings (`DEVAGENT_OIDC_*`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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
    resource metadata, the console's sign-in); `groups_claim`: where the caller's groups are (a
    dotted path; empty: no groups); `shared_groups`: the groups whose members may read each
    other's tasks (the operator's choice; none by default); `approving_groups`: those of them
    whose members may also answer each other's permission requests (allow once or refuse)."""

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
    groups_claim: str = ""
    shared_groups: frozenset[str] = frozenset()
    approving_groups: frozenset[str] = frozenset()

    @property
    def discovery_url(self) -> str:
        return self.issuer.rstrip("/") + "/.well-known/openid-configuration"

    def with_audiences(self, default: str) -> OidcSettings:
        """These settings with `default` as the audience when none is set."""
        if self.audiences:
            return self
        from dataclasses import replace

        return replace(self, audiences=(default,))


# Each setting of the IdP: (environment variable, settings-file key, `devagent serve` flag, "" where
# it has none). Precedence as every setting: the flag over the variable over the file. The client
# secret has no flag: a command line is readable by every user of the host (`ps`,
# /proc/PID/cmdline) and kept in shell histories; it comes from the environment or the settings
# file, which the operator can keep readable by the server's user alone.
OIDC_SETTINGS: dict[str, tuple[str, str, str]] = {
    "issuer": ("DEVAGENT_OIDC_ISSUER", "oidc_issuer", "--oidc-issuer"),
    "audiences": ("DEVAGENT_OIDC_AUDIENCE", "oidc_audience", "--oidc-audience"),
    "identity_claim": ("DEVAGENT_OIDC_IDENTITY_CLAIM", "oidc_identity_claim", "--oidc-identity-claim"),
    "roles_claim": ("DEVAGENT_OIDC_ROLES_CLAIM", "oidc_roles_claim", "--oidc-roles-claim"),
    "operator_role": ("DEVAGENT_OIDC_OPERATOR_ROLE", "oidc_operator_role", "--oidc-operator-role"),
    "client_id": ("DEVAGENT_OIDC_CLIENT_ID", "oidc_client_id", "--oidc-client-id"),
    "groups_claim": ("DEVAGENT_OIDC_GROUPS_CLAIM", "oidc_groups_claim", "--oidc-groups-claim"),
    "shared_groups": ("DEVAGENT_OIDC_SHARED_GROUPS", "oidc_shared_groups", "--oidc-shared-groups"),
    "client_secret": ("DEVAGENT_OIDC_CLIENT_SECRET", "oidc_client_secret", ""),
    "scopes": ("DEVAGENT_OIDC_SCOPES", "oidc_scopes", ""),
    "timeout": ("DEVAGENT_OIDC_TIMEOUT", "oidc_timeout", ""),
    "leeway": ("DEVAGENT_OIDC_LEEWAY", "oidc_leeway", ""),
    "refetch_interval": ("DEVAGENT_OIDC_REFETCH_INTERVAL", "oidc_refetch_interval", ""),
}
# The keys the settings file may hold for them (devagent.config accepts them beside its own).
OIDC_FILE_KEYS = tuple(key for _var, key, _flag in OIDC_SETTINGS.values())
# How a list in the settings file is written as the variable's text: audiences comma-separated,
# scopes space-separated (as OAuth writes them).
_LIST_SEPARATOR = {"audiences": ",", "scopes": " ", "shared_groups": ","}
_NUMBERS = frozenset(("timeout", "leeway", "refetch_interval"))


def _file_text(name: str, value: Any, label: str) -> str:
    """A settings-file value as the text its variable would hold; ValueError names a bad one."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and name in _LIST_SEPARATOR and all(isinstance(v, str) for v in value):
        return _LIST_SEPARATOR[name].join(value)
    if isinstance(value, int | float) and not isinstance(value, bool) and name in _NUMBERS:
        return str(value)
    expected = (
        "a list of strings" if name in _LIST_SEPARATOR else "a number" if name in _NUMBERS else "a string"
    )
    raise ValueError(f"setting {label}: expected {expected}, not {value!r}")


def _given(
    env: Mapping[str, str], file: Mapping[str, Any], flags: Mapping[str, str | None], where: str
) -> dict[str, tuple[str, str]]:
    """Each setting given anywhere: (its text, how the operator spelled it), the flag over the
    variable over the file."""
    out: dict[str, tuple[str, str]] = {}
    for name, (var, key, flag) in OIDC_SETTINGS.items():
        if flag and (value := flags.get(name)) is not None and value.strip():
            out[name] = (value.strip(), flag)
        elif env.get(var, "").strip():
            out[name] = (env[var].strip(), var)
        elif key in file:
            label = f"{key} in {where}"
            out[name] = (_file_text(name, file[key], label).strip(), label)
    return out


def _number(given: Mapping[str, tuple[str, str]], name: str, default: float) -> float:
    if name not in given:
        return default
    raw, label = given[name]
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{label} must be a number, not {raw!r}") from None
    if value < 0 or value != value or value == float("inf"):
        raise ValueError(f"{label} must be 0 or more")
    return value


def oidc_settings(
    environ: Mapping[str, str] | None = None,
    file: Mapping[str, Any] | None = None,
    flags: Mapping[str, str | None] | None = None,
    where: str = "the settings file",
) -> OidcSettings | None:
    """The settings `devagent serve`'s flags (by setting name, None: not given), the environment
    and the settings file's keys (`file`, read from `where`) give, or None without an issuer;
    ValueError names a bad one as the operator spelled it."""
    env = os.environ if environ is None else environ
    given = _given(env, file or {}, flags or {}, where)
    text = {name: value for name, (value, _label) in given.items()}
    issuer = text.get("issuer", "")
    if not issuer:
        return None
    if not issuer.startswith(("https://", "http://")):
        raise ValueError(f"{given['issuer'][1]} must be an http(s) URL, not {issuer!r}")
    timeout = _number(given, "timeout", 5.0)
    shared, approving = _shared_groups(given)
    if timeout <= 0:
        raise ValueError(f"{given['timeout'][1]} must be positive")
    return OidcSettings(
        issuer=issuer.rstrip("/"),
        audiences=tuple(a.strip() for a in text.get("audiences", "").split(",") if a.strip()),
        identity_claim=text.get("identity_claim") or "sub",
        roles_claim=text.get("roles_claim", ""),
        operator_role=text.get("operator_role") or "operator",
        client_id=text.get("client_id", ""),
        client_secret=text.get("client_secret", ""),
        timeout=timeout,
        leeway=int(_number(given, "leeway", 30)),
        refetch_interval=_number(given, "refetch_interval", 10.0),
        scopes=tuple(text.get("scopes", "").split()) or ("openid",),
        groups_claim=text.get("groups_claim", ""),
        shared_groups=shared,
        approving_groups=approving,
    )


def _shared_groups(given: Mapping[str, tuple[str, str]]) -> tuple[frozenset[str], frozenset[str]]:
    """The groups that share (`GROUP`, `GROUP=read` or `GROUP=approve`, comma-separated), and
    those of them that also answer each other's permission requests. Anything else is refused,
    never taken as some other sharing."""
    if "shared_groups" not in given:
        return frozenset(), frozenset()
    raw, label = given["shared_groups"]
    shared: set[str] = set()
    approving: set[str] = set()
    for entry in raw.split(","):
        name, _, mode = (p.strip() for p in entry.partition("="))
        if not name and not mode:
            continue
        if not name or mode not in ("", "read", "approve"):
            raise ValueError(f"{label}: {entry.strip()!r} is not GROUP, GROUP=read or GROUP=approve")
        shared.add(name)
        if mode == "approve":
            approving.add(name)
    return frozenset(shared), frozenset(approving)


def oidc_settings_from_env(environ: Mapping[str, str] | None = None) -> OidcSettings | None:
    """The settings the environment alone gives (`oidc_settings`)."""
    return oidc_settings(environ)
