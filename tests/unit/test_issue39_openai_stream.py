"""Issue 39 item 7: a streamed chat completion sent past the OpenAI SDK's request machinery
(devagent/patches/openai_stream.py) gives what the SDK gives: the same request on the wire, the
same chunks, the same errors and the same retries; and the SDK's own path runs wherever the
direct one does not apply.

Each case sends the same request both ways: through the SDK's own `request` (the patch's
`__wrapped__`) and through the patched one."""

from __future__ import annotations

import asyncio
import random
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from devagent.patches import openai as openai_patch
from devagent.patches import openai_stream
from tests.fakes.openai_server import FakeOpenAI, FakeToolCall, Reply

openai = pytest.importorskip("openai")
from openai import AsyncOpenAI  # noqa: E402
from openai._base_client import AsyncAPIClient  # noqa: E402
from openai._streaming import SSEDecoder  # noqa: E402

openai_patch.skip_message_transform()
openai_patch.validate_stream_chunks()
openai_patch.remember_encoded_prefix()
openai_stream.stream_chat_directly()
SDK_REQUEST = AsyncAPIClient.request.__wrapped__  # type: ignore[attr-defined]


def chunk(text: str = "hi", **extra: Any) -> bytes:
    import json

    body = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    body["choices"] = [{"index": 0, "delta": {"content": text}, "finish_reason": None}]
    return json.dumps({**body, **extra}).encode()


class RawServer:
    """An HTTP/1.1 server on loopback that answers each request with the next canned answer
    (status, headers, body parts), keeping the connection open; the requests it read."""

    def __init__(self, answers: list[tuple[int, dict[str, str], list[bytes]]]) -> None:
        self.answers = answers
        self.requests: list[tuple[bytes, bytes]] = []  # (head, body)
        self.url = ""
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> RawServer:
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/v1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                self.requests.append((head, await reader.readexactly(length)))
                status, headers, parts = self.answers[min(len(self.requests), len(self.answers)) - 1]
                body = b"".join(parts)
                lines = [f"HTTP/1.1 {status} X", f"content-length: {len(body)}"]
                lines += [f"{k}: {v}" for k, v in headers.items()]
                writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
                for part in parts:
                    writer.write(part)
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


SSE = {"content-type": "text/event-stream"}


OPEN: list[AsyncOpenAI] = []  # the clients a test made itself, closed when it ends


@pytest.fixture(autouse=True)
async def close_clients() -> AsyncIterator[None]:
    yield
    while OPEN:
        await OPEN.pop().close()


async def primed(url: str, **kw: Any) -> AsyncOpenAI:
    """A client that made its first request (the SDK works out its platform headers on it)."""
    from openai._base_client import get_platform
    from openai._utils import asyncify

    c = AsyncOpenAI(api_key="sk-test", base_url=url, **kw)
    c._platform = await asyncify(get_platform)()
    OPEN.append(c)
    return c


@asynccontextmanager
async def sdk_only(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[None]:
    with monkeypatch.context() as m:
        m.setattr(AsyncAPIClient, "request", SDK_REQUEST)
        yield


async def chunks_of(c: AsyncOpenAI, **kw: Any) -> tuple[str, list[dict[str, Any]]]:
    stream = await c.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hello"}], stream=True, **kw
    )
    async with stream:
        return type(stream).__name__, [ch.model_dump() async for ch in stream]


async def outcome(fn: Callable[[], Awaitable[Any]]) -> tuple[str, str, Any]:
    try:
        await fn()
    except Exception as e:
        return type(e).__name__, str(e), getattr(e, "body", None)
    return "no error", "", None


# --- the event stream is cut as the SDK's decoder cuts it ------------------------------------------

STREAMS = [
    b"data: " + chunk() + b"\n\ndata: " + chunk("b") + b"\n\ndata: [DONE]\n\n",
    b"data: " + chunk() + b"\r\n\r\ndata: [DONE]\r\n\r\n",
    b"data: " + chunk() + b"\r\rdata: " + chunk("c") + b"\r\r",
    b": keep-alive\n\nevent: message\nid: 7\ndata: " + chunk() + b"\n\nretry: 10\n\n",
    b'data: {"id": "c1",\ndata: "object": "x"}\n\nid: 3\n\n\n\n',
    b"data:" + chunk("\u00e9\u4e2d") + b"\n\nevent:\n\ndata\n\n: only a comment\nretry: x\n\n",
    b"data: " + chunk() + b"\r\n\rdata: tail-without-end",
]


