"""`devagent acp`: the Agent Client Protocol over stdio, for editors (Zed, JetBrains, Neovim, Emacs).

JSON-RPC 2.0, one message a line. The official SDK (`agent-client-protocol`) does the protocol:
its `AgentSideConnection` dispatches requests to `acp.agent.DevagentAgent`, validates params
against the protocol's schema, and sends the agent's requests and notifications to the client.

What this module adds is start-up speed. Importing the SDK builds its whole schema (several
hundred pydantic models, over a second on a loaded machine), and the core (SQLAlchemy,
pydantic-ai) takes as long again. An editor waits for `initialize` before it shows the agent, so
the first `initialize` is answered here from plain JSON (`translate.initialize_result`, the same
answer the SDK path gives, checked against the SDK's model in the tests) while the SDK and the
core load in a thread; every other message waits in order and is handed to the SDK's connection
once it is there. Lines come and go through one `_LineTransport`, the SDK's message-level
`Transport` seam, so the SDK sees exactly the stream the client sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from devagent import __version__
from devagent.acp import translate as t
from devagent.acp.listing import PAGE_SIZE
from devagent.acp.options import AcpOptions
from devagent.common import startup_gc
from devagent.common.jsonlimits import depth_message, positive_int_from_env, too_deep
from devagent.common.waiting import done_or_set
from devagent.preflight import stdio_door_config
from devagent.stdio import Output, OverlongLine, serve_lines, start_reader, work_folder
from devagent.stdio_cli import DoorFlags

log = logging.getLogger("devagent.acp")

PARSE_ERROR = -32700
# How long the server waits for a first message before loading the SDK and the core anyway.
IDLE_PRELOAD_DELAY = 0.3
INVALID_REQUEST = -32600


class _LineTransport:
    """The SDK's `Transport` over this process's stdio lines: `receive` gives the parsed messages
    (after those read before the SDK was loaded), `send` writes one line each. Lines that are not
    a JSON object are answered here with the JSON-RPC error and never reach the SDK."""

    def __init__(self, lines: asyncio.Queue[bytes | None], out: Any, limits: AcpOptions) -> None:
        self._lines = lines
        self._out = out
        self._limits = limits
        self.held: list[dict[str, Any]] = []  # read before the SDK took over
        self._eof = False

    @property
    def eof(self) -> bool:
        """stdin closed: the client went away (or a signal stopped the server)."""
        return self._eof

    async def send(self, message: dict[str, Any]) -> None:
        error = message.get("error")
        if isinstance(error, dict):  # the SDK's own errors say what went wrong in `message` too
            message = {**message, "error": t.explain_error(error)}
        self._out.send(message)
        # Back-pressure (the writer thread of devagent.stdio.Output): while the client does not read, what
        # sends to it waits here; the loop goes on reading stdin (a cancel is still taken).
        await self._out.drain()

    async def receive(self) -> dict[str, Any] | None:
        if self.held:
            return self.held.pop(0)
        while not self._eof:
            msg = self.parse(await self._lines.get())
            if msg is not None:
                return msg
        return None

    def parse(self, raw: bytes | None) -> dict[str, Any] | None:
        if raw is None:
            self._eof = True
            return None
        if isinstance(raw, OverlongLine):
            self._error(INVALID_REQUEST, f"line longer than {self._limits.max_line_bytes} bytes")
            return None
        if not raw.strip():
            return None  # blank lines between messages are tolerated, as by the SDK
        if too_deep(raw, self._limits.max_json_depth):
            self._error(INVALID_REQUEST, depth_message(self._limits.max_json_depth))
            return None
        try:
            msg = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            self._error(PARSE_ERROR, "the line is not JSON")
            return None
        if not isinstance(msg, dict):
            self._error(INVALID_REQUEST, "the line is not a JSON object")
            return None
        return msg

    def _error(self, code: int, reason: str) -> None:
        error = {"code": code, "message": t.error_message(code, reason), "data": {"reason": reason}}
        self._out.send({"jsonrpc": "2.0", "id": None, "error": error})

    async def close(self) -> None:
        await self._out.flush(5)  # what was sent reaches a client that reads


def _load_sdk() -> None:
    """The heavy imports, in a thread: the SDK's schema, the core, the store."""
    # late: the ACP SDK, pydantic-ai and SQLAlchemy load after `initialize` is answered
    import acp  # noqa: F401

    import devagent.acp.agent
    import devagent.store.db  # noqa: F401
    from devagent.agent.api import load_core

    load_core()
    startup_gc.settled()  # loaded: the collector, off since the entry point, on again


