"""The entry point of the core: `AgentCore` owns the store and the settings and opens sessions.

Adapters use only this module's public surface plus `devagent.agent.events`:

    core = await AgentCore.open(CoreConfig(db_url=..., default_model=...))
    session = await core.create_session(workspace_roots=[path], approval_mode="ask")
    async for event in session.advance(UserPrompt("hello")):
        ...  # TextDelta, ThoughtDelta, StepBegin, ToolCallUpdate, Notice, StatusUpdate,
             # NeedsInput (the session stored everything and stopped) or TurnEnd (always last)
    # later, maybe in another process:
    session = await core.get_session(session_id)
    async for event in session.advance(Resume(decisions=[Decision(call_id, "proceed_once")])):
        ...
    await core.close()
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devagent import telemetry
from devagent.agent.events import InputError, Usage
from devagent.agent.hooks import Hooks, load_hooks
from devagent.agent.hooks import points as hook_points
from devagent.agent.hooks.run import HookLimits
from devagent.agent.mcp.manager import McpManager
from devagent.agent.models.prices import NANO, PriceTable, usage_dollars
from devagent.agent.models.providers import context_window, create_model, default_model_spec
from devagent.agent.sandbox.base import SandboxProvider
from devagent.agent.sandbox.choose import choose_provider
from devagent.agent.settings import PERMISSIVENESS, CoreConfig, utc_day
from devagent.agent.state import APPROVAL_MODES, ClientTool, SessionState
from devagent.agent.tools.language_servers import LanguageServerRegistry
from devagent.agent.tools.processes import ProcessRegistry
from devagent.agent.tools.saved_outputs import SavedOutputs
from devagent.common import scrub
from devagent.common.late_import import late_import
from devagent.common.lru import LRU
from devagent.common.memory import IdleSweeper
from devagent.store.db import Store
from devagent.store.leases import SessionExists
from devagent.store.tables import CANCEL_CHANNEL

if TYPE_CHECKING:
    from devagent.agent.repository.remotes import RepositoryRequest
    from devagent.agent.session import Session


def _session_class() -> type[Session]:
    """The session class, imported late: pydantic-ai and the model layer. `devagent serve` opens
    its core before they load, and may be loading them in a thread right now: `late_import` waits
    for that import instead of racing it."""
    session_class: type[Session] = late_import("devagent.agent.session").Session
    return session_class


MODELS_IN_MEMORY = 32  # model objects kept per process, by spec

log = logging.getLogger(__name__)


def _hooks(config: CoreConfig) -> Hooks:
    """The hooks of the settings' hooks file (checked already when the settings were read); what
    devagent skips in it is said here, once."""
    if not config.hooks_file:
        return Hooks()
    limits = HookLimits(config.env_pass, config.command_memory_mb, config.command_processes)
    hook_set = load_hooks(config.hooks_file)
    for warning in hook_set.warnings:
        log.warning("hooks: %s", warning)
    return Hooks(hook_set, limits, data_dir=config.data_dir, allow=config.outbound_networks())


def _who(identity: str) -> str:
    return f"caller {identity!r}" if identity else "the local user"


class AgentCore:
    def __init__(self, config: CoreConfig, store: Store) -> None:
        self.config = config
        self.store = store
        # Sessions in memory. A session is kept while anything uses it (a running turn, an
        # adapter holding it) through the weak map, and the most recently used ones are also held
        # strongly; the others are dropped and loaded again from the store when asked for. So one
        # session id never has two live objects (two locks), and memory stays bounded.
        self._sessions: weakref.WeakValueDictionary[str, Session] = weakref.WeakValueDictionary()
        # (Each with when it was last used: one idle for `cache_idle_seconds` is let go too.)
        self._recent: OrderedDict[str, tuple[Session, float]] = OrderedDict()
        self.sweeper = IdleSweeper(config.cache_idle_seconds)
        self.sweeper.add(self._drop_idle)
        # One lock per session id, held while a session object is made for it (loaded or created):
        # so one id never gets two live objects, while other sessions load and start in parallel.
        self._id_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        # Model objects by spec; a client may name models (allow_client_model), so bounded:
        # one dropped is made again from its spec.
        self.models: LRU[str, Any] = LRU(MODELS_IN_MEMORY)
        self._mcp: McpManager | None = None
        # The background processes of this process's sessions (never stored: they end with it),
        # and where the whole output of long commands is saved (None: nowhere).
        self.processes = ProcessRegistry(
            config.shell_background_idle, self.running_here, config.shell_background_per_caller
        )
        # The language servers that check the sessions' writes (tools/language_servers.py).
        self.language_servers = LanguageServerRegistry()
        # Where the sessions' commands run: the sandbox a door set up for this core
        # (`setup_sandbox`), else the one the settings choose; each session gets its own.
        self.sandboxes: SandboxProvider = config.sandboxes or choose_provider(None, config, "core")[0]
        # The container backend's sweep of idle sessions' and orphans' containers (`open` starts it).
        self.sandbox_sweep: Any = None
        mib = config.shell_outputs_mb
        self.saved_outputs = SavedOutputs(config.data_dir, mib * 1024 * 1024) if mib > 0 else None
        self.usage_listeners: list[Callable[[str, Usage], None]] = []
        self.prices = PriceTable(config.prices)  # what each model's requests cost
        self.hooks = _hooks(config)
        # Secrets that error text from a provider may quote back: never shown (common/scrub.py).
        scrub.remember([config.model_api_key])
        scrub.remember_environment()
        self.default_model, self.model_explanation = self._default_model()

    def _default_model(self) -> tuple[str, str]:
        if self.config.default_model:
            return self.config.default_model, f"Model: {self.config.default_model}"
        return default_model_spec(os.environ)

    def model_for(self, spec: str) -> Any:
        """The pydantic-ai model for a spec ("" = the server default), created once per spec."""
        spec = spec or self.default_model
        model = self.models.get(spec)
        if model is None:
            model = create_model(
                spec,
                base_url=self.config.model_base_url,
                api_key=self.config.model_api_key,
                prompt_cache=self.config.prompt_cache,
            )
            self.models[spec] = model
        return model

    async def check_budget(self, identity: str, session_id: str, *, slot: bool = True) -> bool:
        """Admit a turn of a caller (a new one, or one going on after a pause) within its
        budget: its day's tokens and dollars are not spent, and one of its concurrent-turn slots
        is free (taken now, in the store, for the turn; True when a slot was taken). Else refused
        with InputError `budget_exceeded`, which every door turns into its protocol's error, and a
        log line. A subagent's turn (`slot=False`) runs within its parent's and takes no slot."""
        turns = self.config.budget_for(identity).concurrent_turns if slot else 0
        message = await self.budget_spent(identity)
        if not message and turns > 0:
            slots = self.store.slots
            if not await slots.take(identity, session_id, turns, self.config.lease_seconds):
                running = max(turns, await slots.held(identity))
                message = (
                    f"{_who(identity)} already has {running} turns running, its limit; try again when "
                    "one ends"
                )
        if message:
            log.warning("budget: refused a turn of session %s: %s", session_id, message)
            raise InputError(f"refused by the server's budget: {message}", "budget_exceeded")
        return turns > 0

    async def budget_spent(self, identity: str) -> str:
        """Why a caller may make no more model requests today ("" if it may): its tokens or its
        dollars for the day are spent."""
        budget = self.config.budget_for(identity)
        if budget.tokens_per_day <= 0 and budget.usd_per_day <= 0:
            return ""
        today = await self.store.usage(utc_day(), identity)
        renews = "; the budget renews at midnight UTC"
        used = sum(int(r["input_tokens"]) + int(r["output_tokens"]) for r in today)
        if 0 < budget.tokens_per_day <= used:
            tokens = f"{budget.tokens_per_day:,} tokens"
            return f"{_who(identity)} has used {used:,} of its {tokens} for today{renews}"
        dollars = sum(int(r["cost_nanousd"]) for r in today) / NANO
        if 0 < budget.usd_per_day <= dollars:
            return (
                f"{_who(identity)} has spent {usage_dollars(dollars)} of its "
                f"{usage_dollars(budget.usd_per_day)} for today{renews}"
            )
        return ""

    def spent(self, identity: str, usage: Usage) -> None:
        """Tell the listeners (the server's /metrics) what a caller's model request used."""
        for listener in self.usage_listeners:
            listener(identity, usage)

    def charge(self, session_id: str, usage: Usage) -> None:
        """A subagent's request, charged to the session it works for (`SessionState.subagent_of`)
        and on up: counted in that session's task, where its cap holds. That session runs the
        subagent's `task` call, so it is loaded here; if it is not, its task is not charged (the
        subagent's own cap, the parent's remainder when it started, still holds)."""
        parent = self._sessions.get(session_id)
        if parent is None:
            log.info(
                "spend of a subagent of session %s, which is not loaded here: not charged to it", session_id
            )
            return
        parent.charged(usage)

    def loaded_state(self, session_id: str) -> SessionState | None:
        """The state of a session loaded in this process, None otherwise (nothing is read)."""
        session = self._sessions.get(session_id)
        return None if session is None else session.state

    def known_model(self, spec: str) -> Any | None:
        """The model for a spec if it was created already (nothing is created)."""
        return self.models.get(spec or self.default_model)

    def context_tokens(self, spec: str) -> int:
        """The context window of a session's model: the operator's setting, else the model's."""
        if self.config.context_tokens > 0:
            return self.config.context_tokens
        return context_window(spec or self.default_model)

    @property
    def mcp(self) -> McpManager:
        """The MCP connections of this process (started lazily by sessions, closed by `close`)."""
        if self._mcp is None:
            self._mcp = McpManager(self.config)
        return self._mcp

    @classmethod
    async def open(cls, config: CoreConfig) -> AgentCore:
        if telemetry.configure(config.traces, config.trace_content) and not telemetry.active():
            await asyncio.to_thread(telemetry.start)  # the OpenTelemetry SDK, off the loop
        store = await Store.open(config.resolved_db_url())
        core = cls(config, store)
        if core.sandboxes.kind == "container":  # late: only this backend's
            from devagent.agent.sandbox.sweep import attach

            core.sandbox_sweep = await attach(core.sandboxes, store, config.sandbox_keep_seconds)
        if config.remote_agents:
            # late: the A2A client, for remote agents only; their cards are read once, now, so
            # every session of the process lists the same types
            from devagent.agent.subagents import remote as remote_agents

            await remote_agents.prefetch(config)
        if not store.is_sqlite:
            # Another replica's tasks/cancel reaches a turn running here at once (the lease's
            # heartbeat would find the request too, a third of lease_seconds later).
            listener = store.listener()
            listener.on(CANCEL_CHANNEL, core._cancel_signalled)
            await listener.start()
        return core

    def _cancel_signalled(self, session_id: str) -> None:
        session = self._sessions.get(session_id)
        if session is not None and session.busy:
            session.cancel_requested()

    async def close(self) -> None:
        await self.sweeper.close()
        for s in list(self._sessions.values()):
            await s.cancel(end_waiting=False)  # waiting sessions stay waiting, in the store
        await self.processes.close()
        await self.language_servers.close()
        if self.sandbox_sweep is not None:
            await self.sandbox_sweep.close()
        await self.sandboxes.close()
        if self._mcp is not None:
            await self._mcp.close()
        await self.store.close()
        if telemetry.active():
            # The spans still buffered, now: a server stopped by SIGTERM never runs the SDK's
            # exit hook (uvicorn ends it with the signal once it has shut down).
            await asyncio.to_thread(telemetry.flush)

    def effective_approval_mode(self, requested: str | None) -> str:
        """The mode a session gets: what a client asked for if it is no more permissive than
        the server's default mode, or the operator listed it in `allowed_approval_modes`; else the
        default. A client never grants itself more than the operator allowed."""
        default = self.config.approval_mode
        if requested in APPROVAL_MODES and (
            PERMISSIVENESS[requested] <= PERMISSIVENESS[default]
            or requested in self.config.allowed_approval_modes
        ):
            return requested
        return default

    async def create_session(
        self,
        workspace_roots: list[str | Path],
        *,
        session_id: str | None = None,
        model: str | None = None,
        approval_mode: str | None = None,
        client_tools: list[ClientTool] | None = None,
        extra: dict[str, Any] | None = None,
        mcp_servers: dict[str, dict[str, Any]] | None = None,
        leased: bool = False,
        identity: str = "",
        max_cost_usd: float = 0.0,
        repository: RepositoryRequest | None = None,
    ) -> Session:
        """A new session, stored. `leased`: a turn of it starts right away in this process, so the
        session is stored holding its lease (one write, not an insert and then a claim); a caller
        whose turn then does not start gives it up (`Session.release_unused_lease`), else another
        process's turn of it would wait for the lease until it expires.
        `max_cost_usd`: the caller's cap on each task of the session (`spending.task_cap`).
        `repository`: the session's workspace is a new folder under the first root, cloned from
        that repository at its ref (devagent/agent/repository/; InputError when refused)."""
        roots = [str(Path(r).resolve()) for r in workspace_roots]
        for r in roots:
            if not Path(r).is_dir():
                raise ValueError(f"workspace root {r} is not a directory")
        record: dict[str, Any] = {}
        if repository is not None:
            from devagent.agent.repository.clone import open_workspace  # late: only where asked for

            session_id = session_id or str(uuid.uuid4())
            record = await open_workspace(
                self.config, self.sandboxes, Path(roots[0]), repository, session_id, identity
            )
            roots = [record["workspace"]]
        state = SessionState(
            workspace_roots=roots,
            model=(model if (model and self.config.allow_client_model) else "") or "",
            approval_mode=self.effective_approval_mode(approval_mode),
            client_tools=list(client_tools or []),
            extra=dict(extra or {}),
            mcp_servers=dict(mcp_servers or {}),  # checked against policy when first used (mcp.py)
            identity=identity,
            started_on=time.strftime("%Y-%m-%d"),
            max_cost_usd=max(0.0, max_cost_usd),
            repository=record,
        )
        return await self._create(session_id, state, leased=leased)

    async def create_child(self, session_id: str, state: SessionState) -> Session:
        """A subagent's session (`devagent.agent.subagents.runner`), stored with the state its parent
        prepared (its roots, mode and tools already no wider than the parent's)."""
        return await self._create(session_id, state, leased=False)

    async def _create(self, session_id: str | None, state: SessionState, *, leased: bool) -> Session:
        sid = session_id or str(uuid.uuid4())
        # Under the id's lock, which get_session loads under: otherwise two first messages of one
        # conversation (get_session found nothing for either) made two live objects for one id,
        # whose turns then wrote the same message numbers. A session that exists already (here,
        # or stored: the insert fails) is returned as it is.
        async with self._id_lock(sid):
            if sid not in self._sessions:
                ttl = self.config.lease_seconds if leased else None
                try:
                    await self.store.create_session(sid, state.to_json(), lease_ttl=ttl)
                except SessionExists:
                    if session_id is None:
                        raise
                else:
                    session = _session_class()(self, sid, state)
                    session.start_empty()  # a new session has no transcript to load
                    if leased:
                        session.leased_now()
                    self._remember(session)
                    return session
        found = await self.get_session(sid)
        if found is None:
            raise RuntimeError(f"session {sid} could be neither created nor loaded")
        return found

    def _id_lock(self, session_id: str) -> asyncio.Lock:
        lock = self._id_locks.get(session_id)
        if lock is None:
            lock = self._id_locks[session_id] = asyncio.Lock()
        return lock

    async def get_session(self, session_id: str) -> Session | None:
        """The session with this id, from memory or from the store (after a restart)."""
        session = self._sessions.get(session_id)
        if session is not None:
            self._remember(session)
            return session
        async with self._id_lock(session_id):
            session = self._sessions.get(session_id)
            if session is not None:
                self._remember(session)
                return session
            row = await self.store.load_session(session_id)
            if row is None:
                return None
            # A turn found running may run in another process right now: it is settled (if its
            # process died) when this process takes the session's lease, never on a mere load.
            assert row[1] is not None
            session = _session_class()(self, session_id, SessionState.from_json(row[1]), row[0])
            self._remember(session)
            return session

    async def inspect(self, session_id: str) -> Session | None:
        """The session with its stored state as it is now, for a reader that reports it (A2A
        tasks/get): read again if another process changed it, and a turn whose process died
        settled as interrupted (its started calls never run again)."""
        session = await self.get_session(session_id)
        if session is None:
            return None
        await session.refresh()
        if session.state.status == "running" and not session.busy:
            row = await self.store.read_session(session_id)
            if row is not None and not row.lease_live:
                await session.recover_if_abandoned()
        return session

    async def lease_lapsed(self, session_id: str) -> bool:
        """Whether the session's lease is held by no live process although taken: its holder died
        (or stopped renewing it) before giving it up."""
        row = await self.store.read_session(session_id)
        return row is not None and bool(row.lease_owner) and not row.lease_live

    def running_here(self, session_id: str) -> bool:
        """Whether a turn of this session is starting or running in this process."""
        session = self._sessions.get(session_id)
        return session is not None and session.busy

    async def request_cancel(self, session_id: str) -> bool:
        """Cancel the session's running turn wherever it runs: here, at once; in another process,
        through the store (its lease heartbeat, or the notification channel, stops it). False when
        no turn runs anywhere."""
        session = self._sessions.get(session_id)
        if session is not None and session.busy:
            await session.cancel(end_waiting=False)
            return True
        return await self.store.request_cancel(session_id) is not None

    async def end_session(self, session_id: str, reason: str = "other") -> None:
        """A door ended the session (`reason`, as hooks read it: prompt_input_exit when the user
        left, other): its SessionEnd hooks run, then the core lets go of it (`release`)."""
        session = self._sessions.get(session_id)
        if session is not None:
            await hook_points.session_end(session, reason)
        await self.release(session_id)

    async def release(self, session_id: str) -> None:
        """Let go of a session its door closed: it leaves the recently used ones (it stays in
        memory only while something still holds it), and its background processes, its language
        servers and the servers its client named that no other session uses stop before this returns; its
        transcript for hooks is removed (written again when a hook runs). Nothing stored changes:
        it can be opened again."""
        self._recent.pop(session_id, None)
        self.hooks.forget(session_id)
        await self.processes.stop_session(session_id, "its session ended", forget=True)
        await self.language_servers.stop_session(session_id)
        if (session := self._sessions.get(session_id)) is not None and session.sandbox_owner == session_id:
            await session.sandbox.release(keep=True)  # it may be opened again
        if self._mcp is not None:
            await self._mcp.release(session_id)

    def _remember(self, session: Session) -> None:
        self._sessions[session.id] = session
        self._recent[session.id] = (session, time.monotonic())
        self._recent.move_to_end(session.id)
        while len(self._recent) > self.config.sessions_in_memory:
            self._recent.popitem(last=False)
        self.sweeper.start()

    def _drop_idle(self, cutoff: float) -> int:
        """Lets go of the idle sessions last used before `cutoff` (those still in use stay, held
        by their users); how many."""
        dropped = 0
        while self._recent and next(iter(self._recent.values()))[1] < cutoff:
            self._recent.popitem(last=False)
            dropped += 1
        return dropped
