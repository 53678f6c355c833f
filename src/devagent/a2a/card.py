"""The agent card (A1): one card that v0.3 and 1.0 clients both read.

`card_json` builds it as plain JSON with no SDK import, so a starting server can answer the card
at once; `build_card` gives the SDK its protobuf form. The served JSON is the 1.0 card merged
with the v0.3 fields (`url`, `preferredTransport`, `protocolVersion`, `security`, ...), exactly
what the SDK's card route serves (a test checks they are equal).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from devagent.a2a.extension import EXTENSION_DESCRIPTION, EXTENSION_URI, EXTENSION_VERSION
from devagent.a2a.settings import A2ASettings

if TYPE_CHECKING:
    from a2a.types import AgentCard

_AUTH_DESCRIPTION = "Authorization: Bearer <token> (devagent serve --token)"
# What a message's parts may hold: text, and JSON (DataParts). A file part of another media type
# is refused with ContentTypeNotSupportedError (-32005).
INPUT_MODES = ("text/plain", "application/json")


def card_v1_json(settings: A2ASettings, version: str) -> dict[str, Any]:
    """The 1.0 AgentCard in its JSON form."""
    url = settings.base_url + "/"
    return {
        "name": settings.agent_name,
        "description": (
            "A self-hostable coding agent: reads, edits and searches code, runs shell commands "
            "with permission, and streams its work through the development-tool extension."
        ),
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
        ],
        "version": version,
        "capabilities": {
            "streaming": True,
            "pushNotifications": True,
            "extensions": [
                {
                    "uri": EXTENSION_URI,
                    "description": EXTENSION_DESCRIPTION,
                    "params": {
                        "version": EXTENSION_VERSION,
                        "methods": ["commands/get", "command/execute"],
                        "dialects": ["rfc", "coderAgent"],
                    },
                    # plain A2A clients are served too (B14 keeps A2A's rules for them)
                    "required": False,
                }
            ],
            "extendedAgentCard": True,
        },
        "securitySchemes": {
            "bearer": {"httpAuthSecurityScheme": {"description": _AUTH_DESCRIPTION, "scheme": "bearer"}}
        },
        "securityRequirements": [{"schemes": {"bearer": {}}}],
        "defaultInputModes": list(INPUT_MODES),
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [
            {
                "id": "code",
                "name": "Software development",
                "description": "Answers questions about a codebase, edits files, runs commands and tests.",
                "tags": ["coding", "development", "shell", "files"],
                "examples": ["Add a unit test for the parser", "Why does `make test` fail?"],
            },
            {
                "id": "slash-commands",
                "name": "Slash commands",
                "description": "help, init, memory, compact, clear, tools, mcp, restore, stats "
                "(commands/get, command/execute, or a message starting with '/').",
                "tags": ["commands"],
            },
        ],
    }


def card_json(settings: A2ASettings, version: str) -> dict[str, Any]:
    """The card as served: 1.0 plus the v0.3 fields."""
    card = card_v1_json(settings, version)
    card["securitySchemes"]["bearer"].update(
        {"description": _AUTH_DESCRIPTION, "scheme": "bearer", "type": "http"}
    )
    card.update(
        {
            "preferredTransport": "JSONRPC",
            "protocolVersion": "0.3",
            "security": [{"bearer": []}],
            "supportsAuthenticatedExtendedCard": True,
            "url": settings.base_url + "/",
        }
    )
    return card


def build_card(settings: A2ASettings, version: str) -> AgentCard:
    from a2a.types import AgentCard
    from google.protobuf.json_format import ParseDict  # type: ignore[import-untyped]

    card: AgentCard = ParseDict(card_v1_json(settings, version), AgentCard())
    return card
