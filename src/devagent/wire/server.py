"""Wire mode: the agent as a JSON-RPC 2.0 server on stdin/stdout (kimi-cli's KLIP-12).

One JSON object per line in each direction. The client calls `initialize` (optional), `prompt`
and `cancel`; the server sends `event` notifications and `request`s (`ApprovalRequest`,
`ToolCallRequest`) in the `{type, payload}` vocabulary of kimi-cli's wire protocol 1.x, so that
its existing clients drive devagent unchanged.

The server translates and never decides: core events become wire events, a permission request of
the core becomes an `ApprovalRequest`, a call the client must run becomes a `ToolCallRequest`,
and the client's answers go back to the core as `Resume(decisions=..., results=...)`.

Start-up is split so that `initialize` is answered at once: it needs only the slash command
registry and tool validation, which are light. The core (store, models, pydantic-ai) is loaded in
the background, after the first message or a short idle delay, with the heavy imports in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import sys
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devagent import __version__
from devagent.agent.api import (
    ClientResult,
    ClientTool,
    Decision,
    Door,
    Event,
    InputError,
    NeedsInput,
    Notice,
    QuestionDetails,
    StatusUpdate,
    StepBegin,
    TextDelta,
    ThoughtDelta,
    ToolCall,
    ToolCallUpdate,
    TurnDriver,
    TurnEnd,
    UserPrompt,
    Workspace,
    builtin_tools,
    check_repository,
    repository_result,
    user_config_dir,
    validate_client_tools,
    with_custom,
)
from devagent.common import startup_gc
from devagent.common.jsonlimits import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_LINE_BYTES,
    depth_message,
    too_deep,
)
from devagent.common.rpcerrors import internal_error
from devagent.config import ConfigError, load_config
from devagent.preflight import StartError, check_db_url, check_model, debug_enabled, open_core, report
from devagent.stdio import Output, OverlongLine, serve_lines, start_reader, work_folder
from devagent.stdio_cli import DoorFlags
from devagent.wire import messages as m

if TYPE_CHECKING:
    from devagent.agent.api import AgentCore, CoreConfig, Registry, SandboxProvider, Session

log = logging.getLogger("devagent.wire")

# How long the server waits for a first message before loading the core anyway.
IDLE_PRELOAD_DELAY = 0.3


@dataclass(slots=True)
class WireOptions:
    work_dir: Path
    config: CoreConfig  # the server's settings (flags over DEVAGENT_* over the settings file)
    session_id: str | None = None
    model: str | None = None
    thinking: bool | None = None
    approval_timeout: float | None = None  # seconds; None = wait as long as it takes
    tool_call_timeout: float | None = None
    max_json_depth: int = DEFAULT_MAX_DEPTH  # deeper lines are refused before parsing
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES  # longer lines are dropped and refused
    debug: bool = False  # --debug: tracebacks in the log


# --- per-turn and per-request state ---------------------------------------------------------------


@dataclass(eq=False)
class WireTurn:
    """The wire door's record of the turn it runs: its prompt's request, what was sent of it."""

    id: str
    prompt_id: m.RpcId | None  # None for a turn resumed from the store (no prompt to answer)
    cancel_event: asyncio.Event = field(default_factory=asyncio.Event)  # a cancel came (maybe early)
    begun: bool = False  # the core works on it (until then `initialize` may still change tools)
    driver: TurnDriver | None = None  # drives it once it has begun
    seen: set[str] = field(default_factory=set)  # call ids whose ToolCall event was sent
    finished: set[str] = field(default_factory=set)  # call ids whose ToolResult event was sent
    notices: list[Notice] = field(default_factory=list)  # held until the next event
    task: asyncio.Task[Any] | None = None  # the task driving it

    @property
    def waiting(self) -> bool:
        """Stopped for input: the client's answers are awaited."""
        return self.driver is not None and self.driver.awaiting_answers

    def answer(self, answer: Decision | ClientResult) -> None:
        if self.driver is not None:
            self.driver.answer(answer)


@dataclass(eq=False)
class OutstandingRequest:
    """A request this door sent the client (an approval, a client tool call, a question) that
    has not been answered yet."""

    rpc_id: str
    kind: str  # "approval" | "tool" | "question"
    call_id: str
    turn: WireTurn
    message: m.JSON  # the request as sent, to send again after a re-initialize
    always: str | None = None  # the call's "allow always" option
    timer: asyncio.TimerHandle | None = None
    question: QuestionDetails | None = None  # what a question request asks


