"""Issue 42 item 2 (device code): the A2A card's 1.0 form declares the IdP's OAuth2 device code
flow (RFC 8628) where the IdP's discovery document lists a device authorization endpoint, and a
client without a browser of its own gets a token through it from a real OpenID Connect provider
on loopback: it reads the card, asks the endpoint the card names for a code (for devagent's
resource), the user signs in on the provider's own device page (driven here as a browser would:
the code, the login, the confirmation), and the client's poll of the card's token URL gets the
token, which then serves on A2A's JSON-RPC and on the MCP door. A provider whose discovery lists
no such endpoint gets no such scheme; the 0.3 form never has one (v0.3 has no device flow)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.a2a.helpers import TOKEN, auth, call, rpc, running_server, v03_message
from tests.conftest import Script
from tests.identity.conftest import CLIENTS, ROLES
from tests.identity.idp import DEVICE_GRANT, Idp, running_idp
from tests.identity.test_issue42_doors import mcp_client, server_kw
from tests.identity.test_issue42_idp_failures import lying_idp

DEVICE_CLIENT = "a-terminal"


@pytest.fixture
def device_idp(tmp_path: Path) -> Iterator[Idp]:
    with running_idp(tmp_path, CLIENTS, ROLES, device=DEVICE_CLIENT) as provider:
        yield provider


async def test_issue42_item2_card_declares_the_device_flow_and_a_device_token_serves(
    device_idp: Idp, script: Script, sqlite_url: str, workspace: Path
) -> None:
    from a2a.compat.v0_3.types import AgentCard as AgentCardV03
    from a2a.types import AgentCard
    from google.protobuf.json_format import ParseDict  # type: ignore[import-untyped]

    idp = device_idp
    steps = [[{"text": "hello dana"}], [{"text": "hello again"}]]
    async with running_server(script(steps), sqlite_url, workspace, **server_kw(idp)) as srv:
        base = srv.url.rstrip("/")
        async with httpx.AsyncClient(timeout=60) as c:
            discovery = (await c.get(idp.issuer + "/.well-known/openid-configuration")).json()
            v1 = (await c.get(srv.url + ".well-known/agent-card.json", headers={"A2A-Version": "1.0"})).json()
            v03 = (await c.get(srv.url + ".well-known/agent-card.json")).json()
            ParseDict(v1, AgentCard())  # strict: the 1.0 form only
            scheme = v1["securitySchemes"]["device"]["oauth2SecurityScheme"]
            flow = scheme["flows"]["deviceCode"]
            assert flow["deviceAuthorizationUrl"] == discovery["device_authorization_endpoint"]
            assert flow["tokenUrl"] == discovery["token_endpoint"] and "openid" in flow["scopes"]
            assert scheme["oauth2MetadataUrl"] == idp.issuer + "/.well-known/openid-configuration"
            assert {"schemes": {"device": {}}} in v1["securityRequirements"]
            AgentCardV03.model_validate(v03)
            assert "device" not in v03["securitySchemes"] and {"device": []} not in v03["security"]

            # the device flow, as a terminal client does it from the card
            asked = await c.post(
                flow["deviceAuthorizationUrl"],
                data={"client_id": DEVICE_CLIENT, "scope": "openid", "resource": base},
            )
            assert asked.status_code == 200, asked.text
            code = asked.json()
            poll = {
                "grant_type": DEVICE_GRANT,
                "device_code": code["device_code"],
                "client_id": DEVICE_CLIENT,
            }
            pending = await c.post(flow["tokenUrl"], data=poll)
            assert pending.json()["error"] == "authorization_pending", pending.text
            idp.approve_device(code["verification_uri_complete"], "dana")  # the user, in a browser
            got = await c.post(flow["tokenUrl"], data=poll)
            assert got.status_code == 200, got.text
            token = got.json()["access_token"]

            sent = await call(
                c, srv.url, rpc("message/send", {"message": v03_message("hi")}), auth(token, ext=False)
            )
            assert sent["result"]["status"]["state"] == "completed", sent
            me = (await c.get(srv.url + "ui/api/me", headers=auth(token, ext=False))).json()
            assert me["identity"] == "oidc:dana", me
        async with mcp_client(srv.url + "mcp/", token) as m:
            res = await m.call_tool("devagent_start", {"prompt": "hi"})
            assert not res.is_error and res.structured_content is not None, res
            assert res.structured_content["workspace"] == str((workspace.parent / ".oidc" / "dana").resolve())


async def test_issue42_item2_no_device_endpoint_no_device_scheme(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """An IdP whose discovery document lists no device authorization endpoint (the loopback
    stand-in of the IdP failure tests): the card declares the OpenID Connect scheme only."""
    from devagent.common.identity import OidcSettings

    with lying_idp() as idp:
        kw = {"tokens": {TOKEN: "ci"}, "a2a_kw": {"oidc": OidcSettings(issuer=idp.url)}}
        async with running_server(script([]), sqlite_url, workspace, **kw) as srv:
            async with httpx.AsyncClient(timeout=60) as c:
                v1 = (
                    await c.get(srv.url + ".well-known/agent-card.json", headers={"A2A-Version": "1.0"})
                ).json()
    assert set(v1["securitySchemes"]) == {"bearer", "oidc"}, v1["securitySchemes"]
