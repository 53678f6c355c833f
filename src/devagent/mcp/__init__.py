"""The MCP door: devagent as an MCP server, so any MCP host (Claude Desktop and Code,
Cursor, VS Code, Codex CLI, Gemini CLI, ...) can hand it a coding task. Built on the official `mcp`
SDK's server (`MCPServer`), over stdio (`devagent mcp`). The tools start a session, continue it
and read sessions; permissions are asked of the host's user with MCP elicitation, or returned as
an "input required" result the host's model answers with the continue tool. Everything a session
is and waits for lives in the core's store, like every door's.
"""
