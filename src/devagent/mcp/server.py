"""`devagent mcp`: the MCP door on the official SDK's `MCPServer`, over stdio.

Three tools a host's model can use without knowing devagent:

- `devagent_start` starts a session in the workspace (the `--work-dir` root or a folder under it)
  with a prompt and runs its first turn;
- `devagent_continue` goes on with a session: a new prompt, or the answer to the permission it
  waits for;
- `devagent_sessions` lists the sessions, or reads one.

Each returns the same result: the session id, how the turn ended, the answer, the files changed
(path and a diff summary) and, when the session waits for permission, what it wants to do. As
text for the host's model and as structured content.

A call that needs permission is asked of the host's user with an MCP elicitation (allow once,
allow always, refuse with a reason; the options are the core's), and the turn goes on in the same
tool call. A host without elicitation, or one that dismisses the question (a cancelled
elicitation: headless hosts cancel every one), gets an `input_required` result describing the
request; its model answers with `devagent_continue` (`answer`: yes / always / no and a reason).
Declining the question refuses the call. A question the model asks (`ask_user`) is asked the
same way, as a form of its choices and a text field (`questions.py`): declining it dismisses it
and the turn goes on; the host's model answers an `input_required` one with the user's reply.
Either way the pause is the core's stored pause, so a restarted server (or another process on the
same database) takes the answer.

While a turn runs the host gets progress notifications (when it sent a progress token) and log
messages, one per tool call and step; a host's cancellation of the tool call stops the turn,
running commands included (the core's cancel).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

# The SDK evaluates the tools' annotations in this module's namespace: imported here, not lazily
# (this module is loaded only by `devagent mcp`, which needs the SDK at once anyway).
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, InputRequiredResult, TextContent
from pydantic import BaseModel, ConfigDict, Field

from devagent import __version__
from devagent.agent.api import (
    Decision,
    Door,
    Event,
    FileDiff,
    FileDiffs,
    InputError,
    NeedsInput,
    Notice,
    Resume,
    TextDelta,
    ToolCall,
    ToolCallStatus,
    ToolCallUpdate,
    TurnDriver,
    TurnEnd,
    UserPrompt,
    check_repository,
    diff_summary,
    file_diffs,
    parse_repository,
    repository_result,
    request_text,
    requested_cap,
)
from devagent.common.errors import DevagentError
from devagent.mcp import questions
from devagent.mcp.instructions import INSTRUCTIONS

if TYPE_CHECKING:
    from devagent.agent.api import AgentCore, CoreConfig, Session

log = logging.getLogger("devagent.mcp")

MAX_PROMPT_CHARS = 200_000  # a prompt longer than this is refused (a tool error), never sent on
ANSWER_WORDS = {"yes": "proceed_once", "always": "proceed_always", "no": "cancel"}
CHOICES = {"allow_once": "proceed_once", "allow_always": "proceed_always", "refuse": "cancel"}


class FileChange(BaseModel):
    path: str = Field(description="The file, relative to the workspace")
    summary: str = Field(description="What changed: `new file, 3 lines` or `+2 -1 lines`")


class PendingRequest(BaseModel):
    call_id: str
    tool: str
    description: str = Field(description="What devagent wants to do, in words")
    options: list[str] = Field(description="The answers this request accepts")


class TurnUsage(BaseModel):
    input_tokens: int = Field(default=0, description="The prompts' tokens, cached ones included")
    output_tokens: int = 0
    cache_read_tokens: int = Field(
        default=0, description="Of the input: read from the provider's prompt cache"
    )
    cache_write_tokens: int = Field(
        default=0, description="Of the input: written to the provider's prompt cache"
    )
    requests: int = Field(default=0, description="Model requests")
    cost_usd: float | None = Field(
        default=0.0,
        description="What the requests cost in US dollars at the models' prices; null when no "
        "request's model has a known price (then unpriced_requests says how many)",
    )
    unpriced_requests: int = Field(default=0, description="Requests of a model with no known price")


class RepositoryOutcome(BaseModel):
    """A session started from a repository: its result after a completed task."""

    repository: str
    ref: str
    base_commit: str = Field(description="The commit the session started from")
    patch: str = Field(description="The unified diff of the workspace against base_commit (new files too)")
    files: list[str] = Field(default_factory=list)
    branch: str = Field(default="", description="The branch pushed to the repository, when asked for")
    commit: str = ""
    error: str = Field(default="", description="Why there is no result")


class TaskResult(BaseModel):
    session_id: str = Field(description="Give it to devagent_continue to go on with this session")
    status: Literal["completed", "input_required", "failed", "cancelled"]
    answer: str = Field(description="What devagent said in this turn")
    files_changed: list[FileChange] = Field(default_factory=list)
    pending: list[PendingRequest] = Field(
        default_factory=list, description="When input_required: the permission requests or questions waiting"
    )
    asking: str = Field(default="", description="When input_required by a question: the question, in words")
    workspace: str = ""
    usage: TurnUsage = Field(default_factory=TurnUsage, description="The tokens and dollars this turn used")
    repository: RepositoryOutcome | None = Field(
        default=None, description="When the session started from a repository and the task completed"
    )


class SessionInfo(BaseModel):
    session_id: str
    title: str = Field(description="The session's first prompt, shortened")
    workspace: str
    status: str
    updated: float


class SessionList(BaseModel):
    sessions: list[SessionInfo]
    transcript: str = Field(default="", description="With session_id: the conversation as text")


class ElicitedDecision(BaseModel):
    """What the host's user answers to an elicitation (flat, primitive fields, as MCP requires)."""

    # the form's title as hosts have always been sent it (pydantic titles a schema by class name)
    model_config = ConfigDict(title="Decision")

    decision: Literal["allow_once", "allow_always", "refuse"] = Field(
        description="allow_once: run this call; allow_always: and calls like it for the session; "
        "refuse: do not"
    )
    reason: str = Field(default="", description="With refuse: what to do instead (passed to the agent)")


