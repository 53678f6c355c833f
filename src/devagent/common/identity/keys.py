"""The identity provider's signing keys: its discovery document read once, its JWKS fetched with
a timeout, kept, and fetched again when a token names a key id it does not hold (the IdP rotated
its keys), at most once per `refetch_interval` seconds however many such tokens arrive."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, Key, OKPKey, RSAKey

from devagent.common.errors import DevagentError

# The signature algorithms each kind of public key may verify. A symmetric ("oct") key in the
# JWKS is never used: a key that anyone reading the JWKS knows cannot prove who signed; and `none`
# is no algorithm of any key.
_RSA = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
_EC = {"P-256": ("ES256",), "P-384": ("ES384",), "P-521": ("ES512",)}
_OKP = ("EdDSA", "Ed25519")
MAX_DOCUMENT_BYTES = 1 << 20  # a discovery document or JWKS larger than this is not one


class IdpUnavailable(DevagentError):
    """The IdP's discovery document or keys could not be read (or made no sense): no token can be
    checked until they can, so every one is refused (fail closed)."""


def algorithms_of(key: Key) -> tuple[str, ...]:
    """The algorithms a published key verifies: its own `alg` when it names an asymmetric one the
    key can use, else every one its type allows."""
    if isinstance(key, RSAKey):
        allowed: tuple[str, ...] = _RSA
    elif isinstance(key, ECKey):
        allowed = _EC.get(str(key.get("crv", "")), ())
    elif isinstance(key, OKPKey):
        allowed = _OKP
    else:
        return ()
    named = key.get("alg")
    if named:
        return (str(named),) if named in allowed else ()
    return allowed


def _signing_keys(jwks: Any) -> dict[str | None, tuple[Key, tuple[str, ...]]]:
    """kid -> (public key, its algorithms), for the signing keys of a JWKS document."""
    if not isinstance(jwks, dict) or not isinstance(jwks.get("keys"), list):
        raise IdpUnavailable("the identity provider's JWKS is not a key set")
    from joserfc.jwk import JWKRegistry

    out: dict[str | None, tuple[Key, tuple[str, ...]]] = {}
    for data in jwks["keys"]:
        if not isinstance(data, dict) or data.get("use", "sig") != "sig" or data.get("kty") == "oct":
            continue
        public = {k: v for k, v in data.items() if k not in ("d", "p", "q", "dp", "dq", "qi", "k")}
        try:
            key = JWKRegistry.import_key(public)
        except (JoseError, ValueError, TypeError):
            continue  # RFC 7517 5: a key that cannot be understood is left out, not the set
        algs = algorithms_of(key)
        if algs:
            kid = data.get("kid")
            out[kid if isinstance(kid, str) else None] = (key, algs)
    if not out:
        raise IdpUnavailable("the identity provider's JWKS holds no signing key")
    return out


class IdpKeys:
    """The keys of one issuer. `http` is made per fetch (each with `timeout`), so that nothing is
    held open between fetches."""

    def __init__(self, issuer: str, timeout: float, refetch_interval: float) -> None:
        self.issuer = issuer.rstrip("/")
        self._timeout = timeout
        self._interval = refetch_interval
        self._document: dict[str, Any] = {}
        self._keys: dict[str | None, tuple[Key, tuple[str, ...]]] = {}
        self._tried: float | None = None  # when the keys were last fetched, or tried
        self._lock = asyncio.Lock()
        self.fetches = 0

    async def key_for(self, kid: str | None) -> tuple[Key, tuple[str, ...]] | None:
        """The key a token's `kid` names and its algorithms; None for a key the IdP does not
        publish. IdpUnavailable when the keys cannot be read."""
        found = self._find(kid)
        if found is not None:
            return found
        async with self._lock:  # one fetch at a time; those waiting see its result
            found = self._find(kid)
            if found is not None:
                return found
            due = self._tried is None or time.monotonic() - self._tried >= self._interval
            if due:
                self._tried = time.monotonic()
                self._keys = await self._fetch()
            elif not self._keys:
                raise IdpUnavailable("the identity provider's keys could not be read")
        return self._find(kid)

    @property
    def known_document(self) -> dict[str, Any] | None:
        """The discovery document if it was read already (no request made here)."""
        return self._document or None

    async def document(self) -> dict[str, Any]:
        """The IdP's discovery document (its endpoints), read once; IdpUnavailable if it cannot be."""
        if not self._document:
            async with self._lock, httpx.AsyncClient(timeout=self._timeout, follow_redirects=False) as client:
                if not self._document:
                    self._document = await self._discover(client)
        return self._document

    async def _discover(self, client: httpx.AsyncClient) -> dict[str, Any]:
        doc = await self._get_json(client, self.issuer + "/.well-known/openid-configuration")
        if not isinstance(doc, dict) or str(doc.get("issuer", "")).rstrip("/") != self.issuer:
            # OpenID Connect Discovery 4.3: the document must name the issuer it was read from
            raise IdpUnavailable("the discovery document names another issuer")
        uri = doc.get("jwks_uri")
        if not isinstance(uri, str) or not uri.startswith(("https://", "http://")):
            raise IdpUnavailable("the discovery document names no jwks_uri")
        return doc

    def _find(self, kid: str | None) -> tuple[Key, tuple[str, ...]] | None:
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        return self._keys.get(kid) if kid is not None else None

    async def _get_json(self, client: httpx.AsyncClient, url: str) -> Any:
        try:
            async with client.stream("GET", url, headers={"Accept": "application/json"}) as r:
                if r.status_code != 200:
                    raise IdpUnavailable(f"{url} answered HTTP {r.status_code}")
                body = b""
                async for chunk in r.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_DOCUMENT_BYTES:
                        raise IdpUnavailable(f"{url} sent more than {MAX_DOCUMENT_BYTES} bytes")
        except httpx.TimeoutException:
            raise IdpUnavailable("the identity provider did not answer in time") from None
        except httpx.HTTPError as e:
            raise IdpUnavailable(f"{url} could not be read ({type(e).__name__})") from None
        import json

        try:
            return json.loads(body)
        except ValueError:
            raise IdpUnavailable(f"{url} did not send JSON") from None

    async def _fetch(self) -> dict[str | None, tuple[Key, tuple[str, ...]]]:
        self.fetches += 1
        try:
            # the whole fetch in bounded time: httpx's timeout is per read, which a server
            # sending a byte at a time would never reach
            async with asyncio.timeout(2 * self._timeout):
                return await self._fetch_unbounded()
        except TimeoutError:
            raise IdpUnavailable("the identity provider did not answer in time") from None

    async def _fetch_unbounded(self) -> dict[str | None, tuple[Key, tuple[str, ...]]]:
        # No redirects: the keys come from where the issuer's own document says.
        async with httpx.AsyncClient(timeout=self._timeout, follow_redirects=False) as client:
            if not self._document:
                self._document = await self._discover(client)
            return _signing_keys(await self._get_json(client, self._document["jwks_uri"]))
