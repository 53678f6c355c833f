"""The narrow views the core's parts get of each other: what a session hands the parts that act
on it (`SessionContext`), and what the core hands a session (`CoreServices`).

Slash commands, compaction, checkpoints, the tool-call step and traces each need a few things of
the session they work for: its state, its transcript, its settings and store, its model. They
receive this narrow view instead of the `Session` class, so none of them imports the loop (and
the loop imports them without a circle). `Session` is the one implementation.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from devagent.agent.loop.driver import Drivable

if TYPE_CHECKING:
    from pydantic_ai import messages as pm

    from devagent.agent.events import ToolCall, Usage
    from devagent.agent.hooks import Hooks
    from devagent.agent.mcp.manager import McpManager
    from devagent.agent.models.prices import Priced, PriceTable
    from devagent.agent.sandbox.base import Sandbox, SandboxProvider
    from devagent.agent.settings import CoreConfig
    from devagent.agent.state import PendingCall, SessionState
    from devagent.agent.tools.backends import ToolBackends
    from devagent.agent.tools.base import Tool, ToolContext, Workspace
    from devagent.agent.tools.language_servers import LanguageServerRegistry
    from devagent.agent.tools.processes import ProcessRegistry
    from devagent.agent.tools.saved_outputs import SavedOutputs
    from devagent.store.db import Store


class ListedCommand(Protocol):
    """A slash command as a list shows it (`commands.catalog.CommandInfo`)."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def handler(self) -> Callable[..., Awaitable[Any]] | None: ...

    @property
    def sub_commands(self) -> Sequence[ListedCommand]: ...

    def usage(self) -> str: ...


class Commands(Protocol):
    """A session's slash commands, as a list (`commands.catalog.Registry`)."""

    def list(self) -> Sequence[ListedCommand]: ...


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


class SessionContext(CoreParts, Protocol):
    id: str
    state: SessionState
    workspace: Workspace
    sandbox: Sandbox  # where its commands, hooks and checkers run (the core's provider gave it)

    @property
    def revision(self) -> int:
        """The stored revision the state is at (-1: another process changed it under a turn)."""
        ...

    @property
    def model_name(self) -> str:
        """The session's model spec, the server's default when the session names none."""
        ...

    def model(self) -> Any:
        """The pydantic-ai model of the session."""
        ...

    def context_tokens(self) -> int:
        """The context window of the session's model, in tokens."""
        ...

    def model_price(self) -> Priced | None:
        """The price of the session's model (None: unknown)."""
        ...

    async def messages(self) -> list[pm.ModelMessage]: ...

    async def replace_messages(self, messages: list[pm.ModelMessage]) -> None:
        """Replace the whole transcript and store it with the state (/clear, /compact, /restore)."""
        ...

    def write_with_next_save(self, write: Callable[[Any], Awaitable[object]]) -> None:
        """`write(connection)` runs in the transaction of the session's next save."""
        ...

    async def request_parameters(self) -> Any:
        """The instructions and tool definitions every model request of the session carries."""
        ...

    def spent(self, usage: Usage) -> None:
        """Count a model request's usage (the session's, the turn's, the caller's day)."""
        ...

    def tools(self) -> dict[str, Tool]: ...

    def tool_definitions(self) -> list[dict[str, Any]]: ...

    def tool_context(self, call: PendingCall, **kw: Any) -> ToolContext:
        """The context a tool runs a call of this session in."""
        ...

    def waiting_calls(self) -> list[ToolCall]: ...

    def commands(self) -> Commands:
        """The slash commands of the session: the built-ins and the custom ones, read once."""
        ...

    def read_memory(self) -> str: ...

    def refresh_memory(self) -> str: ...

    def restarted(self, source: str) -> None:
        """The conversation starts afresh (`clear`) or from a summary (`compact`): the
        SessionStart hooks fire again before the next prompt."""
        ...

    async def forget_saved_outputs(self) -> None:
        """Remove the saved whole outputs of the session's long commands (its conversation is
        cleared: nothing names them any more)."""
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