class DoorError(ToolError, DevagentError):
    """Bad input from the host, said plainly: the SDK answers a ToolError as a tool result with
    `isError` and this message (anything else it hides as an unexpected error)."""


@dataclass
class McpOptions:
    config: CoreConfig
    root: Path  # stdio: tasks run in it or in a folder under it
    # Over HTTP (`devagent serve --mcp`): a caller's workspace roots by identity (the A2A
    # server's `roots_for`); the identity is the bearer token's, read from each request.
    roots_for: Callable[[str], list[Path]] | None = None


class McpDoor:
    """The core and the turn handling behind the tools (no agent logic: the core decides)."""

    def __init__(self, opts: McpOptions, core: AgentCore | None = None) -> None:
        self.opts = opts
        self._core: AgentCore | None = core
        self._owns_core = core is None  # stdio opens its own; a server's is the server's
        self._lock = asyncio.Lock()

    async def core(self) -> AgentCore:
        async with self._lock:
            if self._core is None:
                # late: pydantic-ai and SQLAlchemy load at the first tool call, not before the SDK serves
                from devagent.agent.api import AgentCore

                self._core = await AgentCore.open(self.opts.config)
            return self._core

    async def close(self) -> None:
        if self._core is not None and self._owns_core:
            await self._core.close()

    def owner(self, ctx: Any) -> str:
        """The caller: the bearer token's identity over HTTP, "" on stdio (the process's user)."""
        if self.opts.roots_for is None:
            return ""
        try:
            user = ctx.request_context.request.scope.get("user")
        except Exception:
            return ""
        return str(getattr(user, "username", "") or "")

    def roots(self, ctx: Any) -> list[Path]:
        if self.opts.roots_for is None:
            return [self.opts.root]
        return self.opts.roots_for(self.owner(ctx))

    def workspace(self, given: str, ctx: Any) -> Path:
        """The workspace a host names: its root, or an existing folder under one of its roots
        (symlinks resolved)."""
        roots = self.roots(ctx)
        if not given:
            return roots[0]
        named = given if len(given) <= 200 else given[:200] + "..."
        try:
            path = Path(given).expanduser()
            path = (path if path.is_absolute() else roots[0] / path).resolve()
            inside = any(path == r or path.is_relative_to(r) for r in roots)
            is_dir = inside and path.is_dir()
        except (OSError, RuntimeError, ValueError) as e:  # too long, a symlink loop, a NUL byte
            reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise DoorError(f"workspace {named} is not a usable path ({reason})") from None
        if not inside:
            shown = ", ".join(map(str, roots))
            raise DoorError(f"workspace {named} is outside the server's workspace root ({shown})")
        if not is_dir:
            raise DoorError(f"workspace {named} is not a directory")
        return path

    def approval(self, core: AgentCore, requested: str) -> str | None:
        if not requested:
            return None
        mode = core.effective_approval_mode(requested)
        if mode != requested:
            raise DoorError(
                f"approval mode {requested!r} is not allowed on this server (its default is "
                f"{core.config.approval_mode!r}; it allows modes no more permissive, and "
                f"{', '.join(core.config.allowed_approval_modes) or 'no others'})"
            )
        return mode

    async def session(self, session_id: str, ctx: Any) -> Session:
        """A session this door started for this caller (never another door's or another
        caller's: an id alone grants nothing), with its stored state as it is now."""
        core = await self.core()
        session = await core.inspect(session_id) if session_id else None
        if session is None or not self.owns(session.state.to_json(), self.owner(ctx)):
            raise DoorError(f"no session {session_id!r}: devagent_sessions lists them")
        return session

    @staticmethod
    def owns(state: dict[str, Any], owner: str) -> bool:
        mcp = (state.get("extra") or {}).get("mcp")
        return isinstance(mcp, dict) and mcp.get("owner", "") == owner


