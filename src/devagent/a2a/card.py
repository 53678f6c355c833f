"""The agent card, per protocol version.

`card_json` builds it as plain JSON with no SDK import, so a starting server can answer the card
at once; `build_card` gives the SDK its protobuf form. A client that says `A2A-Version: 1.0`
(header or query parameter, as the a2a-sdk 1.x client does) gets the 1.0 card, valid against
the 1.0 schema (`card_v1_json`); any other client, one sending no version included (A2A 1.0 says
to assume 0.3 then), gets the 1.0 card merged with the v0.3 fields (`url`,
`preferredTransport`, `protocolVersion`, `security`, ...), what the SDK's card route serves (a
test checks they are equal). `CardApp` serves both with Cache-Control, ETag and Last-Modified,
answering a revalidation with 304.
"""

from __future__ import annotations

import hashlib
import json
import time
from email.utils import formatdate, parsedate_to_datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from devagent.a2a.extension import EXTENSION_DESCRIPTION, EXTENSION_URI, EXTENSION_VERSION
from devagent.a2a.settings import REST_PREFIX, A2ASettings

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from a2a.types import AgentCard
    from starlette.types import Receive, Scope, Send

# Where the card is served: the well-known path of A2A 1.0, and the one of v0.3.
CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
_AUTH_DESCRIPTION = "Authorization: Bearer <token> (devagent serve --token)"
# What a message's parts may hold: text, and JSON (DataParts). A file part of another media type
# is refused with ContentTypeNotSupportedError (-32005).
INPUT_MODES = ("text/plain", "application/json")


