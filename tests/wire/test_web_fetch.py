"""web_fetch through a real `devagent wire`: asked like a command (the URL in the question), run
once approved, an "approve for session" covering that origin's other pages; refused without a
question for a loopback address unless the operator allows its network."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from tests.core_helpers import call
from tests.fakes.http_reply import send_body
from tests.wire.conftest import WireProc, events, is_response, text_of


class _Pages(BaseHTTPRequestHandler):
    paths: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).paths.append(self.path)
        body = f"<html><body><h1>Page {self.path}</h1><p>Hello from the web.</p></body></html>".encode()
        send_body(self, body, "text/html; charset=utf-8")

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def pages() -> Iterator[tuple[str, list[str]]]:
    """A web server on 127.0.0.1: its base URL and the paths it was asked for."""
    handler = type("Pages", (_Pages,), {"paths": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler.paths
    server.shutdown()
    server.server_close()


def fetch_steps(base: str) -> list[dict[str, Any]]:
    return [
        {"items": [call("web_fetch", {"url": f"{base}/one"}, "f1")]},
        {"items": [call("web_fetch", {"url": f"{base}/two"}, "f2")]},
        {"items": [{"text": "read: {last_tool_results}"}]},
    ]


def test_issue30_item7_wire_web_fetch_is_asked_then_runs(
    start_wire: Callable[..., WireProc], wire_env: dict[str, str], pages: tuple[str, list[str]]
) -> None:
    base, paths = pages
    wire_env["DEVAGENT_OUTBOUND_ALLOW"] = "127.0.0.1/32"
    w = start_wire(fetch_steps(base))
    w.initialize()
    w.prompt("read the pages")
    _, req = w.until_request("ApprovalRequest")
    p = req["params"]["payload"]
    assert (p["tool_call_id"], p["sender"], p["action"]) == ("f1", "web_fetch", "fetch URL")
    assert p["description"] == f"Fetch {base}/one"
    assert paths == []  # nothing was fetched before the answer
    w.approve(req, "approve_for_session")
    msgs, resp = w.until(lambda m: is_response(m, "p1") or m.get("method") == "request", timeout=60)
    assert is_response(resp, "p1"), resp  # f2, of the same origin, was not asked
    assert resp["result"] == {"status": "finished"}
    results = {e["tool_call_id"]: e["return_value"] for e in events(msgs, "ToolResult")}
    assert results["f1"]["is_error"] is False and "# Page /one" in results["f1"]["output"]
    assert "Hello from the web." in results["f2"]["output"]
    assert paths == ["/one", "/two"]
    assert "read: " in text_of(msgs) and "# Page /two" in text_of(msgs)
    assert w.close() == 0


def test_issue30_item7_wire_web_fetch_refused_for_loopback_by_default(
    start_wire: Callable[..., WireProc], pages: tuple[str, list[str]]
) -> None:
    base, paths = pages
    w = start_wire([*fetch_steps(base)[:1], {"items": [{"text": "said: {last_tool_results}"}]}])
    w.initialize()
    w.prompt("read the page")
    msgs, resp = w.until(lambda m: is_response(m, "p1") or m.get("method") == "request", timeout=60)
    assert is_response(resp, "p1"), resp  # no question was put
    (result,) = [e["return_value"] for e in events(msgs, "ToolResult")]
    assert result["is_error"] is True
    assert "127.0.0.1 resolves to 127.0.0.1, a loopback/private address" in text_of(msgs)
    assert "outbound_allow" in text_of(msgs)
    assert paths == []
    assert w.close() == 0
