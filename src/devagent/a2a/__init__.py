"""The A2A adapter: an A2A v0.3 + 1.0 server implementing the development-tool extension.

`create_app(core, settings)` builds the ASGI app; `serve()` / `run_server()` run it (`devagent
serve`). Heavy modules (a2a-sdk, starlette, uvicorn) are imported only when those are called.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from devagent.a2a.settings import A2ASettings

# grpcio is installed for the gRPC binding, but a2a-sdk's `a2a.server.request_handlers` package
# imports its gRPC handler, hence grpcio (~30 ms), whenever it is imported, and tolerates that
# import failing. Marked unimportable here, the gRPC handler is loaded only when `serve
# --grpc-port` asks for it (`devagent.a2a.grpc_server`): the cold start of a
# server without gRPC does not grow (issue 11 item 4).
GRPC_HANDLER_MODULE = "a2a.server.request_handlers.grpc_handler"
sys.modules.setdefault(GRPC_HANDLER_MODULE, None)  # type: ignore[arg-type]

# a2a-sdk wraps the methods of its request handlers, event queues and dispatchers in OpenTelemetry
# spans (`a2a.utils.telemetry`): ~8 µs a call, ~60 calls a tool turn, each starting a no-op span
# through the OpenTelemetry API's proxy tracer when nothing records them. Its own switch,
# `OTEL_INSTRUMENTATION_A2A_SDK_ENABLED=false`, is read once when that module is imported but
# would leak into the agent's shell commands if devagent set it, and keeps a wrapper (~6 µs) per
# call. Instead, when nothing records a span (the variable is unset and devagent's own tracing is
# off, or the variable is set to false), the module's decorators are replaced, as it is imported,
# by ones that return the function or class undecorated (issue 14). With the variable set to
# true, or with devagent's tracing on (devagent/telemetry.py: decided before the server imports
# the SDK), the SDK's tracing is left as it is: its spans go to devagent's tracer provider, in the
# trace of the request that caused them (issue 24 item 4).
TELEMETRY_MODULE = "a2a.utils.telemetry"
TELEMETRY_SWITCH = "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED"


def _leave_untraced(module: Any) -> None:
    import os

    switch = os.environ.get(TELEMETRY_SWITCH)
    if switch is None:
        from devagent import telemetry

        recordable = telemetry.wanted()
    else:
        recordable = switch.lower() == "true"
    if recordable:
        return

    def trace_function(func: Any = None, **_: Any) -> Any:
        return func if func is not None else (lambda f: f)

    def trace_class(*_: Any, **__: Any) -> Any:
        return lambda cls: cls

    module.trace_function = trace_function
    module.trace_class = trace_class


def _untraced(run: Callable[[Any], None], module: Any) -> None:
    run(module)
    _leave_untraced(module)


# `a2a.compat.v0_3.extension_headers`, which the v0.3 server side imports, takes one type alias
# from `a2a.client.service_parameters`; importing that runs `a2a/client/__init__.py`, which loads
# the whole client, and grpcio with its reflection and tools packages, in every server, which uses
# none of it (issue 14: 163 ms under `-X importtime`; without it, and without uvicorn's WebSocket
# import, the server's peak RSS after 200 turns at once went from 166-181 to 150-172 MiB). The
# package's own code is run when something first asks it for a name it does not have yet
# (`from a2a.client import ClientConfig`, `a2a.client.create_client`): its submodules import as
# usual meanwhile, since `__path__` is set as for any package.
CLIENT_PACKAGE = "a2a.client"


def _deferred_package(run: Callable[[Any], None], module: Any) -> None:
    import threading

    lock = threading.Lock()
    loaded = False

    def __getattr__(name: str) -> Any:
        nonlocal loaded
        # dunder probes (copy, inspect, pickling) do not need the package's names
        if not (name.startswith("__") and name != "__all__"):
            with lock:  # two threads asking at once: one runs the package's code, both see it
                if not loaded:
                    loaded = True
                    module.__dict__.pop("__getattr__", None)
                    run(module)
        try:
            return module.__dict__[name]
        except KeyError:
            raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}") from None

    module.__getattr__ = __getattr__


_IMPORT_HOOKS: dict[str, Callable[[Callable[[Any], None], Any], None]] = {
    TELEMETRY_MODULE: _untraced,
    CLIENT_PACKAGE: _deferred_package,
}


class _SDKImportHooks:
    """Finds the modules of `_IMPORT_HOOKS` through the other finders and has their hook execute
    each (the hook calls the loader's own `exec_module`, or defers it); steps aside once every
    one was found."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        hook = _IMPORT_HOOKS.get(name)
        if hook is None or name in self.done:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        self.done.add(name)
        if self.done >= _IMPORT_HOOKS.keys():
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(self)
        run = loader.exec_module
        loader.exec_module = lambda module: hook(run, module)  # type: ignore[method-assign]
        return spec

    def __init__(self) -> None:
        self.done = {name for name in _IMPORT_HOOKS if name in sys.modules}


if not any(type(f) is _SDKImportHooks for f in sys.meta_path):
    sys.meta_path.insert(0, _SDKImportHooks())

if TYPE_CHECKING:
    from devagent.agent.core import AgentCore
    from devagent.agent.settings import CoreConfig

__all__ = ["A2ASettings", "create_app", "run_server", "serve"]


def create_app(core: AgentCore, settings: A2ASettings) -> Any:
    from devagent.a2a.app import create_app as _create_app

    return _create_app(core, settings)


async def serve(core_config: CoreConfig, settings: A2ASettings, *, log_level: str = "warning") -> None:
    from devagent.a2a.server import serve as _serve

    await _serve(core_config, settings, log_level=log_level)


def run_server(core_config: CoreConfig, settings: A2ASettings, *, log_level: str = "warning") -> None:
    from devagent.a2a.server import run_server as _run

    _run(core_config, settings, log_level=log_level)
