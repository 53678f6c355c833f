"""The ACP agent: the SDK's `Agent` interface over the core. Translation only.

One ACP session is one core session (the same id, stored like every other door's). A prompt is
one or more `Session.advance` calls: core events become `session/update`s (`translate.py`), a
call that needs permission becomes `session/request_permission` and the chosen option the core's
`Decision`, and the turn goes on until it ends (`stopReason`). `session/cancel` goes to the core's
turn handle. A stored session is opened again with `session/load` (its history replayed first) or
`session/resume` (without it); `session/close` cancels its turn and lets go of what this process
holds for it; `session/list` pages through the stored sessions the editor may open
(`listing.py`). When the client can read and write files, or run terminals, the session's file
tools and shell commands run through the client (`backends.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp import PROTOCOL_VERSION, RequestError
from acp.agent.connection import AgentSideConnection
from acp.schema import (
    CloseSessionResponse,
    ElicitationFormSessionMode,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ResumeSessionResponse,
    SessionNotification,
    SetSessionModeResponse,
    ToolCallUpdate,
)
from acp.schema import Usage as AcpUsage

from devagent import __version__, telemetry
from devagent.acp import translate as t
from devagent.acp.backends import backends_for
from devagent.acp.listing import ListingError, page, visible
from devagent.acp.options import AcpOptions
from devagent.acp.replay import history
from devagent.agent.api import (
    Decision,
    Door,
    Event,
    InputError,
    Notice,
    Paused,
    QuestionDetails,
    StatusUpdate,
    StepBegin,
    TextDelta,
    ThoughtDelta,
    ToolBackends,
    ToolCall,
    ToolCallStatus,
    TurnDriver,
    TurnEnd,
    UserPrompt,
    check_repository,
    parse_repository,
    repository_result,
    requested_cap,
)
from devagent.agent.api import (
    ToolCallUpdate as CoreToolCallUpdate,
)
from devagent.common.waiting import done_or_set
from devagent.preflight import open_core

if TYPE_CHECKING:
    from devagent.agent.api import AgentCore, Session

log = logging.getLogger("devagent.acp")

assert PROTOCOL_VERSION == t.PROTOCOL_VERSION, "the SDK speaks another ACP version than translate.py"


@dataclass(eq=False)
class _Open:
    """An ACP session this connection has open."""

    session: Session
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one prompt at a time, in order
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    driver: TurnDriver | None = None  # the prompt's turn, while it runs
    seen: set[str] = field(default_factory=set)  # call ids announced with `tool_call`
    terminals: dict[str, str] = field(default_factory=dict)  # call id -> the client's terminal id
    closed: bool = False  # session/close: no prompt runs on it any more


class DevagentAgent:
    """The SDK calls these methods with validated params; they answer with the SDK's models."""

    def __init__(self, opts: AcpOptions) -> None:
        self.opts = opts
        self.conn: AgentSideConnection | None = None
        self.client_caps: dict[str, Any] = {}
        self.core: AgentCore | None = None
        self._core_lock = asyncio.Lock()
        self.open: dict[str, _Open] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._resumed_flag_session = False
        self.transport: Any = None  # the connection's stdio transport (server._LineTransport)

    def on_connect(self, conn: AgentSideConnection) -> None:
        self.conn = conn

    # --- plumbing ------------------------------------------------------------------------

    async def _core(self) -> AgentCore:
        async with self._core_lock:
            if self.core is None:
                self.core = await open_core(self.opts.config)
                if not self.opts.model:
                    level = logging.WARNING if self.core.default_model == "demo" else logging.INFO
                    log.log(level, "%s", self.core.model_explanation)
            return self.core

    async def _send(self, session_id: str, update: dict[str, Any]) -> None:
        assert self.conn is not None
        if session_id not in self.open:
            return  # closed: the client hears nothing more of it
        note = SessionNotification.model_validate({"sessionId": session_id, "update": update})
        with contextlib.suppress(ConnectionError):
            await self.conn.session_update(session_id=session_id, update=note.update)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _get(self, session_id: str) -> _Open:
        o = self.open.get(session_id)
        if o is None:
            raise _invalid(f"no open session {session_id}", sessionId=session_id)
        return o

    async def aclose(self) -> None:
        """After the connection closed: a running turn is stopped (its state is stored); a turn
        that waits for permission stays waiting in the store, for a later session/load."""
        for o in self.open.values():
            if o.driver is not None and o.driver.running:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(o.driver.cancel(), 10)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.core is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.core.close(), 10)

    # --- initialize ----------------------------------------------------------------------

    async def initialize(
        self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **kw: Any
    ) -> InitializeResponse:
        if client_capabilities is not None:
            self.client_caps = client_capabilities.model_dump(by_alias=True, exclude_none=True)
        result = t.initialize_result(mcp_http=self.opts.config.mcp_client_http, version=__version__)
        result["protocolVersion"] = t.negotiate(protocol_version)
        return InitializeResponse.model_validate(result)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "devagent/initialized":  # the fast path answered `initialize` (server.py)
            caps = params.get("clientCapabilities")
            self.client_caps = caps if isinstance(caps, dict) else {}

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise _error(-32601, f"_{method}", method=f"_{method}")

    async def authenticate(self, method_id: str, **kw: Any) -> None:
        # No auth methods are offered: nothing to authenticate.
        raise _invalid("devagent offers no auth methods", methodId=method_id)

    # --- sessions ------------------------------------------------------------------------

    def _root(self, cwd: str) -> Path:
        if self.opts.work_dir is not None:
            return self.opts.work_dir
        p = Path(cwd)
        if not p.is_absolute() or not p.is_dir():
            raise _invalid("cwd must be an existing absolute directory", cwd=cwd)
        return p

    def _allowed_modes(self, core: AgentCore) -> list[str]:
        return [m for m in t.MODES if core.effective_approval_mode(m) == m]

    def _modes(self, core: AgentCore, session: Session) -> Any:
        from acp.schema import SessionModeState

        allowed = self._allowed_modes(core)
        current = session.state.approval_mode
        if current not in allowed:
            allowed.append(current)
        return SessionModeState.model_validate(t.modes(current, allowed))

    async def new_session(
        self, cwd: str, mcp_servers: list[Any] | None = None, **kw: Any
    ) -> NewSessionResponse:
        core = await self._core()
        root = self._root(cwd)
        cap = _cap(kw)  # `_meta.max_cost_usd`: the editor's cap on each turn's cost
        repository = _repository(core, kw)  # `_meta.repository`: {url, ref, push?, setup?}
        session = None
        if self.opts.session_id and not self._resumed_flag_session:
            # `--session ID`: the first session/new continues that stored session.
            self._resumed_flag_session = True
            session = await core.get_session(self.opts.session_id)
        if session is None:
            session = await core.create_session(
                [root],
                session_id=self.opts.session_id if self.opts.session_id and not self.open else None,
                model=self.opts.model,
                approval_mode=None,
                mcp_servers=_mcp_servers(mcp_servers),
                max_cost_usd=cap or 0.0,
                repository=repository,
            )
            log.info("new session %s in %s", session.id, root)
        o = self._attach(session)
        self._spawn(self._after_open(o))
        return NewSessionResponse(session_id=session.id, modes=self._modes(core, session))

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None, **kw: Any
    ) -> LoadSessionResponse:
        o = await self._reopen(session_id, mcp_servers)
        # The history is replayed before the answer (the protocol's rule), then the commands and,
        # for a session that waits for permission, the request again.
        await self._replay(o)
        self._spawn(self._after_open(o))
        return LoadSessionResponse(modes=self._modes(await self._core(), o.session))

    async def resume_session(
        self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None, **kw: Any
    ) -> ResumeSessionResponse:
        """As session/load without the history: the client shows the conversation it has. The
        commands, the plan and a pending permission request follow the answer as after a load."""
        o = await self._reopen(session_id, mcp_servers)
        self._spawn(self._after_open(o))
        return ResumeSessionResponse(modes=self._modes(await self._core(), o.session))

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kw: Any
    ) -> ListSessionsResponse:
        """The stored sessions this editor may open, most recently active first, a page at a time."""
        core = await self._core()
        sessions = visible(await core.store.list_sessions(None), self.opts.work_dir)
        try:
            result = page(sessions, cwd=cwd, cursor=cursor, size=self.opts.list_page_size)
        except ListingError as e:
            raise _invalid(str(e), cwd=cwd, cursor=cursor) from None
        return ListSessionsResponse.model_validate(result)

    async def _reopen(self, session_id: str, mcp_servers: list[Any] | None) -> _Open:
        """A stored session, open on this connection (from the store after a restart)."""
        core = await self._core()
        session = await core.get_session(session_id)
        if session is None:
            raise _error(-32002, f"no stored session {session_id}", uri=session_id)
        servers = _mcp_servers(mcp_servers)
        if servers and servers != session.state.mcp_servers:
            log.info("session %s: the client's MCP servers are not changed on reopening", session_id)
        return self._attach(session)

    async def close_session(self, session_id: str, **kw: Any) -> CloseSessionResponse:
        """Its turn is cancelled as by session/cancel (a permission request it waits for
        included) and ends before the answer; then the connection forgets the session, the
        editor stops being its backend and the core lets go of it (MCP servers only it used
        stop). Its stored state stays: session/load or session/resume opens it again. A session
        that is not open is closed already."""
        o = self.open.get(session_id)
        if o is None:
            return CloseSessionResponse()
        o.closed = True
        await self.cancel(session_id)
        async with o.lock:  # the prompt in flight has ended; one waiting for its turn will not run
            if self.open.get(session_id) is o:
                del self.open[session_id]
        if session_id not in self.open:
            o.session.use_backends(ToolBackends())
            await (await self._core()).end_session(session_id)
        log.info("session %s closed", session_id)
        return CloseSessionResponse()

    def _attach(self, session: Session) -> _Open:
        o = self.open.get(session.id)
        if o is None or o.session is not session or o.closed:
            o = self.open[session.id] = _Open(session)
        session.use_backends(backends_for(self, session.id, session.workspace, o.terminals))
        return o

    async def _after_open(self, o: _Open) -> None:
        await self._send(o.session.id, t.available_commands(o.session.commands().list()))
        if o.session.state.todos:
            await self._send(o.session.id, t.plan(o.session.state.todos))
        if o.session.state.status == "awaiting_input":
            # A turn stored waiting for permission (before a restart): ask again; the answer
            # continues it, its updates stream as for a prompt (no prompt to answer).
            async with o.lock:
                waiting = [] if o.closed else o.session.waiting_calls()
                if waiting:
                    o.cancelled.clear()
                    with contextlib.suppress(Exception):
                        await self._drive(o, None, waiting)

    async def _replay(self, o: _Open) -> None:
        root = o.session.workspace.primary
        for update in history(await o.session.messages(), o.session, root):
            await self._send(o.session.id, update)
            if update.get("sessionUpdate") == "tool_call":
                o.seen.add(update["toolCallId"])

    async def set_session_mode(self, session_id: str, mode_id: str, **kw: Any) -> SetSessionModeResponse:
        o = self._get(session_id)
        core = await self._core()
        if mode_id not in t.MODES or core.effective_approval_mode(mode_id) != mode_id:
            allowed = self._allowed_modes(core)
            raise _invalid(
                f"{mode_id} is not a mode this server allows ({', '.join(allowed)})",
                modeId=mode_id,
                allowed=allowed,
            )
        await o.session.set_approval_mode(mode_id)
        await self._send(session_id, {"sessionUpdate": "current_mode_update", "currentModeId": mode_id})
        return SetSessionModeResponse()

    # --- prompt and cancel ---------------------------------------------------------------

    async def prompt(self, session_id: str, prompt: list[Any], **kw: Any) -> PromptResponse:
        o = self._get(session_id)
        text, refused = t.prompt_text([b.model_dump(by_alias=True, exclude_none=True) for b in prompt])
        if refused:
            raise _invalid(f"devagent takes text prompts; not {', '.join(sorted(set(refused)))}")
        if not text.strip():
            raise _invalid("the prompt is empty")
        cap = _cap(kw)
        async with o.lock:
            if o.closed:
                raise _error(-32800, "the session was closed before the prompt ran")
            o.cancelled.clear()
            titled = o.session.state.title
            try:
                # `_meta` keys come as keyword arguments: an editor inside a trace sends its
                # `traceparent` there, and the turn joins that trace
                with telemetry.caller(kw):
                    end = await self._drive(o, UserPrompt(text, cap), None)
            except InputError as e:
                raise _invalid(str(e)) from e
            except ConnectionError as e:
                # The editor went away (stdin closed) while the turn waited for it, a permission
                # request most likely: that stays stored for a later session/load. Nothing can be
                # answered; this ends the request quietly (the SDK logs other exceptions).
                if not self.editor_gone():
                    raise
                log.info("session %s: the editor closed the connection during the turn", session_id)
                raise _error(-32603, "the editor closed the connection") from e
            if o.session.state.title != titled:  # the first prompt named it: the editor's history shows it
                await self._send(session_id, t.session_title(o.session.state.title))
        reason = t.stop_reason(end)
        if reason is None:
            raise _error(-32603, end.error or "the model failed", details=end.error or "the model failed")
        usage = t.usage(end.usage)
        return PromptResponse(
            stop_reason=reason,  # type: ignore[arg-type]
            usage=None if usage is None else AcpUsage.model_validate(usage),
            field_meta=await _repository_meta(o.session) if reason == "end_turn" else None,
        )

    async def cancel(self, session_id: str, **kw: Any) -> None:
        o = self.open.get(session_id)
        if o is None:
            return
        o.cancelled.set()
        if o.driver is not None:  # stops the turn, a running command or a question included
            await o.driver.cancel()

    async def _drive(self, o: _Open, first: UserPrompt | None, waiting: list[ToolCall] | None) -> TurnEnd:
        o.driver = driver = TurnDriver(o.session, _AcpDoor(self, o))
        try:
            outcome = await driver.run(first, waiting)
        finally:
            o.driver = None
        if isinstance(outcome, Paused):  # the core asks ACP for permissions only
            return TurnEnd("error", error="the turn waits for a client tool, which ACP cannot run")
        return outcome

    async def _ask(self, o: _Open, call: ToolCall) -> Decision | None:
        """`session/request_permission` for one call (a question: an elicitation where the client
        takes one); None when the turn was cancelled first."""
        assert self.conn is not None
        root = o.session.workspace.primary
        if call.id not in o.seen:
            o.seen.add(call.id)
            await self._send(o.session.id, t.tool_call_update(call, root, first=True))
        q = call.question
        if q is not None and self.client_offers("elicitation", "form"):
            return await self._elicit(o, call, q)
        if q is not None and not q.choices:  # a permission request takes no typed answer
            return Decision(call.id, "cancel", feedback=CANNOT_TYPE)
        tool_call, options = t.permission_request(call, root)
        answer = await self._client_answer(
            o,
            call,
            self.conn.request_permission(
                session_id=o.session.id,
                tool_call=ToolCallUpdate.model_validate(tool_call),
                options=[PermissionOption.model_validate(x) for x in options],
            ),
        )
        if answer is None or isinstance(answer, Decision):
            return answer
        outcome = answer.outcome
        if getattr(outcome, "outcome", "") != "selected":
            o.cancelled.set()  # the client cancelled the prompt
            return None
        option = outcome.option_id
        offered = call.option_ids()
        if option not in offered:
            log.warning("the client chose option %r, which was not offered; taken as a refusal", option)
            option = "cancel"
        return Decision(call.id, option)

    async def _elicit(self, o: _Open, call: ToolCall, q: QuestionDetails) -> Decision | None:
        """A question as an elicitation form (its choices, a text field): the answer given, or the
        question dismissed (declined, cancelled, left empty); None when the turn was cancelled."""
        assert self.conn is not None
        mode = ElicitationFormSessionMode.model_validate(
            {"sessionId": o.session.id, "toolCallId": call.id, "requestedSchema": t.question_form(q)}
        )
        form = self.conn.create_elicitation(message=q.question, mode=mode)
        answer = await self._client_answer(o, call, form)
        if answer is None or isinstance(answer, Decision):
            return answer
        got = t.question_answer(q, getattr(answer, "content", None)) if answer.action == "accept" else None
        if got is None:
            return Decision(call.id, "cancel")
        return Decision(call.id, got[0], new_content=got[1])

    async def _client_answer(self, o: _Open, call: ToolCall, request: Any) -> Any:
        """A request to the client about a waiting call, waited for until it is answered or the
        prompt is cancelled: the client's answer; a refusal of the call when the client answered
        with an error; None when the prompt was cancelled first (the client answers the request
        `cancelled` on its side of session/cancel; that answer is not waited for)."""
        ask: asyncio.Future[Any] = asyncio.ensure_future(request)
        await done_or_set(ask, o.cancelled)
        if not ask.done():
            ask.add_done_callback(lambda f: f.cancelled() or f.exception())
            return None
        try:
            return ask.result()
        except RequestError as e:
            log.info("the client answered its request about %s with an error: %s", call.name, e)
            return Decision(call.id, "cancel", feedback=str(e))

    async def _emit(self, o: _Open, ev: Any) -> None:
        sid = o.session.id
        if isinstance(ev, TextDelta):
            if ev.text:
                await self._send(sid, t.text_chunk("agent_message_chunk", ev.text))
        elif isinstance(ev, ThoughtDelta):
            if ev.text:
                await self._send(sid, t.text_chunk("agent_thought_chunk", ev.text))
        elif isinstance(ev, CoreToolCallUpdate):
            call = ev.call
            first = call.id not in o.seen
            o.seen.add(call.id)
            update = t.tool_call_update(
                call, o.session.workspace.primary, first=first, terminal_id=o.terminals.get(call.id)
            )
            await self._send(sid, update)
            if call.name == "write_todos" and call.status is ToolCallStatus.SUCCEEDED:
                await self._send(sid, t.plan(o.session.state.todos))
        elif isinstance(ev, Notice):
            text = ev.text if ev.text.endswith("\n") else ev.text + "\n"
            await self._send(sid, t.text_chunk("agent_message_chunk", text))
        elif isinstance(ev, StepBegin | StatusUpdate):
            pass  # ACP has no step events; the turn's usage goes with the prompt's response

    # --- the client's side, for backends.py ------------------------------------------------

    def editor_gone(self) -> bool:
        """The editor closed devagent's stdin (or a signal stopped the server)."""
        return bool(getattr(self.transport, "eof", False))

    def client_can(self, *path: str) -> bool:
        return self._client_cap(path) is True

    def client_offers(self, *path: str) -> bool:
        """A capability the client declares with an object (`elicitation.form: {}`)."""
        return isinstance(self._client_cap(path), dict)

    def _client_cap(self, path: tuple[str, ...]) -> Any:
        node: Any = self.client_caps
        for key in path:
            if not isinstance(node, dict):
                return None
            node = node.get(key)
        return node