def _prompt(text: str) -> str:
    if not text.strip():
        raise DoorError("the prompt is empty")
    if len(text) > MAX_PROMPT_CHARS:
        raise DoorError(f"the prompt is longer than {MAX_PROMPT_CHARS} characters")
    return text


def _elicit_message(call: ToolCall) -> str:
    text = f"devagent wants to {request_text(call)}."
    details = call.confirmation.details if call.confirmation is not None else None
    if isinstance(details, FileDiff | FileDiffs) and details.formatted_diff:
        diff = details.formatted_diff
        text += "\n\n" + (diff if len(diff) <= 8000 else diff[:8000] + "\n[... diff shortened ...]")
    return text


class HostTurn(Door):
    """One tool call's worth of a session, driven by the core's turn driver: the host is told
    as the turn goes (progress, log messages), each call that asks is put to the host's user as
    an elicitation where the host can answer one, and the result is gathered."""

    def __init__(self, door: McpDoor, session: Session, ctx: Any) -> None:
        self.door = door
        self.session = session
        self.ctx = ctx
        self.text: list[str] = []
        self.files: dict[str, FileChange] = {}
        self.steps = 0
        self.asks: list[ToolCall] = []  # the permissions the turn waits for now
        # Set once the host dismissed a question in this tool call: no question is put again;
        # the calls wait (returned as input_required) for devagent_continue.
        self.dismissed = False
        # Calls to ask in the tool's result, on protocol versions without server-to-client
        # requests (2026-07-28: the client asks its user and calls the tool again).
        self.elicit_later: list[ToolCall] = []

    async def _tell(self, message: str) -> None:
        """A progress notification (with the host's token) and a log message."""
        self.steps += 1
        with contextlib.suppress(Exception):
            await self.ctx.report_progress(self.steps, None, message)
        with contextlib.suppress(Exception), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await self.ctx.info(message, logger_name="devagent")

    async def run(self, inp: Any) -> TaskResult:
        driver = TurnDriver(self.session, self)
        try:
            outcome = await driver.run(inp)
        except InputError as e:
            # Refused before the turn ran (the caller's budget): the host reads devagent's reason.
            raise DoorError(str(e)) from None
        except asyncio.CancelledError:
            # The host cancelled the tool call: stop the turn (commands included), then go.
            core = await self.door.core()
            with contextlib.suppress(Exception):
                await asyncio.shield(core.request_cancel(self.session.id))
            raise
        if not isinstance(outcome, TurnEnd):
            return self.result("input_required", [c for c in outcome.calls if not c.awaiting_client])
        if outcome.reason not in ("finished", "cancelled") and outcome.error:
            self.text.append(f"\n{outcome.error}")
        status = {"finished": "completed", "cancelled": "cancelled", "max_steps_reached": "completed"}
        return self.result(status.get(outcome.reason, "failed"), [])

    async def show(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            self.text.append(event.text)
        elif isinstance(event, ToolCallUpdate):
            c = event.call
            if c.status is ToolCallStatus.EXECUTING:
                await self._tell(f"{c.name}: {c.description or ''}".strip())
            elif c.status is ToolCallStatus.SUCCEEDED and c.output is not None and c.output.diff:
                for d in file_diffs(c.output.diff):
                    self.files[d.file_path] = FileChange(
                        path=self.session.workspace.display(Path(d.file_path)), summary=diff_summary(d)
                    )
            elif c.status is ToolCallStatus.FAILED and c.error is not None:
                await self._tell(f"{c.name} failed: {c.error.message[:200]}")
        elif isinstance(event, Notice) and event.level != "info":
            self.text.append(f"\n[{event.level}] {event.text}\n")
        elif isinstance(event, NeedsInput):
            self.asks = event.permissions

    async def ask(self, call: ToolCall, driver: TurnDriver) -> None:
        """The host's user is asked (an elicitation) where the host can answer: declining
        refuses the call, dismissing it answers nothing (it waits for devagent_continue)."""
        if call.awaiting_client or self.dismissed or not self._can_elicit():
            driver.park()
            return
        if self._stateless():
            self.elicit_later = list(self.asks)  # asked in the result (2026-07-28)
            driver.park()
            return
        message, schema = _elicitation(call)
        got = await self.ctx.elicit(message, schema)
        if got.action == "cancel":
            self.dismissed = True
            driver.park()
            return
        driver.answer(_decision(call, got.data if got.action == "accept" else None))

    def _stateless(self) -> bool:
        """Whether this request came on a protocol version where the server cannot send the
        client a request of its own (2026-07-28 and later): questions go in the result then."""
        version = getattr(self.ctx, "protocol_version", None) or ""
        return version >= "2026"

    def input_required(self) -> InputRequiredResult:
        """The waiting calls as elicitations embedded in the result; the client answers them
        and calls the tool again with the session id as `request_state`."""
        from mcp.server.elicitation import render_elicitation_schema
        from mcp_types import ElicitRequest, ElicitRequestFormParams

        requests: dict[str, Any] = {}
        for c in self.elicit_later:
            message, schema = _elicitation(c)
            requests[c.id] = ElicitRequest(
                params=ElicitRequestFormParams(
                    message=message, requested_schema=render_elicitation_schema(schema)
                )
            )
        return InputRequiredResult(input_requests=requests, request_state=self.session.id)

    def _can_elicit(self) -> bool:
        try:
            from mcp_types import ClientCapabilities, ElicitationCapability

            session = self.ctx.request_context.session
            return bool(
                session.check_client_capability(ClientCapabilities(elicitation=ElicitationCapability()))
            )
        except Exception:
            return False

    def result(self, status: str, pending: list[ToolCall]) -> TaskResult:
        u = self.session.state.turn_usage  # the turn's, across its pauses for permission
        return TaskResult(
            session_id=self.session.id,
            status=status,  # type: ignore[arg-type]
            answer="".join(self.text).strip(),
            files_changed=list(self.files.values()),
            pending=[_pending(c) for c in pending],
            asking=next((questions.asking(c.question) for c in pending if c.question is not None), ""),
            workspace=str(self.session.workspace.primary),
            usage=TurnUsage(
                input_tokens=u.input_tokens,
                output_tokens=u.output_tokens,
                cache_read_tokens=u.cache_read_tokens,
                cache_write_tokens=u.cache_write_tokens,
                requests=u.requests,
                cost_usd=None if u.requests and u.unpriced_requests >= u.requests else round(u.cost_usd, 9),
                unpriced_requests=u.unpriced_requests,
            ),
        )


def _pending(c: ToolCall) -> PendingRequest:
    """A waiting call as the result lists it: a permission request, or a question with its choices."""
    q = c.question
    if q is None:
        return PendingRequest(
            call_id=c.id, tool=c.name, description=request_text(c), options=["yes", "always", "no"]
        )
    options = [*q.choices, *(["any other answer in the user's words"] if q.allow_free_text else [])]
    return PendingRequest(call_id=c.id, tool=c.name, description=q.question, options=options)


def _elicitation(call: ToolCall) -> tuple[str, type[BaseModel]]:
    """The message and the form of the elicitation that asks about a call."""
    q = call.question
    if q is not None:
        return questions.message(q), questions.form(q)
    return _elicit_message(call), ElicitedDecision


def _decision(call: ToolCall, data: BaseModel | None) -> Any:
    """The core's decision for a call from the host user's answer to its elicitation: accepted
    with a choice, or declined (None: a refusal; for a question, dismissing it)."""
    if call.question is not None:
        return questions.decision(call, data)
    assert data is None or isinstance(data, ElicitedDecision)
    if data is None:
        return Decision(call.id, "cancel")
    option = CHOICES[data.decision]
    if option == "proceed_always":
        option = call.allow_always()
    return Decision(call.id, option, feedback=(data.reason or None) if option == "cancel" else None)


def _responses(session: Session, responses: Any) -> Any:
    """The client's answers to the elicitations of an input-required result, as a Resume (None
    when none was answered). A dismissed (cancelled), missing or malformed answer leaves its call
    waiting."""
    decisions = []
    for call in session.waiting_calls():
        got = (responses or {}).get(call.id)
        action = getattr(got, "action", "cancel")
        if action == "decline":
            decisions.append(_decision(call, None))
        elif action == "accept":
            try:
                data = _elicitation(call)[1].model_validate(getattr(got, "content", None) or {})
            except ValueError:
                continue
            decisions.append(_decision(call, data))
    return Resume(decisions=decisions) if decisions else None


async def _turn_result(turn: HostTurn, inp: Any) -> CallToolResult | InputRequiredResult:
    """The turn run on `inp` (None: nothing to run, the session still waits) as the tool's result."""
    if inp is None:
        waiting = [c for c in turn.session.waiting_calls() if not c.awaiting_client]
        return _as_call_result(turn.result("input_required", waiting))
    result = await turn.run(inp)
    if turn.elicit_later:
        return turn.input_required()
    if result.status == "completed" and turn.session.state.repository:
        result.repository = await _repository_outcome(turn.session)
    return _as_call_result(result)


async def _repository_outcome(session: Session) -> RepositoryOutcome:
    """The patch (and the branch pushed, as the caller asked at the start) of a repository session."""
    record = session.state.repository
    try:
        got = (await repository_result(session)).to_json()
    except InputError as e:
        return RepositoryOutcome(
            repository=record["url"], ref=record["ref"], base_commit="", patch="", error=str(e)
        )
    return RepositoryOutcome(**got)


def result_text(r: TaskResult) -> str:
    """The result as the host's model reads it."""
    lines = [r.answer or "(no answer text)"]
    if r.files_changed:
        lines.append("\nFiles changed: " + ", ".join(f"{f.path} ({f.summary})" for f in r.files_changed))
    if r.status == "input_required" and r.asking:
        lines.append(
            f"\n{r.asking}\nAsk the user, then call devagent_continue with "
            f'session_id "{r.session_id}" and `answer` set to their reply.'
        )
    elif r.status == "input_required":
        wants = "; ".join(p.description for p in r.pending)
        lines.append(
            f"\ndevagent waits for permission to {wants}. Ask the user, then call devagent_continue with "
            f'session_id "{r.session_id}" and answer "yes", "always" or "no <what to do instead>".'
        )
    if r.repository is not None:
        repo = r.repository
        pushed = f"; pushed as branch {repo.branch}" if repo.branch else ""
        said = repo.error or f"{len(repo.files)} files changed against {repo.ref}{pushed}"
        lines.append(f"\nRepository {repo.repository}: {said} (the patch is in the structured result)")
    lines.append(f"\n[session {r.session_id}: {r.status}]")
    return "\n".join(lines)


def _as_call_result(r: TaskResult) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=result_text(r))],
        structured_content=r.model_dump(mode="json"),
    )