class WireServer:
    def __init__(self, options: WireOptions, out: Output) -> None:
        self.opts = options
        self.out = out
        self.initialized = False
        self.supports_question = False  # the client declared it can show a QuestionRequest
        self.version = m.WIRE_PROTOCOL_VERSION
        self.client_tools: dict[str, m.ExternalToolDef] = {}
        self.max_cost_usd: float | None = None  # the client's cap on each turn's cost (initialize)
        self.repository: Any = None  # initialize's repository: the new session's clone
        self.tools_dirty = False
        self.core: AgentCore | None = None
        self.session: Session | None = None
        self._commands: Registry | None = None  # the work folder's, before the session opens
        self._listed_in = Workspace([options.work_dir])
        self._load_task: asyncio.Task[Session] | None = None
        self._turn_lock = asyncio.Lock()
        self.turn: WireTurn | None = None
        self.pending: dict[str, OutstandingRequest] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._resume_checked = False
        self._stopping = False
        self._prompts: set[asyncio.Task[Any]] = set()  # prompts read and not yet answered
        self._stalled = asyncio.Event()  # a turn began to wait for the client's answers

    # --- plumbing --------------------------------------------------------------------------

    def send(self, msg: m.JSON) -> None:
        self.out.send(msg)

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def serve(self, lines: asyncio.Queue[bytes | None]) -> int:
        loop = asyncio.get_running_loop()
        preload = loop.call_later(IDLE_PRELOAD_DELAY, self._start_loading)
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        stop_wait = asyncio.ensure_future(stop.wait())
        try:
            while True:
                get = asyncio.ensure_future(lines.get())
                done, _ = await asyncio.wait({get, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
                if get not in done:
                    get.cancel()
                    log.info("signal received, wire server exiting")
                    break
                line = get.result()
                if line is None:
                    await self._end_of_input(stop_wait)
                    break
                self.handle_line(line)
                # answers the client does not read: past the hard limit, its input waits too
                await self.out.drain(self.out.hard_limit)
                # After the first message the client is there: load the core now.
                self._start_loading()
        finally:
            preload.cancel()
            stop_wait.cancel()
            await self.shutdown()
        return 0

    async def _end_of_input(self, stop: asyncio.Future[Any]) -> None:
        """Standard input ended: the prompts already read run to their end (a client that wants
        the running turn stopped sends `cancel` before it closes), unless a turn waits for an
        answer only the client could give: that turn stays waiting in the store. Said on stderr,
        since no client may be reading stdout. A signal still stops everything at once."""
        told = False
        while self._prompts:
            if self.turn is not None and self.turn.waiting:
                sid = self.session.id if self.session is not None else "?"
                _say(
                    "end of input while the turn waits for an answer from the client; it stays "
                    f"waiting in session {sid} (devagent wire --session {sid} asks again)"
                )
                queued = len(self._prompts) - (1 if self.turn.prompt_id is not None else 0)
                if queued > 0:
                    _say(f"{queued} prompt(s) read after it were not run")
                return
            if not told:
                _say(f"end of input: finishing {len(self._prompts)} prompt(s) before exiting")
                told = True
            self._stalled.clear()
            stalled = asyncio.ensure_future(self._stalled.wait())
            try:
                await asyncio.wait({*self._prompts, stalled, stop}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stalled.cancel()
            if stop.done():
                return
        if told:
            _say("the prompts ended; exiting")
        log.info("stdin closed, wire server exiting")

    async def shutdown(self) -> None:
        self._stopping = True
        turn = self.turn
        if turn is not None and turn.driver is not None and turn.driver.running:
            # A running turn is stopped (its state is stored); a turn that waits for the client
            # stays waiting in the store, and a later `--session` resumes it. Queued prompts do
            # not start (`_stopping`).
            turn.cancel_event.set()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(turn.driver.cancel(), 10)
            if turn.task is not None:
                # Let it write its TurnEnd and the prompt's answer: stdout may still be read.
                await asyncio.wait({turn.task}, timeout=3)
        for p in self.pending.values():
            if p.timer:
                p.timer.cancel()
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._load_task is not None and not self._load_task.done():
            self._load_task.cancel()
            with contextlib.suppress(BaseException):
                await self._load_task
        if self.core is not None:
            if self.session is not None:  # the client left: the session ends (its hooks run)
                with contextlib.suppress(Exception):
                    await self.core.end_session(self.session.id)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.core.close(), 10)

    # --- framing ---------------------------------------------------------------------------

    def handle_line(self, raw: bytes) -> None:
        if isinstance(raw, OverlongLine):
            limit = self.opts.max_line_bytes
            self.send(m.error_response(None, m.INVALID_REQUEST, f"line longer than {limit} bytes"))
            return
        if too_deep(raw, self.opts.max_json_depth):  # before json.loads recurses
            self.send(m.error_response(None, m.INVALID_REQUEST, depth_message(self.opts.max_json_depth)))
            return
        try:
            msg = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            # Also an empty line: the reference answers it the same way.
            self.send(m.error_response(None, m.PARSE_ERROR, "Invalid JSON format"))
            return
        if not _valid_envelope(msg):
            self.send(m.error_response(None, m.INVALID_REQUEST, "Invalid request"))
            return
        method = msg.get("method")
        rpc_id = msg.get("id")
        if method is None:
            self._handle_response(msg)
            return
        if method not in m.IN_METHODS:
            if rpc_id is not None:
                self.send(
                    m.error_response(rpc_id, m.METHOD_NOT_FOUND, f"Unexpected method received: {method}")
                )
            else:
                log.info("ignoring notification of unknown method %r", method)
            return
        params = msg.get("params")
        if rpc_id is None:
            # Notifications get no answer; only `cancel` makes sense without one.
            if method == "cancel":
                self._spawn(self._handle_cancel(None))
            else:
                log.info("ignoring %s sent as a notification (it needs an id)", method)
            return
        try:
            if method == "initialize":
                self._handle_initialize(rpc_id, params)
            elif method == "prompt":
                user_input = m.parse_user_input(params)
                task = self._spawn(self._handle_prompt(rpc_id, user_input))
                self._prompts.add(task)
                task.add_done_callback(self._prompts.discard)
            elif method == "cancel":
                self._spawn(self._handle_cancel(rpc_id))
        except m.ParamsError as e:
            self.send(
                m.error_response(
                    rpc_id, m.INVALID_PARAMS, f"Invalid parameters for method `{method}`", str(e)
                )
            )

    # --- initialize ------------------------------------------------------------------------

    def _slash_commands(self) -> list[m.JSON]:
        """The session's commands (built-in and custom), or before it opens, those of the work
        folder: read once, so a second `initialize` lists the same."""
        if self.session is not None:
            registry = self.session.commands()
        else:
            if self._commands is None:
                self._commands = with_custom(user_config_dir(), self._listed_in)
            registry = self._commands
        listed = registry.list()
        return [{"name": c.name, "description": c.description, "aliases": list(c.aliases)} for c in listed]

    def _handle_initialize(self, rpc_id: m.RpcId, params: Any) -> None:
        p = m.parse_initialize(params)
        if self.turn is not None and self.turn.begun and not self.turn.waiting:
            self.send(m.error_response(rpc_id, m.INVALID_STATE, "An agent turn is already in progress"))
            return
        if p.repository is not None:
            if self._load_task is not None:
                raise m.ParamsError("repository starts a new session: give it in the first initialize")
            try:
                check_repository(self.opts.config, p.repository)
            except InputError as e:
                raise m.ParamsError(str(e)) from None
            self.repository = p.repository
        accepted, rejected = self._validate_tools(p.external_tools)
        for t in accepted:
            self.client_tools[t.name] = t  # a name registered again is replaced
        if p.external_tools:
            self.tools_dirty = True
        if p.max_cost_usd is not None:
            self.max_cost_usd = p.max_cost_usd
        self.initialized = True
        self.supports_question = p.supports_question
        self.version = m.negotiate_version(p.protocol_version)
        log.info(
            "initialize from %s %s (protocol %s -> %s); tools accepted %s, rejected %s",
            p.client_name or "?",
            p.client_version or "",
            p.protocol_version,
            self.version,
            [t.name for t in accepted],
            rejected,
        )
        self.send(
            m.result_response(
                rpc_id,
                {
                    "protocol_version": self.version,
                    "server": {"name": m.SERVER_NAME, "version": __version__},
                    "slash_commands": self._slash_commands(),
                    "external_tools": {
                        "accepted": [t.name for t in accepted],
                        "rejected": [{"name": n, "reason": r} for n, r in rejected],
                    },
                    "capabilities": {"supports_question": True},
                },
            )
        )
        # A client that reconnects gets the requests still waiting for an answer.
        for pr in list(self.pending.values()):
            self.send(pr.message)
        self._spawn(self._resume_waiting())

    def _validate_tools(
        self, defs: list[m.ExternalToolDef]
    ) -> tuple[list[m.ExternalToolDef], list[tuple[str, str]]]:
        if not defs:
            return [], []
        core_cfg = self.opts.config
        ok, rejected = validate_client_tools(
            [{"name": d.name, "description": d.description, "parameters": d.parameters} for d in defs],
            builtin_names=builtin_tools().keys(),
            allow=core_cfg.client_tool_allow,
            deny=core_cfg.client_tool_deny,
        )
        accepted = [m.ExternalToolDef(t.name, t.description, t.parameters) for t in ok]
        return accepted, rejected

    # --- loading the core ------------------------------------------------------------------

    def _start_loading(self) -> None:
        if self._load_task is None and not self._stopping:
            self._load_task = asyncio.create_task(self._load())

    async def _load(self) -> Session:
        # pydantic-ai and SQLAlchemy take most of a second to import: do it off the loop so that
        # the protocol stays responsive meanwhile.
        await asyncio.to_thread(_import_heavy)
        cfg = self.opts.config
        core = await open_core(cfg)
        self.core = core
        if not self.opts.model:  # said plainly (on stderr; stdout is protocol only)
            level = logging.WARNING if core.default_model == "demo" else logging.INFO
            log.log(level, "%s", core.model_explanation)
        session = None
        if self.opts.session_id:
            session = await core.get_session(self.opts.session_id)
            if session is not None:
                log.info("resumed session %s (%s)", session.id, session.state.status)
                if cfg.approval_mode == "yolo" and session.state.approval_mode != "yolo":
                    # --yolo when resuming: the operator's choice for this server.
                    await session.set_approval_mode("yolo")
        if session is None:
            session = await core.create_session(
                [self.opts.work_dir],
                session_id=self.opts.session_id,
                model=self.opts.model,
                approval_mode=cfg.approval_mode,
                extra={"wire": {"thinking": self.opts.thinking}},
                repository=self.repository,
            )
            log.info("new session %s", session.id)
        if self._commands is not None and session.workspace.roots == self._listed_in.roots:
            session.use_commands(self._commands)  # the list `initialize` gave is the session's
        self.session = session
        return session

    async def _ready(self) -> Session:
        self._start_loading()
        assert self._load_task is not None
        return await asyncio.shield(self._load_task)

    async def _sync_tools(self, session: Session) -> None:
        if self.tools_dirty:
            tools = self._client_tool_objects()
            refused = await session.set_client_tools(tools)
            if refused:
                log.warning("the core refused client tools: %s", refused)
            self.tools_dirty = False
        elif not self.initialized and session.state.client_tools:
            # A client that did not initialize has no external tools.
            await session.set_client_tools([])

    def _client_tool_objects(self) -> list[Any]:
        return [ClientTool(t.name, t.description, t.parameters) for t in self.client_tools.values()]

    # --- prompt and cancel -----------------------------------------------------------------

    async def _handle_prompt(self, rpc_id: m.RpcId, user_input: str | m.ContentParts) -> None:
        text, unsupported = m.input_text(user_input)
        if unsupported:
            self.send(
                m.error_response(
                    rpc_id,
                    m.LLM_NOT_SUPPORTED,
                    f"devagent does not support {', '.join(sorted(set(unsupported)))} input; send text parts",
                )
            )
            return
        if not text.strip():
            self.send(
                m.error_response(rpc_id, m.INVALID_PARAMS, "Invalid parameters for method `prompt`", "empty")
            )
            return
        current = self.turn
        if current is not None and current.prompt_id is None and current.waiting:
            # A stored turn resumed after a restart waits for answers, and this prompt will wait
            # behind it: ask again now that the client listens (kimi's SDK shows requests only
            # while one of its prompts runs).
            for pr in list(self.pending.values()):
                if pr.turn is current:
                    self.send(pr.message)
        # Prompts are served one at a time, in the order they came (a second one waits).
        async with self._turn_lock:
            if self._stopping:
                return
            turn = WireTurn(id=uuid.uuid4().hex, prompt_id=rpc_id)
            self.turn = turn  # a cancel applies from now on, also while the core is loading
            try:
                session = await self._ready()
            except Exception as e:
                self.turn = None
                if isinstance(e, InputError):  # the repository could not be cloned: said as it is
                    text = str(e)
                elif isinstance(e, StartError):  # the database cannot be opened: one line, the fix
                    text = e.message
                    if debug_enabled(self.opts.debug):
                        log.exception("could not open the session")
                    else:
                        log.error("could not open the session: %s", text)
                else:  # the detail to the log, a reference to the client
                    text = internal_error(repr(e), what="opening the session", exc_info=e)
                self.send(m.error_response(rpc_id, m.INTERNAL_ERROR, text))
                return
            await self._resume_locked(session)  # a stored turn that waits comes first
            if self._stopping:
                self.turn = None
                return
            self.turn = turn
            await self._sync_tools(session)
            self.send(m.turn_begin(user_input))
            await self._run_turn(session, turn, UserPrompt(text, self.max_cost_usd))

    async def _resume_waiting(self) -> None:
        """After a restart: a session that waits for answers sends its requests again."""
        async with self._turn_lock:
            try:
                session = await self._ready()
            except Exception:
                log.exception("could not open the session")
                return
            await self._resume_locked(session)

    async def _resume_locked(self, session: Session) -> None:
        if self._resume_checked:
            return
        self._resume_checked = True
        waiting = session.waiting_calls() if session.state.status == "awaiting_input" else []
        if not waiting:
            return
        log.info("session waits for %d answer(s): sending the requests again", len(waiting))
        turn = WireTurn(id=uuid.uuid4().hex, prompt_id=None)
        await self._run_turn(session, turn, None, waiting)

    async def _handle_cancel(self, rpc_id: m.RpcId | None) -> None:
        turn = self.turn
        if turn is None:
            if rpc_id is not None:
                self.send(m.error_response(rpc_id, m.INVALID_STATE, "No agent turn is in progress"))
            return
        turn.cancel_event.set()
        if rpc_id is not None:
            self.send(m.result_response(rpc_id, {}))
        if turn.driver is not None:  # stops it at any point, a wait for answers included
            await turn.driver.cancel()

    async def _run_turn(
        self,
        session: Session,
        turn: WireTurn,
        first: UserPrompt | None,
        waiting: list[ToolCall] | None = None,
    ) -> None:
        self.turn = turn
        turn.begun = True
        turn.task = asyncio.current_task()
        end: TurnEnd | None = None
        try:
            end = await self._drive(session, turn, first, waiting)
        except InputError as e:
            log.warning("the core refused the input: %s", e)
            if turn.prompt_id is not None:
                self.send(m.error_response(turn.prompt_id, m.INVALID_STATE, str(e)))
            return
        except asyncio.CancelledError:
            raise
        except Exception as e:
            text = internal_error(repr(e), what="the turn", exc_info=e)
            if turn.prompt_id is not None:
                self.send(m.error_response(turn.prompt_id, m.INTERNAL_ERROR, text))
            return
        finally:
            self._drop_requests(turn)
            self.turn = None
        self._finish(turn, end, await self._repository(session, end))

    async def _repository(self, session: Session, end: TurnEnd) -> m.JSON | None:
        """A repository session's result after a finished turn (the prompt's result carries it)."""
        if end.reason != "finished" or not session.state.repository:
            return None
        try:
            got: m.JSON = (await repository_result(session)).to_json()
        except InputError as e:
            got = {"error": str(e)}
        return got

    def _finish(self, turn: WireTurn, end: TurnEnd, repository: m.JSON | None = None) -> None:
        # TurnEnd came with protocol 1.2: a client that negotiated 1.1 does not know it.
        if not self.initialized or (m.version_tuple(self.version) or (0,)) >= (1, 2):
            self.send(m.turn_end())
        if turn.prompt_id is None:
            return
        if end.reason == "error":
            self.send(m.error_response(turn.prompt_id, m.CHAT_PROVIDER_ERROR, end.error or "model error"))
        elif end.reason == "max_steps_reached":
            steps = self.core.config.max_steps if self.core is not None else 0
            self.send(m.result_response(turn.prompt_id, {"status": "max_steps_reached", "steps": steps}))
        else:
            result: m.JSON = {"status": end.reason}
            if repository is not None:
                result["repository"] = repository
            self.send(m.result_response(turn.prompt_id, result))

    async def _drive(
        self,
        session: Session,
        turn: WireTurn,
        first: UserPrompt | None,
        waiting: list[ToolCall] | None,
    ) -> TurnEnd:
        turn.driver = driver = TurnDriver(session, _WireDoor(self, session, turn))
        if turn.cancel_event.is_set():  # cancelled before it began
            await driver.cancel()
        outcome = await driver.run(first, waiting)
        assert isinstance(outcome, TurnEnd)  # the wire door waits for its client's answers
        return outcome

    # --- core events -> wire events --------------------------------------------------------

    def _emit(self, session: Session, turn: WireTurn, ev: Any) -> None:
        if isinstance(ev, StepBegin):
            self.send(m.step_begin(ev.n))
        elif isinstance(ev, TextDelta):
            if ev.text:
                self.send(m.text_part(ev.text))
        elif isinstance(ev, ThoughtDelta):
            if ev.text:
                self.send(m.think_part(ev.text))
        elif isinstance(ev, ToolCallUpdate):
            call = ev.call
            # a subagent's call goes out inside a SubagentEvent naming the task call it runs under
            wrap = (lambda msg: m.subagent_event(call, msg)) if call.parent_call_id else (lambda msg: msg)
            if call.id not in turn.seen:
                turn.seen.add(call.id)
                self.send(wrap(m.tool_call_event(call)))
            if call.status.terminal and call.id not in turn.finished:
                turn.finished.add(call.id)
                self.send(wrap(m.tool_result_event(call)))
        elif isinstance(ev, StatusUpdate):
            self.send(m.status_update(ev, plan_mode=session.state.approval_mode == "plan"))

    def _flush_notices(self, turn: WireTurn, ev: Any) -> None:
        """Notices (a slash command's usage error, a warning) are shown as text, which is how the
        reference reports such messages. The notice that a turn ended with a model error or at the
        step limit is left out: the prompt's answer carries it (an error, `max_steps_reached`)."""
        notices, turn.notices = turn.notices, []
        for n in notices:
            if isinstance(ev, TurnEnd) and ev.reason in ("error", "max_steps_reached") and n.text == ev.error:
                continue
            self.send(m.text_part(n.text if n.text.endswith("\n") else n.text + "\n"))

    # --- requests to the client ------------------------------------------------------------

    def _send_request(self, session: Session, turn: WireTurn, call: ToolCall) -> None:
        q = call.question
        if q is not None and not self.supports_question:
            # Not offered to this client: the model reads that it cannot ask, and goes on.
            turn.answer(Decision(call.id, "cancel", feedback=CANNOT_ASK))
            return
        if q is not None:
            rid = _request_id(session, call)
            msg = m.request(rid, "QuestionRequest", m.question_request_payload(rid, call, q))
            pr = OutstandingRequest(rid, "question", call.id, turn, msg, question=q)
            timeout = self.opts.approval_timeout
        elif call.awaiting_client:
            rid = call.id
            msg = m.request(rid, "ToolCallRequest", m.tool_call_request_payload(call))
            pr = OutstandingRequest(rid, "tool", call.id, turn, msg)
            timeout = self.opts.tool_call_timeout
            if call.id not in turn.seen:  # resumed after a restart: show the call first
                turn.seen.add(call.id)
                self.send(m.tool_call_event(call))
        else:
            rid = _request_id(session, call)
            msg = m.request(rid, "ApprovalRequest", m.approval_request_payload(rid, call, turn.id))
            pr = OutstandingRequest(rid, "approval", call.id, turn, msg, call.always_option())
            timeout = self.opts.approval_timeout
        if rid in self.pending:
            log.warning("request id %s is already pending; replacing it", rid)
        self.pending[rid] = pr
        if timeout is not None and timeout > 0:
            pr.timer = asyncio.get_running_loop().call_later(timeout, self._on_timeout, rid, timeout)
        self.send(msg)

    def _drop_requests(self, turn: WireTurn) -> None:
        for rid, pr in list(self.pending.items()):
            if pr.turn is turn:
                if pr.timer:
                    pr.timer.cancel()
                del self.pending[rid]

    def _on_timeout(self, rid: str, timeout: float) -> None:
        pr = self.pending.pop(rid, None)
        if pr is None:
            return
        log.warning("no answer to %s %s within %s s", pr.kind, rid, timeout)
        if pr.kind == "approval":
            self._answer_approval(pr, "reject", f"no answer within {timeout:g} s")
        elif pr.kind == "question":
            pr.turn.answer(Decision(pr.call_id, "cancel", feedback=f"no answer within {timeout:g} s"))
        else:
            pr.turn.answer(
                ClientResult(
                    pr.call_id, error=f"The client did not return a result within {timeout:g} s (timed out)."
                )
            )

    def _answer_approval(self, pr: OutstandingRequest, response: str, feedback: str = "") -> None:
        option = _option_for(response, pr.always)
        pr.turn.answer(Decision(pr.call_id, option, feedback=feedback or None))
        self.send(m.approval_response_event(pr.rpc_id, response, feedback))

    def _handle_response(self, msg: m.JSON) -> None:
        rpc_id = msg.get("id")
        pr = self.pending.get(rpc_id) if isinstance(rpc_id, str) else None
        if pr is None:
            log.warning("no pending request for response id=%r; ignored", rpc_id)
            return
        del self.pending[pr.rpc_id]
        if pr.timer:
            pr.timer.cancel()
        if pr.kind == "question":
            self._answer_question(pr, msg)
            return
        if "error" in msg:
            err = msg["error"]
            text = err.get("message") or "the client reported an error"
            log.info("client answered %s with an error: %s", pr.rpc_id, text)
            if pr.kind == "approval":
                self._answer_approval(pr, "reject", text)
            else:
                pr.turn.answer(ClientResult(pr.call_id, error=text))
            return
        type_, payload = m.unwrap_result(msg.get("result"))
        expected = (
            ("ApprovalResponse", m.LEGACY_APPROVAL_RESPONSE) if pr.kind == "approval" else ("ToolResult",)
        )
        problem: str | None = None
        if type_ is not None and type_ not in expected:
            problem = f"Unknown wire message type: {type_}"
        elif pr.kind == "approval":
            answer = m.parse_approval_answer(payload)
            if answer is None:
                problem = (
                    "an approval answer needs {request_id, response: approve | approve_for_session | reject}"
                )
            else:
                self._answer_approval(pr, answer.response, answer.feedback)
                return
        else:
            result = m.parse_tool_result(payload)
            if result is None:
                problem = (
                    "a tool result needs {tool_call_id, return_value: {is_error, output, message, display}}"
                )
            else:
                if result.is_error:
                    text = result.message or result.output or "the external tool failed"
                    if result.message and result.output and result.output != result.message:
                        text = f"{result.message}\n{result.output}"
                    pr.turn.answer(ClientResult(pr.call_id, error=text))
                else:
                    out = result.output or result.message
                    pr.turn.answer(ClientResult(pr.call_id, output=out))
                return
        # An answer the server cannot read: say so, and do not leave the turn hanging.
        log.warning("invalid answer to %s %s: %s", pr.kind, pr.rpc_id, problem)
        self.send(
            m.error_response(
                None, m.INVALID_REQUEST, "Invalid response", {"id": pr.rpc_id, "reason": problem}
            )
        )
        if pr.kind == "approval":
            self._answer_approval(pr, "reject", "invalid answer")
        else:
            pr.turn.answer(ClientResult(pr.call_id, error="Invalid tool result payload from client."))

    def _answer_question(self, pr: OutstandingRequest, msg: m.JSON) -> None:
        """A QuestionResponse: the answer (a choice's label or the client's "other" text) goes to
        the core; no answer, an error or a payload the server cannot read dismisses the question
        (an unreadable one is also answered `Invalid response`)."""
        q = pr.question
        assert q is not None
        if "error" in msg:
            error = msg["error"].get("message") or "an error"
            pr.turn.answer(Decision(pr.call_id, "cancel", feedback=f"the client answered with {error}"))
            return
        type_, payload = m.unwrap_result(msg.get("result"))
        answers = m.parse_question_answer(payload) if type_ in (None, "QuestionResponse") else None
        if answers is None:
            reason = "a question answer needs {request_id, answers: {question: answer}}"
            log.warning("invalid answer to question %s: %s", pr.rpc_id, reason)
            bad = {"id": pr.rpc_id, "reason": reason}
            self.send(m.error_response(None, m.INVALID_REQUEST, "Invalid response", bad))
            answers = {}
        # keyed by the question's text; a client that keys it otherwise still answers it
        said = answers.get(q.question, next(iter(answers.values()), ""))
        got = q.answer_for(said)
        if got is not None:
            pr.turn.answer(Decision(pr.call_id, got[0], new_content=got[1]))
        else:
            feedback = f"they answered {said!r}, which is none of the choices" if said.strip() else None
            pr.turn.answer(Decision(pr.call_id, "cancel", feedback=feedback))


# --- helpers -------------------------------------------------------------------------------------

# What the model reads when a question cannot be put to the client.
CANNOT_ASK = (
    "the user's client cannot show questions; do not call ask_user again in this session, "
    "say in your answer what you need to know instead"
)


def _request_id(session: Session, call: ToolCall) -> str:
    """A request's id: stable across restarts, so a resumed session asks with the same id."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"devagent:{session.id}:{call.id}"))


def _valid_envelope(msg: Any) -> bool:
    if not isinstance(msg, dict):
        return False
    if "jsonrpc" in msg and msg["jsonrpc"] != "2.0":
        return False
    rpc_id = msg.get("id")
    if rpc_id is not None and (not isinstance(rpc_id, str | int) or isinstance(rpc_id, bool)):
        return False
    method = msg.get("method")
    if method is not None:
        return isinstance(method, str)
    # a response
    if rpc_id is None or ("result" in msg) == ("error" in msg):
        return False
    if "error" in msg:
        err = msg["error"]
        return (
            isinstance(err, dict) and isinstance(err.get("code"), int) and isinstance(err.get("message"), str)
        )
    return True


def _say(text: str) -> None:
    """A line for the person who started the server (stdout is the protocol's)."""
    print(f"devagent wire: {text}", file=sys.stderr, flush=True)


def _option_for(response: str, always: str | None) -> str:
    """The core's option for a wire approval answer (approving for the session takes the call's
    "allow always" option, or allows it once where it offers none)."""
    if response == "approve_for_session":
        return always or "proceed_once"
    return "cancel" if response == "reject" else "proceed_once"


def _import_heavy() -> None:
    # late, in a thread: pydantic-ai and SQLAlchemy load while `initialize` is answered
    import devagent.store.db  # noqa: F401
    from devagent.agent.api import load_core

    load_core()
    startup_gc.settled()  # loaded: the collector, off since the entry point, on again


def run_wire(
    flags: DoorFlags,
    *,
    session_id: str | None = None,
    yolo: bool = False,
    thinking: bool | None = None,
    approval_timeout: float | None = None,
    tool_call_timeout: float | None = None,
    max_steps: int | None = None,
    sandboxes: SandboxProvider | None = None,
) -> int:
    """Serve wire mode on this process's stdin/stdout until stdin closes. Returns the exit code.
    `sandboxes`: what the door set up for its flags (None: the settings choose)."""
    if (wd := work_folder("devagent wire", flags.work_dir or ".")) is None:
        return 2
    overrides = {
        **flags.settings,
        "db_url": flags.db_url or None,
        "default_model": flags.model,
        "max_steps": max_steps,
    }
    config = _checked_config(
        overrides, check_model_first=bool(flags.model or not session_id), debug=flags.debug
    )
    if isinstance(config, int):
        return config
    config.sandboxes = sandboxes or config.sandboxes
    if yolo:
        # --yolo is the operator's choice when starting the server, not a client's request.
        config.approval_mode = "yolo"

    def serve(limits: dict[str, int], proto_fd: int) -> Coroutine[Any, Any, int]:
        opts = WireOptions(
            work_dir=wd,
            config=config,
            session_id=session_id,
            model=flags.model,
            thinking=thinking,
            approval_timeout=approval_timeout,
            tool_call_timeout=tool_call_timeout,
            debug=flags.debug,
            **limits,
        )
        return _serve_stdio(opts, proto_fd)

    return serve_lines("devagent wire", flags.verbose, flags.log_file, serve)


def _checked_config(overrides: dict[str, Any], *, check_model_first: bool, debug: bool) -> CoreConfig | int:
    """The server's settings, with what can be told before the client starts talking checked
    (the model unless a resumed session keeps its own; the database URL, opened later); an exit
    code after one line on stderr when they are wrong."""
    try:
        config = load_config(overrides)
    except ConfigError as e:
        print(f"devagent wire: {e}", file=sys.stderr)
        return 2
    try:
        if check_model_first:
            check_model(config)
        check_db_url(config.db_url)
    except StartError as e:
        return report("devagent wire", e, debug)
    return config


async def _serve_stdio(opts: WireOptions, proto_fd: int) -> int:
    """Serve the lines of stdin, answering on `proto_fd`, until stdin closes."""
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()
    start_reader(0, asyncio.get_running_loop(), queue, opts.max_line_bytes)
    out = Output(proto_fd)
    server = WireServer(opts, out)
    code = await server.serve(queue)
    await out.flush(10)  # the last lines (a TurnEnd, answers) reach a client that reads
    return code


class _WireDoor(Door):
    """A turn as wire shows it: events as they come (notices held until the next event), and for
    each waiting call an ApprovalRequest or a ToolCallRequest whose answer comes back later, as a
    response line, through `WireTurn.answer`."""

    def __init__(self, server: WireServer, session: Session, turn: WireTurn) -> None:
        self.server = server
        self.session = session
        self.turn = turn

    async def show(self, event: Event) -> None:
        if isinstance(event, Notice):
            self.turn.notices.append(event)
            return
        self.server._flush_notices(self.turn, event)
        if isinstance(event, NeedsInput | TurnEnd):
            return
        self.server._emit(self.session, self.turn, event)
        await self.server.out.drain()  # a client that does not read pauses this turn, not the process

    async def ask(self, call: ToolCall, driver: TurnDriver) -> None:
        self.server._send_request(self.session, self.turn, call)

    async def waiting(self, calls: list[ToolCall]) -> None:
        self.server._stalled.set()
