"""What every model request of a session carries besides the messages: the system prompt and the
tool definitions, byte-identical for the whole session so that the provider's prompt cache keeps
them (that cache is most of what a long session costs)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic_ai import messages as pm

from devagent.agent.tools.memory import read_memory

if TYPE_CHECKING:
    from devagent.agent.state import ClientTool, SessionState
    from devagent.agent.tools.base import Tool, Workspace

SYSTEM_PROMPT = """You are devagent, a coding agent working in the user's workspace.
Workspace roots: {roots}
Approval mode: {mode}. This conversation started on {date}.

Work carefully and concretely: read files before you change them, prefer small exact edits
(`edit`) over rewriting whole files, run commands to check your work, and say plainly what you did.
Paths are relative to the first workspace root; you cannot leave the workspace roots.
When a tool fails, read its message and adapt. Keep answers short unless asked for detail."""


def system_prompt(state: SessionState, memory: str, memory_file: str) -> str:
    """The instructions of every request: the same for the whole session unless the user changes
    the approval mode or the memory file. The date is the session's first day, not today's."""
    text = SYSTEM_PROMPT.format(
        roots=", ".join(state.workspace_roots), mode=state.approval_mode, date=state.started_on
    )
    if memory.strip():
        text += f"\n\nProject memory ({memory_file}):\n{memory.strip()}"
    return text


def request_parameters(
    instructions: str, tools: Mapping[str, Tool], builtin: Iterable[str], client_tools: list[ClientTool]
) -> Any:
    """pydantic-ai's ModelRequestParameters: the same definitions in the same order on every
    request of the session: the built-ins in their fixed order, then the MCP servers' tools and
    the client's tools each by name (whichever server became ready first, whatever order a server
    or client listed them in)."""
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.tools import ToolDefinition

    builtin = set(builtin)
    ordered = [t for name, t in tools.items() if name in builtin]
    ordered += [tools[name] for name in sorted(tools) if name not in builtin]
    tool_defs = [
        ToolDefinition(name=t.name, description=t.description, parameters_json_schema=t.parameters)
        for t in ordered
    ] + [
        ToolDefinition(name=t.name, description=t.description, parameters_json_schema=t.parameters)
        for t in sorted(client_tools, key=lambda t: t.name)
    ]
    return ModelRequestParameters(
        function_tools=tool_defs,
        allow_text_output=True,
        instruction_parts=[pm.InstructionPart(content=instructions)],
    )


class Instructions:
    """A session's instructions and tool definitions. The memory file is read once per loaded
    session: what the save_memory tool adds reaches the prompt after `/memory refresh` or when
    the session is next loaded, so the prefix stays the same meanwhile."""

    def __init__(self, workspace: Workspace, memory_file: str) -> None:
        self.workspace = workspace
        self.memory_file = memory_file
        self._memory: str | None = None

    def read_memory(self) -> str:
        return read_memory(self.workspace, self.memory_file)

    def refresh_memory(self) -> str:
        self._memory = self.read_memory()
        return self._memory

    def parameters(self, state: SessionState, tools: Mapping[str, Tool], builtin: Iterable[str]) -> Any:
        if self._memory is None:
            self._memory = self.read_memory()
        if not state.started_on:  # a session stored before the day was kept
            state.started_on = time.strftime("%Y-%m-%d")
        text = system_prompt(state, self._memory, self.memory_file)
        return request_parameters(text, tools, builtin, state.client_tools)
