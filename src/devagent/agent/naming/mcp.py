"""How MCP tools are named to the model: `server__tool`. Kept apart from `mcp.py` (the
connections) so the approval policy can read a name without importing the MCP machinery."""

from __future__ import annotations

SEPARATOR = "__"


def server_of(name: str) -> str:
    """The server part of an MCP tool name (server names never contain the separator)."""
    return name.split(SEPARATOR, 1)[0]
