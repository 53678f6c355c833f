"""Issue 42 item 2: how a client finds the identity provider. The A2A card declares the
provider's OpenID Connect scheme beside the static bearer (1.0 form, strict against the 1.0
AgentCard; 0.3 form, valid for the 0.3 model); the MCP door serves its protected-resource
metadata (RFC 9728) and points to it from its 401, so that the official `mcp` client's OAuth flow
logs a user in by itself: registration (RFC 7591), the provider's login page, code + PKCE, a
token for devagent's resource, tools called, no token copied by hand."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from tests.a2a.helpers import running_server
from tests.conftest import Script
from tests.identity.idp import Idp
from tests.identity.test_issue42_doors import server_kw


async def test_issue42_item2_card_declares_the_idp_in_both_forms(
    idp: Idp, script: Script, sqlite_url: str, workspace: Path
) -> None:
    from a2a.compat.v0_3.types import AgentCard as AgentCardV03
    from a2a.compat.v0_3.types import OpenIdConnectSecurityScheme
    from a2a.types import AgentCard
    from google.protobuf.json_format import ParseDict  # type: ignore[import-untyped]

    discovery = idp.issuer + "/.well-known/openid-configuration"
    async with running_server(script([]), sqlite_url, workspace, **server_kw(idp)) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            v1 = (await c.get(srv.url + ".well-known/agent-card.json", headers={"A2A-Version": "1.0"})).json()
            v03 = (await c.get(srv.url + ".well-known/agent-card.json")).json()
            found = (
                await c.get(v1["securitySchemes"]["oidc"]["openIdConnectSecurityScheme"]["openIdConnectUrl"])
            ).json()
    ParseDict(v1, AgentCard())  # strict: the 1.0 form only
    assert v1["securitySchemes"]["oidc"]["openIdConnectSecurityScheme"]["openIdConnectUrl"] == discovery
    assert {"schemes": {"oidc": {}}} in v1["securityRequirements"]
    assert {"schemes": {"bearer": {}}} in v1["securityRequirements"]  # static tokens still declared
    card = AgentCardV03.model_validate(v03)
    scheme = card.security_schemes["oidc"].root  # type: ignore[index]
    assert isinstance(scheme, OpenIdConnectSecurityScheme) and scheme.open_id_connect_url == discovery
    assert {"oidc": []} in v03["security"] and {"bearer": []} in v03["security"]
    assert found["issuer"] == idp.issuer  # the card leads to the real provider


async def test_issue42_item2_mcp_resource_metadata_and_401_pointer(
    idp: Idp, script: Script, sqlite_url: str, workspace: Path
) -> None:
    async with running_server(script([]), sqlite_url, workspace, **server_kw(idp)) as srv:
        base = srv.url.rstrip("/")
        async with httpx.AsyncClient(timeout=30) as c:
            r = await c.post(srv.url + "mcp/", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            assert r.status_code == 401
            challenge = r.headers["www-authenticate"]
            assert challenge.startswith("Bearer ") and "error=" not in challenge  # no token: no error code
            pointer = challenge.split('resource_metadata="', 1)[1].split('"', 1)[0]
            assert pointer == base + "/.well-known/oauth-protected-resource/mcp"
            meta = (await c.get(pointer)).json()  # public: no token
            bare = (await c.get(base + "/.well-known/oauth-protected-resource")).json()
    assert meta == bare
    assert meta["resource"] == base  # the audience its tokens must name, a parent of /mcp
    assert meta["authorization_servers"] == [idp.issuer]
    assert meta["bearer_methods_supported"] == ["header"]
    assert meta["scopes_supported"] == ["openid"]


class Memory:
    """The MCP host's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def test_issue42_item2_mcp_client_oauth_flow_logs_in_by_itself(
    idp: Idp, script: Script, sqlite_url: str, workspace: Path
) -> None:
    redirect_uri = "http://127.0.0.1:9/callback"  # never reached: the user agent stops before it
    answer: dict[str, str] = {}

    async def redirect_handler(url: str) -> None:
        answer.update(await asyncio.to_thread(idp.log_in, url, "carol", redirect_uri))

    async def callback_handler() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=answer["code"], state=answer.get("state"), iss=answer.get("iss"))

    steps = [[{"text": "hello carol"}]]
    async with running_server(script(steps), sqlite_url, workspace, **server_kw(idp)) as srv:
        storage = Memory()
        auth = OAuthClientProvider(
            server_url=srv.url + "mcp/",
            client_metadata=OAuthClientMetadata(
                client_name="a test MCP host",
                redirect_uris=[redirect_uri],  # type: ignore[list-item]
                grant_types=["authorization_code"],
                response_types=["code"],
            ),
            storage=storage,
            redirect_handler=redirect_handler,
            callback_handler=callback_handler,
        )
        http = httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(60, read=120))
        async with Client(streamable_http_client(srv.url + "mcp/", http_client=http)) as m:
            res = await m.call_tool("devagent_start", {"prompt": "hi"})
    assert not res.is_error, res
    assert res.structured_content is not None
    assert res.structured_content["answer"] == "hello carol"
    assert res.structured_content["workspace"] == str((workspace.parent / ".oidc" / "carol").resolve())
    assert storage.client is not None and storage.tokens is not None  # registered, then logged in
    assert answer["code"]
