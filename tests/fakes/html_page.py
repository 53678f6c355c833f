"""A web server that is not a model server: every request gets an HTML 404 page, as a wrong base
URL meets (a proxy's or a web server's own page)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from tests.fakes.local_server import FakeHTTPServer

PAGE = (
    "<!DOCTYPE html>\n<html>\n<head><title>404 Not Found</title></head>\n<body>\n"
    "<center><h1>404 Not Found</h1></center>\n"
    + "<p>This page is not here.</p>\n" * 50
    + "</body>\n</html>\n"
)


class HtmlNotFound(FakeHTTPServer):
    url_suffix = "/v1"

    def __init__(self) -> None:
        super().__init__()
        self.requests = 0

    async def _page(self, request: Request) -> Response:
        self.requests += 1
        return HTMLResponse(PAGE, status_code=404)

    def routes(self) -> list[Route]:
        return [Route("/{path:path}", self._page, methods=["GET", "POST"])]