# What the model reads when a question takes only a typed answer and the editor cannot take one.
CANNOT_TYPE = (
    "the user's editor cannot take a typed answer; ask again with choices, or say in your answer "
    "what you need to know"
)


def _error(code: int, reason: str, **data: Any) -> RequestError:
    """The SDK's error with what went wrong in `message` (editors show it; `data` is kept for
    programs): "Invalid params: cwd must be an existing absolute directory"."""
    return RequestError(code, t.error_message(code, reason), {**data, "reason": reason})


def _cap(meta: dict[str, Any]) -> float | None:
    """A request's `_meta.max_cost_usd` (its keys come as keyword arguments): the editor's cap on
    each turn's cost in USD, None when not given."""
    try:
        return requested_cap(meta.get("max_cost_usd"))
    except ValueError as e:
        raise _invalid(str(e), max_cost_usd=meta.get("max_cost_usd")) from None


def _repository(core: AgentCore, meta: dict[str, Any]) -> Any:
    """A session/new's `_meta.repository` (its keys come as keyword arguments), checked against
    the operator's allow-list before anything is cloned; None when not given."""
    try:
        repository = parse_repository(meta.get("repository"))
        if repository is not None:
            check_repository(core.config, repository)
    except ValueError as e:  # InputError is one
        raise _invalid(str(e), repository=meta.get("repository")) from None
    return repository


