"""gRPC on the A2A server's own port too, so that the card can name every interface on the
card's origin (strict clients such as Google ADK's refuse an interface on another origin).

With `--grpc-port`, each connection to the HTTP port is told apart by its first bytes: the
HTTP/2 connection preface (`PRI * HTTP/2.0`, which every gRPC client sends first) hands it to a
pass-through to the gRPC server's own port; anything else is HTTP/1.1 for uvicorn, as before.
The gRPC server keeps its own port as well (its clients by address go on working).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import uvicorn

    from devagent.a2a.settings import A2ASettings

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def share_port(config: uvicorn.Config, settings: A2ASettings) -> None:
    """With gRPC on (its port resolved), the A2A server's uvicorn `config` also takes gRPC."""
    if settings.grpc_port:
        config.http = sniffing_protocol(settings.grpc_connect_host, settings.grpc_port)


def sniffing_protocol(grpc_host: str, grpc_port: int) -> type[asyncio.Protocol]:
    """The protocol class uvicorn builds for each connection (its `http` setting): gRPC
    connections go to `grpc_host:grpc_port`, the others to uvicorn's own HTTP protocol."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol  # late: loaded with the server

    class Sniffing(asyncio.Protocol):
        def __init__(self, **uvicorn_args: Any) -> None:
            self.uvicorn_args = uvicorn_args
            self.transport: Any = None
            self.held = b""

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport

        def data_received(self, data: bytes) -> None:
            self.held += data
            if len(self.held) < len(PREFACE) and PREFACE.startswith(self.held):
                return  # not told apart yet
            if self.held.startswith(PREFACE):
                _Relay(self.transport, grpc_host, grpc_port, self.held)
            else:
                self._http().data_received(self.held)

        def eof_received(self) -> bool | None:
            return self._http().eof_received()

        def connection_lost(self, exc: Exception | None) -> None:
            pass  # before any byte came: nothing was started

        def _http(self) -> asyncio.Protocol:
            http: asyncio.Protocol = AutoHTTPProtocol(**self.uvicorn_args)
            self.transport.set_protocol(http)
            http.connection_made(self.transport)
            return http

    return Sniffing


class _Relay(asyncio.Protocol):
    """A client's gRPC connection passed through to the gRPC server's port, both ways, with the
    flow control of each side passed to the other."""

    def __init__(self, client: Any, host: str, port: int, first: bytes) -> None:
        self.client = client
        self.server: Any = None
        client.set_protocol(self)
        client.pause_reading()
        loop = asyncio.get_running_loop()
        self.opening = loop.create_task(loop.create_connection(lambda: _Back(client), host, port))
        self.opening.add_done_callback(lambda t: self._opened(t, first))

    def _opened(self, task: asyncio.Task[Any], first: bytes) -> None:
        if task.cancelled() or task.exception() is not None:
            self.client.close()
            return
        self.server = task.result()[0]
        self.server.write(first)
        if not self.client.is_closing():
            self.client.resume_reading()

    def data_received(self, data: bytes) -> None:
        self.server.write(data)

    def eof_received(self) -> bool:
        if self.server is not None and self.server.can_write_eof():
            self.server.write_eof()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        if self.server is not None:
            self.server.close()
        else:
            self.opening.cancel()

    def pause_writing(self) -> None:
        if self.server is not None:
            self.server.pause_reading()

    def resume_writing(self) -> None:
        if self.server is not None:
            self.server.resume_reading()


class _Back(asyncio.Protocol):
    """The gRPC server's side of a relayed connection."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.server: Any = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.server = transport

    def data_received(self, data: bytes) -> None:
        self.client.write(data)

    def eof_received(self) -> bool:
        if self.client.can_write_eof():
            self.client.write_eof()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self.client.close()

    def pause_writing(self) -> None:
        self.client.pause_reading()

    def resume_writing(self) -> None:
        self.client.resume_reading()
