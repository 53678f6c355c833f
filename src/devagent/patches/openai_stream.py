"""OpenAI SDK patch: a streamed chat completion sent through the SDK's own connection pool with
the request the SDK would build, without the SDK's per-request machinery around it.

Written for openai 3.57.0 (`WRITTEN_FOR`) over httpx2 and httpcore2 2.16.2, which it brings.
Applied once, when an OpenAI-family model is first built (devagent.agent.models.providers).

Why. A tool turn makes two streamed requests, and the SDK's work around each one cost more CPU
than the HTTP exchange itself: in one process against the fake server (bench/openai_layers.py),
1.13-1.24 ms a request through the SDK's own path, 0.41 ms for the same bytes through its
connection pool, 0.78-0.79 ms through this path (the body's encoding and the chunks' validation
are in it). Per request the SDK copies its options twice, rebuilds and re-validates every header,
parses and merges the URL, builds an httpx request and response, and decodes the event stream
through four nested generators. Nothing of that changes between two requests of one client, so
it is done once and kept.

What stays the SDK's own, so that a request and its outcome are what the SDK makes of them:
- the request: its URL, query and headers come from the SDK's `_build_request` (built once per
  client, extra headers and timeout, and kept); its body from the SDK's `openapi_dumps` (patched
  by devagent.patches.openai to reuse the encoded prefix); the one difference is
  `Accept-Encoding: identity`, so the event stream arrives as sent;
- the chunks: each event's data goes through the SDK's `_process_response_data` (so its chunk
  types and devagent's strict validation); events are cut as the SDK's `SSEDecoder` cuts them
  (CR, LF or CRLF line ends, `data`/`event`/`id`/`retry` fields, comments) and `[DONE]`, an `error`
  in the data and `thread.` events are handled as in `AsyncStream.__stream__`;
- every failure: an HTTP error status becomes the SDK's error (`_make_status_error_from_response`),
  a failed connection or read the SDK's `APIConnectionError` or `APITimeoutError`; a first attempt
  the SDK would retry (`_should_retry`, or a connection failure) waits the SDK's back-off
  (`_calculate_retry_timeout`) and is handed to the SDK's own path with one retry fewer, so the
  attempts and their spacing are the SDK's.

The SDK's own path runs instead whenever anything of its machinery applies: a request other than
a streamed POST to /chat/completions with a JSON body and no query, files, idempotency key or
redirect setting; a client other than a plain `AsyncOpenAI` (Azure), or one with a provider
runtime, an API-key provider, custom auth or an idempotency header; an HTTP client with event
hooks, auth, cookies (from the start, or set by a response: from then on), a proxy or mounted
transport, or a transport or pool of another type; before the client's first request (which works
out the platform headers); a status outside 2xx and 4xx-5xx.
tests/unit/test_issue39_openai_stream.py sends the same requests both ways and compares."""

from __future__ import annotations

import asyncio
import functools
import json
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any

WRITTEN_FOR = "3.57.0"
PATH = "/chat/completions"
TEMPLATES_REMEMBERED = 32  # per client: one request template per set of extra headers and timeout


@functools.cache  # applied once: a later call does nothing
def stream_chat_directly() -> None:
    """Route eligible streamed chat completions past the SDK's request machinery (see above)."""
    try:  # an SDK without these names is left alone
        lib = _Library()
    except (ImportError, AttributeError):
        return
    original: Any = lib.base_client.AsyncAPIClient.request

    async def request(
        self: Any, cast_to: Any, options: Any, *, stream: bool = False, stream_cls: Any = None
    ) -> Any:
        if stream and type(self) is lib.AsyncOpenAI and lib.direct_options(options):
            route = lib.route(self)
            if route is not None:
                return await route.send(self, original, cast_to, options, stream_cls)
        return await original(self, cast_to, options, stream=stream, stream_cls=stream_cls)

    request.__wrapped__ = original  # type: ignore[attr-defined]
    lib.base_client.AsyncAPIClient.request = request


