"""An access token of the operator's IdP checked: its signature against the IdP's published keys
with an algorithm of that key, its issuer, its audience, its times; the caller it names."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

from joserfc import jwt
from joserfc.errors import JoseError

from devagent.common.errors import DevagentError
from devagent.common.identity.keys import IdpKeys, IdpUnavailable
from devagent.common.identity.settings import IDENTITY_PREFIX, OidcSettings
from devagent.common.lru import LRU

MAX_TOKEN_CHARS = 16384  # far above any IdP's access token
MAX_NAME_CHARS = 255


class TokenRefused(DevagentError):
    """Why a bearer token is not accepted (said to the caller: names no secret)."""


@dataclass(frozen=True, slots=True)
class Caller:
    """Who a valid token names: `name` (IDENTITY_PREFIX and the identity claim), whether the
    operator's role is among its roles, when the token expires (epoch seconds), and its `sub`
    (what an ID token of the same person names too)."""

    name: str
    operator: bool
    expires: float
    subject: str = ""
    groups: frozenset[str] = frozenset()  # the shared groups (OidcSettings.shared_groups) it is in


def _claim(claims: dict[str, Any], path: str) -> Any:
    """A claim by dotted path (`realm_access.roles`); None where absent."""
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _roles(value: Any) -> set[str]:
    if isinstance(value, str):
        return set(value.split())
    if isinstance(value, list):
        return {v for v in value if isinstance(v, str)}
    return set()


def _name(value: Any, claim: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value or len(value) > MAX_NAME_CHARS:
        raise TokenRefused(f"the token's {claim!r} claim names no caller")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise TokenRefused(f"the token's {claim!r} claim holds control characters")
    return IDENTITY_PREFIX + value


class OidcVerifier:
    """Checks tokens of one issuer for these settings (with their audiences set). A token checked
    once is remembered until it expires (by its digest), so that a caller's every request, and
    gRPC's synchronous look-up of a call's user (`known`), costs no signature check."""

    def __init__(self, settings: OidcSettings, keys: IdpKeys | None = None) -> None:
        if not settings.audiences:
            raise ValueError("an OIDC verifier needs the audience its tokens must name")
        self.settings = settings
        self.keys = keys or IdpKeys(settings.issuer, settings.timeout, settings.refetch_interval)
        self._checked: LRU[bytes, Caller] = LRU(4096)

    def known(self, token: str) -> Caller | None:
        """The caller of a token already checked and not yet expired, else None."""
        caller = self._checked.get(hashlib.sha256(token.encode()).digest())
        if caller is None or caller.expires + self.settings.leeway <= time.time():
            return None
        return caller

    async def verify(self, token: str) -> Caller:
        """The caller the token names; TokenRefused says why not."""
        caller = self.known(token)
        if caller is not None:
            return caller
        caller = await self._check(token)
        self._checked[hashlib.sha256(token.encode()).digest()] = caller
        return caller

    async def _check(self, token: str) -> Caller:
        return self._caller(await self._signed_claims(token))

    async def id_token_subject(self, token: str, client_id: str, nonce: str) -> str:
        """The `sub` of a sign-in's ID token (OpenID Connect Core 3.1.3.7): signed by the IdP,
        for this client (`aud`), carrying the nonce the sign-in sent, not expired."""
        claims = await self._signed_claims(token)
        registry = jwt.JWTClaimsRegistry(
            leeway=self.settings.leeway,
            iss={"essential": True, "value": self.settings.issuer},
            aud={"essential": True, "value": client_id},
            exp={"essential": True},
            nonce={"essential": True, "value": nonce},
        )
        try:
            registry.validate(claims)
        except JoseError as e:
            raise TokenRefused(_said(e)) from None
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            raise TokenRefused("the ID token names no subject")
        return subject

    async def _signed_claims(self, token: str) -> dict[str, Any]:
        """The claims of a JWT whose signature verifies with a key the IdP publishes."""
        if len(token) > MAX_TOKEN_CHARS or token.count(".") != 2:
            raise TokenRefused("the bearer token is not a signed JWT")
        header = _header(token)
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str) or not isinstance(kid, str | None):
            raise TokenRefused("the token's header is malformed")
        try:
            found = await self.keys.key_for(kid)
        except IdpUnavailable as e:
            raise TokenRefused(f"the token cannot be checked now: {e}") from None
        if found is None:
            raise TokenRefused("the token is signed with a key the identity provider does not publish")
        key, algorithms = found
        if alg not in algorithms:  # `none`, HMAC, or another key type's algorithm
            raise TokenRefused(f"the token's algorithm {alg!r} is not one of its key's")
        try:
            return jwt.decode(token, key, algorithms=[alg]).claims
        except (JoseError, ValueError):
            raise TokenRefused("the token's signature does not verify") from None

    def _caller(self, claims: dict[str, Any]) -> Caller:
        s = self.settings
        registry = jwt.JWTClaimsRegistry(
            leeway=s.leeway,
            iss={"essential": True, "value": s.issuer},
            aud={"essential": True, "values": list(s.audiences)},
            exp={"essential": True},
        )
        try:
            registry.validate(claims)
        except JoseError as e:
            raise TokenRefused(_said(e)) from None
        roles = _roles(_claim(claims, s.roles_claim)) if s.roles_claim else set()
        groups = _roles(_claim(claims, s.groups_claim)) & s.shared_groups if s.groups_claim else set()
        return Caller(
            name=_name(_claim(claims, s.identity_claim), s.identity_claim),
            operator=s.operator_role in roles,
            expires=float(claims["exp"]),
            subject=str(claims.get("sub") or ""),
            groups=frozenset(groups),
        )


def _header(token: str) -> dict[str, Any]:
    """A compact JWS's protected header, read before anything is verified only to pick the key."""
    first = token.split(".", 1)[0]
    try:
        header = json.loads(base64.urlsafe_b64decode(first + "=" * (-len(first) % 4)))
    except (ValueError, UnicodeError):
        raise TokenRefused("the bearer token is not a signed JWT") from None
    if not isinstance(header, dict):
        raise TokenRefused("the bearer token is not a signed JWT")
    return header


def _said(error: JoseError) -> str:
    """A claim check's failure in words."""
    kind = type(error).__name__
    if kind == "ExpiredTokenError":
        return "the token has expired"
    if "not yet valid" in str(error.description):
        return "the token is not valid yet"
    if "in the future" in str(error.description):
        return "the token was issued in the future"
    if kind == "MissingClaimError":
        return f"the token lacks a required claim ({error.description})"
    if kind == "InvalidClaimError":
        return f"the token's claim is not this server's ({error.description})"
    return f"the token's claims are not accepted ({kind})"
