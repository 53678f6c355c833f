"""The `tools/list` answer `devagent mcp` gives while the MCP SDK still loads (see fast.py): the
SDK's own answer for devagent's tools, stored in tools.json beside this module, so that a host
that lists the tools right after `initialize` gets them at once. tests/mcpdoor/test_stdio.py
checks that it is still the SDK's answer; after a change to a tool, write it again with
`python -m devagent.mcp.listing`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from devagent.agent.api import CoreConfig

FILE = Path(__file__).with_name("tools.json")


def stored() -> dict[str, Any]:
    """The stored `tools/list` result."""
    result: dict[str, Any] = json.loads(FILE.read_text(encoding="utf-8"))
    return result


def current() -> dict[str, Any]:
    """The `tools/list` result the SDK gives for devagent's tools now (loads the SDK), as it
    sends it on the handshake protocol versions (`initialize`: no caching fields)."""
    import asyncio

    from devagent.mcp.server import McpDoor, McpOptions, build_server  # late: the MCP SDK

    server = build_server(McpDoor(McpOptions(config=CoreConfig(), root=Path.cwd())))
    tools = asyncio.run(server.list_tools())
    return {"tools": [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in tools]}


if __name__ == "__main__":
    FILE.write_text(json.dumps(current(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