class _Library:
    """The library names the direct path uses, imported when the patch is applied."""

    def __init__(self) -> None:
        import httpcore2
        import httpx2
        import openai
        from httpx2._transports.default import map_httpcore_exceptions
        from openai import _base_client
        from openai._httpx2 import request_exceptions, timeout_exceptions
        from openai._models import FinalRequestOptions
        from openai._types import NotGiven, Omit
        from openai._utils import extract_type_arg

        self.httpcore = httpcore2
        self.httpx = httpx2
        self.base_client = _base_client
        self.AsyncOpenAI = openai.AsyncOpenAI
        self.APIError = openai.APIError
        self.APIConnectionError = openai.APIConnectionError
        self.APITimeoutError = openai.APITimeoutError
        self.FinalRequestOptions = FinalRequestOptions
        self.NotGiven = NotGiven
        self.Omit = Omit
        self.mapped: Any = map_httpcore_exceptions
        self.timeouts = timeout_exceptions
        self.failures = request_exceptions
        self.chunk_type: Any = lambda stream_cls: extract_type_arg(stream_cls, 0)
        # httpx's client, and the SDK's subclass of it that only adds closing on collection
        self.http_clients = (httpx2.AsyncClient, _base_client.AsyncHttpxClientWrapper)
        self.known_hooks: tuple[type, ...] = ()
        try:  # pydantic-ai's clients cap the connect and pool timeouts from the request's own timeout
            from pydantic_ai._http import ConnectPoolTimeoutCap

            self.known_hooks = (ConnectPoolTimeoutCap,)
        except ImportError:
            pass
        self.routes: weakref.WeakKeyDictionary[Any, _Route | None] = weakref.WeakKeyDictionary()

    def direct_options(self, o: Any) -> bool:
        """Whether a request's options ask for nothing the direct path leaves out."""
        return (
            o.url == PATH
            and o.method == "post"
            and type(o.json_data) is dict
            and not o.params
            and o.files is None
            and o.content is None
            and o.idempotency_key is None
            and o.follow_redirects is None
            and o.stream_mode == "legacy"
            and not o.synthesize_event_and_data
            and isinstance(o.post_parser, self.NotGiven)
        )

    def route(self, client: Any) -> _Route | None:
        """The client's direct route, or None when the client or its HTTP client takes part in
        the request (see the module's text); worked out once per client, after its first request."""
        if client._platform is None:  # the SDK's first request works out the platform headers
            return None
        try:
            return self.routes[client]
        except KeyError:
            route = _Route(self, client) if self.plain_client(client) else None
            self.routes[client] = route
            return route

    def plain_client(self, client: Any) -> bool:
        http = client._client
        if type(http) not in self.http_clients or http.is_closed:
            return False
        transport = http._transport
        return (
            client._provider_runtime is None
            and client._api_key_provider is None
            and client.custom_auth is None
            and client._idempotency_header is None
            and not client.default_query
            and not http._event_hooks["response"]
            and all(isinstance(hook, self.known_hooks) for hook in http._event_hooks["request"])
            and http._auth is None
            and not http.cookies
            and not any(http._mounts.values())
            and type(transport) is self.httpx.AsyncHTTPTransport
            and type(transport._pool) is self.httpcore.AsyncConnectionPool
        )


class _Template:
    """What the SDK's `_build_request` and the HTTP client's request hooks make of a request, less
    its body: the URL, the headers (but Content-Length), the timeout, and the httpx request that
    errors name. The hooks run once, on the template: only hooks known to depend on nothing but
    the request's own timeout are let through (`_Library.plain_client`)."""

    @classmethod
    async def build(cls, lib: _Library, client: Any, options: Any) -> _Template:
        shape = lib.FinalRequestOptions.construct(
            method="post",
            url=PATH,
            json_data={},
            headers=options.headers,
            timeout=options.timeout,
            security=options.security,
        )
        built = client._build_request(shape, retries_taken=0)
        for hook in client._client._event_hooks["request"]:
            await hook(built)
        return cls(lib, built)

    def __init__(self, lib: _Library, built: Any) -> None:
        url = built.url
        self.url = lib.httpcore.URL(
            scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
        )
        self.headers = [
            (k, b"identity" if k.lower() == b"accept-encoding" else v)
            for k, v in built.headers.raw
            if k.lower() != b"content-length"
        ]
        self.extensions = dict(built.extensions)
        self.request = built


