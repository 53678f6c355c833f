"""Running the A2A server: `devagent serve`.

The process answers the agent card within a few hundred milliseconds of starting: uvicorn
serves a small boot app at once, which answers the card from plain JSON while the core (the
database) and the SDK app load in the background; every other request waits for them, then
everything is handed to the real app.

"listening" is printed once the core has loaded, not when the socket is bound: the database is
reachable and its schema ready by then, so a wrong `--db` is one line and exit 1 rather than a
"listening" followed by failing requests. (The model's provider and credentials are checked
before binding, in `devagent.a2a.cli`, without importing the provider.) The card is answered from
the moment the socket is bound, as before.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import socket
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import devagent
from devagent import telemetry
from devagent.a2a.card import CARD_PATHS, CardApp
from devagent.a2a.settings import A2ASettings
from devagent.a2a.shared_port import share_port
from devagent.common import startup_gc
from devagent.preflight import StartError, debug_enabled, open_core

if TYPE_CHECKING:
    from starlette.types import Message, Receive, Scope, Send

    from devagent.agent.api import AgentCore, CoreConfig

log = logging.getLogger(__name__)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP said explicitly: asyncio turns Nagle off (TCP_NODELAY) only on sockets whose
    # `proto` says TCP, and accepted sockets inherit the listener's 0. With Nagle on, an event
    # written while the previous one is unacknowledged waits for the client's delayed ACK
    # (40 ms on Linux): the first event of a turn that follows another arrived ~40 ms late.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.setblocking(False)
    return sock


GC_YOUNG_THRESHOLD = 50_000  # allocations net between two collections of the young generation


def _warm_core() -> None:
    import gc

    from devagent.agent.api import load_core  # late: pydantic-ai, the model layer

    load_core()

    # The ~220,000 objects loaded by now (modules, classes, schemas) live as long as the process.
    # Frozen, Python's full collections no longer walk them: one took ~100 ms and came more often
    # as a long conversation's objects piled up (time per turn over 200 turns). The collector,
    # off since the entry point while all of it was imported (common/startup_gc.py), is on again.
    gc.freeze()
    startup_gc.settled()
    # A turn allocates tens of thousands of short-lived objects that reference counting frees.
    # With the default threshold (700 allocations net) the collector ran about once a turn, each
    # pass walking what happened to be alive then and promoting it, so older generations and the
    # full collections (~30 ms each) followed: ~0.6 ms of a tool turn's ~20 (bench/ab_turns.py:
    # 0.97 with the collector off, 0.97-0.98 with this threshold). A young generation of 50,000
    # keeps cyclic garbage a little longer (a few MB at most); the idle sweeper still collects.
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])


def _import_server_modules() -> None:
    """uvicorn and what it loads as it starts (its HTTP protocol and lifespan modules):
    imported in the thread that runs the server, before the preload thread starts.

    The preload imports sse-starlette through the a2a SDK, and sse-starlette imports `uvicorn.main`,
    whose own first lines import `uvicorn`, whose `__init__` imports `uvicorn.main`: a cycle. Python's
    import locks are per module, so two threads entering that cycle from its two ends wait on each
    other, and the import system breaks the wait by handing one of them the half-run module (a
    replica in CI: "cannot import name 'Server' from partially initialized module
    'uvicorn.main'"). Loaded here first, the preload finds uvicorn complete, and the server's thread
    imports nothing more while the preload runs (tests/a2a/test_startup_imports.py)."""
    import uvicorn
    import uvicorn.lifespan.on
    import uvicorn.protocols.http.auto  # noqa: F401


def _preload() -> None:
    import prometheus_client  # noqa: F401  (the metrics: devagent.a2a.observe imports it when used)

    import devagent.a2a.app  # late: the a2a SDK and Starlette, in the boot thread
    import devagent.store.db  # noqa: F401  (late: SQLAlchemy, in the boot thread)

    telemetry.start()  # the OpenTelemetry SDK and exporter, when tracing is on (else nothing)


_preloading: concurrent.futures.Future[None] | None = None


def start_preload() -> concurrent.futures.Future[None]:
    """Starts importing the server's modules in a thread, once: `serve` calls it as early as it
    can, so the imports overlap the rest of its start-up (the sandbox probe, uvicorn's start)."""
    global _preloading
    if _preloading is None:
        _import_server_modules()
        future: concurrent.futures.Future[None] = concurrent.futures.Future()

        def run() -> None:
            try:
                _preload()
            except BaseException as e:  # reported where the app is built
                future.set_exception(e)
            else:
                future.set_result(None)

        threading.Thread(target=run, name="devagent-preload", daemon=True).start()
        _preloading = future
    return _preloading


class _InnerLifespan:
    """Drives an ASGI app's lifespan protocol by hand."""

    def __init__(self, app: Any) -> None:
        self._app = app
        self._to_app: asyncio.Queue[Message] = asyncio.Queue()
        self._from_app: asyncio.Queue[Message] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    async def _step(self, kind: str) -> None:
        await self._to_app.put({"type": f"lifespan.{kind}"})
        reply = await self._from_app.get()
        if reply["type"] != f"lifespan.{kind}.complete":
            raise RuntimeError(f"{kind} failed: {reply.get('message', reply['type'])}")

    async def startup(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": {}}
        self._task = asyncio.create_task(self._app(scope, self._to_app.get, self._from_app.put))
        await self._step("startup")

    async def shutdown(self) -> None:
        if self._task is None:
            return
        await self._step("shutdown")
        await self._task


class BootApp:
    def __init__(
        self,
        core_config: CoreConfig,
        settings: A2ASettings,
        version: str,
        on_fail: Callable[[], None] = lambda: None,
    ) -> None:
        self._card = CardApp(settings, version)
        self._core_config = core_config
        self._settings = settings
        self._on_fail = on_fail
        self._inner: Any = None
        self._core: AgentCore | None = None
        self._lifespan: _InnerLifespan | None = None
        self._ready: asyncio.Event | None = None
        self._loader: asyncio.Task[None] | None = None
        self._warm: asyncio.Task[None] | None = None
        self.loaded = asyncio.Event()  # set when the load ended, well or not
        self.failure: Exception | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._run_lifespan(receive, send)
            return
        if self._inner is None:
            if scope["type"] == "http" and scope["path"] in CARD_PATHS and scope["method"] in ("GET", "HEAD"):
                await self._card(scope, receive, send)
                return
            if self._ready is not None:
                await self._ready.wait()
            if self._inner is None:
                if scope["type"] == "http":
                    await send({"type": "http.response.start", "status": 503, "headers": []})
                    await send({"type": "http.response.body", "body": b"server failed to start"})
                return
        await self._inner(scope, receive, send)

    async def _run_lifespan(self, receive: Receive, send: Send) -> None:
        await receive()  # lifespan.startup
        self._ready = asyncio.Event()
        self._loader = asyncio.create_task(self._load())
        await send({"type": "lifespan.startup.complete"})
        await receive()  # lifespan.shutdown
        await self._unload()
        await send({"type": "lifespan.shutdown.complete"})

    async def _load(self) -> None:
        assert self._ready is not None
        try:
            # Imports take most of the start-up; in a thread the loop keeps answering the card.
            await asyncio.wrap_future(start_preload())
            from devagent.a2a.app import create_app  # late: the a2a SDK, loaded by the preload above

            self._core = await open_core(self._core_config)
            # A caller's own folder, made on its first use, is its commands' user's.
            self._settings.give_folder = self._core.sandboxes.give
            # Which model serves, said plainly: with none configured that is the offline demo.
            print(f"devagent: {self._core.model_explanation}", file=sys.stderr, flush=True)
            if telemetry.active():
                print(f"devagent: {telemetry.description()}", file=sys.stderr, flush=True)
            app = create_app(self._core, self._settings)
            self._lifespan = _InnerLifespan(app)
            await self._lifespan.startup()
            self._inner = app
            # The first message needs the model layer (pydantic-ai, ~1 s to import): load it now,
            # off the loop, rather than make the first client wait for it.
            self._warm = asyncio.create_task(asyncio.to_thread(_warm_core))
        except Exception as e:
            if debug_enabled():
                log.exception("the A2A server could not start")
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            self.failure = (
                e if isinstance(e, StartError) else StartError(f"the server could not start: {first}")
            )
            self._on_fail()
        finally:
            self._ready.set()
            self.loaded.set()

    def wake_polls(self) -> None:
        if self._core is not None and self._core.store is not None:
            self._core.store.workers.wake_polls()

    async def _unload(self) -> None:
        if self._loader is not None:
            await asyncio.gather(self._loader, return_exceptions=True)
        try:
            if self._lifespan is not None:
                await self._lifespan.shutdown()
        finally:
            if self._core is not None:
                await self._core.close()


async def serve(core_config: CoreConfig, settings: A2ASettings, *, log_level: str = "warning") -> None:
    """Binds, prints the URL (and a generated token), and serves until stopped."""
    settings.check_bind()
    generated = settings.ensure_token()
    sock = _bind(settings.host, settings.port)
    settings.port = sock.getsockname()[1]  # --port 0 picks a free port; the card names the real one
    settings.resolve_grpc_port()

    import uvicorn

    server: uvicorn.Server | None = None

    def fail() -> None:
        if server is not None:
            server.should_exit = True

    boot = BootApp(core_config, settings, getattr(devagent, "__version__", "0.1.0"), on_fail=fail)
    # ws="none": no A2A binding uses WebSockets, and uvicorn's "auto" imports a WebSocket library
    # at start-up when one is installed (start-up time and memory)
    config = uvicorn.Config(boot, log_level=log_level, lifespan="on", timeout_graceful_shutdown=5, ws="none")
    share_port(config, settings)  # gRPC on this port too: every interface on the card's origin
    server = _stopping_server(uvicorn, config, boot)
    settings.stopping = lambda: server is not None and server.should_exit

    async def announce() -> None:
        while not server.started:  # noqa: ASYNC110 - uvicorn offers no event to wait on
            await asyncio.sleep(0.005)
        await boot.loaded.wait()  # the database reachable and its schema ready (module docstring)
        if boot.failure is not None:
            return
        print(f"devagent A2A server listening on {settings.base_url}/", file=sys.stderr, flush=True)
        if settings.console:
            idp = settings.oidc is not None and bool(settings.oidc.client_id)
            how = "a token or the identity provider" if idp else "a token"
            print(f"web console: {settings.base_url}/ui (sign in with {how})", file=sys.stderr, flush=True)
        if settings.grpc_port:
            print(f"gRPC on {settings.grpc_address}", file=sys.stderr, flush=True)
        if generated:
            print(f"token: {generated}", file=sys.stderr, flush=True)

    announcer = asyncio.create_task(announce())
    try:
        await server.serve(sockets=[sock])
    finally:
        announcer.cancel()
    if boot.failure is not None:
        raise boot.failure


def _stopping_server(uvicorn: Any, config: Any, boot: BootApp) -> Any:
    """uvicorn's server, which on SIGTERM or SIGINT also wakes the workers' held long polls: they
    answer at once (the door sees `should_exit`), instead of holding the graceful shutdown for
    their full wait."""

    loop = asyncio.get_running_loop()

    class Server(uvicorn.Server):  # type: ignore[misc,name-defined]
        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            loop.call_soon_threadsafe(boot.wake_polls)  # from a signal handler: through the loop

    return Server(config)


def run_server(core_config: CoreConfig, settings: A2ASettings, *, log_level: str = "warning") -> None:
    asyncio.run(serve(core_config, settings, log_level=log_level))
