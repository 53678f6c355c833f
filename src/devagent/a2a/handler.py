"""The SDK's request handler with devagent's edges: AgentSettings and confirmations are checked
before a task is touched (so a bad request is a JSON-RPC error, not a failed task), extension
clients may continue a finished task, subscriptions end with the task's state (the TCK's
STREAM-SUB-002), and the contextId of a taskId-only follow-up is inherited (a2a-python #1206).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Callable
from typing import TYPE_CHECKING, Any

from a2a.server.agent_execution import RequestContext, SimpleRequestContextBuilder
from a2a.server.agent_execution.active_task import INTERRUPTED_TASK_STATES, TERMINAL_TASK_STATES
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
)
from a2a.utils.task import apply_history_length, validate_history_length
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]

from devagent.a2a import client_tools as ct
from devagent.a2a import extension as ext
from devagent.a2a import legacy, operator_reads
from devagent.a2a.card import INPUT_MODES
from devagent.a2a.derive import derive_task, may_be_untaken, needs_transcript, to_history
from devagent.a2a.executor import DevagentExecutor, owner_of, session_id_for
from devagent.a2a.request import LegacyRequest, Prepared, handoff
from devagent.a2a.streams import StreamLimit
from devagent.agent.api import ANSWER_OPTION, InputError, Resume, check_repository, read_turn

if TYPE_CHECKING:
    from a2a.server.context import ServerCallContext
    from a2a.server.events import Event
    from a2a.server.tasks import TaskStore

    from devagent.agent.api import ClientResult, ClientTool, Session

log = logging.getLogger(__name__)

MAX_ID_LEN = 36  # the SDK's task table stores ids in VARCHAR(36) (PostgreSQL enforces it)


class InheritContextBuilder(SimpleRequestContextBuilder):
    """A taskId-only follow-up keeps its task's contextId (the handler looked the task up).
    `on_new_task` learns the id of every task a message creates."""

    def __init__(self, on_new_task: Callable[[str], None] | None = None) -> None:
        super().__init__()
        self._on_new_task = on_new_task

    async def build(
        self,
        context: ServerCallContext,
        params: SendMessageRequest | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: Task | None = None,
    ) -> RequestContext:
        if task_id and not context_id:
            context_id = handoff(context).context_id
        if not task_id and not context_id:
            # The SDK generates a new contextId: no session can exist for it yet.
            handoff(context).new_context = True
        built = await super().build(context, params, task_id, context_id, task)
        if not task_id and built.task_id and self._on_new_task is not None:
            self._on_new_task(built.task_id)
        return built


def parse_message(message: Message, request_metadata: dict[str, Any] | None) -> Prepared:
    texts: list[str] = []
    confirmations: list[ext.Confirmation] = []
    tools: list[ClientTool] | None = None
    tools_rejected: list[tuple[str, str]] = []
    raw_results: list[ct.ResultIn] = []
    for part in message.parts:
        which = part.WhichOneof("content")
        if which == "text":
            texts.append(part.text)
        elif which == "data":
            data = MessageToDict(part.data)
            part_md = MessageToDict(part.metadata) if part.HasField("metadata") else {}
            part_type = part_md.get("type") if isinstance(part_md, dict) else None
            if (isinstance(data, dict) and ("tools" in data or "tool_results" in data)) or part_type in (
                ct.DEFINITIONS_TYPE,
                ct.RESULTS_TYPE,
            ):
                data = ct.plain_numbers(data)
            if (isinstance(data, dict) and "tools" in data) or part_type == ct.DEFINITIONS_TYPE:
                # client tool definitions (several parts add up)
                found, refused = ct.parse_definitions(data.get("tools") if isinstance(data, dict) else data)
                tools = [*(tools or []), *found]
                tools_rejected += refused
            elif (isinstance(data, dict) and "tool_results" in data) or part_type == ct.RESULTS_TYPE:
                try:  # results of client tool calls
                    raw_results += ct.parse_results(
                        data.get("tool_results") if isinstance(data, dict) else data
                    )
                except ct.ToolResultsError as e:
                    raise InvalidParamsError(message=str(e)) from None
            elif isinstance(data, dict):
                try:
                    c = ext.parse_confirmation(data)
                except ext.SettingsError as e:
                    raise InvalidParamsError(message=str(e)) from None
                if c is not None:
                    confirmations.append(c)
    msg_md = MessageToDict(message.metadata) if message.HasField("metadata") else None
    try:
        settings = ext.AgentSettings.from_metadata(msg_md, request_metadata)
    except ext.SettingsError as e:
        raise InvalidParamsError(message=str(e)) from None
    prepared = Prepared(
        text="\n".join(texts),
        confirmations=confirmations,
        settings=settings,
        tools=tools,
        tools_rejected=tools_rejected,
        raw_results=raw_results,
    )
    if not raw_results and prepared.text:
        try:  # the design's plain-text result forms
            prepared.text_results = ct.parse_text_results(prepared.text)
        except ct.ToolResultsError as e:
            raise InvalidParamsError(message=str(e)) from None
    if prepared.text and prepared.text_results is None:
        # Other text beside a refusal is the user's reason, passed on to the model (the RFC's
        # ToolCallConfirmation has no field for it; `devagent chat --url` sends it so); beside a
        # question's free answer without its text, it is the answer.
        if any(c.selected_option_id == "cancel" for c in confirmations):
            prepared.feedback = prepared.text
        for c in confirmations:
            if c.selected_option_id == ANSWER_OPTION and c.new_content is None:
                c.new_content = prepared.text
    return prepared


def _task_calls(task: Task) -> list[tuple[str, str]]:
    """The client tool calls a task's current status announces."""
    if not task.status.HasField("message"):
        return []
    out: list[tuple[str, str]] = []
    for part in task.status.message.parts:
        if part.WhichOneof("content") == "data":
            out += ct.calls_of_data(MessageToDict(part.data))
    return out


