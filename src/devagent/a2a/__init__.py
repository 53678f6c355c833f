"""The A2A adapter: an A2A v0.3 + 1.0 server implementing the development-tool extension.

`create_app(core, settings)` builds the ASGI app; `serve()` / `run_server()` run it (`devagent
serve`). Heavy modules (a2a-sdk, starlette, uvicorn) are imported only when those are called.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from devagent.a2a.settings import A2ASettings

# grpcio is installed for the gRPC binding, but a2a-sdk's `a2a.server.request_handlers` package
# imports its gRPC handler, hence grpcio (~30 ms), whenever it is imported, and tolerates that
# import failing. Marked unimportable here, the gRPC handler is loaded only when `serve
# --grpc-port` asks for it (`devagent.a2a.grpc_server`): the cold start of a
# server without gRPC does not grow (issue 11 item 4).
GRPC_HANDLER_MODULE = "a2a.server.request_handlers.grpc_handler"
sys.modules.setdefault(GRPC_HANDLER_MODULE, None)  # type: ignore[arg-type]

if TYPE_CHECKING:
    from devagent.agent.core import AgentCore, CoreConfig

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