class _Route:
    """A client's direct path: its connection pool and its request templates."""

    def __init__(self, lib: _Library, client: Any) -> None:
        # no reference to the client: the route is the value of a weak map keyed by it
        self.lib = lib
        self.pool = client._client._transport._pool
        self.templates: dict[tuple[object, ...], _Template] = {}

    async def template(self, client: Any, options: Any) -> _Template:
        headers = options.headers
        extra = (
            () if isinstance(headers, self.lib.NotGiven) else tuple((k, repr(v)) for k, v in headers.items())
        )
        key = (extra, repr(options.timeout), client.api_key)
        found = self.templates.get(key)
        if found is None:
            if len(self.templates) >= TEMPLATES_REMEMBERED:
                self.templates.clear()
            found = self.templates[key] = await _Template.build(self.lib, client, options)
        return found

    async def send(self, client: Any, original: Any, cast_to: Any, options: Any, stream_cls: Any) -> Any:
        lib = self.lib
        template = await self.template(client, options)
        data = options.json_data
        if options.extra_json is not None:
            data = lib.base_client._merge_mappings(data, options.extra_json)
        body: bytes = lib.base_client.openapi_dumps(data)
        headers = [*template.headers, (b"Content-Length", str(len(body)).encode())]
        outgoing = lib.httpcore.Request(
            b"POST", template.url, headers=headers, content=body, extensions=template.extensions
        )
        try:
            with lib.mapped():
                response = await self.pool.handle_async_request(outgoing)
        except lib.timeouts() as e:
            error: Exception = lib.APITimeoutError(request=template.request)
            return await _retry(client, original, cast_to, options, stream_cls, None, error, e)
        except lib.failures() as e:
            error = lib.APIConnectionError(request=template.request)
            return await _retry(client, original, cast_to, options, stream_cls, None, error, e)
        self.keep_cookies(client, response, template)
        if 200 <= response.status < 300:
            return _DirectStream(lib, client, response, lib.chunk_type(stream_cls), template.request)
        await response.aread()
        await response.aclose()
        if response.status < 400:  # a redirect or another answer the SDK's own path follows
            return await original(client, cast_to, options, stream=True, stream_cls=stream_cls)
        failed = lib.httpx.Response(
            response.status, headers=response.headers, content=response.content, request=template.request
        )
        error = client._make_status_error_from_response(failed)
        if not client._should_retry(failed):
            raise error from None
        return await _retry(client, original, cast_to, options, stream_cls, failed, error, None)

    def keep_cookies(self, client: Any, response: Any, template: _Template) -> None:
        """A response that sets cookies: kept in the HTTP client's jar, as httpx keeps them, and
        the client's later requests take the SDK's own path, which sends them (a load balancer's
        sticky session, say)."""
        if any(name.lower() == b"set-cookie" for name, _ in response.headers):
            answer = self.lib.httpx.Response(
                response.status, headers=response.headers, request=template.request
            )
            client._client.cookies.extract_cookies(answer)
            self.lib.routes[client] = None


async def _retry(
    client: Any,
    original: Any,
    cast_to: Any,
    options: Any,
    stream_cls: Any,
    failed: Any,
    error: Exception,
    cause: BaseException | None,
) -> Any:
    """The SDK's handling of a failed first attempt: raised when it has no retries, else its
    back-off and then its own path with one retry fewer."""
    retries = options.get_max_retries(client.max_retries)
    if retries <= 0:
        raise error from cause
    headers = failed.headers if failed is not None else None
    await asyncio.sleep(client._calculate_retry_timeout(retries, options, headers))
    again = options.model_copy()
    again.max_retries = retries - 1
    return await original(client, cast_to, again, stream=True, stream_cls=stream_cls)


