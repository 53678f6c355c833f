"""Tool names across formats: Claude Code's names and MCP's server__tool names."""
