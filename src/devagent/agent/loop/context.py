"""The views a session and the core that owns it have of each other: what the core hands a
session (`CoreServices`), what the loop's helpers read of a session with its core
(`CoreSession`), and what the `task` tool needs of a subagent's session (`ChildSession`).

The parts that act on a session (slash commands, compaction, checkpoints, the tool-call step,
traces, hooks, subagents) each name the few members they use in a protocol beside them
(`CompactingSession` in compact.py, `CheckpointSession` in checkpoints.py, `CallSession` in
calls.py, `TracedTurn`/`TracedRequest` in traces.py, `HookSession` in hooks/points.py, `Parent` in
subagents/runner.py, one per command module in commands/), so none imports `Session` (and the
session imports them without a circle). `Session` is the one implementation of each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from devagent.agent.loop.driver import Drivable

if TYPE_CHECKING:
    from pydantic_ai import messages as pm

    from devagent.agent.events import ToolCall, Usage
    from devagent.agent.hooks import Hooks
    from devagent.agent.mcp.manager import McpManager
    from devagent.agent.models.prices import PriceTable
    from devagent.agent.sandbox.base import SandboxProvider
    from devagent.agent.settings import CoreConfig
    from devagent.agent.state import SessionState
    from devagent.agent.tools.backends import ToolBackends
    from devagent.agent.tools.language_servers import LanguageServerRegistry
    from devagent.agent.tools.processes import ProcessRegistry
    from devagent.agent.tools.saved_outputs import SavedOutputs
    from devagent.store.db import Store


class CoreParts(Protocol):
    """What a session shares with the core that owns it: the server's settings, its store, the
    MCP connections of this process (the session's servers among them), and the hooks."""

    @property
    def config(self) -> CoreConfig: ...

    @property
    def store(self) -> Store: ...

    @property
    def mcp(self) -> McpManager: ...

    @property
    def hooks(self) -> Hooks:
        """The operator's hooks (none unless the settings name a hooks file)."""
        ...


class CoreSession(Protocol):
    """A session with the core that owns it, as the helpers of its loop read it (`toolset.py`,
    `turn_limits.py`, `spending.py`, each asking a little more): its id, state, settings and
    model name (`Session` is the one implementation)."""

    @property
    def id(self) -> str: ...

    @property
    def state(self) -> SessionState: ...

    @property
    def config(self) -> CoreConfig: ...

    @property
    def model_name(self) -> str: ...

    @property
    def core(self) -> CoreServices: ...


class ChildSession(Drivable, Protocol):
    """What the `task` tool needs of a subagent's session (`Session` is the one implementation)."""

    @property
    def id(self) -> str: ...

    @property
    def state(self) -> SessionState: ...

    async def messages(self) -> list[pm.ModelMessage]: ...

    def use_backends(self, backends: ToolBackends) -> None: ...

    def waiting_calls(self) -> list[ToolCall]: ...


class CoreServices(CoreParts, Protocol):
    """What a session needs of the core that owns it (`AgentCore` is the one implementation)."""

    default_model: str

    @property
    def processes(self) -> ProcessRegistry:
        """The background processes of this process's sessions."""
        ...

    @property
    def language_servers(self) -> LanguageServerRegistry:
        """The language servers that check this process's sessions' writes."""
        ...

    @property
    def sandboxes(self) -> SandboxProvider:
        """Where this process's sessions run their commands (each gets its own sandbox)."""
        ...

    @property
    def saved_outputs(self) -> SavedOutputs | None:
        """Where the whole output of long commands is saved (None: nowhere)."""
        ...

    def model_for(self, spec: str) -> Any:
        """The pydantic-ai model for a spec ("" = the server default), created once per spec."""
        ...

    def known_model(self, spec: str) -> Any | None:
        """The model for a spec if it was created already (nothing is created)."""
        ...

    def context_tokens(self, spec: str) -> int: ...

    async def check_budget(self, identity: str, session_id: str, *, slot: bool = True) -> bool:
        """Admit a turn within its caller's budget (True when a turn slot was taken for it;
        `slot=False`: a subagent's turn, part of its parent's, takes none)."""
        ...

    async def create_child(self, session_id: str, state: SessionState) -> ChildSession:
        """A subagent's session, stored with the state its parent prepared."""
        ...

    async def get_session(self, session_id: str) -> ChildSession | None: ...

    async def budget_spent(self, identity: str) -> str:
        """Why a caller may make no more model requests today ("" if it may)."""
        ...

    def spent(self, identity: str, usage: Usage) -> None: ...

    @property
    def prices(self) -> PriceTable:
        """What each model's requests cost."""
        ...

    def charge(self, session_id: str, usage: Usage) -> None:
        """Count a subagent's request in the task of the session it works for (and on up)."""
        ...

    def loaded_state(self, session_id: str) -> SessionState | None:
        """The state of a session loaded in this process (None otherwise)."""
        ...
