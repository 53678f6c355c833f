"""A body sent from a test HTTP server's handler (http.server), with its length."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler


def send_body(handler: BaseHTTPRequestHandler, body: bytes, content_type: str, status: int = 200) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)
