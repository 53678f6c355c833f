"""The agent card (A1): one card that v0.3 and 1.0 clients both read."""

from __future__ import annotations

from typing import TYPE_CHECKING

from devagent.a2a.extension import EXTENSION_DESCRIPTION, EXTENSION_URI, EXTENSION_VERSION
from devagent.a2a.settings import A2ASettings

if TYPE_CHECKING:
    from a2a.types import AgentCard


def build_card(settings: A2ASettings, version: str) -> AgentCard:
    from a2a.types import (
        AgentCapabilities,
        AgentCard,
        AgentExtension,
        AgentInterface,
        AgentSkill,
        HTTPAuthSecurityScheme,
        SecurityRequirement,
        SecurityScheme,
        StringList,
    )

    url = settings.base_url + "/"
    ext = AgentExtension(
        uri=EXTENSION_URI,
        description=EXTENSION_DESCRIPTION,
        required=False,  # plain A2A clients are served too (B14 keeps A2A's rules for them)
        params={
            "version": EXTENSION_VERSION,
            "methods": ["commands/get", "command/execute"],
            "dialects": ["rfc", "coderAgent"],
        },
    )
    return AgentCard(
        name=settings.agent_name,
        description=(
            "A self-hostable coding agent: reads, edits and searches code, runs shell commands "
            "with permission, and streams its work through the development-tool extension."
        ),
        version=version,
        supported_interfaces=[
            AgentInterface(protocol_binding="JSONRPC", protocol_version="1.0", url=url),
            AgentInterface(protocol_binding="JSONRPC", protocol_version="0.3", url=url),
        ],
        capabilities=AgentCapabilities(
            streaming=True, push_notifications=True, extended_agent_card=True, extensions=[ext]
        ),
        security_schemes={
            "bearer": SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="bearer", description="Authorization: Bearer <token> (devagent serve --token)"
                )
            )
        },
        security_requirements=[SecurityRequirement(schemes={"bearer": StringList(list=[])})],
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[
            AgentSkill(
                id="code",
                name="Software development",
                description="Answers questions about a codebase, edits files, runs commands and tests.",
                tags=["coding", "development", "shell", "files"],
                examples=["Add a unit test for the parser", "Why does `make test` fail?"],
            ),
            AgentSkill(
                id="slash-commands",
                name="Slash commands",
                description="help, init, memory, compact, clear, tools, mcp, restore, stats "
                "(commands/get, command/execute, or a message starting with '/').",
                tags=["commands"],
            ),
        ],
    )
