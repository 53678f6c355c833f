"""a2a-sdk patches: its import-time costs in a server that does not use what they load, its
tracing wrappers when nothing records a span, and two v0.3 conversions.

Written for a2a-sdk 1.3.0 (`WRITTEN_FOR`, the pin in pyproject.toml).

Import hooks (`install_import_hooks`, run when `devagent.a2a` is imported, before the SDK):

- `a2a.server.request_handlers` imports its gRPC handler, hence grpcio, whenever it is imported,
  and tolerates that import failing. Marked unimportable (`defer_grpc_handler`), the handler is
  loaded only when `serve --grpc-port` asks for it (`allow_grpc_handler`): a server without
  gRPC does not load grpcio.
- `a2a.utils.telemetry` wraps the methods of the SDK's request handlers, event queues and
  dispatchers in OpenTelemetry spans: each call (~60 a tool turn) starts a no-op span through
  the API's proxy tracer when nothing records them. The SDK's own switch,
  `OTEL_INSTRUMENTATION_A2A_SDK_ENABLED=false`, is read once when that module is imported but
  would leak into the agent's shell commands if devagent set it, and keeps a wrapper per call.
  Instead, when nothing records a span (the variable unset and devagent's tracing off, or the
  variable set to false), the module's decorators are replaced, as it is imported, by ones that
  return the function or class undecorated. With the variable set to true, or with devagent's
  tracing on, the SDK's tracing is left as it is.
- `a2a.compat.v0_3.extension_headers`, which the v0.3 server side imports, takes one type alias
  from `a2a.client.service_parameters`; importing that runs `a2a/client/__init__.py`, which
  loads the whole client and grpcio with its reflection and tools packages. The package's own
  code is run when something first asks it for a name it does not have yet (`from a2a.client
  import ClientConfig`); its submodules import as usual meanwhile.

What they buy (bench/library_patches.py, on the shared 2-core test machine under a load of ~5):
importing the server's SDK modules took 585 ms of CPU and 83.7 MiB of peak RSS without the hooks,
558 ms and 72.6 MiB with them (the least of 7 fresh processes); one call through the SDK's tracing
decorator with nothing recording took 13.1 µs, 0.1 µs undecorated (~60 such calls a tool turn).

v0.3 conversions (`mend_v03_conversions`, applied when the A2A app is built): the SDK's v0.3
compatibility layer converts every event and part through module-level functions of
`a2a.compat.v0_3.conversions`, looked up per call, with no hook of its own:

- v0.3 clients get `final: true` on a status update to input-required or auth-required (the
  pause ends the stream); the SDK sets it for terminal states only.
- Protobuf `Struct` holds every number as a float: v0.3 DataParts (a client tool call's args, a
  ToolCall's input parameters) would go out as `3.0`; whole numbers go out as integers again.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

WRITTEN_FOR = "1.3.0"

GRPC_HANDLER_MODULE = "a2a.server.request_handlers.grpc_handler"
TELEMETRY_MODULE = "a2a.utils.telemetry"
TELEMETRY_SWITCH = "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED"
CLIENT_PACKAGE = "a2a.client"
CONVERSIONS_MODULE = "a2a.compat.v0_3.conversions"


# --- the gRPC handler, loaded only when asked for -------------------------------------------------


def defer_grpc_handler() -> None:
    """The SDK's gRPC handler module counts as unimportable until `allow_grpc_handler`."""
    sys.modules.setdefault(GRPC_HANDLER_MODULE, None)  # type: ignore[arg-type]


def grpc_handler_deferred() -> bool:
    """Whether the gRPC handler module counts as unimportable (`defer_grpc_handler`)."""
    return sys.modules.get(GRPC_HANDLER_MODULE, False) is None


def allow_grpc_handler() -> None:
    """The gRPC handler module imports as usual from now on."""
    if grpc_handler_deferred():
        del sys.modules[GRPC_HANDLER_MODULE]


# --- the SDK's tracing decorators, when nothing records a span -----------------------------------


def _untraced_decorators(module: Any, spans_wanted: Callable[[], bool]) -> None:
    switch = os.environ.get(TELEMETRY_SWITCH)
    recordable = spans_wanted() if switch is None else switch.lower() == "true"
    if recordable:
        return

    def trace_function(func: Any = None, **_: Any) -> Any:
        return func if func is not None else (lambda f: f)

    def trace_class(*_: Any, **__: Any) -> Any:
        return lambda cls: cls

    module.trace_function = trace_function
    module.trace_class = trace_class


# --- a package whose own code runs on the first name asked of it ---------------------------------


def _deferred_package(run: Callable[[Any], None], module: Any) -> None:
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


# --- the finder that applies both as the modules are imported ------------------------------------

_Hook = Callable[[Callable[[Any], None], Any], None]


class SDKImportHooks:
    """Finds the modules of `hooks` through the other finders and has their hook execute each
    (the hook calls the loader's own `exec_module`, or defers it); steps aside once every one
    was found."""

    def __init__(self, hooks: dict[str, _Hook]) -> None:
        self.hooks = hooks
        self.done = {name for name in hooks if name in sys.modules}

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        hook = self.hooks.get(name)
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
        if self.done >= self.hooks.keys():
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(self)
        run = loader.exec_module
        loader.exec_module = lambda module: hook(run, module)  # type: ignore[method-assign]
        return spec


def install_import_hooks(spans_wanted: Callable[[], bool]) -> None:
    """Before the SDK is imported: its gRPC handler deferred, its tracing decorators replaced
    when nothing records a span (`spans_wanted()`: whether devagent's own tracing is on, asked
    when the SDK's telemetry module is imported), its client package deferred. Once a process."""
    defer_grpc_handler()
    if any(type(f) is SDKImportHooks for f in sys.meta_path):
        return

    def untraced(run: Callable[[Any], None], module: Any) -> None:
        run(module)
        _untraced_decorators(module, spans_wanted)

    sys.meta_path.insert(0, SDKImportHooks({TELEMETRY_MODULE: untraced, CLIENT_PACKAGE: _deferred_package}))


# --- the v0.3 conversions ------------------------------------------------------------------------

_MENDED = "_devagent_mended"


def mend_v03_conversions(plain_numbers: Callable[[Any], Any]) -> None:
    """v0.3 status updates to input-required or auth-required are final; the data of v0.3
    DataParts goes through `plain_numbers` (whole floats back to ints). Once a process."""
    from a2a.compat.v0_3 import conversions
    from a2a.compat.v0_3 import types as t03

    if getattr(conversions, _MENDED, False):
        return
    original_event = conversions.to_compat_task_status_update_event
    original_part = conversions.to_compat_part
    pauses = (t03.TaskState.input_required, t03.TaskState.auth_required)

    def to_compat_task_status_update_event(core_event: Any) -> Any:
        ev = original_event(core_event)
        if ev.status.state in pauses:
            ev.final = True
        return ev

    def to_compat_part(core_part: Any) -> Any:
        part = original_part(core_part)
        if isinstance(part.root, t03.DataPart):
            part.root.data = plain_numbers(part.root.data)
        return part

    to_compat_task_status_update_event.__wrapped__ = original_event  # type: ignore[attr-defined]
    to_compat_part.__wrapped__ = original_part  # type: ignore[attr-defined]
    conversions.to_compat_task_status_update_event = to_compat_task_status_update_event
    conversions.to_compat_part = to_compat_part
    setattr(conversions, _MENDED, True)
