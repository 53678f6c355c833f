"""Operability of `devagent serve`: Prometheus metrics (`/metrics`, behind the same bearer auth as
every route but the card) and one log line per turn and per request.

The metrics are the `prometheus-client` library's, in a registry of the app's own (several apps in
one process, as in tests, do not collide). prometheus_client is imported when the app is made, not
when `devagent` starts (it costs ~0.1 s).

Log lines go to the `devagent.a2a.requests` (requests) and `devagent.a2a.turns` (turns) loggers at
info level; their structured fields travel in the record's `fields` attribute, which the JSON
formatter (`--log-format json`) writes as keys of the line.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any

from devagent.agent.api import NeedsInput, ToolCallUpdate, TurnEnd, Usage
from devagent.common.lru import LRU

request_log = logging.getLogger("devagent.a2a.requests")
turn_log = logging.getLogger("devagent.a2a.turns")

# Histogram buckets (seconds): a first event comes within ms (cached) to tens of s (a cold model);
# a turn lasts from ms (a slash command) to many minutes (an agentic task with tools).
FIRST_EVENT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
TURN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)
PENDING_TASKS_COUNTED = 10_000  # paused tasks the pending-permission gauge counts, at most

_STATE = re.compile(rb'"state"\s*:\s*"([A-Za-z_-]+)"')
_TASK_ID = re.compile(rb'"taskId"\s*:\s*"([^"]{1,64})"')


def _state_name(raw: str) -> str:
    """TASK_STATE_INPUT_REQUIRED and input-required alike -> input-required."""
    s = raw.lower()
    if s.startswith("task_state_"):
        s = s[len("task_state_") :]
    return s.replace("_", "-")


class Metrics:
    """The server's metrics, and the per-turn records that feed them and the turn log."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.turns = Counter("devagent_turns", "Turns run, by how they ended", ["outcome"], registry=r)
        self.tool_calls = Counter(
            "devagent_tool_calls", "Tool calls finished, by tool and outcome", ["tool", "outcome"], registry=r
        )
        self.errors = Counter(
            "devagent_errors", "Errors: failed turns, server errors (HTTP 5xx)", ["kind"], registry=r
        )
        self.requests = Counter(
            "devagent_requests",
            "Requests, by JSON-RPC method (or route) and HTTP status",
            ["method", "status"],
            registry=r,
        )
        self.first_event = Histogram(
            "devagent_time_to_first_event_seconds",
            "From a turn's start to its first event from the core",
            buckets=FIRST_EVENT_BUCKETS,
            registry=r,
        )
        self.turn_seconds = Histogram(
            "devagent_turn_duration_seconds",
            "From a turn's start to its end or pause (input-required)",
            buckets=TURN_BUCKETS,
            registry=r,
        )
        # task id -> permission requests it waits on (this process's turns). Bounded: a task
        # paused and never answered stays until then, so beyond PENDING_TASKS_COUNTED the oldest
        # are no longer counted by the gauge.
        self._pending: LRU[str, int] = LRU(PENDING_TASKS_COUNTED)
        pending = Gauge(
            "devagent_pending_permission_requests",
            "Permission requests waiting for an answer (turns paused by this process)",
            registry=r,
        )
        pending.set_function(lambda: sum(self._pending.values()))
        self.open_streams = Gauge(
            "devagent_open_streams", "Open response streams (SSE and gRPC), all tokens", registry=r
        )
        self._worker_gauges(r)
        # Spend (tokens and requests), in two registries of their own: per caller, labelled by the
        # token's name (never the token), for the operator's metrics token alone; the totals of
        # all callers for every other token.
        kinds = (
            "kind: input, cached (of input, read from the provider's prompt cache), cache_write (of "
            "input, written to it), output"
        )
        self._by_identity = CollectorRegistry(auto_describe=True)
        self._totals = CollectorRegistry(auto_describe=True)
        self.tokens = Counter(
            "devagent_tokens",
            f"Model tokens used, by caller (token name) and {kinds}",
            ["identity", "kind"],
            registry=self._by_identity,
        )
        self.all_tokens = Counter(
            "devagent_tokens", f"Model tokens used, all callers, by {kinds}", ["kind"], registry=self._totals
        )
        self.model_requests, self.all_model_requests = self._spend(
            "devagent_model_requests", "Model requests made"
        )
        # Dollars at the models' prices (devagent/agent/models/prices.py), and the requests of models
        # with no known price (not in the dollars).
        self.cost, self.all_cost = self._spend(
            "devagent_cost_usd", "What model requests cost in USD at the models' prices"
        )
        self.unpriced, self.all_unpriced = self._spend(
            "devagent_unpriced_model_requests",
            "Model requests of a model with no known price (not in the cost)",
        )

    def _spend(self, name: str, what: str) -> tuple[Any, Any]:
        """A spend counter per caller (labelled by the token's name) and its total of all callers."""
        from prometheus_client import Counter

        return (
            Counter(name, f"{what}, by caller (token name)", ["identity"], registry=self._by_identity),
            Counter(name, f"{what}, all callers", registry=self._totals),
        )

    def count_usage(self, identity: str, usage: Usage) -> None:
        """A core usage listener (AgentCore.usage_listeners)."""
        who = identity or "-"
        for kind, n in (
            ("input", usage.input_tokens),
            ("cached", usage.cache_read_tokens),
            ("cache_write", usage.cache_write_tokens),
            ("output", usage.output_tokens),
        ):
            self.tokens.labels(who, kind).inc(n)
            self.all_tokens.labels(kind).inc(n)
        self.model_requests.labels(who).inc(usage.requests)
        self.all_model_requests.inc(usage.requests)
        self.cost.labels(who).inc(usage.cost_usd)
        self.all_cost.inc(usage.cost_usd)
        if usage.unpriced_requests:
            self.unpriced.labels(who).inc(usage.unpriced_requests)
            self.all_unpriced.inc(usage.unpriced_requests)

    def count_open_streams(self, total: Callable[[], int]) -> None:
        """The open-streams gauge reads the per-token stream count (a2a/streams.py), the one
        place every binding's streams are counted."""
        self.open_streams.set_function(total)

    def _worker_gauges(self, r: Any) -> None:
        """The workers (sandbox_backend = worker), read from the store at each scrape: every
        replica counts them all."""
        from prometheus_client import Gauge

        self.workers = Gauge(
            "devagent_workers", "Workers connected, by pool and state", ["pool", "state"], registry=r
        )
        self.worker_sessions = Gauge(
            "devagent_worker_sessions",
            "Sessions' sandboxes held by live workers, by pool",
            ["pool"],
            registry=r,
        )
        self.worker_capacity = Gauge(
            "devagent_worker_capacity", "Sessions live workers can hold, by pool", ["pool"], registry=r
        )
        self.worker_calls = Gauge(
            "devagent_worker_calls_running", "Calls running on workers, by pool", ["pool"], registry=r
        )

    def count_workers(self, rows: list[dict[str, Any]]) -> None:
        """The workers as the store has them now (`WorkerQueue.overview`)."""
        for gauge in (self.workers, self.worker_sessions, self.worker_capacity, self.worker_calls):
            gauge.clear()
        for row in rows:
            pool = str(row["pool"])
            self.workers.labels(pool, "alive" if row["alive"] else "lost").inc()
            if row["alive"]:
                self.worker_sessions.labels(pool).inc(int(row["sessions"]))
                self.worker_capacity.labels(pool).inc(int(row["capacity"]))
                self.worker_calls.labels(pool).inc(int(row["running"]))

    def exposition(self, *, per_identity: bool) -> tuple[bytes, str]:
        """The metrics; spend per caller with `per_identity`, else the totals of all callers."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        spend = self._by_identity if per_identity else self._totals
        return generate_latest(self.registry) + generate_latest(spend), CONTENT_TYPE_LATEST

    # --- turns --------------------------------------------------------------------------------

    def turn(self, task_id: str) -> TurnRecord:
        self._pending.pop(task_id, None)  # answered (or given up) by this new execution
        return TurnRecord(self, task_id)

    def task_canceled(self, task_id: str) -> None:
        self._pending.pop(task_id, None)

    # --- requests -----------------------------------------------------------------------------

    def request(self, method: str, task: str | None, status: int, started: float, state: str = "") -> None:
        self.requests.labels(method, str(status)).inc()
        if status >= 500:
            self.errors.labels("http_5xx").inc()
        log_request(method, task, status, started, state)

    async def stream(
        self, body: AsyncIterable[Any], method: str, task: str | None, status: int, started: float
    ) -> AsyncIterator[Any]:
        """An SSE body (counted open by the stream limit, not here); its request's line is logged
        when it closes, with the task and the last state it carried."""
        state = ""
        try:
            async for chunk in body:
                data = _bytes_of(chunk)
                if task is None:
                    m = _TASK_ID.search(data)
                    if m:
                        task = m.group(1).decode()
                for m in _STATE.finditer(data):
                    state = m.group(1).decode()
                yield chunk
        finally:
            aclose = getattr(body, "aclose", None)
            if aclose is not None:
                await aclose()
            self.request(method, task, status, started, _state_name(state) if state else "")


def _bytes_of(chunk: Any) -> bytes:
    """The data of an SSE item as sse-starlette takes it (bytes, str, a dict or a ServerSentEvent)."""
    if isinstance(chunk, bytes):
        return chunk
    if isinstance(chunk, dict):
        chunk = chunk.get("data", "")
    else:
        chunk = getattr(chunk, "data", chunk)
    return chunk if isinstance(chunk, bytes) else str(chunk).encode()


def log_request(method: str, task: str | None, status: int, started: float, state: str = "") -> None:
    if not request_log.isEnabledFor(logging.INFO):
        return
    ms = (time.monotonic() - started) * 1000
    fields = {
        "event": "request",
        "method": method,
        "task_id": task or "",
        "status": status,
        "state": state,
        "duration_ms": round(ms, 1),
    }
    request_log.info(
        "request %s task=%s status=%s%s %.1f ms",
        method,
        task or "-",
        status,
        f" state={state}" if state else "",
        ms,
        extra={"fields": fields},
    )


class TurnRecord:
    """One execution of a task (a turn, or the rest of one after answers): fed the core's events,
    it records the time to the first one, tool call outcomes, and how it ended."""

    __slots__ = ("_m", "first", "outcome", "pending", "started", "task_id")

    def __init__(self, metrics: Metrics, task_id: str) -> None:
        self._m = metrics
        self.task_id = task_id
        self.started = time.monotonic()
        self.first: float | None = None
        self.outcome = ""
        self.pending = 0

    def event(self, ev: Any) -> None:
        if self.first is None:
            self.first = time.monotonic() - self.started
            self._m.first_event.observe(self.first)
        if isinstance(ev, ToolCallUpdate):
            c = ev.call
            if c.status.terminal:
                self._m.tool_calls.labels(c.name, c.status.value.lower()).inc()
        elif isinstance(ev, NeedsInput):
            self.outcome = "input-required"
            self.pending = len(ev.permissions)
        elif isinstance(ev, TurnEnd):
            self.outcome = ev.reason

    def finish(self, failure: str = "") -> None:
        """The execution ended (normally or not): metrics and the turn's log line."""
        elapsed = time.monotonic() - self.started
        outcome = self.outcome or ("error" if failure else "unknown")
        m = self._m
        m.turns.labels(outcome).inc()
        m.turn_seconds.observe(elapsed)
        if outcome in ("error", "interrupted"):
            m.errors.labels("turn_" + outcome).inc()
        if self.pending:
            m._pending[self.task_id] = self.pending
        if turn_log.isEnabledFor(logging.INFO):
            fields = {
                "event": "turn",
                "task_id": self.task_id,
                "state": outcome,
                "duration_ms": round(elapsed * 1000, 1),
                "first_event_ms": round(self.first * 1000, 1) if self.first is not None else None,
            }
            if failure:
                fields["error"] = failure
            turn_log.info(
                "turn task=%s state=%s %.1f ms (first event %s)%s",
                self.task_id,
                outcome,
                elapsed * 1000,
                f"{self.first * 1000:.1f} ms" if self.first is not None else "-",
                f": {failure}" if failure else "",
                extra={"fields": fields},
            )


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and the record's `fields`."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            out.update(fields)
        if record.exc_info:
            out["exception"] = record.exc_text or self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def configure_logging(fmt: str) -> None:
    """devagent's own loggers at info level on stderr, as text or JSON lines (`--log-format`),
    unless the operator configured logging already (a root handler)."""
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
        handler.formatter.converter = time.gmtime  # type: ignore[union-attr]
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("devagent")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


