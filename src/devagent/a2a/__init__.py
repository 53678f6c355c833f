"""The A2A adapter: an A2A v0.3 + 1.0 server implementing the development-tool extension.

`create_app(core, settings)` builds the ASGI app; `serve()` / `run_server()` run it (`devagent
serve`). Heavy modules (a2a-sdk, starlette, uvicorn) are imported only when those are called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from devagent import telemetry
from devagent.a2a.server import run_server, serve
from devagent.a2a.settings import A2ASettings
from devagent.patches import a2a_sdk


def _spans_wanted() -> bool:
    return telemetry.wanted()


# Before the SDK is imported: what a server without gRPC or the SDK's client does not load, and
# the SDK's tracing wrappers off when nothing records a span (devagent/patches/a2a_sdk.py).
a2a_sdk.install_import_hooks(_spans_wanted)

if TYPE_CHECKING:
    from devagent.agent.api import AgentCore

__all__ = ["A2ASettings", "create_app", "run_server", "serve"]


def create_app(core: AgentCore, settings: A2ASettings) -> Any:
    from devagent.a2a.app import create_app as _create_app  # late: the a2a SDK, Starlette, SQLAlchemy

    return _create_app(core, settings)