def interfaces(settings: A2ASettings) -> list[dict[str, str]]:
    """Where each binding is served: JSON-RPC at `/` (1.0 and v0.3),
    HTTP+JSON at `/rest` (1.0; v0.3 under `/rest/v1`, as the v0.3 REST client adds it), and gRPC
    (1.0) when enabled, at the same origin (served on this port too; its own port is not named, so
    that a strict client finds every interface on the card's origin). JSON-RPC first: the
    preferred one."""
    url = settings.base_url + "/"
    rest = settings.base_url + REST_PREFIX
    out = [
        {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
        {"url": rest, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
        {"url": rest, "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3"},
    ]
    if settings.grpc_port:
        out.append({"url": settings.grpc_url, "protocolBinding": "GRPC", "protocolVersion": "1.0"})
    return out


def card_v1_json(
    settings: A2ASettings, version: str, discovery: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The 1.0 AgentCard in its JSON form (`discovery`: the IdP's discovery document, once read)."""
    schemes = _schemes_v1(settings, discovery)
    return {
        "name": settings.agent_name,
        "description": (
            "A self-hostable coding agent: reads, edits and searches code, runs shell commands "
            "with permission, and streams its work through the development-tool extension."
        ),
        "supportedInterfaces": interfaces(settings),
        "version": version,
        "capabilities": {
            "streaming": True,
            "pushNotifications": True,
            "extensions": [
                {
                    "uri": EXTENSION_URI,
                    "description": EXTENSION_DESCRIPTION,
                    "params": {
                        "version": EXTENSION_VERSION,
                        "methods": ["commands/get", "command/execute", "workspaces/get"],
                        "dialects": ["rfc", "coderAgent"],
                    },
                    # plain A2A clients are served too, under A2A's own rules
                    "required": False,
                }
            ],
            "extendedAgentCard": True,
        },
        "securitySchemes": schemes,
        # any one scheme (requirements are alternatives): a static token, or the IdP's
        "securityRequirements": [{"schemes": {name: {}}} for name in schemes],
        "defaultInputModes": list(INPUT_MODES),
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [
            {
                "id": "code",
                "name": "Software development",
                "description": "Answers questions about a codebase, edits files, runs commands and tests.",
                "tags": ["coding", "development", "shell", "files"],
                "examples": ["Add a unit test for the parser", "Why does `make test` fail?"],
            },
            {
                "id": "slash-commands",
                "name": "Slash commands",
                "description": "help, init, memory, compact, clear, tools, mcp, restore, stats "
                "(commands/get, command/execute, or a message starting with '/').",
                "tags": ["commands"],
            },
        ],
    }


def _oidc_description(settings: A2ASettings) -> str:
    return "Authorization: Bearer <access token> from the operator's OpenID Connect provider" + (
        f" (audience {', '.join(settings.oidc_resolved.audiences)})" if settings.oidc_resolved else ""
    )


def _device_flow(settings: A2ASettings, discovery: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The IdP's device authorization grant (RFC 8628) as A2A 1.0's OAuth2 device code flow,
    where its discovery document lists the endpoint; None where it does not."""
    if discovery is None or settings.oidc is None:
        return None
    device, token = discovery.get("device_authorization_endpoint"), discovery.get("token_endpoint")
    if not all(isinstance(u, str) and u.startswith(("https://", "http://")) for u in (device, token)):
        return None
    return {
        "oauth2SecurityScheme": {
            "description": _oidc_description(settings) + ", by the device authorization grant",
            "flows": {
                "deviceCode": {
                    "deviceAuthorizationUrl": device,
                    "tokenUrl": token,
                    "scopes": {scope: f"the {scope} scope" for scope in settings.oidc.scopes},
                }
            },
            "oauth2MetadataUrl": settings.oidc.discovery_url,
        }
    }


def _schemes_v1(settings: A2ASettings, discovery: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The card's security schemes (1.0 form): the static bearer tokens, and the operator's
    OpenID Connect provider where one is set (its discovery document's URL), with its device
    code flow where its discovery document lists one (`device`)."""
    schemes: dict[str, Any] = {
        "bearer": {"httpAuthSecurityScheme": {"description": _AUTH_DESCRIPTION, "scheme": "bearer"}}
    }
    if settings.oidc is not None:
        schemes["oidc"] = {
            "openIdConnectSecurityScheme": {
                "description": _oidc_description(settings),
                "openIdConnectUrl": settings.oidc.discovery_url,
            }
        }
    device = _device_flow(settings, discovery)
    if device is not None:
        schemes["device"] = device
    return schemes


def card_json(
    settings: A2ASettings, version: str, discovery: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The card as served: 1.0 plus the v0.3 fields. v0.3 has no device code flow: its client
    finds the IdP through the OpenID Connect scheme."""
    card = card_v1_json(settings, version, discovery)
    schemes = card["securitySchemes"]
    if "device" in schemes:
        del schemes["device"]
        card["securityRequirements"] = [{"schemes": {name: {}}} for name in schemes]
    schemes["bearer"].update({"description": _AUTH_DESCRIPTION, "scheme": "bearer", "type": "http"})
    if "oidc" in schemes:  # v0.3's OpenIdConnectSecurityScheme, beside the 1.0 form
        schemes["oidc"].update(
            {
                "type": "openIdConnect",
                "description": _oidc_description(settings),
                "openIdConnectUrl": schemes["oidc"]["openIdConnectSecurityScheme"]["openIdConnectUrl"],
            }
        )
    card.update(
        {
            "preferredTransport": "JSONRPC",
            "protocolVersion": "0.3",
            "security": [{name: []} for name in schemes],
            "supportsAuthenticatedExtendedCard": True,
            "url": settings.base_url + "/",
            # v0.3's list of the other bindings (its gRPC would be the v0.3 service: not served)
            "additionalInterfaces": [
                {"url": i["url"], "transport": i["protocolBinding"]}
                for i in card["supportedInterfaces"]
                if i["protocolVersion"] == "0.3" and i["protocolBinding"] != "JSONRPC"
            ],
        }
    )
    return card


def build_card(settings: A2ASettings, version: str, discovery: Mapping[str, Any] | None = None) -> AgentCard:
    from a2a.types import AgentCard
    from google.protobuf.json_format import ParseDict  # type: ignore[import-untyped]

    card: AgentCard = ParseDict(card_v1_json(settings, version, discovery), AgentCard())
    return card


CARD_MAX_AGE = 300  # seconds: a restarted server may declare other interfaces or capabilities
_STARTED = time.time()  # Last-Modified: when this process built its card


def _wants_v1(scope: Scope, default_v1: bool = False) -> bool:
    """Whether the request says it speaks A2A 1.0 or later (`A2A-Version` header, else the
    `A2A-Version` query parameter); without either, A2A 1.0 says to assume 0.3, unless the
    operator says its clients all speak 1.0 (`default_v1`)."""
    version = ""
    for k, v in scope.get("headers", []):
        if k == b"a2a-version":
            version = v.decode("latin-1")
            break
    else:
        for k, v in parse_qsl(scope.get("query_string", b"").decode("latin-1")):
            if k.lower() == "a2a-version":
                version = v
                break
    if not version.strip():
        return default_v1
    major = version.strip().split(".", 1)[0]
    return major.isdigit() and int(major) >= 1


class CardApp:
    """The agent card as an ASGI app: GET and HEAD on the well-known paths. `discovered` says
    the IdP's discovery document once the server has read it (at start, or at a token's check
    after): the card then declares what the document offers (`_device_flow`)."""

    def __init__(
        self,
        settings: A2ASettings,
        version: str,
        modified: float | None = None,
        discovered: Callable[[], Mapping[str, Any] | None] | None = None,
    ) -> None:
        self._settings, self._version = settings, version
        self._discovered = discovered
        self._declared: Mapping[str, Any] | None = None
        self._bodies: dict[bool, tuple[bytes, bytes]] = {}
        self._build()
        self._default_v1 = settings.card_default_version == "1.0"
        self._modified = int(_STARTED if modified is None else modified)
        self._last_modified = formatdate(self._modified, usegmt=True).encode()

    def _build(self) -> None:
        settings, version, found = self._settings, self._version, self._declared
        for v1, card in (
            (False, card_json(settings, version, found)),
            (True, card_v1_json(settings, version, found)),
        ):
            body = json.dumps(card, separators=(",", ":")).encode()
            etag = ('"' + hashlib.sha256(body).hexdigest()[:32] + '"').encode()
            self._bodies[v1] = (body, etag)

    def _up_to_date(self) -> None:
        """The card rebuilt once the IdP's discovery document is known (read once per server)."""
        if self._declared is None and self._discovered is not None:
            found = self._discovered()
            if found:
                self._declared = found
                self._modified = int(time.time())
                self._last_modified = formatdate(self._modified, usegmt=True).encode()
                self._build()

    def _not_modified(self, scope: Scope, etag: bytes) -> bool:
        headers = dict(scope.get("headers", []))
        inm = headers.get(b"if-none-match")
        if inm is not None:  # weak comparison (RFC 9110 13.1.2)
            tags = [t.strip().removeprefix(b"W/") for t in inm.split(b",")]
            return b"*" in tags or etag in tags
        ims = headers.get(b"if-modified-since")
        if ims is None:
            return False
        try:
            return parsedate_to_datetime(ims.decode("latin-1")).timestamp() >= self._modified
        except (TypeError, ValueError):
            return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            await send({"type": "http.response.start", "status": 405, "headers": [(b"allow", b"GET, HEAD")]})
            await send({"type": "http.response.body", "body": b""})
            return
        self._up_to_date()
        body, etag = self._bodies[_wants_v1(scope, self._default_v1)]
        headers = [
            (b"cache-control", f"public, max-age={CARD_MAX_AGE}".encode()),
            (b"etag", etag),
            (b"last-modified", self._last_modified),
            (b"vary", b"A2A-Version"),
        ]
        if self._not_modified(scope, etag):
            await send({"type": "http.response.start", "status": 304, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        headers += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})