def _answer_error(e: InputError) -> str:
    if e.code in ("answered", "not_waiting"):
        return f"this permission request or tool call was already answered: {e}"
    return str(e)


def _v03(context: ServerCallContext) -> bool:
    """Whether the request speaks A2A v0.3: no `A2A-Version`, or a 0.x one (as the SDK decides)."""
    headers = context.state.get("headers") or {}
    version = str(headers.get("A2A-Version") or headers.get("a2a-version") or "0.3")
    return version.startswith("0.")


# The answers a member of a group that approves may give another member's permission request.
APPROVER_OPTIONS = frozenset(("proceed_once", "cancel"))


def beyond_approval(prepared: Prepared) -> str:
    """What a message answering another identity's permission requests carries beyond allowing
    once or refusing ("" for nothing): the rest (an edit, an "always", an answer to a question,
    settings, tool results, a prompt) would act in the owner's session as the owner."""
    if not prepared.confirmations:
        return "carries no ToolCallConfirmation"
    if prepared.raw_results or prepared.text_results is not None or prepared.tools is not None:
        return "carries tool results or definitions"
    if prepared.tools_rejected or prepared.settings is not None:
        return "carries tool definitions or settings"
    for c in prepared.confirmations:
        if c.selected_option_id not in APPROVER_OPTIONS or c.new_content is not None:
            return f"answers {c.tool_call_id} with {c.selected_option_id!r} or new content"
    if prepared.text and any(c.selected_option_id != "cancel" for c in prepared.confirmations):
        return "carries text beside an allow (a reason goes with a refusal only)"
    return ""


def _state_name(state: TaskState) -> str:
    return str(TaskState.Name(state)).removeprefix("TASK_STATE_").lower().replace("_", "-")


