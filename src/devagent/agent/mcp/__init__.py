"""The MCP client: the operator's and clients' MCP servers and their tools."""
