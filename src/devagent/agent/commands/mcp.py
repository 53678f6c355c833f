"""`/mcp` and `/mcp restart`: the session's MCP servers, their state and their tools."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from devagent.agent.commands.output import Emit
from devagent.agent.events import Notice, TextDelta

if TYPE_CHECKING:
    from devagent.agent.mcp.manager import McpManager
    from devagent.agent.state import SessionState


class McpCommandSession(Protocol):
    """What the `/mcp` commands need of a session: its id and state (which name its servers)
    and the MCP connections (`Session` is the one implementation)."""

    id: str
    state: SessionState

    @property
    def mcp(self) -> McpManager: ...


async def list_servers(session: McpCommandSession, args: str, emit: Emit) -> str | None:
    """`/mcp`: the session's MCP servers, their state and their tools (starting them if needed)."""
    manager = session.mcp
    await manager.prepare(session)
    entries = manager.session_servers(session)
    if not entries:
        text = (
            "No MCP servers are configured for this session. Add [mcp_servers.NAME] tables to the "
            "settings file (--config; command/args/env/cwd or url/headers); see docs/mcp-and-checkpoints.md."
        )
        emit(TextDelta(text + "\n"))
        return None
    lines = ["MCP servers:"]
    for e in entries:
        origin = "server config" if e.origin == "config" else "session settings"
        head = f"  {e.spec.name} ({e.spec.transport}, from {origin})"
        if e.refused:
            lines.append(f"{head}: refused: {e.refused}")
            continue
        conn = e.conn
        assert conn is not None
        if conn.state == "ready":
            info = f", {conn.server_info}" if conn.server_info else ""
            lines.append(f"{head}: ready{info}: {e.spec.target()}")
            granted = e.spec.name in session.state.grants_mcp_servers
            for name, tool in conn.tool_objects.items():
                always = " [always allowed]" if granted or name in session.state.grants_tools else ""
                first = (tool.info.description or "").strip().splitlines()
                lines.append(f"    {name}{always}: {first[0] if first else tool.info.name}")
            if not conn.tool_objects:
                lines.append("    (no tools)")
        else:
            detail = f": {conn.error}" if conn.error else ""
            lines.append(f"{head}: {conn.state}{detail}: {e.spec.target()}")
    emit(TextDelta("\n".join(lines) + "\n"))
    return None


async def restart(session: McpCommandSession, args: str, emit: Emit) -> str | None:
    """`/mcp restart [NAME ...]`: start servers afresh (by default, those that failed)."""
    names = args.split()
    known = {e.spec.name for e in session.mcp.session_servers(session)}
    unknown = [n for n in names if n not in known]
    if unknown:
        emit(Notice(f"No MCP server named {', '.join(unknown)} in this session; /mcp lists them.", "error"))
        return None
    done = await session.mcp.restart(session, names)
    if not done:
        emit(TextDelta("No MCP server needed restarting.\n"))
        return None
    return await list_servers(session, "", emit)
