"""web_fetch through the outbound address policy, against a real HTTP server on 127.0.0.1; the
HTML it reads as text; its caps; how the approval modes treat it; web search through the
operator's endpoint (a fake SearXNG) and through the provider's own tool (fake Anthropic and
Gemini servers)."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from devagent.agent.events import GenericDetails, ToolKind, UserPrompt
from devagent.agent.policy import approval
from devagent.agent.settings import CoreConfig
from devagent.agent.state import PendingCall, SessionState
from devagent.agent.tools import builtin_tools
from devagent.agent.tools import web as web_mod
from devagent.agent.tools.backends import ToolBackends
from devagent.agent.tools.base import ToolContext, ToolResult
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.workspace import Workspace
from devagent.common import netpolicy
from devagent.common.netpolicy import parse_networks
from devagent.config import ConfigError, load_config
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.gemini_server import FakeGemini
from tests.fakes.local_server import serving_app

TOOLS = builtin_tools()
LOOPBACK = parse_networks(["127.0.0.0/8"])

PAGE = """<!DOCTYPE html>
<html><head><title>The  Guide</title><script>steal(document.cookie)</script>
<style>p { color: red }</style></head>
<body><nav><a href="/">Home</a> <a href="/about">About</a></nav>
<main><h1>Installing</h1>
<p>Run <code>pip install thing</code>, then read <a href="/docs/next.html">the next page</a>.</p>
<ul><li>fast</li><li>small<ul><li>really</li></ul></li></ul>
<pre>for x in y:
    print(x)</pre>
<table><tr><th>name</th><th>size</th></tr><tr><td>a</td><td>1</td></tr></table>
</main><footer>Copyright</footer></body></html>
"""


class Site:
    """A small web site on 127.0.0.1 that records the requests it got."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.base = ""
        self.release = asyncio.Event()  # what /hang waits for: set when the test is over

    async def handle(self, request: Request) -> Response:
        path = request.url.path
        self.requests.append((path, dict(request.headers)))
        if path == "/page":
            return HTMLResponse(PAGE)
        if path == "/text":
            return PlainTextResponse("".join(f"line {i}\n" for i in range(1, 2001)))
        if path == "/bytes":
            return Response(b"\x89PNG\r\n\x1a\n" + bytes(200), media_type="image/png")
        if path == "/missing":
            return HTMLResponse("<h1>Not here</h1>", status_code=404)
        if path == "/to-page":
            return RedirectResponse("/page", status_code=302)
        if path == "/to-metadata":
            return RedirectResponse("http://169.254.169.254/latest/meta-data/", status_code=302)
        if path == "/to-private-name":
            return RedirectResponse(f"http://inside.test:{request.url.port}/page", status_code=307)
        if path == "/hang":
            await self.release.wait()
        if path == "/loop":
            return RedirectResponse("/loop", status_code=301)
        return PlainTextResponse("?", status_code=500)

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/{path:path}", self.handle)])


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    s = Site()
    async with serving_app(s.app()) as base:
        s.base = base
        yield s
        s.release.set()


def make_ctx(ws: Path, **kw: Any) -> ToolContext:
    return ToolContext(workspace=Workspace([ws]), state=SessionState(workspace_roots=[str(ws)]), **kw)


async def fetch(ws: Path, url: str, allow: Any = LOOPBACK, **args: Any) -> ToolResult:
    return await TOOLS["web_fetch"].run({"url": url, **args}, make_ctx(ws, outbound_allow=allow))


async def refused(ws: Path, url: str, allow: Any = LOOPBACK) -> ToolFailure:
    with pytest.raises(ToolFailure) as info:
        await fetch(ws, url, allow)
    return info.value


# --- the address policy --------------------------------------------------------------------------


async def test_issue30_item7_web_fetch_refuses_loopback_by_default(ws: Path, site: Site) -> None:
    """With no outbound_allow the model is told the address is loopback/private and how the
    operator could allow it; the server never sees a request, and nobody is asked first."""
    err = await refused(ws, f"{site.base}/page", allow=())
    assert err.type == "address_refused"
    assert err.message == (
        f"cannot fetch {site.base}/page: 127.0.0.1 resolves to 127.0.0.1, a loopback/private address "
        "(web_fetch reaches public addresses only, unless the operator lists the network in outbound_allow)"
    )
    with pytest.raises(ToolFailure) as info:  # the permission question is not even put
        await TOOLS["web_fetch"].confirmation({"url": f"{site.base}/page"}, make_ctx(ws))
    assert info.value.type == "address_refused"
    for url in ("http://localhost:9/", "http://[::1]/", "http://10.1.2.3/", "http://169.254.169.254/"):
        assert (await refused(ws, url, allow=())).type == "address_refused", url
    assert site.requests == []


