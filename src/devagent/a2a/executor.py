"""The AgentExecutor: runs one `session.advance` per A2A request and translates core events into
A2A events (B4-B11). It holds protocol state only; every decision is the core's.

One core session serves one (owner, contextId) conversation; its id is derived from both, so
no mapping table is needed and a restarted server finds the same session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.types import Part, Task, TaskState, TaskStatus

from devagent.a2a import client_tools as ct
from devagent.a2a import extension as ext
from devagent.a2a import legacy
from devagent.a2a.emitter import (
    CANCELED,
    COMPLETED,
    FAILED,
    INPUT_REQUIRED,
    WORKING,
    Emitter,
    RfcEmitter,
    data_part,
    tool_calls_part,
)
from devagent.a2a.plain import PlainEmitter
from devagent.a2a.request import Prepared, handoff
from devagent.agent.api import (
    Door,
    Event,
    Input,
    InputError,
    NeedsInput,
    Notice,
    StepBegin,
    TextDelta,
    ThoughtDelta,
    ToolCall,
    ToolCallStatus,
    ToolCallUpdate,
    TurnDriver,
    TurnEnd,
    repository_result,
    shown_name,
)
from devagent.common.faults import crash_point
from devagent.common.rpcerrors import internal_error

if TYPE_CHECKING:
    from a2a.server.context import ServerCallContext

    from devagent.a2a.fanout import Fanout
    from devagent.a2a.observe import Metrics, TurnRecord
    from devagent.a2a.settings import A2ASettings
    from devagent.a2a.store import BufferedTaskStore
    from devagent.agent.api import AgentCore, Session
    from devagent.store.identity_groups import IdentityGroups

log = logging.getLogger(__name__)

_HANDOFF_YIELDS = 12
# Seconds a task whose end this process queued reads as this process writes it, at most, should
# the task store never write that end (a bound, for a consumer that failed)
SETTLE_WITHIN = 30.0
# How long a turn waits for the task's row to hold its message (`_row_stored`) before it begins
# anyway: a bound for an SDK consumer that stopped without writing it, never reached otherwise.
_ROW_WAIT_SECONDS = 60.0
_SESSION_NS = uuid.UUID("5b0f4b8e-6a53-4c53-9a39-1d3c3f0a2a2a")


def session_id_for(owner: str, context_id: str) -> str:
    """The core session of one owner's A2A context (owners never share a session)."""
    return str(uuid.uuid5(_SESSION_NS, f"{owner}\n{context_id}"))


def owner_of(call_context: ServerCallContext | None) -> str:
    if call_context is None:
        return ""
    try:
        return call_context.user.user_name or ""
    except Exception:
        return ""


def split_subject(text: str) -> tuple[str, str]:
    """`**Subject** rest` -> ("Subject", "rest"): the bold title Gemini-style thoughts open with,
    when the core did not already give it."""
    end = text.find("**", 2)
    if end == -1:
        return "", text
    return text[2:end].strip(), text[end + 2 :].lstrip()


def _mcp_servers(raw: Any) -> dict[str, dict[str, Any]] | None:
    """AgentSettings `mcp_servers`: {name: {command, args, env, cwd} | {url, headers}}."""
    if not isinstance(raw, dict):
        return None
    return {str(k): v if isinstance(v, dict) else {} for k, v in raw.items()}


def task_extra(session: Session) -> dict[str, Any]:
    """What the task's metadata keeps about the conversation: the client tool set in force, the
    definitions last refused, per-tool call and failure counts, and the tokens and dollars the
    conversation has used so far (what a remote `devagent chat` shows in its status line), this
    task's own (`task_usage`: what its cap counts) and its subagents' share."""
    out: dict[str, Any] = {}
    state = session.state
    for key, u in (
        ("usage", state.usage),
        ("task_usage", state.turn_usage),
        ("subagent_usage", state.subagent_usage),
    ):
        if u.requests or u.input_tokens or u.output_tokens:
            out[key] = u.to_json()
    if state.tool_stats:
        out["tool_stats"] = {k: dict(v) for k, v in state.tool_stats.items()}
    rejected = (state.extra.get("a2a") or {}).get("client_tools_rejected") or []
    if state.client_tools or rejected:
        out["client_tools"] = {
            "accepted": [t.name for t in state.client_tools],
            "rejected": list(rejected),
        }
    return out