@pytest.mark.parametrize("body", STREAMS)
async def test_g1_events_are_cut_as_the_sdk_decoder_cuts_them(body: bytes) -> None:
    rng = random.Random(len(body))
    for _ in range(25):  # the same bytes arriving in random pieces, one-byte pieces included
        cuts = sorted(rng.sample(range(1, len(body)), k=min(len(body) - 1, rng.randint(0, 12))))
        parts = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]

        async def feed(parts: list[bytes] = parts) -> AsyncIterator[bytes]:
            for p in parts:
                yield p

        sdk = [(e.event, e.data) async for e in SSEDecoder().aiter_bytes(feed())]
        stream = object.__new__(openai_stream._DirectStream)
        stream.raw = type("Raw", (), {"stream": feed()})()
        stream.lib = openai_stream._Library()
        ours = [e async for e in stream.events(stream.parts())]
        assert ours == sdk, parts


# --- against the fake OpenAI server: the same chunks and the same request ------------------------


def tool_reply(body: dict[str, Any]) -> Reply:
    return Reply(
        reasoning=["thinking"],
        text=["Writing ", "it."],
        tool_calls=[FakeToolCall("call_1", "write_file", {"path": "a.txt", "content": "x" * 300}, chunks=3)],
        usage={"prompt_tokens": 40, "completion_tokens": 9},
    )


async def test_g1_direct_path_gives_the_sdk_chunks_and_sends_the_sdk_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeOpenAI(tool_reply)
    async with fake as url:
        c = await primed(url)
        kw = {
            "stream_options": {"include_usage": True},
            "extra_headers": {"X-Extra": "1"},
            "temperature": 0.5,
        }
        async with sdk_only(monkeypatch):
            sdk_kind, sdk_chunks = await chunks_of(c, **kw)
        kind, ours = await chunks_of(c, **kw)
        again_kind, again = await chunks_of(c, **kw)  # the kept template, a reused connection
    assert (sdk_kind, kind, again_kind) == ("AsyncStream", "_DirectStream", "_DirectStream")
    assert ours == sdk_chunks and again == sdk_chunks and len(ours) >= 8
    assert fake.requests[0] == fake.requests[1] == fake.requests[2]
    sdk_headers, direct_headers = fake.request_headers[0], fake.request_headers[1]
    assert direct_headers.pop("accept-encoding") == "identity"
    sdk_headers.pop("accept-encoding")
    assert direct_headers == sdk_headers  # authorization, user agent, x-stainless-*, x-extra


async def test_g1_the_first_request_of_a_client_and_other_clients_keep_the_sdk_path() -> None:
    import httpx2

    fake = FakeOpenAI(tool_reply)
    async with fake as url:
        fresh = AsyncOpenAI(api_key="sk-test", base_url=url)
        OPEN.append(fresh)
        assert (await chunks_of(fresh))[0] == "AsyncStream"  # works out the platform headers
        assert (await chunks_of(fresh))[0] == "_DirectStream"

        async def hook(request: httpx2.Request) -> None:
            request.headers["x-signed"] = "per request"

        hooked = await primed(url, http_client=httpx2.AsyncClient(event_hooks={"request": [hook]}))
        assert (await chunks_of(hooked))[0] == "AsyncStream"
        mounted = httpx2.AsyncClient(mounts={"http://": httpx2.AsyncHTTPTransport()})
        assert (await chunks_of(await primed(url, http_client=mounted)))[0] == "AsyncStream"
    assert fake.request_headers[-2]["x-signed"] == "per request"