async def serve(opts: AcpOptions, lines: asyncio.Queue[bytes | None], out: Any) -> int:
    transport = _LineTransport(lines, out, opts)
    # The loading thread holds the GIL most of the time it runs: it starts once the first message
    # is answered (or after a short idle wait), so that it does not slow that answer down.
    get: asyncio.Future[Any] = asyncio.ensure_future(lines.get())
    await asyncio.wait({get}, timeout=IDLE_PRELOAD_DELAY)
    loading: asyncio.Future[Any] | None = None
    if not get.done():
        loading = asyncio.ensure_future(asyncio.to_thread(_load_sdk))
    answered_initialize = False
    consumed = False  # `get`'s line was handled
    # Until the SDK is loaded: answer the first `initialize`, keep the rest in order.
    while loading is None or not loading.done():
        if consumed:
            get = asyncio.ensure_future(lines.get())
        if loading is not None:
            await asyncio.wait([get, loading], return_when=asyncio.FIRST_COMPLETED)
        else:
            await get
        if not get.done():
            get.cancel()
            break
        msg = transport.parse(get.result())
        consumed = True
        if msg is not None and msg.get("method") == "initialize" and "id" in msg and not answered_initialize:
            answered_initialize = True
            raw = msg.get("params")
            params: dict[str, Any] = raw if isinstance(raw, dict) else {}
            out.send({"jsonrpc": "2.0", "id": msg["id"], "result": _initialize(opts, params)})
            transport.held.append({"jsonrpc": "2.0", "method": "_devagent/initialized", "params": params})
        elif msg is not None:
            transport.held.append(msg)
        elif transport._eof:
            return 0
        if loading is None:  # the first message is answered: load now
            loading = asyncio.ensure_future(asyncio.to_thread(_load_sdk))
    assert loading is not None
    await loading
    from devagent.acp.agent import run_connection  # late: loaded by _load_sdk, in its thread

    return await run_connection(opts, transport)


def _initialize(opts: AcpOptions, params: dict[str, Any]) -> dict[str, Any]:
    result = t.initialize_result(mcp_http=opts.config.mcp_client_http, version=__version__)
    result["protocolVersion"] = t.negotiate(params.get("protocolVersion"))
    info = params.get("clientInfo") or {}
    log.info(
        "initialize from %s %s (protocol %r -> %s)",
        info.get("name", "?") if isinstance(info, dict) else "?",
        info.get("version", "") if isinstance(info, dict) else "",
        params.get("protocolVersion"),
        result["protocolVersion"],
    )
    return result


def run_acp(flags: DoorFlags, *, session_id: str | None = None, approval: str | None = None) -> int:
    """Serve ACP on this process's stdin/stdout until stdin closes. Returns the exit code."""
    wd: Path | None = None
    if flags.work_dir and (wd := work_folder("devagent acp", flags.work_dir)) is None:
        return 2
    try:
        page_size = positive_int_from_env("DEVAGENT_ACP_PAGE_SIZE") or PAGE_SIZE
    except ValueError as e:
        print(f"devagent acp: {e}", file=sys.stderr)
        return 2
    config = stdio_door_config("devagent acp", flags, approval)
    if isinstance(config, int):
        return config

    def serve(limits: dict[str, int], proto_fd: int) -> Coroutine[Any, Any, int]:
        opts = AcpOptions(
            config=config,
            work_dir=wd,
            session_id=session_id,
            model=flags.model,
            list_page_size=page_size,
            **limits,
        )
        return _serve_stdio(opts, proto_fd)

    return serve_lines("devagent acp", flags.verbose, flags.log_file, serve)


async def _serve_stdio(opts: AcpOptions, proto_fd: int) -> int:
    """Serve the lines of stdin, answering on `proto_fd`, until stdin closes or a signal comes."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()
    start_reader(0, loop, queue, opts.max_line_bytes)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    out = Output(proto_fd)
    serving = asyncio.ensure_future(serve(opts, queue, out))
    await done_or_set(serving, stop)
    if not serving.done():  # a signal: EOF for the connection, which then shuts down
        queue.put_nowait(None)
        await asyncio.wait({serving}, timeout=15)
    await out.flush(10)  # the last answers reach a client that reads
    return serving.result() if serving.done() and not serving.cancelled() else 0
