"""A tiny OTLP/HTTP trace receiver, so tests see the spans a real process exports.

    with OtlpReceiver() as receiver:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.url     # http://127.0.0.1:PORT
        ...  # run something that traces
        receiver.spans                                          # every span received so far

It answers `POST /v1/traces` (protobuf `ExportTraceServiceRequest`, optionally gzip-compressed)
from a thread of its own, so it keeps receiving while the test waits on a process. Spans are
decoded into plain `Span` records: ids in lower-case hex, attributes as Python values.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.fakes.http_reply import send_body

__all__ = ["OtlpReceiver", "Span"]


@dataclass
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_id: str  # "" for a root span
    kind: int  # the OTLP enum: 1 internal, 2 server, 3 client
    scope: str  # the instrumentation scope (tracer) name
    service: str  # the resource's service.name
    attributes: dict[str, Any] = field(default_factory=dict)
    status_code: int = 0  # 0 unset, 1 ok, 2 error
    status_message: str = ""
    links: list[tuple[str, str]] = field(default_factory=list)  # (trace id, span id)
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def text(self) -> str:
        """Everything the span says, for checking what it must not say."""
        return repr((self.name, self.attributes, self.status_message, self.events))


def _value(v: Any) -> Any:
    which = v.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, which)


def _attributes(kvs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in kvs}


class OtlpReceiver:
    def __init__(self) -> None:
        self._spans: list[Span] = []
        self._lock = threading.Condition()
        self.requests = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                receiver._add(ExportTraceServiceRequest.FromString(body))
                reply = ExportTraceServiceResponse().SerializeToString()
                send_body(self, reply, "application/x-protobuf")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def _add(self, request: ExportTraceServiceRequest) -> None:
        spans = []
        for rs in request.resource_spans:
            service = str(_attributes(rs.resource.attributes).get("service.name", ""))
            for ss in rs.scope_spans:
                for s in ss.spans:
                    spans.append(
                        Span(
                            name=s.name,
                            trace_id=s.trace_id.hex(),
                            span_id=s.span_id.hex(),
                            parent_id=s.parent_span_id.hex(),
                            kind=s.kind,
                            scope=ss.scope.name,
                            service=service,
                            attributes=_attributes(s.attributes),
                            status_code=s.status.code,
                            status_message=s.status.message,
                            links=[(link.trace_id.hex(), link.span_id.hex()) for link in s.links],
                            events=[(e.name, _attributes(e.attributes)) for e in s.events],
                        )
                    )
        with self._lock:
            self._spans += spans
            self.requests += 1
            self._lock.notify_all()

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        """`base` with its own OTEL_* settings dropped, exporting to this receiver soon after each
        span ends (a short `OTEL_BSP_SCHEDULE_DELAY`, for `wait_for`)."""
        env = {k: v for k, v in base.items() if not k.startswith("OTEL_")}
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = self.url
        env["OTEL_BSP_SCHEDULE_DELAY"] = "50"  # ms
        return env

    def wait_for(self, done: Callable[[list[Span]], bool], timeout: float = 120) -> list[Span]:
        """The spans received, once `done(spans)` holds: woken by each export, not by a clock (the
        timeout is a safety net: it raises). For a process that keeps running, with a short
        `OTEL_BSP_SCHEDULE_DELAY` so that it exports soon after a span ends."""
        with self._lock:
            if not self._lock.wait_for(lambda: done(self._spans), timeout):
                raise TimeoutError(f"spans received: {[s.name for s in self._spans]}")
            return list(self._spans)

    @property
    def spans(self) -> list[Span]:
        with self._lock:
            return list(self._spans)

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