async def _repository_meta(session: Session) -> dict[str, Any] | None:
    """A repository session's result after a turn that ended: `_meta.devagent.repository` of the
    prompt's response (the patch, and the branch pushed when the editor asked for it)."""
    if not session.state.repository:
        return None
    try:
        got: dict[str, Any] = (await repository_result(session)).to_json()
    except InputError as e:
        got = {"error": str(e)}
    return {"devagent": {"repository": got}}


def _invalid(reason: str, **data: Any) -> RequestError:
    return _error(-32602, reason, **data)


def _mcp_servers(servers: list[Any] | None) -> dict[str, dict[str, Any]] | None:
    """ACP's MCP server list as the core's {name: spec}; the core checks each against the
    operator's policy for client-named servers before it is used (as over A2A)."""
    if not servers:
        return None
    out: dict[str, dict[str, Any]] = {}
    for s in servers:
        d = s.model_dump(by_alias=True, exclude_none=True)
        name = str(d.get("name") or f"server-{uuid.uuid4().hex[:6]}")
        kind = d.get("type")
        if kind == "http":
            headers = {h["name"]: h["value"] for h in d.get("headers") or []}
            out[name] = {"url": d["url"], "headers": headers}
        elif kind == "sse" or "command" not in d:
            log.warning("MCP server %s: transport %r is not supported; left out", name, kind)
        else:
            env = {e["name"]: e["value"] for e in d.get("env") or []}
            out[name] = {"command": d["command"], "args": list(d.get("args") or []), "env": env}
    return out or None