def _error(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def _answer(session: Session, answer: str) -> Any:
    """`yes` / `always` / `no <reason>` for every call the session waits on, as the core's Resume;
    while a question waits, the reply to it (the first one asked)."""
    waiting = [c for c in session.waiting_calls() if not c.awaiting_client]
    if not waiting:
        raise DoorError("this session waits for no answer: send a prompt instead")
    question = next((c for c in waiting if c.question is not None), None)
    if question is not None and question.question is not None:
        decision = questions.typed(question, answer)
        if decision is None:
            raise DoorError(f"that answers none of the choices. {questions.asking(question.question)}")
        return Resume(decisions=[decision])
    word, _, reason = answer.strip().partition(" ")
    option = ANSWER_WORDS.get(word.lower().rstrip(",.:;!"))
    if option is None:
        raise DoorError('answer with "yes", "always" or "no" (optionally followed by what to do instead)')
    decisions = []
    for c in waiting:
        chosen = c.allow_always() if option == "proceed_always" else option
        feedback = reason.strip() or None if chosen == "cancel" else None
        decisions.append(Decision(c.id, chosen, feedback=feedback))
    return Resume(decisions=decisions)


# What each tool does, as hosts show it to their models.
_DESCRIPTIONS = {
    "devagent_start": (
        "Start a coding task in a new devagent session and run it until it is done or waits "
        "for permission. Returns the answer, the files changed and the session id."
    ),
    "devagent_continue": (
        "Go on with a devagent session: send a new prompt, or answer the permission it waits "
        'for ("yes", "always", or "no" followed by what to do instead) or the question it asks.'
    ),
    "devagent_sessions": "List the sessions started here (newest first), or read one with its conversation.",
}


def _tool(server: MCPServer, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The decorator that registers tool `name` on `server` with its description."""
    return server.tool(name=name, description=_DESCRIPTIONS[name])


def build_server(door: McpDoor) -> Any:
    """devagent's MCP server over `door`: its tools, in the order hosts list them."""

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> Any:
        try:
            yield {}
        finally:
            await door.close()

    server = MCPServer(
        "devagent",
        lifespan=lifespan,
        instructions=INSTRUCTIONS,
        version=__version__,
    )
    _add_start(server, door)
    _add_continue(server, door)
    _add_sessions(server, door)
    return server


def _add_start(server: MCPServer, door: McpDoor) -> None:
    """devagent_start: a task in a new session."""

    @_tool(server, "devagent_start")
    async def devagent_start(
        prompt: Annotated[str, Field(description="The task, as you would tell a developer")],
        ctx: Context,
        workspace: Annotated[
            str, Field(description="A folder under the server's workspace root (default: the root)")
        ] = "",
        model: Annotated[str, Field(description="provider:model, where the server allows it")] = "",
        approval_mode: Annotated[
            str, Field(description="ask | auto-edit | plan (or more, where the server allows it)")
        ] = "",
        max_cost_usd: Annotated[
            float,
            Field(
                ge=0,
                description="The most each task of this session may cost, in US dollars (0: no cap "
                "of yours; the server's own cap applies anyway); a task stops before the model "
                "request that would begin past it",
            ),
        ] = 0,
        repository: Annotated[
            str,
            Field(description="Clone this repository (one the server allows) at `ref` and work there"),
        ] = "",
        ref: Annotated[str, Field(description="With repository: the branch, tag or commit to start at")] = "",
        push: Annotated[
            bool, Field(description="With repository: push the result as a new branch when a task completes")
        ] = False,
    ) -> Annotated[CallToolResult, TaskResult] | InputRequiredResult:
        if ctx.request_state:  # the retry after an input-required result: the answers
            return await _answered(door, ctx)
        try:
            text = _prompt(prompt)
            cap = requested_cap(max_cost_usd)
            core = await door.core()
            ws = door.workspace(workspace, ctx)
            mode = door.approval(core, approval_mode)
            repo = parse_repository({"url": repository, "ref": ref}, push=push) if repository else None
            if repo is not None:
                check_repository(core.config, repo)  # refused before anything is cloned
            session = await core.create_session(
                [ws],
                model=model or None,
                approval_mode=mode,
                extra={"mcp": {"title": text[:120], "owner": door.owner(ctx)}},
                identity=door.owner(ctx),
                max_cost_usd=cap or 0.0,
                repository=repo,
            )
        except (DoorError, ValueError) as e:
            return _error(str(e))
        return await _turn_result(HostTurn(door, session, ctx), UserPrompt(text))


def _add_continue(server: MCPServer, door: McpDoor) -> None:
    """devagent_continue: a session's next prompt, or its answer to a permission."""

    @_tool(server, "devagent_continue")
    async def devagent_continue(
        session_id: str,
        ctx: Context,
        prompt: Annotated[str, Field(description="The next instruction")] = "",
        answer: Annotated[
            str,
            Field(
                description='"yes", "always" or "no <what to do instead>"; to a question, the user\'s reply'
            ),
        ] = "",
    ) -> Annotated[CallToolResult, TaskResult] | InputRequiredResult:
        if ctx.request_state:
            return await _answered(door, ctx)
        try:
            session = await door.session(session_id, ctx)
            if answer.strip():
                inp: Any = _answer(session, answer)
            else:
                waiting = session.waiting_calls()
                if any(c.question is not None for c in waiting):
                    raise DoorError("this session waits for the answer to its question: send it as `answer`")
                if waiting:
                    raise DoorError(
                        "this session waits for permission: answer it (yes, always, or no with what to do)"
                    )
                inp = UserPrompt(_prompt(prompt))
        except DoorError as e:
            return _error(str(e))
        return await _turn_result(HostTurn(door, session, ctx), inp)


def _add_sessions(server: MCPServer, door: McpDoor) -> None:
    """devagent_sessions: the caller's sessions, or one with its conversation."""

    @_tool(server, "devagent_sessions")
    async def devagent_sessions(
        ctx: Context,
        session_id: Annotated[str, Field(description="Read this session")] = "",
        limit: Annotated[int, Field(ge=1, le=200)] = 20,
    ) -> SessionList:
        core = await door.core()
        if session_id:
            session = await door.session(session_id, ctx)
            row = await core.store.read_session(session.id)
            info = _info(session.id, session.state.to_json(), row.updated_at if row is not None else 0.0)
            return SessionList(sessions=[info], transcript=await _transcript(session))
        # (the store lists every door's sessions, newest first: this door's, this caller's, kept)
        owner = door.owner(ctx)
        rows = [r for r in await core.store.list_sessions(None) if door.owns(r[1], owner)][:limit]
        return SessionList(sessions=[_info(sid, state, updated) for sid, state, updated in rows])


async def _answered(door: McpDoor, ctx: Context) -> CallToolResult | InputRequiredResult:
    """The retry of a tool call after an input-required result: the turn goes on with the answers."""
    try:
        session = await door.session(str(ctx.request_state), ctx)
    except DoorError as e:
        return _error(str(e))
    turn = HostTurn(door, session, ctx)
    inp = _responses(session, ctx.input_responses)
    answered = {d.call_id for d in inp.decisions} if inp is not None else set()
    turn.dismissed = bool({c.id for c in session.waiting_calls()} - answered)
    return await _turn_result(turn, inp)


def _info(sid: str, state: dict[str, Any], updated: float) -> SessionInfo:
    title = str(((state.get("extra") or {}).get("mcp") or {}).get("title") or "")
    roots = state.get("workspace_roots") or [""]
    return SessionInfo(
        session_id=sid,
        title=title,
        workspace=str(roots[0]),
        status=str(state.get("status", "")),
        updated=updated,
    )


async def _transcript(session: Session) -> str:
    out: list[str] = []
    for item in await session.timeline():
        if isinstance(item, UserPrompt):
            out.append(f"user: {item.text}")
        elif isinstance(item, TextDelta):
            out.append(f"devagent: {item.text}")
        elif isinstance(item, ToolCall):
            out.append(f"devagent called {item.name} ({item.status.value.lower()})")
    return "\n".join(out)[-20_000:]
