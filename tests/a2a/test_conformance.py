"""Issue 11 item 3: what the A2A TCK (github a2aproject/a2a-tck, branches 0.3.x and 1.0-dev)
checks, tested here without it: JSON-RPC error codes, the card per protocol version and its
caching headers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from tests.a2a.helpers import auth, call, rpc, running_server, v03_message
from tests.conftest import Script

TEXT = [{"items": [{"text": "hello there"}]}, {"items": [{"text": "second: {last_user}"}]}]


async def test_invalid_request_objects_answer_32600(script: Script, sqlite_url: str, workspace: Path) -> None:
    """Issue 11 item 3: a request object that is not JSON-RPC 2.0 is -32600 (Invalid Request),
    for v0.3 and 1.0 methods alike, never -32602 or HTTP 500 (TCK 0.3.x
    test_rejects_invalid_json_rpc_requests[invalid_request0/3], test_invalid_jsonrpc_version);
    invalid v0.3 params stay -32602 (test_rejects_invalid_params)."""
    params = {"message": v03_message("hi")}
    bad: list[tuple[dict[str, Any], Any]] = [
        ({"jsonrpc": "1.0", "id": 7, "method": "message/send", "params": params}, 7),
        ({"jsonrpc": "aaa", "method": "message/send", "params": {}}, None),
        ({"id": 8, "method": "message/send", "params": params}, 8),
        ({"jsonrpc": "2.0", "id": {"bad": "type"}, "method": "message/send", "params": {}}, None),
        ({"jsonrpc": "2.0", "id": True, "method": "tasks/get", "params": {"id": "x"}}, None),
        ({"jsonrpc": "2.0", "id": 9, "method": {"not": "a string"}, "params": {}}, 9),
        ({"jsonrpc": "2.0", "id": 10, "method": ["message/send"], "params": {}}, 10),
        ({"jsonrpc": "2.0", "id": 11, "method": 5}, 11),
        ({"jsonrpc": "2.0", "id": 12, "params": {}}, 12),
        ({"jsonrpc": 2.0, "id": 14, "method": "GetTask", "params": {"id": "x"}}, 14),
    ]
    async with running_server(script(TEXT), sqlite_url, workspace) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            for body, rid in bad:
                r = await c.post(srv.url, json=body, headers=auth())
                assert r.status_code == 200, (body, r.text)
                res = r.json()
                assert res["error"]["code"] == -32600, (body, res)
                assert res["id"] == rid and res["jsonrpc"] == "2.0", (body, res)
            res = await call(c, srv.url, rpc("message/send", {"message": {"parts": "invalid"}}), auth())
            assert res["error"]["code"] == -32602, res
            res = await call(c, srv.url, rpc("message/send", {"": "not_a_dict"}), auth())
            assert res["error"]["code"] == -32602, res
            res = await call(c, srv.url, rpc("message/ssend", {}), auth())
            assert res["error"]["code"] == -32601, res


async def test_body_that_is_not_json_by_content_type(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """Issue 11 item 3: a body that is not JSON sent with another Content-Type is -32005
    (ContentTypeNotSupportedError, TCK 1.0-dev JSONRPC-SSE-002); sent as JSON it stays -32700;
    JSON sent with a careless Content-Type (curl -d) is still served."""
    body = str({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {}}).encode()
    async with running_server(script(TEXT), sqlite_url, workspace) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            h = {**auth(v1=True), "Content-Type": "text/plain"}
            res = (await c.post(srv.url, content=body, headers=h)).json()
            assert res["error"]["code"] == -32005, res
            h = {**auth(v1=True), "Content-Type": "application/json"}
            res = (await c.post(srv.url, content=body, headers=h)).json()
            assert res["error"]["code"] == -32700, res
            h = {**auth(), "Content-Type": "application/x-www-form-urlencoded"}
            r = await c.post(srv.url, json=rpc("tasks/get", {"id": "nope"}), headers=h)
            assert r.json()["error"]["code"] == -32001, r.text


async def test_unknown_task_id_and_unsupported_content(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """Issue 11 item 3: a message naming a taskId no task has is TaskNotFoundError (-32001) however
    long the id (TCK 1.0-dev CORE-MULTI-004); a file part of a media type the card's input modes
    do not list is ContentTypeNotSupportedError (-32005, CORE-SEND-003), in v0.3 and 1.0."""
    async with running_server(script(TEXT), sqlite_url, workspace) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            for task_id in ("tck-nonexistent-multi-004-0123456789abcdef", "nope"):
                msg = {"role": "ROLE_USER", "parts": [{"text": "hi"}], "messageId": "m1", "taskId": task_id}
                res = await call(c, srv.url, rpc("SendMessage", {"message": msg}), auth(v1=True))
                assert res["error"]["code"] == -32001, res
                res = await call(
                    c, srv.url, rpc("message/send", {"message": v03_message("hi", task_id=task_id)}), auth()
                )
                assert res["error"]["code"] == -32001, res
            part = {"raw": "dGNr", "mediaType": "application/x-unsupported-tck-type"}
            msg = {"role": "ROLE_USER", "parts": [part], "messageId": "m2"}
            res = await call(c, srv.url, rpc("SendMessage", {"message": msg}), auth(v1=True))
            assert res["error"]["code"] == -32005, res
            msg = {
                "role": "ROLE_USER",
                "parts": [{"text": "look"}, {**part, "mediaType": "image/png"}],
                "messageId": "m3",
            }
            res = await call(c, srv.url, rpc("SendMessage", {"message": msg}), auth(v1=True))
            assert res["error"]["code"] == -32005 and "image/png" in res["error"]["message"], res
            m03 = v03_message("look")
            m03["parts"].append({"kind": "file", "file": {"bytes": "dGNr", "mimeType": "image/png"}})
            res = await call(c, srv.url, rpc("message/send", {"message": m03}), auth())
            assert res["error"]["code"] == -32005, res
            # issue 21 item 4: a text or data part of a type the agent does not read is refused too
            for odd in (
                {"text": "x", "mediaType": "application/x-tck"},
                {"data": {}, "mediaType": "application/xml"},
            ):
                msg = {"role": "ROLE_USER", "parts": [{"text": "look"}, odd], "messageId": "m4"}
                res = await call(c, srv.url, rpc("SendMessage", {"message": msg}), auth(v1=True))
                assert res["error"]["code"] == -32005, res
            msg = {
                "role": "ROLE_USER",
                "parts": [{"text": "# hi", "mediaType": "text/markdown"}],
                "messageId": "m5",
            }
            res = await call(c, srv.url, rpc("SendMessage", {"message": msg}), auth(v1=True))
            assert "task" in res["result"], res
            # text and JSON are what the card's defaultInputModes say
            m03 = v03_message("hello")
            m03["parts"].append({"kind": "file", "file": {"bytes": "dGNr", "mimeType": "text/plain"}})
            res = await call(c, srv.url, rpc("message/send", {"message": m03}), auth())
            assert res["result"]["status"]["state"] == "completed", res


V03_ONLY = ("preferredTransport", "protocolVersion", "url", "supportsAuthenticatedExtendedCard", "security")


async def test_card_per_version_with_caching_headers(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    """Issue 11 item 3: a client saying A2A-Version 1.0 (header or query parameter) gets a card
    that parses strictly as the 1.0 AgentCard, with none of the v0.3 fields (TCK 1.0-dev
    CARD-STRUCT-001); a client saying nothing or 0.3 gets the v0.3 card. Both carry
    Cache-Control with max-age, ETag and Last-Modified (CARD-CACHE-001..003) and revalidate
    with 304."""
    from a2a.types import AgentCard
    from google.protobuf.json_format import ParseDict  # type: ignore[import-untyped]

    async with running_server(script(TEXT), sqlite_url, workspace) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            for path in (".well-known/agent-card.json", ".well-known/agent.json"):
                url = srv.url + path
                r1 = await c.get(url, headers={"A2A-Version": "1.0"})
                v1 = r1.json()
                assert not set(V03_ONLY) & set(v1), v1
                assert v1["securitySchemes"] == {
                    "bearer": {
                        "httpAuthSecurityScheme": v1["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]
                    }
                }
                ParseDict(v1, AgentCard())  # strict: an unknown field would raise
                assert (await c.get(url + "?A2A-Version=1.0")).json() == v1
                for headers in ({}, {"A2A-Version": "0.3"}):
                    r0 = await c.get(url, headers=headers)
                    v03 = r0.json()
                    assert v03["protocolVersion"] == "0.3" and v03["url"] == srv.url, v03
                    assert v03["securitySchemes"]["bearer"]["type"] == "http"
                for r in (r1, r0):
                    assert r.status_code == 200
                    assert "max-age=" in r.headers["cache-control"]
                    assert r.headers["etag"] and r.headers["last-modified"]
                    assert "A2A-Version" in r.headers["vary"]
                assert r1.headers["etag"] != r0.headers["etag"]
                r = await c.get(url, headers={"If-None-Match": r0.headers["etag"]})
                assert r.status_code == 304 and not r.content and r.headers["etag"] == r0.headers["etag"]
                r = await c.get(url, headers={"If-None-Match": r0.headers["etag"], "A2A-Version": "1.0"})
                assert r.status_code == 200 and r.json() == v1
                r = await c.get(
                    url, headers={"If-None-Match": f"W/{r1.headers['etag']}", "A2A-Version": "1.0"}
                )
                assert r.status_code == 304
                r = await c.get(url, headers={"If-Modified-Since": r0.headers["last-modified"]})
                assert r.status_code == 304
                r = await c.get(url, headers={"If-Modified-Since": "Mon, 01 Jan 2001 00:00:00 GMT"})
                assert r.status_code == 200 and r.json() == v03
                r = await c.head(url)
                assert r.status_code == 200 and not r.content and r.headers["etag"] == r0.headers["etag"]
                assert (await c.post(url)).status_code == 405


async def test_boot_app_serves_the_same_card() -> None:
    """Issue 11 item 3: the card a starting server answers before its app has loaded is the card
    the app serves, with the same headers (one CardApp)."""
    from devagent.a2a.server import BootApp
    from devagent.a2a.settings import A2ASettings
    from devagent.agent.settings import CoreConfig

    settings = A2ASettings(host="127.0.0.1", port=1234, tokens={"t": "u"})
    boot = BootApp(CoreConfig(db_url="sqlite+aiosqlite://"), settings, "1.2.3")
    for headers, v03 in (([], True), ([(b"a2a-version", b"1.0")], False)):
        sent: list[dict[str, Any]] = []

        async def send(m: dict[str, Any]) -> None:
            sent.append(m)  # noqa: B023

        scope = {"type": "http", "method": "GET", "path": "/.well-known/agent-card.json", "headers": headers}
        await boot(scope, None, send)  # type: ignore[arg-type]
        assert sent[0]["status"] == 200
        names = {k for k, _ in sent[0]["headers"]}
        assert {b"etag", b"last-modified", b"cache-control"} <= names
        card = json.loads(sent[1]["body"])
        assert ("url" in card) is v03


async def test_issue21_card_for_clients_that_name_no_version() -> None:
    """Issue 21 item 4 (TCK 1.0-dev CARD-STRUCT-001): a client that sends no A2A-Version gets the
    v0.3 card, as A2A 1.0 says to assume; where the operator says its clients all speak 1.0
    (DEVAGENT_CARD_VERSION=1.0), such a client gets the 1.0 card, and a 0.3 client that says so
    still gets the v0.3 card."""
    from devagent.a2a.card import CardApp
    from devagent.a2a.settings import A2ASettings

    for default, plain_v1 in (("0.3", False), ("1.0", True)):
        app = CardApp(A2ASettings(tokens={"t": "user"}, card_default_version=default), "1.2.3")
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
            plain = (await c.get("/.well-known/agent-card.json")).json()
            said = (await c.get("/.well-known/agent-card.json", headers={"A2A-Version": "0.3"})).json()
            v1 = (await c.get("/.well-known/agent-card.json", headers={"A2A-Version": "1.0"})).json()
        assert ("url" not in plain) is plain_v1 and plain == (v1 if plain_v1 else said)
        assert "url" in said and "url" not in v1


def test_issue28_item14_each_protocol_version_reads_its_card_from_a_real_serve(
    sqlite_url: str, workspace: Path, tmp_path: Path
) -> None:
    """Issue 28 item 14 (TCK 1.0 CARD-STRUCT-001): from outside a real `devagent serve`, a
    client saying `A2A-Version: 1.0` (header or query parameter, on either well-known path) reads
    a card that validates against the 1.0 AgentCard schema, with none of the v0.3 fields; so do
    the extended cards a 1.0 client reads over JSON-RPC and HTTP+JSON. A client saying nothing
    or 0.3 keeps the v0.3 card, which the v0.3 types read and the strict 1.0 schema refuses."""
    import jsonschema
    from a2a.compat.v0_3.types import AgentCard as AgentCardV03
    from a2a.types import a2a_pb2

    from tests.a2a.card_schema import schema_for
    from tests.a2a.procs import TOKEN, serve_args, serving

    v1_schema = jsonschema.Draft202012Validator(schema_for(a2a_pb2.AgentCard.DESCRIPTOR))
    args = [*serve_args(sqlite_url, workspace, "demo", "ask"), "--grpc-port", "0"]
    with serving(args, tmp_path / "serve.log") as srv, httpx.Client(timeout=60) as c:
        cards_v1 = [
            c.get(srv.url + path, headers={"A2A-Version": "1.0"}).json()
            for path in (".well-known/agent-card.json", ".well-known/agent.json")
        ]
        cards_v1.append(c.get(srv.url + ".well-known/agent-card.json?A2A-Version=1.0").json())
        v1 = cards_v1[0]
        assert cards_v1 == [v1] * 3
        assert [e.message for e in v1_schema.iter_errors(v1)] == []
        assert not set(V03_ONLY) & set(v1) and "additionalInterfaces" not in v1
        bindings = {(i["protocolBinding"], i["protocolVersion"]) for i in v1["supportedInterfaces"]}
        assert {("JSONRPC", "1.0"), ("HTTP+JSON", "1.0"), ("GRPC", "1.0")} <= bindings
        assert v1["supportedInterfaces"][0] == {
            "url": srv.url,
            "protocolBinding": "JSONRPC",
            "protocolVersion": "1.0",
        }

        headers = {"Authorization": f"Bearer {TOKEN}", "A2A-Version": "1.0"}
        rest = c.get(srv.url + "rest/extendedAgentCard", headers=headers).json()
        jsonrpc = c.post(srv.url, headers=headers, json=rpc("GetExtendedAgentCard", {})).json()["result"]
        for extended in (rest, jsonrpc):
            assert [e.message for e in v1_schema.iter_errors(extended)] == []

        plain = c.get(srv.url + ".well-known/agent-card.json").json()
        said = c.get(srv.url + ".well-known/agent-card.json", headers={"A2A-Version": "0.3"}).json()
        assert plain == said
        assert (plain["url"], plain["protocolVersion"], plain["preferredTransport"]) == (
            srv.url,
            "0.3",
            "JSONRPC",
        )
        assert plain["security"] == [{"bearer": []}] and plain["supportsAuthenticatedExtendedCard"] is True
        assert plain["securitySchemes"]["bearer"]["type"] == "http"
        assert AgentCardV03.model_validate(plain).url == srv.url
        assert list(v1_schema.iter_errors(plain))  # the schema check is strict: v0.3 fields fail it