async def test_g1_a_model_built_by_devagent_takes_the_direct_path() -> None:
    from pydantic_ai.messages import ModelRequest, UserPromptPart
    from pydantic_ai.models import ModelRequestParameters

    from devagent.agent.models.providers import create_model

    fake = FakeOpenAI(tool_reply)
    async with fake as url:
        model = create_model("openai:fake", environ={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": url})
        kinds = []
        for _ in range(2):
            request = [ModelRequest(parts=[UserPromptPart("hello")])]
            async with model.request_stream(
                request, None, ModelRequestParameters(allow_text_output=True)
            ) as s:
                kinds.append(type(s._response.source).__name__)  # type: ignore[attr-defined]
                async for _ in s:
                    pass
            parts = s.get().parts
        assert kinds == ["AsyncStream", "_DirectStream"]
        assert [type(p).__name__ for p in parts] == ["ThinkingPart", "TextPart", "ToolCallPart"]


# --- failures: the SDK's errors and the SDK's retries ---------------------------------------------


ERROR = b'{"error": {"message": "the fake refuses", "type": "invalid_request_error", "code": null}}'


@pytest.mark.parametrize(
    ("status", "headers"),
    [(400, {}), (401, {}), (404, {}), (429, {"x-should-retry": "false"}), (500, {"x-should-retry": "false"})],
)
async def test_g1_an_error_status_is_the_sdk_error(
    monkeypatch: pytest.MonkeyPatch, status: int, headers: dict[str, str]
) -> None:
    async with RawServer([(status, {"content-type": "application/json", **headers}, [ERROR])]) as server:
        c = await primed(server.url)
        async with sdk_only(monkeypatch):
            sdk = await outcome(lambda: chunks_of(c))
        ours = await outcome(lambda: chunks_of(c))
    assert ours == sdk and sdk[0] != "no error" and "the fake refuses" in sdk[1]
    assert len(server.requests) == 2  # one each: no retry


async def test_g1_a_retried_status_is_retried_as_the_sdk_retries_it(monkeypatch: pytest.MonkeyPatch) -> None:
    ok = (200, SSE, [b"data: " + chunk() + b"\n\ndata: [DONE]\n\n"])
    busy = (429, {"content-type": "application/json", "retry-after-ms": "1"}, [ERROR])
    for retries, answers, expected in [
        (2, [busy, busy, ok], ("no error", 3)),  # two retries used
        (1, [busy, busy, ok], ("RateLimitError", 2)),  # out of retries
        (0, [busy, ok], ("RateLimitError", 1)),
    ]:
        results = []
        for direct in (False, True):
            async with RawServer(answers) as server:
                c = await primed(server.url, max_retries=retries)
                if direct:
                    got = await outcome(lambda c=c: chunks_of(c))
                else:
                    async with sdk_only(monkeypatch):
                        got = await outcome(lambda c=c: chunks_of(c))
                results.append((got[0], len(server.requests)))
        assert results == [expected, expected], retries


async def test_g1_a_refused_connection_is_the_sdk_connection_error(monkeypatch: pytest.MonkeyPatch) -> None:
    async with RawServer([]) as server:
        url = server.url
    c = await primed(url, max_retries=0)  # the server is gone: the port refuses
    async with sdk_only(monkeypatch):
        sdk = await outcome(lambda: chunks_of(c))
    ours = await outcome(lambda: chunks_of(c))
    assert ours == sdk and sdk[0] == "APIConnectionError"


async def test_g1_an_error_in_the_stream_is_the_sdk_api_error(monkeypatch: pytest.MonkeyPatch) -> None:
    body = b"data: " + chunk() + b'\n\ndata: {"error": {"message": "overloaded mid-stream"}}\n\n'
    async with RawServer([(200, SSE, [body])]) as server:
        c = await primed(server.url)
        async with sdk_only(monkeypatch):
            sdk = await outcome(lambda: chunks_of(c))
        ours = await outcome(lambda: chunks_of(c))
    assert ours == sdk and sdk[:2] == ("APIError", "overloaded mid-stream")


async def test_g1_templates_are_bounded_and_a_dropped_client_takes_its_route_along() -> None:
    import gc

    fake = FakeOpenAI(tool_reply)
    async with fake as url:
        c = await primed(url)
        for i in range(openai_stream.TEMPLATES_REMEMBERED + 3):
            await chunks_of(c, extra_headers={"X-Turn": str(i)})
        lib = next(
            cell.cell_contents
            for cell in AsyncAPIClient.request.__closure__
            if isinstance(cell.cell_contents, openai_stream._Library)
        )  # type: ignore[attr-defined]
        route = lib.routes[c]
        assert route is not None and 0 < len(route.templates) <= openai_stream.TEMPLATES_REMEMBERED
        assert fake.request_headers[-1]["x-turn"] == str(openai_stream.TEMPLATES_REMEMBERED + 2)
        count = len(lib.routes)
        dropped = weakref.ref(c)
        OPEN.remove(c)
        await c.close()
        del c, route
        gc.collect()  # other tests' dropped clients may go with it: the map only shrinks
        assert dropped() is None and len(lib.routes) <= count - 1


async def test_g1_a_cookie_set_by_a_response_is_sent_again_as_the_sdk_sends_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A load balancer's sticky-session cookie: kept in the HTTP client's jar and sent with the
    next request, as the SDK's own path does; that client's requests take the SDK's path since."""
    ok = b"data: " + chunk() + b"\n\ndata: [DONE]\n\n"
    answers = [(200, {**SSE, "set-cookie": "sticky=abc; Path=/"}, [ok]), (200, SSE, [ok]), (200, SSE, [ok])]
    sent: dict[bool, list[bytes]] = {}
    for direct in (False, True):
        async with RawServer(answers) as server:
            c = await primed(server.url)
            kinds = []
            for _ in range(3):
                if direct:
                    kinds.append((await chunks_of(c))[0])
                else:
                    async with sdk_only(monkeypatch):
                        kinds.append((await chunks_of(c))[0])
            sent[direct] = [b"cookie: sticky=abc" in head.lower() for head, _ in server.requests]  # type: ignore[misc]
            if direct:
                assert kinds == ["_DirectStream", "AsyncStream", "AsyncStream"]
    assert sent[True] == sent[False] == [False, True, True]