async def run_connection(opts: AcpOptions, transport: Any) -> int:
    """Hand the stdio transport to the SDK's connection; serve until the client closes stdin."""
    agent = DevagentAgent(opts)
    agent.transport = transport
    # ACP v1 made session/resume and session/close stable; the SDK (0.12.1) still routes them only
    # with its unstable flag. The flag also routes session/fork, which devagent does not offer
    # (so it answers "method not found", as before).
    conn = AgentSideConnection(
        agent,  # type: ignore[arg-type]
        transport,
        listening=False,
        use_unstable_protocol=True,
    )
    try:
        await conn.listen()
    finally:
        # The connection first: the client's unanswered requests fail (nothing is answered for
        # it), and the prompts in flight end; then the turns and the core.
        with contextlib.suppress(Exception):
            await conn.close()
        await agent.aclose()
    return 0


class _AcpDoor(Door):
    """A prompt's turn as ACP shows it: `session/update`s, and `session/request_permission` for
    each call that asks (the editor's choice is the answer; its cancel cancels the prompt)."""

    def __init__(self, agent: DevagentAgent, o: _Open) -> None:
        self.agent = agent
        self.o = o

    async def show(self, event: Event) -> None:
        await self.agent._emit(self.o, event)

    async def ask(self, call: ToolCall, driver: TurnDriver) -> None:
        if call.awaiting_client:  # ACP has no client-run tools; the core never asks here
            driver.park()
            return
        decision = await self.agent._ask(self.o, call)
        if decision is None:
            await driver.cancel()
        else:
            driver.answer(decision)

    async def withdrawn(self, calls: list[ToolCall]) -> None:
        for call in calls:
            await self.agent._emit(self.o, CoreToolCallUpdate(call))