class DevagentRequestHandler(DefaultRequestHandler):
    def __init__(
        self,
        executor: DevagentExecutor,
        task_store: TaskStore,
        on_new_task: Callable[[str], None] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            agent_executor=executor,
            task_store=task_store,
            request_context_builder=InheritContextBuilder(on_new_task),
            **kwargs,
        )
        self.devagent = executor
        self.store = task_store
        # Open streams per token, counted by each binding's door
        self.streams = StreamLimit(executor.settings.max_streams_per_token)

    async def _prepare(self, params: SendMessageRequest, context: ServerCallContext) -> None:
        """Checks and parses a message before the SDK runs it; a bad one is a JSON-RPC error and
        no task is touched. What was worked out goes to the executor in the hand-off."""
        msg = params.message
        self._check_limits(msg)
        req_md = MessageToDict(params.metadata) if params.HasField("metadata") else None
        prepared = self._parse(msg, req_md, context)
        results = prepared.raw_results or (prepared.text_results.entries if prepared.text_results else [])
        if results and not msg.task_id:
            # The design's client sends results without taskId: find the task waiting for them.
            await self._route_results(msg, prepared, context)
        lreq: LegacyRequest | None = None
        if not msg.task_id and legacy.is_legacy_message(
            MessageToDict(msg.metadata) if msg.HasField("metadata") else None,
            req_md,
            context.requested_extensions,
        ):
            lreq = LegacyRequest()
        context_id = msg.context_id or None
        task: Task | None = None
        stored = Task()  # the task as stored, before `_derived_task` derives it
        if not msg.task_id and context_id:
            # A client that keeps contextIds only (the A2A Inspector, a2a-handler) answers a
            # question on the context: the task waiting there continues.
            msg.task_id = await self._waiting_task_of(context_id, context)
        if msg.task_id:
            task = await self._task_named(
                msg.task_id, context, stored if (prepared.confirmations or results) else None
            )
            if legacy.is_legacy_task(task):
                lreq = LegacyRequest()
            context_id = task.context_id
            handoff(context).context_id = context_id
            if results:
                await self._match_results(task, prepared, context)
        plain = lreq is None and ext.EXTENSION_URI not in context.requested_extensions
        prepared.dialect = "legacy" if lreq is not None else "plain" if plain else "rfc"
        if plain and task is not None and prepared.text and not prepared.confirmations and not results:
            await self._plain_answer(task, prepared, context)
        if prepared.confirmations:
            await self._check_confirmations(prepared, lreq, context_id, context)
        if (prepared.confirmations or prepared.results) and context_id and prepared.command is None:
            await self._take_answers(prepared, context_id, context, task, stored)
        if (
            task is not None
            and task.status.state in TERMINAL_TASK_STATES
            and ext.EXTENSION_URI in context.requested_extensions
            and not prepared.confirmations
            and not prepared.results
        ):
            # Only once the message is known to be acceptable: an answer refused above (given
            # already through another replica) must not write this process's copy of the task.
            await self._reopen(task, context)
        given = handoff(context)
        given.legacy = lreq
        given.prepared = prepared

    def _check_limits(self, msg: Message) -> None:
        """The message's ids, its number of parts and their media types, within bounds."""
        if len(msg.task_id) > MAX_ID_LEN:  # no task has such an id (TCK CORE-MULTI-004)
            raise TaskNotFoundError(f"Task {msg.task_id} not found")
        if len(msg.context_id) > MAX_ID_LEN:
            raise InvalidParamsError(message=f"contextId longer than {MAX_ID_LEN} characters")
        limits = self.devagent.settings
        if len(msg.parts) > limits.max_parts:
            raise InvalidParamsError(message=f"more than {limits.max_parts} parts in one message")
        for part in msg.parts:  # TCK CORE-SEND-003: a media type outside the card's input modes
            media = part.media_type.split(";", 1)[0].strip().lower()
            kind = part.WhichOneof("content")
            if not media or media in INPUT_MODES or (kind == "text" and media.startswith("text/")):
                continue  # text of any text/* type is read as text
            what = "file" if kind in ("raw", "url") else kind or "empty"
            raise ContentTypeNotSupportedError(f"{what} parts of type {media} are not supported")

    def _parse(self, msg: Message, req_md: dict[str, Any] | None, context: ServerCallContext) -> Prepared:
        """The message parsed: its text, confirmations, settings (the workspace validated), client
        tools and results; refused when it carries nothing to act on."""
        prepared = parse_message(msg, req_md)
        limits = self.devagent.settings
        if len(prepared.tools or ()) + len(prepared.tools_rejected) > limits.max_tools:
            raise InvalidParamsError(message=f"more than {limits.max_tools} tool definitions in one message")
        prepared.command = handoff(context).command
        if prepared.settings is not None and prepared.settings.workspace_path:
            try:
                prepared.workspace = ext.validate_workspace(
                    prepared.settings.workspace_path, limits.roots_for(owner_of(context))
                )
            except ext.SettingsError as e:
                raise InvalidParamsError(message=str(e)) from None
        if prepared.settings is not None and prepared.settings.repository is not None:
            try:  # a remote, ref or setup the operator does not allow: refused before any clone
                check_repository(self.devagent.core.config, prepared.settings.repository)
            except InputError as e:
                raise InvalidParamsError(message=str(e)) from None
        if not prepared.text and not prepared.confirmations and not prepared.raw_results:
            raise InvalidParamsError(
                message="the message has no text, no ToolCallConfirmation and no tool_results"
            )
        return prepared

    async def _task_named(self, task_id: str, context: ServerCallContext, stored: Task | None = None) -> Task:
        """The caller's task with this id, its state brought up to date with its session's (the
        copy as stored goes into `stored`, when given: compared once an answer is taken)."""
        task = await self.store.get(task_id, context)
        if task is None:
            raise TaskNotFoundError(f"Task {task_id} not found")
        if stored is not None:
            stored.CopyFrom(task)
        return await self._derived_task(task, context)

    async def _check_confirmations(
        self,
        prepared: Prepared,
        lreq: LegacyRequest | None,
        context_id: str | None,
        context: ServerCallContext,
    ) -> None:
        """Every confirmation answers a call waiting in this context (an answer given already is
        said to be so); a legacy client's outcomes are applied to the session."""
        session = (
            await self.devagent.core.inspect(session_id_for(owner_of(context), context_id))
            if context_id
            else None
        )
        if session is None:
            raise InvalidParamsError(message="no tool call waits for confirmation in this context")
        waiting = {c.id for c in session.waiting_calls()}
        unknown = [c.tool_call_id for c in prepared.confirmations if c.tool_call_id not in waiting]
        if unknown and await session.answered(unknown) == unknown:
            raise InvalidParamsError(
                message=f"this permission request was already answered (tool call {', '.join(unknown)})"
            )
        if unknown:
            raise InvalidParamsError(message=f"no tool call waiting with id {', '.join(unknown)}")
        if lreq is not None:
            try:
                if legacy.apply_confirmations(session, prepared, lreq):
                    await session.save_state()
            except ext.SettingsError as e:
                raise InvalidParamsError(message=str(e)) from None

    async def _take_answers(
        self, prepared: Prepared, context_id: str, context: ServerCallContext, task: Task | None, stored: Task
    ) -> None:
        """The answers are taken here, so that an answer given already (through this process or
        another) is a JSON-RPC error, and of two answers raced through two processes one runs."""
        answer = prepared.to_input()
        session = await self.devagent.session_for(owner_of(context), context_id, None, create=False)
        if session is not None and isinstance(answer, Resume) and (answer.decisions or answer.results):
            try:
                await session.accept_answers(answer)
            except InputError as e:
                raise InvalidParamsError(message=_answer_error(e)) from None
            if task is not None and stored.id and task.history != stored.history:
                # This process now runs the turn (it holds the conversation's lease): the task it
                # continues is the one the reader sees, with the history completed from the
                # conversation (`derive.py`), not the stale stored copy.
                await self.store.save(task, context)

    async def _waiting_task_of(self, context_id: str, context: ServerCallContext) -> str:
        """The caller's task that waits `input-required` in this context, or ""."""
        session = await self.devagent.core.inspect(session_id_for(owner_of(context), context_id))
        if session is None or session.state.status != "awaiting_input" or not session.state.turn_label:
            return ""
        task = await self.store.get(session.state.turn_label, context)
        if task is None or task.context_id != context_id:
            return ""
        task = await self._derived_task(task, context)
        return task.id if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED else ""

    async def _plain_answer(self, task: Task, prepared: Prepared, context: ServerCallContext) -> None:
        """A plain client answers a permission request in words, on the waiting task: `yes`,
        `always`, or `no` with feedback become the decisions; other text refuses the calls with
        the user's words for the model (`plain.parse_answer`). A question waiting is answered
        first, with the whole text (`plain.question_answer`)."""
        # late: only plain clients answering in words need the parser
        from devagent.a2a.plain import parse_answer, question_answer

        session = await self.devagent.core.inspect(session_id_for(owner_of(context), task.context_id))
        if session is None or session.state.turn_label != task.id:
            return
        asks = [c for c in session.waiting_calls() if not c.awaiting_client]
        if not asks:
            return
        question = next((c for c in asks if c.question is not None), None)
        if question is not None:  # the question shown (the first), answered with the text
            confirmation, prepared.feedback = question_answer(question, prepared.text)
            prepared.confirmations.append(confirmation)
            prepared.text = ""
            return
        answer = parse_answer(prepared.text)
        for c in asks:
            offered = [o.id for o in c.confirmation.options] if c.confirmation is not None else []
            option = answer.option
            if option == "proceed_always" and option not in offered:
                option = next((o for o in offered if o.startswith("proceed_always")), "proceed_once")
            prepared.confirmations.append(ext.Confirmation(c.id, option))
        prepared.feedback = answer.feedback
        prepared.text = ""

    def _match(
        self, session: Session | None, prepared: Prepared, *, quiet: bool = False
    ) -> list[ClientResult]:
        if prepared.raw_results:
            entries, exact = prepared.raw_results, False
        else:
            assert prepared.text_results is not None
            entries, exact = prepared.text_results.entries, prepared.text_results.exact
        waiting = session.waiting_calls() if session is not None else []
        if not any(c.awaiting_client for c in waiting):
            if quiet:
                return []
            raise ct.ToolResultsError("no tool call waits for a result in this task")
        answered = {p.id for p in session.state.pending if p.result is not None} if session else set()
        return ct.match_results(entries, waiting, exact=exact, answered=answered)

    async def _match_results(self, task: Task, prepared: Prepared, context: ServerCallContext) -> None:
        """Client tool results must answer calls this task waits on; anything else is refused before
        the task or the conversation changes."""
        try:
            if task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
                raise ct.ToolResultsError(
                    f"task {task.id} is not waiting for tool results (it is {_state_name(task.status.state)})"
                )
            session = await self.devagent.core.inspect(session_id_for(owner_of(context), task.context_id))
            prepared.results = self._match(session, prepared)
        except ct.ToolResultsError as e:
            raise InvalidParamsError(message=str(e)) from None
        prepared.text = ""

    async def _route_results(self, msg: Message, prepared: Prepared, context: ServerCallContext) -> None:
        """Finds the caller's task that waits for these results (by call ids, or for the text forms
        by the calls' names) among its own tasks waiting for input, and addresses the message to it.
        Another owner's tasks are never listed."""
        ids = {e.tool_call_id for e in prepared.raw_results if e.tool_call_id}
        found: list[Task] = []
        near: list[str] = []  # why the tasks waiting for calls of these names do not fit
        page_token = ""
        for _ in range(50):
            req = ListTasksRequest(
                status=TaskState.TASK_STATE_INPUT_REQUIRED, page_size=100, page_token=page_token
            )
            if msg.context_id:
                req.context_id = msg.context_id
            resp = await self.store.list(req, context)
            for t in resp.tasks:
                calls = _task_calls(t)
                if not calls or (ids and not ids <= {i for i, _ in calls}):
                    continue
                if not ids:
                    session = await self.devagent.session_for(
                        owner_of(context), t.context_id, None, create=False
                    )
                    try:
                        if not self._match(session, prepared, quiet=True):
                            continue
                    except ct.ToolResultsError as e:
                        near.append(f"{e} (task {t.id})")
                        continue
                found.append(t)
            page_token = resp.next_page_token
            if not page_token:
                break
        what = f"tool calls {', '.join(sorted(ids))}" if ids else "these tool results"
        if not found and len(near) == 1:
            raise InvalidParamsError(message=near[0])
        if not found:
            raise InvalidParamsError(
                message=f"no task of yours waits for {what}; send the message with its taskId"
            )
        if len(found) > 1:
            raise InvalidParamsError(
                message=f"several tasks wait for {what} ({', '.join(t.id for t in found)}); send the taskId"
            )
        msg.task_id = found[0].id
        msg.context_id = found[0].context_id

    async def _derived_task(self, task: Task, context: ServerCallContext) -> Task:
        """The task as its conversation says, at every read (`derive.py`): the core's read model
        of the conversation (`read_turn`), translated. A task whose turn runs in this process
        is as this process writes it."""
        ex = self.devagent
        if ex.executing(task.id):
            return task  # this process runs it and writes the task as it goes
        sid = session_id_for(owner_of(context), task.context_id)
        if ex.core.running_here(sid):
            return task
        view = await read_turn(ex.core, sid, lease=may_be_untaken(task))
        plain = ext.EXTENSION_URI not in context.requested_extensions
        em = ex.emitter(None, task, ex.shown_model(view.model if view is not None else ""), plain=plain)
        if view is not None and needs_transcript(task, view, em):
            await view.read_transcript()
        return derive_task(task, view, em, ex.core.config.lease_seconds)

    async def on_list_tasks(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        # an operator's (a shared group's): maybe another identity's
        context = await operator_reads.list_context(params, context, self.devagent.identity_groups)
        page: ListTasksResponse = await super().on_list_tasks(params, context)
        for task in page.tasks:  # the open ones read as their conversations say (`_derived_task`)
            if task.status.state not in TERMINAL_TASK_STATES:
                task.CopyFrom(await self._derived_task(task, context))
        return page

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        validate_history_length(params)
        stored = await self.store.get(params.id, context)
        groups = self.devagent.identity_groups
        if stored is None and (
            owners := await operator_reads.owner_context(self.store, params.id, context, groups)
        ):
            context = owners  # an operator (a shared group) reads another's task as its owner would
            stored = await self.store.get(params.id, context)
        if stored is None:
            raise TaskNotFoundError
        task = await self._derived_task(stored, context)
        result: Task = apply_history_length(task, params)
        return result

    async def _reopen(self, task: Task, context: ServerCallContext) -> None:
        """An extension client continues a finished task with the same taskId (RFC step 10).
        The task is stored `submitted` (a message no turn has taken up yet), which the SDK runs a
        new message on, this process holding the conversation's lease for that turn. If this
        process dies before the turn begins, a reader finds the task as any message no process
        took up: as its conversation says, or failed (`_not_taken_up`); never waiting for an input
        nothing asked for."""
        status = TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)
        status.timestamp.GetCurrentTime()
        to_history(task)  # (a status that restates the history's end is there once)
        task.status.CopyFrom(status)
        # The conversation's lease first: it names the process taking the message up, so a reader
        # knows at once when that process died before the turn began (`_not_taken_up`).
        session = await self.devagent.session_for(owner_of(context), task.context_id, None, create=False)
        if session is not None:
            await session.hold_for_turn()
        await self.store.save(task, context)

    async def _as_approver(self, params: SendMessageRequest, context: ServerCallContext) -> ServerCallContext:
        """A message to another identity's task from a member of a group that approves with its
        owner (`operator_reads.approver_context`): the owner's context, where the message only
        allows once or refuses (with maybe a reason) the task's permission requests; refused if
        it carries more. Any other message keeps the caller's context: another's task is then
        unknown to it, as ever."""
        msg = params.message
        groups = self.devagent.identity_groups
        answering = await operator_reads.approver_context(self.store, msg.task_id, context, groups)
        if answering is None:
            return context
        req_md = MessageToDict(params.metadata) if params.HasField("metadata") else None
        beyond = beyond_approval(parse_message(msg, req_md))
        if not beyond and params.configuration.HasField("task_push_notification_config"):
            # a webhook of the answerer's on the owner's task would outlive the answer
            beyond = "sets a push notification config"
        if beyond:
            raise InvalidParamsError(
                message="a member of a group that approves may only allow once or refuse another "
                f"member's permission request (with a reason); this message {beyond}"
            )
        log.info(
            "%s answers the permission requests of task %s of %s (a group that approves)",
            owner_of(context),
            msg.task_id,
            owner_of(answering),
        )
        return answering

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Message | Task:
        context = await self._as_approver(params, context)
        await self._prepare(params, context)
        result: Message | Task = await super().on_message_send(params, context)
        return result

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        context = await self._as_approver(params, context)
        await self._prepare(params, context)
        async for ev in super().on_message_send_stream(params, context):
            yield ev

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        """A turn running on another replica is followed through the fan-out log;
        otherwise the SDK serves the subscription, which it would keep open forever on a parked
        task: it is closed at an interrupted or terminal state, as the spec says."""
        stop = TERMINAL_TASK_STATES | INTERRUPTED_TASK_STATES
        stored = await self.store.get(params.id, context)
        if stored is None:
            raise TaskNotFoundError
        stored_state = stored.status.state  # (`_derived_task` derives in place)
        task = await self._derived_task(stored, context)
        if self._runs_elsewhere(task) and self.devagent.fanout is not None:

            async def settled() -> Event | None:
                """The turn's state when it stopped with no final event (its replica died)."""
                again = await self.store.get(params.id, context)
                if again is None:
                    return None
                now = await self._derived_task(again, context)
                if now.status.state not in stop:
                    return None
                return TaskStatusUpdateEvent(
                    task_id=now.id, context_id=now.context_id, status=now.status, metadata=now.metadata
                )

            async for ev in self.devagent.fanout.follow(task, settled=settled):
                yield ev
            return
        if self._runs_elsewhere(task):
            # Another process on the same SQLite file runs it: only PostgreSQL carries live
            # events between processes. The task as it stands, and the end of this stream.
            yield task
            return
        if task.status.state in TERMINAL_TASK_STATES and stored_state not in TERMINAL_TASK_STATES:
            # Ended as its conversation says, its process gone before writing so:
            # the SDK would wait on the stored, running copy for ever. The task and the end.
            yield task
            if _v03(context):
                yield TaskStatusUpdateEvent(
                    task_id=task.id, context_id=task.context_id, status=task.status, metadata=task.metadata
                )
            return
        agen = super().on_subscribe_to_task(params, context)
        first = True
        try:
            async for ev in agen:
                state = ev.status.state if isinstance(ev, Task | TaskStatusUpdateEvent) else None
                if first and isinstance(ev, Task) and state in INTERRUPTED_TASK_STATES:
                    # A parked task (STREAM-SUB-002): v0.3 marks a stream's end with a final
                    # status event, so its client gets the snapshot and that event; a 1.0
                    # subscription follows the task until it stops again or ends (3.1.6).
                    yield ev
                    if _v03(context):
                        yield TaskStatusUpdateEvent(
                            task_id=ev.id, context_id=ev.context_id, status=ev.status, metadata=ev.metadata
                        )
                        return
                    first = False
                    continue
                first = False
                yield ev
                if state in stop:
                    return
        finally:
            await agen.aclose()

    def _runs_elsewhere(self, task: Task) -> bool:
        """After `_derived_task`: the task's turn runs in another process."""
        return task.status.state == TaskState.TASK_STATE_WORKING and not self.devagent.executing(task.id)

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        stored = await self.store.get(params.id, context)
        if stored is None:
            raise TaskNotFoundError
        current = await self._derived_task(stored, context)
        if current.status.state in TERMINAL_TASK_STATES:  # (maybe only as its session says)
            raise TaskNotCancelableError
        if self._runs_elsewhere(current):
            # The turn runs on another replica: ask it to stop (through the store), and answer
            # with the task once that replica has ended it.
            sid = session_id_for(owner_of(context), current.context_id)
            if await self.devagent.core.request_cancel(sid):
                return await self._await_stop(params.id, context)
        task: Task | None = await super().on_cancel_task(params, context)
        if task is not None:
            # A parked task held by no ActiveTask (after a restart) is cancelled in the store only:
            # cancel the calls its session waits on too.
            session = await self.devagent.session_for(owner_of(context), task.context_id, None, create=False)
            if session is not None and session.state.status == "awaiting_input":
                await session.cancel()
        return task

    async def _await_stop(self, task_id: str, context: ServerCallContext) -> Task:
        """The task once its turn stopped: the replica running it ends it `canceled`, or, if that
        replica died meanwhile, it reads as its lease's expiry settles it."""
        import asyncio

        stop = TERMINAL_TASK_STATES | INTERRUPTED_TASK_STATES
        deadline = time.monotonic() + 3 * self.devagent.core.config.lease_seconds + 30
        while True:
            stored = await self.store.get(task_id, context)
            if stored is None:
                raise TaskNotFoundError
            task = await self._derived_task(stored, context)
            if task.status.state in stop or time.monotonic() > deadline:
                return task
            await asyncio.sleep(0.05)