# What the pump hands the emitting loop in `_translate`, one small typed item per core event: the
# core's own text, thought and notice events, and these.


@dataclass(slots=True)
class _Tool:
    call_id: str
    status: ToolCallStatus
    json: dict[str, Any]  # the update as the dialect sends it, taken when it happened


@dataclass(slots=True)
class _Answer:
    """A model answer begins (`StepBegin.answer`)."""

    key: str


@dataclass(slots=True)
class _End:
    """How the turn stopped: the task state, its error text, the status message's parts, and
    the reply (an artifact and the final message) when it finished."""

    state: TaskState
    error: str | None = None
    parts: list[Part] | None = None
    reply: str = ""


@dataclass(slots=True)
class _Refused:
    """The core refused the input before anything changed."""

    state: TaskState
    text: str


class _Done:
    __slots__ = ()


_DONE = _Done()
_Item = TextDelta | _Tool | _Answer | ThoughtDelta | Notice | _End | _Refused | _Done


@dataclass(slots=True)
class _Running:
    """An execution of this process: its turn's driver once made (the one handle that cancels it)."""

    driver: TurnDriver | None = None
    cancelled: bool = False
    done: asyncio.Event = field(default_factory=asyncio.Event)
    record: TurnRecord | None = None  # metrics and the turn's log line (observe.py)


