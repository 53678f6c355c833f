"""A real MCP server written with the `mcp` SDK, for the B15 tests: its source (run it as a stdio
subprocess) and a runner for its streamable-HTTP form on 127.0.0.1 (port 0)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

SERVER = textwrap.dedent(
    '''
    import os, sys
    from mcp.server.mcpserver import MCPServer, Context, Image

    mcp = MCPServer("testsrv")

    @mcp.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @mcp.tool()
    def echo(text: str) -> str:
        """Echo the text."""
        return "echo: " + text

    @mcp.tool()
    def picture() -> list:
        """A tiny picture with a caption."""
        return ["a red dot", Image(data=b"\\x89PNG\\r\\n\\x1a\\nfake", format="png")]

    @mcp.tool()
    def fail() -> str:
        """Always fails."""
        raise ValueError("the tool broke")

    @mcp.tool()
    async def grow(ctx: Context) -> str:
        """Adds the tool `extra`."""
        def extra(x: str) -> str:
            """Doubles x."""
            return x * 2
        mcp.add_tool(extra)
        try:
            await ctx.notify_tools_changed()
        except Exception:
            pass
        try:
            await ctx.session.send_tool_list_changed()
        except Exception:
            pass
        return "grown"

    @mcp.tool()
    async def slow(seconds: float) -> str:
        """Sleeps, then answers."""
        import anyio
        await anyio.sleep(seconds)
        return "slept"

    @mcp.tool()
    def environment() -> str:
        """The server's environment, one NAME=value a line."""
        return "\\n".join(f"{k}={v}" for k, v in sorted(os.environ.items()))

    @mcp.tool()
    def crash() -> str:
        """Kills the server."""
        print("boom: the server is going down", file=sys.stderr, flush=True)
        os._exit(3)

    if __name__ == "__main__":
        if len(sys.argv) > 1 and sys.argv[1] == "http":
            import socket, uvicorn
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sock.listen(128)  # before the port is announced: a client's connect waits in the backlog
            print(sock.getsockname()[1], flush=True)
            app = mcp.streamable_http_app()
            uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
        else:
            mcp.run()
    '''
)


def start_http_server(directory: Path) -> Iterator[str]:
    """Runs the server over streamable HTTP in a subprocess; yields its URL, stops it after."""
    p = directory / "mcp_server.py"
    p.write_text(SERVER)
    proc = subprocess.Popen([sys.executable, str(p), "http"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    port = int(proc.stdout.readline())
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)
