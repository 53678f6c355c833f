"""ASGI middleware that acts on HTTP requests only."""

from __future__ import annotations

from typing import Any


class HttpMiddleware:
    """ASGI middleware for HTTP requests: other scopes (lifespan, websockets) go to the app as
    they are, each HTTP request to `http`, which a subclass writes."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.http(scope, receive, send)

    async def http(self, scope: Any, receive: Any, send: Any) -> None:
        raise NotImplementedError