async def test_issue30_item7_web_fetch_allowed_with_outbound_allow(ws: Path, site: Site) -> None:
    details = await TOOLS["web_fetch"].confirmation(
        {"url": f"{site.base}/page"}, make_ctx(ws, outbound_allow=LOOPBACK)
    )
    assert details == GenericDetails(description=f"Fetch {site.base}/page")
    res = await fetch(ws, f"{site.base}/page")
    assert res.data["status"] == 200 and res.data["content_type"] == "text/html"
    assert site.requests[0][0] == "/page"
    assert site.requests[0][1]["user-agent"] == web_mod.USER_AGENT


async def test_issue30_item7_web_fetch_redirects_checked_at_every_hop(
    ws: Path, site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    res = await fetch(ws, f"{site.base}/to-page")
    assert res.text.startswith(f"{site.base}/page (redirected from {site.base}/to-page): HTTP 200")
    err = await refused(ws, f"{site.base}/to-metadata")
    assert err.type == "address_refused"
    assert "169.254.169.254 resolves to 169.254.169.254, a loopback/private address" in err.message
    # A name that resolves to a private address is refused at its hop too (a fake DNS answers).
    answers = {"inside.test": ["10.0.0.7"]}

    async def lookup(host: str, port: int) -> list[Any]:
        if host in answers:
            return [ipaddress.ip_address(a) for a in answers[host]]
        raise OSError("no such host")

    monkeypatch.setattr(netpolicy, "lookup", lookup)
    err = await refused(ws, f"{site.base}/to-private-name")
    assert "inside.test resolves to 10.0.0.7" in err.message
    assert [p for p, _h in site.requests] == ["/to-page", "/page", "/to-metadata", "/to-private-name"]
    err = await refused(ws, f"{site.base}/loop")
    assert err.type == "too_many_redirects"


async def test_issue30_item7_web_fetch_connects_to_the_checked_address(
    ws: Path, site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The request goes to the address the policy checked, not to a second resolution of the
    name: the fake DNS answers 127.0.0.1 once and a refused address after that (a rebinding);
    the system's resolver knows no such name at all. The page still comes from the first
    answer, with the name in the Host header."""
    calls: list[str] = []

    async def rebinding(host: str, port: int) -> list[Any]:
        calls.append(host)
        return [ipaddress.ip_address("127.0.0.1" if len(calls) == 1 else "10.6.6.6")]

    monkeypatch.setattr(netpolicy, "lookup", rebinding)
    port = site.base.rsplit(":", 1)[1]
    res = await fetch(ws, f"http://docs.rebind.test:{port}/page")
    assert "# Installing" in res.text and calls == ["docs.rebind.test"]
    assert site.requests[-1][1]["host"] == f"docs.rebind.test:{port}"


# --- what a page becomes -------------------------------------------------------------------------


async def test_issue30_item7_web_fetch_html_to_text(ws: Path, site: Site) -> None:
    res = await fetch(ws, f"{site.base}/page")
    header, text = res.text.split("\n\n", 1)
    assert (
        header == f"{site.base}/page: HTTP 200, text/html, {res.data['chars']} characters\nTitle: The Guide"
    )
    assert text == (
        "# Installing\n\n"
        f"Run `pip install thing`, then read [the next page]({site.base}/docs/next.html).\n\n"
        "- fast\n- small\n  - really\n\n"
        "```\nfor x in y:\n    print(x)\n```\n\n"
        "| name | size |\n| a | 1 |"
    )
    for gone in ("steal", "color: red", "Home", "About", "Copyright"):
        assert gone not in res.text


async def test_issue30_item7_web_fetch_size_caps(
    ws: Path, site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(web_mod, "WEB_FETCH_MAX_CHARS", 1000)
    res = await fetch(ws, f"{site.base}/text")
    total = res.data["chars"]
    assert total == sum(len(f"line {i}\n") for i in range(1, 2001))
    assert res.data["truncated"] is True
    assert "; characters 0-1000 follow" in res.text
    assert res.text.endswith(f"[{total - 1000} more characters: call web_fetch with offset=1000 to read on.]")
    res = await fetch(ws, f"{site.base}/text", offset=1000)
    whole = "".join(f"line {i}\n" for i in range(1, 2001))
    assert "; characters 1000-2000 follow" in res.text and res.text.split("\n\n")[1] == whole[1000:2000]
    with pytest.raises(ToolFailure) as info:
        await fetch(ws, f"{site.base}/text", offset=total)
    assert info.value.type == "invalid_arguments"
    # The body read is capped too: a larger page is cut, and the result says so.
    monkeypatch.setattr(web_mod, "WEB_FETCH_MAX_BYTES", 5000)
    res = await fetch(ws, f"{site.base}/text")
    assert res.data["truncated"] is True and res.data["chars"] == 5000
    assert res.text.endswith("[The page is larger than 4.9 KiB: only its start was read.]")


async def test_issue30_item7_web_fetch_gives_up_on_a_server_that_never_answers(
    ws: Path, site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(web_mod, "WEB_FETCH_TIMEOUT", 0.2)  # the server never answers: no race
    err = await refused(ws, f"{site.base}/hang")
    assert err.type == "timeout" and err.message == f"cannot fetch {site.base}/hang: no answer within 0.2 s"


async def test_issue30_item7_web_fetch_not_text_and_http_errors(ws: Path, site: Site) -> None:
    err = await refused(ws, f"{site.base}/bytes")
    assert err.type == "not_text" and "image/png" in err.message
    err = await refused(ws, f"{site.base}/missing")
    assert err.type == "http_error" and err.message == f"{site.base}/missing answered HTTP 404: # Not here"
    err = await refused(ws, "ftp://example.com/x")
    assert err.type == "invalid_arguments"


# --- approval ------------------------------------------------------------------------------------


def test_issue30_item7_web_fetch_is_asked_like_a_command() -> None:
    url = "https://docs.example.com/a/b?c=1"
    args = {"url": url}

    def verdict(mode: str, state: SessionState | None = None) -> str:
        s = state or SessionState(workspace_roots=["/w"], approval_mode=mode)
        return approval.decide(ToolKind.FETCH, "web_fetch", args, s).verdict

    assert verdict("ask") == "ask" and verdict("auto-edit") == "ask"
    assert verdict("yolo") == "run" and verdict("plan") == "deny"
    options = approval.options_for(ToolKind.FETCH, "web_fetch", args)
    assert [o.id for o in options] == ["proceed_once", "proceed_always", "cancel", "cancel_always"]
    assert (
        options[1].description
        == "Allow fetching any URL of https://docs.example.com for the rest of this session"
    )
    s = SessionState(workspace_roots=["/w"], approval_mode="ask")
    approval.grant(ToolKind.FETCH, "web_fetch", args, s)
    assert s.grants_web == ["https://docs.example.com"]
    assert SessionState.from_json(s.to_json()).grants_web == s.grants_web
    assert (
        approval.decide(ToolKind.FETCH, "web_fetch", {"url": "https://docs.example.com/other"}, s).verdict
        == "run"
    )
    for other in ("http://docs.example.com/", "https://docs.example.com:8443/", "https://example.com/"):
        assert approval.decide(ToolKind.FETCH, "web_fetch", {"url": other}, s).verdict == "ask", other
    approval.refuse(ToolKind.FETCH, "web_fetch", args, s)
    assert approval.decide(ToolKind.FETCH, "web_fetch", args, s).verdict == "deny"


# --- settings ------------------------------------------------------------------------------------


def test_issue30_item7_web_settings(tmp_path: Path) -> None:
    config = load_config(environ={})
    assert (config.web_fetch, config.web_search, config.web_search_key) == (True, "off", None)
    assert set(builtin_tools(config)) >= {"web_fetch"} and "web_search" not in builtin_tools(config)
    env = {"DEVAGENT_WEB_FETCH": "false", "DEVAGENT_WEB_SEARCH": "https://search.example/search?lang=en"}
    config = load_config(environ=env)
    assert "web_fetch" not in builtin_tools(config) and "web_search" in builtin_tools(config)
    assert load_config(environ={"DEVAGENT_WEB_SEARCH": " Native "}).web_search == "native"
    with pytest.raises(ConfigError, match="web_search must be off, native or the http"):
        load_config(environ={"DEVAGENT_WEB_SEARCH": "bing"})


# --- web search through the operator's endpoint --------------------------------------------------


async def test_issue30_item7_web_search_through_the_configured_endpoint(ws: Path) -> None:
    seen: list[Request] = []

    async def searx(request: Request) -> Response:
        seen.append(request)
        return JSONResponse(
            {
                "query": request.query_params["q"],
                "results": [
                    {"url": "https://a.example/x", "title": "A  result", "content": "About\nthings"},
                    {"url": "https://b.example/", "title": "", "content": ""},
                    {"title": "no url, left out"},
                ],
            }
        )

    async with serving_app(Starlette(routes=[Route("/search", searx)])) as base:
        ctx = make_ctx(ws, web_search_url=f"{base}/search?lang=en&format=html", web_search_key="s3cret")
        res = await TOOLS["web_search"].run({"query": "pydantic ai"}, ctx)
    assert res.text == (
        "Results for 'pydantic ai':\n"
        "1. A result\n   https://a.example/x\n   About things\n"
        "2. https://b.example/\n   https://b.example/"
    )
    (request,) = seen
    assert list(request.query_params.multi_items()) == [
        ("lang", "en"),
        ("q", "pydantic ai"),
        ("format", "json"),
    ]
    assert request.headers["authorization"] == "Bearer s3cret"


# --- the provider's own web search ---------------------------------------------------------------


async def test_issue30_item7_native_web_search_reaches_anthropic(core_factory: Any, workspace: Path) -> None:
    def script(body: dict[str, Any]) -> tuple[list[Any], tuple[int, int]]:
        return [("text", f"answer {len(body['messages'])}")], (10, 2)

    fake = FakeAnthropic(script)
    async with fake as base_url:
        core = await core_factory(
            "anthropic:claude-fake", model_base_url=base_url, model_api_key="k", web_search="native"
        )
        s = await core.create_session([workspace])
        for prompt in ("first", "second"):
            [e async for e in s.advance(UserPrompt(prompt))]
        plain = await core_factory("anthropic:claude-fake", model_base_url=base_url, model_api_key="k")
        s = await plain.create_session([workspace])
        [e async for e in s.advance(UserPrompt("third"))]
    first, second, third = fake.requests
    search = [t for t in first["tools"] if t.get("name") == "web_search"]
    assert len(search) == 1 and search[0]["type"].startswith("web_search_")
    assert first["tools"] == second["tools"] and first["system"] == second["system"]  # one prefix
    assert not any(t.get("name") == "web_search" for t in third["tools"])


async def test_issue30_item7_native_web_search_reaches_gemini(core_factory: Any, workspace: Path) -> None:
    fake = FakeGemini(lambda body: ([[{"text": "ok"}]], {"promptTokenCount": 5, "candidatesTokenCount": 1}))
    async with fake as base_url:
        core = await core_factory(
            "google:gemini-3.1-pro-preview", model_base_url=base_url, model_api_key="k", web_search="native"
        )
        s = await core.create_session([workspace])
        [e async for e in s.advance(UserPrompt("hi"))]
    (request,) = fake.requests
    assert {"googleSearch": {}} in request["tools"]
    assert any("functionDeclarations" in t for t in request["tools"])


def test_issue30_item7_native_web_search_only_for_models_that_have_one() -> None:
    from devagent.agent.models.providers import create_model

    env = {"OPENAI_API_KEY": "k", "GEMINI_API_KEY": "k"}
    assert web_mod.native_tools("native", create_model("openai:gpt-4.1", environ=env)) == []
    assert web_mod.native_tools("native", create_model("demo")) == []
    # Gemini before 3 takes either its search or function tools, not both.
    assert web_mod.native_tools("native", create_model("google:gemini-2.5-flash", environ=env)) == []
    assert web_mod.native_tools("off", create_model("google:gemini-3.1-pro-preview", environ=env)) == []
    assert (
        len(web_mod.native_tools("native", create_model("google:gemini-3.1-pro-preview", environ=env))) == 1
    )


def test_issue30_item7_config_reaches_the_tool_context(ws: Path) -> None:
    config = CoreConfig(outbound_allow=("10.0.0.0/8",), web_search="https://s.example/", web_search_key="k")
    state = SessionState(workspace_roots=[str(ws)])
    call = PendingCall("c", "web_fetch", {}, "fetch")
    ctx = ToolContext.for_call(config, Workspace([ws]), state, call, asyncio.Event(), ToolBackends())
    assert ctx.outbound_allow == parse_networks(["10.0.0.0/8"])
    assert (ctx.web_search_url, ctx.web_search_key) == ("https://s.example/", "k")