class _DirectStream:
    """The chunks of a streamed response, as the SDK's `AsyncStream` gives them: iterated,
    closed, or used as an async context manager."""

    def __init__(self, lib: _Library, client: Any, response: Any, cast_to: Any, request: Any) -> None:
        self.lib = lib
        self.client = client
        self.raw = response
        self.cast_to = cast_to
        self.response = lib.httpx.Response(response.status, headers=response.headers, request=request)
        self.iterator = self.chunks()

    def __aiter__(self) -> AsyncIterator[Any]:
        return self.iterator

    async def __anext__(self) -> Any:
        return await self.iterator.__anext__()

    async def __aenter__(self) -> _DirectStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.raw.aclose()

    async def chunks(self) -> AsyncIterator[Any]:
        """`AsyncStream.__stream__` over the events. The body's iterator and the events' are
        closed here, whatever ends the stream: an async generator left suspended would wait for
        the garbage collector (and hold the stream and its client till then)."""
        process = self.client._process_response_data
        parts = self.parts()
        events = self.events(parts)
        try:
            async for event, data in events:
                if data.startswith("[DONE]"):
                    if self.raw.extensions.get("http_version", b"HTTP/1.1") == b"HTTP/1.1":
                        async for _ in parts:  # the rest read, so the connection is reused
                            pass
                    break
                decoded = json.loads(data)
                thread = bool(event and event.startswith("thread."))
                if (event == "error" or not thread) and isinstance(decoded, Mapping) and decoded.get("error"):
                    raise self.stream_error(decoded["error"])
                item = {"data": decoded, "event": event} if thread else decoded
                yield process(data=item, cast_to=self.cast_to, response=self.response)
        finally:
            await events.aclose()
            await parts.aclose()
            await self.raw.aclose()

    def stream_error(self, error: Any) -> Exception:
        message = error.get("message") if isinstance(error, Mapping) else None
        if not message or not isinstance(message, str):
            message = "An error occurred during streaming"
        return self.lib.APIError(message=message, request=self.response.request, body=error)

    async def parts(self) -> AsyncGenerator[bytes, None]:
        """The body's bytes, read failures as the SDK raises them."""
        lib = self.lib
        try:
            with lib.mapped():
                async for part in self.raw.stream:
                    yield part
        except lib.timeouts() as e:
            raise lib.APITimeoutError(request=self.response.request) from e
        except lib.failures() as e:
            raise lib.APIConnectionError(request=self.response.request) from e

    async def events(self, parts: AsyncIterator[bytes]) -> AsyncGenerator[tuple[str | None, str], None]:
        """(event, data) of each server-sent event in the body's `parts`, cut as the SDK's
        `SSEDecoder` cuts them."""
        pending = b""
        event: str | None = None
        data: list[str] = []
        last_id: str | None = None  # kept across events, as the SDK (and the SSE standard) keep it
        retry: int | None = None
        skip_lf = False  # the last part ended in CR: an LF starting the next one ends no line
        async for part in parts:
            if skip_lf and part.startswith(b"\n"):
                part = part[1:]
            pending += part
            skip_lf = False
            if b"\r" in pending:  # CR and CRLF line ends as LF
                skip_lf = pending.endswith(b"\r")
                pending = pending.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            *lines, pending = pending.split(b"\n")
            for raw in lines:
                line = raw.decode("utf-8")
                if not line:
                    if event or data or last_id or retry is not None:
                        yield event, "\n".join(data)
                    event, data, retry = None, [], None
                    continue
                if line.startswith(":"):
                    continue
                name, _, value = line.partition(":")
                if value.startswith(" "):
                    value = value[1:]
                if name == "data":
                    data.append(value)
                elif name == "event":
                    event = value
                elif name == "id" and "\0" not in value:
                    last_id = value
                elif name == "retry":
                    try:
                        retry = int(value)
                    except ValueError:
                        pass