class DevagentExecutor(AgentExecutor):
    def __init__(self, core: AgentCore, settings: A2ASettings) -> None:
        self.core = core
        self.settings = settings
        self._running: dict[str, _Running] = {}  # tasks whose execute() runs in this process
        # tasks whose end or pause this process queued, until the task store writes it (or a
        # bound passes): (the store's event, the deadline)
        self._settling: dict[str, tuple[asyncio.Event, float]] = {}
        self.metrics: Metrics | None = None  # set by the app (observe.py)
        # the IdP identities' shared groups, where the operator lets groups share (set by the app)
        self.identity_groups: IdentityGroups | None = None
        # The SDK's task store (set by the app): a turn begins once its task's row holds its message.
        self.task_store: BufferedTaskStore | None = None
        # With a database that several replicas share: the live events of executions here,
        # logged for the replicas that follow them (None with SQLite: one process).
        self.fanout: Fanout | None = None
        if not core.store.is_sqlite and settings.replica_events:
            # late: replicas only; one process on SQLite never loads it
            from devagent.a2a.fanout import Fanout

            self.fanout = Fanout(core.store)

    def executing(self, task_id: str) -> bool:
        """Whether this process is running a request of the task (from its very start), or has
        queued its end or pause for the SDK and the task store has not written it yet: in both,
        the task is as this process writes it (its conversation may have ended already)."""
        if task_id in self._running:
            return True
        entry = self._settling.get(task_id)
        if entry is None:
            return False
        if entry[0].is_set() or time.monotonic() > entry[1]:
            del self._settling[task_id]
            return False
        return True

    def _ending_queued(self, task_id: str) -> None:
        """The end or pause of the task is about to be queued (`executing`)."""
        if self.task_store is not None:
            self._settling[task_id] = (self.task_store.settling(task_id), time.monotonic() + SETTLE_WITHIN)

    def emitter(self, queue: EventQueue | None, task: Task, model: str, *, plain: bool = False) -> Emitter:
        """The emitter of a task's dialect: the legacy one the task was made in, else the RFC's,
        or the plain one for a client without the extension (`plain`); `model` as clients see
        it (`model_name`)."""
        q: Any = queue
        if legacy.is_legacy_task(task):
            return legacy.LegacyEmitter(q, task.id, task.context_id, model)
        if plain:
            return PlainEmitter(q, task.id, task.context_id, model)
        return RfcEmitter(q, task.id, task.context_id, model)

    # --- sessions ---------------------------------------------------------------------------

    async def session_for(
        self,
        owner: str,
        context_id: str,
        prepared: Prepared | None,
        create: bool = True,
        *,
        new_context: bool = False,
        turn: bool = False,
    ) -> Session | None:
        """The session of (owner, context_id), created if missing and `create`. `new_context`: the
        contextId was generated for this request, so there is no session to look up. `turn`: a
        turn of it starts now in this process, which creates it holding its lease: a reader then
        knows a message whose process died before its turn began (the lease's holder is gone)."""
        sid = session_id_for(owner, context_id)
        if not new_context:
            session = await self.core.get_session(sid)
            if session is not None or not create:
                return session
        st = prepared.settings if prepared else None
        workspace = (prepared.workspace if prepared else None) or str(self.settings.roots_for(owner)[0])
        approval = st.approval_mode if st else None
        if prepared is not None and prepared.dialect == "plain":
            # the operator's policy for clients that cannot render a permission request
            approval = {"ask": "ask", "deny": "plan", "server": None}.get(self.settings.plain_approval, "ask")
        return await self.core.create_session(
            [workspace],
            session_id=sid,
            model=st.model if st else None,
            approval_mode=approval,
            extra={"a2a": {"context_id": context_id, "owner": owner}},
            identity=owner,
            # the client's MCP servers; the core applies server policy to them
            mcp_servers=_mcp_servers(st.extra.get("mcp_servers")) if st else None,
            repository=st.repository if st else None,  # a new folder under `workspace`, cloned
            # Its turn starts now: stored holding the lease (one write fewer than a claim).
            leased=new_context or turn,
        )

    def model_name(self, session: Session | None) -> str:
        """The model as clients see it in event metadata (`shown_name`)."""
        return self.shown_model(session.state.model if session is not None else "")

    def shown_model(self, spec: str) -> str:
        """A conversation's model (`spec`; "" for the default) as clients see it."""
        return shown_name(spec or self.core.default_model)

    # --- AgentExecutor ------------------------------------------------------------------------

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = context.task_id or ""
        running = _Running()
        self._running[task_id] = running
        if self.metrics is not None:
            running.record = self.metrics.turn(task_id)
        failure = ""
        try:
            await self._execute(context, event_queue, running)
        except BaseException as e:
            failure = f"{type(e).__name__}: {e}"
            raise
        finally:
            if running.record is not None:
                running.record.finish(failure)
            running.done.set()
            if self._running.get(task_id) is running:
                del self._running[task_id]

    async def _execute(self, context: RequestContext, event_queue: EventQueue, running: _Running) -> None:
        given = handoff(context.call_context)  # what the request handler worked out (request.py)
        prepared = given.prepared or Prepared(text=context.get_user_input())
        task = context.current_task
        context_id = task.context_id if task is not None else (context.context_id or "")
        owner = owner_of(context.call_context)
        new_context = task is None and given.new_context
        # The conversation first, created holding its lease: a new task is stored (`_start`) once the
        # process taking its message up is named by that lease, so a reader knows at once a
        # message whose process died before its turn began (`derive._not_taken_up`).
        session, error = await self._open(owner, context_id, prepared, new_context)
        try:
            with self._awaiting_row(context) as stored:
                await self._start(context, event_queue, running, prepared, (session, error), stored)
        finally:
            if session is not None:  # a lease taken for a turn that may not have started
                await session.release_unused_lease()

    async def _start(
        self,
        context: RequestContext,
        event_queue: EventQueue,
        running: _Running,
        prepared: Prepared,
        opened: tuple[Session | None, str],
        stored: asyncio.Future[bool] | None,
    ) -> None:
        """Store a new task (its conversation is `opened` already), then run the turn in it once
        the task's row holds the message (`stored`); or, when the conversation could not be
        opened, fail the task with the reason."""
        session, error = opened
        # A legacy (Gemini CLI a2a-server dialect) task, decided once by the request handler.
        lreq = handoff(context.call_context).legacy
        task = context.current_task
        task_id = context.task_id or ""
        context_id = task.context_id if task is not None else (context.context_id or "")
        if task is None:
            first = Task(
                id=task_id, context_id=context_id, status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)
            )
            first.status.timestamp.GetCurrentTime()
            if context.message is not None:
                first.history.append(context.message)
            if lreq is not None:  # the task keeps its dialect in its metadata
                first.metadata.update(legacy.event_metadata(legacy.STATE_CHANGE, self.core.default_model))
        if self.fanout is not None:  # other replicas may follow this execution
            self.fanout.begin(task if task is not None else first, context.message)
            event_queue = self.fanout.queue(event_queue, task_id)
        if task is None:
            await event_queue.enqueue_event(first)
        previous_state = task.status.state if task is not None else None

        model = self.core.default_model
        em: Emitter
        if lreq is not None:
            em = legacy.LegacyEmitter(event_queue, task_id, context_id, model, lreq.outcomes)
        elif prepared.dialect == "plain":
            em = PlainEmitter(event_queue, task_id, context_id, model)
        else:
            em = RfcEmitter(event_queue, task_id, context_id, model)
        if session is None:
            await em.emit(FAILED, ext.STATE_CHANGE, Part(text=error), error=error)
            return
        await self._run(session, prepared, lreq, em, previous_state, running, stored)

    def _awaiting_row(
        self, context: RequestContext
    ) -> contextlib.AbstractContextManager[asyncio.Future[bool] | None]:
        """The request's turn waits until the task's row holds its message: the SDK's consumer
        writes the row when it takes the new Task, or a continuation's first status update, while
        this keeps going, so without the wait a process killed before that write leaves a
        conversation whose turn began (or even ended) on a message its task does not hold, and a
        reader misreads the task. Opened before those events are sent; nothing to wait for when
        there is no message, or the stored task holds it already (the SDK does not write it
        again)."""
        message = context.message
        task = context.current_task
        if self.task_store is None or message is None or not message.message_id:
            return contextlib.nullcontext()
        if task is not None and any(m.message_id == message.message_id for m in task.history):
            return contextlib.nullcontext()
        return self.task_store.awaiting_row(context.task_id or "", message.message_id)

    async def _row_stored(self, stored: asyncio.Future[bool], task_id: str) -> bool:
        """Whether the task's row holds the message (False: its write failed, and the SDK fails the
        task). Bounded: a consumer that stopped without writing it must not hold the request."""
        try:
            return await asyncio.wait_for(stored, _ROW_WAIT_SECONDS)
        except TimeoutError:
            log.warning(
                "task %s: its message is not stored after %s s; the turn begins", task_id, _ROW_WAIT_SECONDS
            )
            return True

    async def _open(
        self, owner: str, context_id: str, prepared: Prepared, new_context: bool
    ) -> tuple[Session | None, str]:
        """The conversation a turn is about to run in, created holding its lease if new: (it, "")
        or (None, why it cannot be opened)."""
        try:
            session = await self.session_for(owner, context_id, prepared, new_context=new_context, turn=True)
        except Exception as e:  # an unusable workspace, a model that cannot be built
            log.warning("cannot open session for context %s: %s", context_id, e)
            return None, str(e)
        return session, ""

    async def _run(
        self,
        session: Session,
        prepared: Prepared,
        lreq: legacy.LegacyRequest | None,
        em: Emitter,
        previous_state: TaskState | None,
        running: _Running,
        stored: asyncio.Future[bool] | None,
    ) -> None:
        em.model = self.model_name(session)
        await em.emit(WORKING, ext.STATE_CHANGE)
        crash_point("a2a.working_sent")
        if stored is not None and not await self._row_stored(stored, em.task_id):
            return  # the task's row could not be written: the SDK fails the task
        if lreq is not None and lreq.reannounce:  # legacy modify_with_editor: nothing for the core
            await em.reannounce(session.waiting_calls(), lreq.edits)
            return
        if prepared.tools is not None or prepared.tools_rejected:
            await self._apply_client_tools(session, prepared, em)

        await self._translate(session, prepared.to_input(), em, previous_state, running)

    async def _apply_client_tools(self, session: Session, prepared: Prepared, em: Emitter) -> None:
        """The message's client tool set replaces the conversation's (the core validates
        it); every refused definition is reported in a DataPart and in the task's metadata."""
        rejected = [*prepared.tools_rejected, *await session.set_client_tools(prepared.tools or [])]
        # Kept with the session (saved with the turn's first write), so the task's metadata
        # shows the refusals after later turns too.
        session.state.extra.setdefault("a2a", {})["client_tools_rejected"] = ct.rejected_json(rejected)
        if rejected:
            text = "Refused client tools: " + "; ".join(f"{n}: {r}" for n, r in rejected) + "\n"
            data = {
                "rejected_tools": ct.rejected_json(rejected),
                "accepted_tools": [t.name for t in session.state.client_tools],
            }
            await em.emit(
                WORKING,
                ext.TEXT_CONTENT,
                [Part(text=text), data_part(data, {"type": ct.REJECTED_TYPE, "format": ct.FORMAT})],
                extra=task_extra(session),
            )

    async def _translate(
        self,
        session: Session,
        inp: Input,
        em: Emitter,
        previous_state: TaskState | None,
        running: _Running,
    ) -> None:
        """Runs the core's turn through the turn driver in a pump task whose door turns events
        into items at once (the core keeps mutating its ToolCall objects), and sends the items
        from here (`_Outbox` merges those waiting when the SDK's consumer is slower than the
        model)."""
        outbox = _Outbox()
        door = _A2aDoor(outbox, em, running.record, session.id)
        # A cancel that comes before the turn begins is recorded by it (it begins cancelled).
        driver = running.driver = TurnDriver(session, door, label=em.task_id, record_early_cancel=True)
        if running.cancelled:  # tasks/cancel came before the turn was made: it ends at once
            await driver.cancel()

        async def pump() -> None:
            try:
                await driver.run(inp)
            except InputError as e:
                # Refused before anything changed: the task stays as it was.
                state = previous_state if previous_state == INPUT_REQUIRED else FAILED
                outbox.put(_Refused(state, str(e)))
            except Exception as e:
                # the client gets a reference, the log the detail
                text = internal_error(repr(e), what=f"the turn of session {session.id}", exc_info=e)
                outbox.put(_End(FAILED, text, [Part(text=text)]))
            outbox.put(_DONE)

        # Let the SDK deliver what is already queued (the Task, `working`) before the turn's
        # first synchronous stretch (building the model request) holds the loop.
        for _ in range(_HANDOFF_YIELDS):
            await asyncio.sleep(0)
        pumping = asyncio.create_task(pump(), name=f"advance:{session.id}")
        try:
            ended = await self._send_items(outbox, em, session)
        finally:
            if not pumping.done():
                pumping.cancel()
                await asyncio.gather(pumping, return_exceptions=True)
        if not ended:
            await em.emit(FAILED, ext.STATE_CHANGE, error="the turn ended without a result")

    async def _send_items(self, outbox: _Outbox, em: Emitter, session: Session) -> bool:
        """Send the turn's items as A2A events until it is done; True when its end was sent."""
        ended = False
        while True:
            item = await outbox.next()
            if isinstance(item, TextDelta):
                await em.text(item.text)
            elif isinstance(item, _Tool):
                await em.data(ext.TOOL_CALL_UPDATE, item.json)
            elif isinstance(item, _Answer):
                em.answer_begins(item.key)
            elif isinstance(item, ThoughtDelta):
                await em.data(ext.THOUGHT, ext.thought_json(item.subject, item.text))
            elif isinstance(item, Notice):
                error = item.text if item.level == "error" else None
                await em.emit(WORKING, ext.TEXT_CONTENT, Part(text=item.text), error)
            elif isinstance(item, _End):
                if not ended:
                    ended = True
                    # (the session has stored the pause or the end; the task store not yet)
                    crash_point("a2a.turn_stored")
                    if item.state == COMPLETED and session.state.repository:
                        await self._repository_artifact(session, em)
                    parts = await em.reply(item.reply) if item.reply else item.parts
                    self._ending_queued(em.task_id)
                    await em.emit(
                        item.state, ext.STATE_CHANGE, parts, error=item.error, extra=task_extra(session)
                    )
            elif isinstance(item, _Refused):
                ended = True
                parts = [Part(text=item.text)]
                waiting = [c for c in session.waiting_calls() if c.awaiting_client]
                if item.state == INPUT_REQUIRED and waiting:  # the calls still wait: say so again
                    parts.append(tool_calls_part(waiting))
                self._ending_queued(em.task_id)
                await em.emit(item.state, ext.STATE_CHANGE, parts, error=item.text)
            else:  # done
                return ended

    async def _repository_artifact(self, session: Session, em: Emitter) -> None:
        """A repository conversation's result after a completed task: the patch against the ref
        it started from (a text/x-diff part) and what it is (a data part: repository, ref,
        base_commit, files, and branch and commit when pushed, as the caller asked at its start),
        as the artifact `repository-result`; a failure to make it is said in a text part."""
        try:
            result = await repository_result(session)
        except InputError as e:
            parts = [Part(text=f"No repository result: {e}")]
        else:
            info = {k: v for k, v in result.to_json().items() if k != "patch"}
            parts = [data_part(info, {"type": "repository-result"})]
            if result.patch:
                parts.insert(0, Part(text=result.patch, media_type="text/x-diff"))
        await em.artifact("repository-result", parts)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = context.task_id or ""
        if self.metrics is not None:
            self.metrics.task_canceled(task_id)
        running = self._running.get(task_id)
        if running is not None:
            # The turn ends with TurnEnd("cancelled"), which execute() turns into CANCELED; a
            # turn not made yet begins cancelled.
            running.cancelled = True
            if running.driver is not None:
                await running.driver.cancel()
            try:
                await asyncio.wait_for(running.done.wait(), timeout=10)
            except TimeoutError:
                log.warning("task %s did not stop within 10 s of cancel", task_id)
            return
        # Parked (input-required): no execute() runs. Cancel the waiting calls and record it.
        task = context.current_task
        if task is not None:
            session = await self.session_for(
                owner_of(context.call_context), task.context_id, None, create=False
            )
            if session is not None and session.state.status == "awaiting_input":
                await session.cancel()
            cc = context.call_context
            plain = cc is None or ext.EXTENSION_URI not in cc.requested_extensions
            em = self.emitter(event_queue, task, self.model_name(session), plain=plain)
            await em.emit(CANCELED, ext.STATE_CHANGE)


