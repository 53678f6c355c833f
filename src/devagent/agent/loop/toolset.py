"""What a session's model is offered and what its tools get: the built-ins its family and its
place allow (the family's editing tools; `task` while it may start subagents; a subagent only what
its type gave it; a custom command's turn only what its `allowed-tools` name), the ready MCP
servers' tools, the definitions doors list, and the context a call
runs in."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from devagent.agent.events import ToolKind
from devagent.agent.loop.context import CoreSession
from devagent.agent.prompt.family import family_of, hidden_tools, output_caps
from devagent.agent.sandbox.shown import not_holding
from devagent.agent.tools.base import Delegation, MediaInput, Tool, ToolContext
from devagent.agent.tools.workspace import Workspace

if TYPE_CHECKING:
    from devagent.agent.loop.context import CoreServices
    from devagent.agent.sandbox.base import Sandbox
    from devagent.agent.state import ClientTool, PendingCall
    from devagent.agent.tools.backends import ToolBackends


class Delegates(Delegation, Protocol):
    """The session's subagents, as its tools see them (`subagents.Subagents`)."""

    def may_delegate(self) -> bool: ...

    def tool(self) -> Tool:
        """The `task` tool, listing the types the session may start."""
        ...


class Cancellable(Protocol):
    """What runs the session's turns (`turn.TurnRunner`): set when the running turn is to stop."""

    @property
    def cancelled(self) -> asyncio.Event: ...


class ToolUser(CoreSession, Protocol):
    """What choosing a session's tools and the context of its calls read of it."""

    @property
    def workspace(self) -> Workspace: ...

    @property
    def backends(self) -> ToolBackends: ...

    @property
    def sandbox(self) -> Sandbox:
        """Where the session's commands run (the core's sandbox for it)."""
        ...

    @property
    def runner(self) -> Cancellable: ...

    @property
    def subagents(self) -> Delegates: ...

    def model(self) -> Any:
        """The pydantic-ai model of the session."""
        ...


def workspace_of(
    core: CoreServices, session_id: str, roots: list[str], skill_folders: tuple[Path, ...] = ()
) -> Workspace:
    """The roots a session's tools work in, with the folder of its saved command outputs and the
    folders of the user's skills as read-only roots (not one that holds devagent's settings or
    data: a skill linked to the home folder does not open them to reading)."""
    saved = core.saved_outputs
    protected = core.config.protected_paths()
    skills = not_holding(skill_folders, protected)
    return Workspace(
        [Path(r) for r in roots],
        protected,
        read_only_roots=((saved.folder(session_id),) if saved is not None else ()) + skills,
    )


def family(session: ToolUser) -> str:
    """The family of the model the session's requests go to now, as the operator named it."""
    return family_of(session.model_name, session.config.model_family)


def offered(session: ToolUser, builtins: dict[str, Tool]) -> dict[str, Tool]:
    """The tools the core runs for `session`, by name."""
    hidden = hidden_tools(family(session), session.config.edit_tools)
    builtin = {name: tool for name, tool in builtins.items() if name not in hidden}
    if "task" in builtin:
        if session.subagents.may_delegate():
            builtin["task"] = session.subagents.tool()
        else:
            del builtin["task"]
    tools = {**session.core.mcp.tools_for(session), **builtin}
    link = session.state.subagent_of
    if link is not None:
        tools = {name: tool for name, tool in tools.items() if name in link.tools}
    scope = session.state.turn_scope  # a custom command's allowed-tools, for its turn
    if scope is not None:
        tools = {name: tool for name, tool in tools.items() if scope.allows(name)}
    return tools


def definitions(tools: dict[str, Tool], client_tools: list[ClientTool]) -> list[dict[str, Any]]:
    """The definitions a door lists: the core's tools, then the client's."""
    defs = [{**t.definition(), "kind": t.kind.value} for t in tools.values()]
    defs += [{**t.to_json(), "kind": ToolKind.CLIENT.value} for t in client_tools]
    return defs


def context_for(session: ToolUser, call: PendingCall, **kw: Any) -> ToolContext:
    """The context one call of `session` runs in."""
    return ToolContext.for_call(
        session.core.config,
        session.workspace,
        session.state,
        call,
        session.runner.cancelled,
        session.backends,
        subagents=session.subagents,
        media=media_input(session),
        session_id=session.id,
        saved_outputs=session.core.saved_outputs,
        processes=session.core.processes.of(session.id),
        language_servers=session.core.language_servers.of(session.id),
        output_caps=output_caps(family(session)),
        sandbox=session.sandbox,
        **kw,
    )


def media_input(session: ToolUser) -> MediaInput:
    """Which files the session's model can be given to look at, as its pydantic-ai profile says
    (a model that cannot be made gets none)."""
    try:
        profile = session.model().profile
    except Exception:  # the model's own request reports why it cannot be made
        return MediaInput()
    documents = profile.get("supported_document_media_types")
    return MediaInput(
        images=bool(profile.get("supports_image_input", True)),
        pdf=bool(profile.get("supports_document_input", True))
        and (documents is None or "application/pdf" in documents),
    )
