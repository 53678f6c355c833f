"""What the terminal drives: a `Backend` runs turns and yields the core's events. `LocalBackend`
runs a core session in this process; `remote.RemoteBackend` is an A2A client of a devagent server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from devagent.agent.api import (
    CommandInfo,
    Event,
    ExecuteDetails,
    FileDiff,
    Input,
    InputError,
    StatusUpdate,
    ToolCall,
    TurnEnd,
)
from devagent.preflight import StartError, check_model
from devagent.terminal.history import PastTurn, past_turns

if TYPE_CHECKING:
    from devagent.agent.api import AgentCore, Session


@dataclass(slots=True)
class Status:
    """What the status line shows."""

    model: str = ""
    approval_mode: str = ""
    session_id: str = ""
    tokens: int | None = 0  # input + output tokens of the whole session (None: not known)
    context_tokens: int = 0  # input tokens of the last model step
    where: str = ""  # "" (this process) or the server's URL
    workspace: str = ""  # the session's workspace, where it is known


class TurnStream(Protocol):
    def __aiter__(self) -> AsyncIterator[Event]: ...

    async def cancel(self) -> None: ...

    async def aclose(self) -> None: ...


class Backend(Protocol):
    status: Status

    def start(self, inp: Input) -> TurnStream:
        """Run a turn (a prompt, a slash command line, answers); its events end with NeedsInput or
        TurnEnd. `cancel()` on the result stops it."""
        ...

    def waiting(self) -> list[ToolCall]:
        """The calls the session waits on (a resumed session paused at a permission request)."""
        ...

    async def history(self) -> list[PastTurn]:
        """The conversation so far (a resumed session's earlier turns), oldest first."""
        ...

    async def end_waiting(self) -> None:
        """Give up the calls the session waits on (Ctrl-C at a permission prompt)."""
        ...

    def can_edit(self, call: ToolCall) -> bool:
        """Whether "edit first" can change this call's content or command."""
        ...

    def commands(self) -> list[CommandInfo]:
        """The slash commands, for completion (their names, aliases, descriptions, sub-commands)."""
        ...

    async def set_approval_mode(self, mode: str) -> str | None:
        """Change the session's approval mode; None when done, else why not."""
        ...

    def observe(self, ev: Event) -> None:
        """Keep the status current from an event of a turn."""
        ...

    async def close(self) -> None: ...


class LocalBackend:
    """A core session in this process."""

    def __init__(self, core: AgentCore, session: Session) -> None:
        self.core = core
        self.session = session
        roots = session.state.workspace_roots
        self.status = Status(session_id=session.id, workspace=str(roots[0]) if roots else "")
        self._sync()

    def _sync(self) -> None:
        st = self.session.state
        self.status.model = st.model or self.core.default_model
        self.status.approval_mode = st.approval_mode
        self.status.tokens = st.usage.input_tokens + st.usage.output_tokens

    def start(self, inp: Input) -> TurnStream:
        return self.session.advance(inp)

    def waiting(self) -> list[ToolCall]:
        if self.session.state.status != "awaiting_input":
            return []
        return self.session.waiting_calls()

    async def end_waiting(self) -> None:
        await self.session.cancel()

    async def history(self) -> list[PastTurn]:
        return await past_turns(self.session)

    def can_edit(self, call: ToolCall) -> bool:
        return call.confirmation is not None and isinstance(
            call.confirmation.details, FileDiff | ExecuteDetails
        )

    def commands(self) -> list[CommandInfo]:
        return self.session.commands().list()

    async def set_approval_mode(self, mode: str) -> str | None:
        try:  # the terminal user is the operator of a local session: any mode
            await self.session.set_approval_mode(mode)
        except InputError as e:
            return str(e)
        self._sync()
        return None

    def observe(self, ev: Event) -> None:
        if isinstance(ev, StatusUpdate):
            self.status.context_tokens = ev.context_tokens
        if isinstance(ev, StatusUpdate | TurnEnd):
            self._sync()
            if isinstance(ev, StatusUpdate):  # the step's usage is added to the state after the event
                self.status.tokens = max(
                    self.status.tokens or 0,
                    self.session.state.usage.input_tokens + self.session.state.usage.output_tokens,
                )

    async def close(self) -> None:
        await self.core.end_session(self.session.id, "prompt_input_exit")
        await self.core.close()


# --- opening a local session ---------------------------------------------------------------------


async def latest_session_id(core: AgentCore, workspace: Path) -> str | None:
    """The id of the session last active in this workspace (its first root) that has a prompt, or
    None: one opened and left at once has nothing to continue."""
    want = str(workspace.resolve())
    for sid, state, _updated in await core.store.list_sessions(limit=None):
        roots = state.get("workspace_roots") or []
        if roots and roots[0] == want and state.get("title"):  # (a session never prompted is empty)
            return sid
    return None


# Where the server of a terminal session's model is (its base URL; never a key, which comes from
# the environment): kept in the session's state (`extra`), so that a resumed session reaches its
# model there again without `--base-url`.
BASE_URL_KEY = "model_base_url"


async def open_local_session(
    core: AgentCore,
    config: Any,
    workspace: Path,
    session_id: str | None,
    model: str | None,
    *,
    base_url: str | None = None,
    unknown_hint: str = "'devagent sessions' lists them",
    repository: Any = None,
) -> tuple[Session, bool]:
    """The session to talk to: `session_id`'s (on its own stored model and base URL unless
    `model` or `base_url`, the flags, are given), or a new one in `workspace`. Returns it and
    whether it was resumed. Raises StartError, saying `unknown_hint` (where to find an id) when no
    session has that id."""
    if session_id:
        s = await core.get_session(session_id)
        if s is None:
            raise StartError(f"no stored session {session_id!r} ({unknown_hint})", 2)
        if model:  # --model given: the session goes on with it
            s.state.model = model
            _keep_base_url(s.state.extra, model, config)
            await s.save_state()
        elif s.state.model:  # else on the model the session was started with, where it was
            config.default_model = s.state.model
            stored = s.state.extra.get(BASE_URL_KEY)
            if base_url is None and isinstance(stored, str) and stored:
                config.model_base_url = stored
            try:
                check_model(config)
            except StartError as e:
                e.session_id = s.id
                raise
        return s, True
    extra = _keep_base_url({}, core.default_model, config)
    s = await core.create_session(
        [workspace],
        approval_mode=config.approval_mode,
        model=core.default_model,
        extra=extra,
        repository=repository,  # a new folder under `workspace`, cloned (RepositoryRequest)
    )
    return s, False


def _keep_base_url(extra: dict[str, Any], spec: str, config: Any) -> dict[str, Any]:
    """`extra` holding the base URL the model `spec` is reached at with these settings (the
    flag, the environment or the provider's default), or none when it has none or the URL holds
    credentials (`user:password@`), which are never stored."""
    from urllib.parse import urlsplit

    from devagent.agent.api import (
        ModelConfigError,  # late: as check_model does
        check_model_spec,
    )

    try:
        url = check_model_spec(spec, base_url=config.model_base_url, api_key=config.model_api_key)[3]
    except ModelConfigError:
        url = None
    if url and "@" not in urlsplit(url).netloc:
        extra[BASE_URL_KEY] = url
    else:
        extra.pop(BASE_URL_KEY, None)
    return extra