class _Outbox:
    """The items of a turn, put by the door as events happen and taken by the emitting loop. When
    the loop is slower than the model, the items waiting are merged as they are taken: text
    pieces into one text, thought pieces of one subject into one thought, and successive
    EXECUTING snapshots of one call into the latest (its `live_content` replaces the earlier one
    anyway). An idle stream sends every piece as it comes."""

    def __init__(self) -> None:
        self._buf: deque[_Item] = deque()
        self._wake = asyncio.Event()

    def put(self, item: _Item) -> None:
        self._buf.append(item)
        self._wake.set()

    async def next(self) -> _Item:
        while not self._buf:
            self._wake.clear()
            await self._wake.wait()
        item = self._buf.popleft()
        buf = self._buf
        if isinstance(item, TextDelta) and buf and isinstance(buf[0], TextDelta):
            pieces = [item.text]
            while buf and isinstance(more := buf[0], TextDelta):
                pieces.append(more.text)
                buf.popleft()
            return TextDelta("".join(pieces))
        if isinstance(item, _Tool) and item.status == ToolCallStatus.EXECUTING:
            while (
                buf
                and isinstance(newer := buf[0], _Tool)
                and (newer.call_id, newer.status)
                == (
                    item.call_id,
                    item.status,
                )
            ):
                item = newer
                buf.popleft()
            return item
        if isinstance(item, ThoughtDelta) and buf and isinstance(buf[0], ThoughtDelta):
            pieces = [item.text]
            while buf and isinstance(same := buf[0], ThoughtDelta) and same.subject == item.subject:
                pieces.append(same.text)
                buf.popleft()
            return ThoughtDelta("".join(pieces), item.subject)
        return item