_TASK_IN_PATH = re.compile(r"/tasks/([^/:]+)")
_CONFIG_IN_PATH = re.compile(r"/pushNotificationConfigs/([^/:]+)")
_QUIET_PATHS = frozenset(("/", "/healthz", "/metrics"))  # JSON-RPC logs itself; probes are noise


class RouteLog:
    """One log line and one count per request of every HTTP route but JSON-RPC's (which logs its
    JSON-RPC method itself, `rpc` in app.py) and the probes: the HTTP+JSON binding, the Gemini CLI
    routes, the card. The label is the method and the path with ids replaced (`GET
    /rest/tasks/*`), so the metric's label set stays bounded; a path no route has is `(no
    route)`. A stream (SSE) counts as open until it closes and is logged then. Plain ASGI, so that
    a streamed body passes through untouched (Starlette's BaseHTTPMiddleware would buffer it)."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("path", "") in _QUIET_PATHS:
            await self.app(scope, receive, send)
            return
        started = time.monotonic()
        path: str = scope.get("path", "")
        found = _TASK_IN_PATH.search(path)
        task = found.group(1)[:64] if found else None
        shape = _CONFIG_IN_PATH.sub("/pushNotificationConfigs/*", _TASK_IN_PATH.sub("/tasks/*", path))
        status = 500
        stream = False
        done = False

        async def sending(message: Any) -> None:
            nonlocal status, stream, done
            if message["type"] == "http.response.start":
                status = int(message["status"])
                ctype = dict(message.get("headers") or []).get(b"content-type", b"")
                stream = ctype.startswith(b"text/event-stream")
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                done = True
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            routed = "endpoint" in scope  # set by the router on the (shared) scope when a route matched
            label = f"{scope.get('method', '?')} {shape if routed else '(no route)'}"
            self.metrics.request(label[:200], task, status if done or stream else 500, started)


# The a2a SDK's loggers that report a client's malformed request with `logger.exception`.
_SDK_REQUEST_LOGGERS = ("a2a.compat.v0_3.jsonrpc_adapter", "a2a.server.routes.jsonrpc_dispatcher")


class _ClientMistakeInOneLine(logging.Filter):
    """A request that fails the SDK's validation is the client's mistake, answered with a
    JSON-RPC error; the SDK logs it with a traceback at error level. Here it becomes one warning
    line with the reason's first line (the client's own error object says the rest)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and str(record.msg).startswith("Failed to validate"):
            exc = record.exc_info[1]
            first = (str(exc).strip().splitlines() or [""])[0]
            record.msg = f"{record.getMessage()}: {first}"[:300]
            record.args = ()
            record.exc_info = record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def quiet_client_mistakes() -> None:
    """Installs `_ClientMistakeInOneLine` on the SDK's request loggers (once)."""
    for name in _SDK_REQUEST_LOGGERS:
        sdk_logger = logging.getLogger(name)
        if not any(isinstance(f, _ClientMistakeInOneLine) for f in sdk_logger.filters):
            sdk_logger.addFilter(_ClientMistakeInOneLine())