class _A2aDoor(Door):
    """A turn as A2A streams it: each core event becomes an item of the outbox, taken when it
    happens; a call that waits parks the turn (input-required: its answer comes in a later
    request, perhaps to another process). Thoughts are sent with their subject: a thought that
    opens with a bold title is held until the title is whole."""

    def __init__(self, outbox: _Outbox, em: Emitter, record: TurnRecord | None, session_id: str) -> None:
        self.outbox = outbox
        self.em = em
        self.session_id = session_id
        self.record = record  # metrics and the turn's log line
        self.reply: list[str] = []  # the text of the model's last response (the turn's reply)
        self.subject = ""
        self.held = ""
        self.in_thought = False

    async def ask(self, call: ToolCall, driver: TurnDriver) -> None:
        driver.park()

    async def show(self, event: Event) -> None:
        if self.record is not None:
            self.record.event(event)
        if self.in_thought and not isinstance(event, ThoughtDelta):
            if self.held:
                self.outbox.put(ThoughtDelta(self.held, self.subject))
            self.subject = self.held = ""
            self.in_thought = False
        if isinstance(event, TextDelta):
            if event.text:
                self.outbox.put(event)
                self.reply.append(event.text)
        elif isinstance(event, ToolCallUpdate):
            self.reply.clear()  # text before a tool call is not the reply
            c = event.call
            self.outbox.put(_Tool(c.id, c.status, self.em.tool_json(c)))
        elif isinstance(event, ThoughtDelta):
            self._thought(event)
        elif isinstance(event, StepBegin):
            if event.answer:  # the answer's messages get ids of its own (the same if asked again)
                self.outbox.put(_Answer(f"{self.session_id}/{event.answer}"))
        elif isinstance(event, Notice):
            self.outbox.put(event)
        elif isinstance(event, NeedsInput):
            # the requests and the calls the client runs go out with the pause itself
            self.outbox.put(_End(INPUT_REQUIRED, parts=self.em.pause_parts(event.calls)))
        elif isinstance(event, TurnEnd):
            self.outbox.put(self._end(event))

    def _thought(self, ev: ThoughtDelta) -> None:
        if ev.subject:
            self.subject = ev.subject
            self.outbox.put(ThoughtDelta(ev.text, ev.subject))
        elif self.held or (not self.in_thought and ev.text.startswith("*")):
            # A thought opening with a bold title: hold it until the title is whole.
            self.held += ev.text
            if self.held.startswith("**") and "**" in self.held[2:]:
                self.subject, rest = split_subject(self.held)
                self.held = ""
                if rest:
                    self.outbox.put(ThoughtDelta(rest, self.subject))
            elif len(self.held) > 200 or not self.held.startswith("**"[: len(self.held)]):
                self.outbox.put(ThoughtDelta(self.held, self.subject))
                self.held = ""
        else:
            self.outbox.put(ThoughtDelta(ev.text, self.subject))
        self.in_thought = True

    def _end(self, ev: TurnEnd) -> _End:
        if ev.reason == "cancelled":
            return _End(CANCELED)
        if ev.reason in ("error", "interrupted"):
            text = ev.error or ev.reason
            return _End(FAILED, text, [Part(text=text)])
        if ev.reason == "max_steps_reached":
            msg = ev.error or "maximum number of steps reached"
            return _End(COMPLETED, "maximum number of steps reached", [Part(text=msg)])
        return _End(COMPLETED, reply="".join(self.reply))
