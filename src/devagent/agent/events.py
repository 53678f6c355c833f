"""Core events and inputs: what a session yields and what advances it.

These types know no protocol. Adapters (A2A, wire, CLI) translate them into their own wire shapes
and translate their protocol's answers back into `Input`s. They are plain slotted dataclasses so
the event path costs no validation or serialisation until an adapter actually writes bytes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Literal

from devagent.common.dataclass_json import fields_json
from devagent.common.errors import DevagentError


class ToolCallStatus(enum.StrEnum):
    """The development-tool RFC's ToolCall lifecycle."""

    PENDING = "PENDING"
    EXECUTING = "EXECUTING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def terminal(self) -> bool:
        return self in (ToolCallStatus.SUCCEEDED, ToolCallStatus.FAILED, ToolCallStatus.CANCELLED)


class ToolKind(enum.StrEnum):
    """What a tool does, which is what the approval policy decides on."""

    READ = "read"  # reads the workspace; never needs permission
    EDIT = "edit"  # changes files in the workspace
    EXECUTE = "execute"  # runs commands
    FETCH = "fetch"  # reads from the network: asked like a command, since what it sends leaves
    INTERNAL = "internal"  # touches only the session's own state (todo list)
    CLIENT = "client"  # executed by the client that supplied it; the core only waits
    MCP = "mcp"  # a tool of an MCP server
    QUESTION = "question"  # asks the user; always waits for the answer, in every approval mode


# --- the pieces of a tool call -------------------------------------------------------------------


@dataclass(slots=True)
class FileDiff:
    """An edit as the RFC's FileDiff: old and new content and a unified diff."""

    file_name: str
    file_path: str
    old_content: str | None
    new_content: str
    formatted_diff: str


@dataclass(slots=True)
class FileDiffs:
    """A change of several files at once (a patch): one FileDiff per file, in the patch's order.
    A deleted file's diff goes to /dev/null (its new content is ""); a moved file's goes from the
    old path to the new one (`file_path`)."""

    files: list[FileDiff]

    @property
    def formatted_diff(self) -> str:
        """The files' unified diffs, one after the other."""
        return "".join(f.formatted_diff for f in self.files)

    def combined(self) -> FileDiff:
        """One FileDiff standing for them all, for a protocol whose result holds one diff: no
        path, no contents, every file's unified diff."""
        n = len(self.files)
        return FileDiff(f"{n} files", "", "", "", self.formatted_diff)


def file_diffs(diff: object) -> list[FileDiff]:
    """The FileDiffs of a confirmation's details or a result's diff (none for other details)."""
    if isinstance(diff, FileDiff):
        return [diff]
    if isinstance(diff, FileDiffs):
        return list(diff.files)
    return []


@dataclass(slots=True)
class ExecuteDetails:
    command: str
    working_directory: str
    root_command: str = ""


@dataclass(slots=True)
class McpDetails:
    server_name: str
    tool_name: str


@dataclass(slots=True)
class GenericDetails:
    description: str


# The options of a question: one per choice (`choice_1`, `choice_2`, ...), the free answer (its text
# in the Decision's `new_content`), and `cancel` (the user dismissed it).
ANSWER_OPTION = "answer"
_CHOICE_PREFIX = "choice_"


def choice_option(n: int) -> str:
    """The option id of the `n`-th choice of a question (from 1)."""
    return f"{_CHOICE_PREFIX}{n}"


@dataclass(slots=True)
class QuestionDetails:
    """A question the model asks the user (the `ask_user` tool): its text, the choices offered
    (possibly none) and whether an answer in the user's own words is taken."""

    question: str
    choices: list[str] = field(default_factory=list)
    allow_free_text: bool = True

    def choice_of(self, option: str) -> str | None:
        """The text of the choice an option id names, or None."""
        if not option.startswith(_CHOICE_PREFIX):
            return None
        n = option[len(_CHOICE_PREFIX) :]
        if not n.isdigit() or not 1 <= int(n) <= len(self.choices):
            return None
        return self.choices[int(n) - 1]

    def answer_for(self, text: str) -> tuple[str, str | None] | None:
        """A typed answer as (option, new_content): a choice's number or its text (any case) picks
        that choice; other text is the free answer where one is taken; None otherwise (also for
        empty text)."""
        said = text.strip()
        if not said:
            return None
        if said.isdigit() and 1 <= int(said) <= len(self.choices):
            return choice_option(int(said)), None
        for n, choice in enumerate(self.choices, start=1):
            if said.casefold() == choice.strip().casefold():
                return choice_option(n), None
        if self.allow_free_text:
            return ANSWER_OPTION, said
        return None


ConfirmationDetails = ExecuteDetails | FileDiff | FileDiffs | McpDetails | GenericDetails | QuestionDetails


@dataclass(slots=True)
class PermissionOption:
    id: Literal["proceed_once", "proceed_always", "proceed_always_server", "cancel"] | str
    name: str
    description: str


@dataclass(slots=True)
class ConfirmationRequest:
    """What the user is asked before a call runs."""

    options: list[PermissionOption]
    details: ConfirmationDetails


@dataclass(slots=True)
class ToolOutput:
    """A call's result as shown to a client. `text` is always set (it is what the model saw);
    `diff` is set for edits and `data` for structured results."""

    text: str
    diff: FileDiff | FileDiffs | None = None
    data: Any = None


class ToolErrorType(enum.StrEnum):
    """Why a tool call failed: `ToolFailure.type`, `CallResult.error_type`, `ToolError.type`.

    The values are what transcripts store and clients receive, so a value never changes; the
    table in docs/tools.md says what each means."""

    TOOL_ERROR = "tool_error"  # a failure with no more precise kind
    # refused before it ran
    UNKNOWN_TOOL = "unknown_tool"
    INVALID_ARGUMENTS = "invalid_arguments"
    DENIED_BY_POLICY = "denied_by_policy"
    BLOCKED_BY_HOOK = "blocked_by_hook"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"
    INTERNAL = "internal"
    CLIENT_ERROR = "client_error"
    UNAVAILABLE = "unavailable"
    UNSUPPORTED = "unsupported"
    TIMEOUT = "timeout"
    BUSY = "busy"
    NOT_ANSWERED = "not_answered"
    # paths and files
    PATH_OUTSIDE_WORKSPACE = "path_outside_workspace"
    PROTECTED_PATH = "protected_path"
    READ_ONLY_PATH = "read_only_path"
    NOT_FOUND = "not_found"
    NOT_A_FILE = "not_a_file"
    NOT_A_DIRECTORY = "not_a_directory"
    IS_DIRECTORY = "is_directory"
    OS_ERROR = "os_error"
    FILE_EXISTS = "file_exists"
    FILE_NOT_READ = "file_not_read"
    FILE_CHANGED = "file_changed"
    FILE_TOO_LARGE = "file_too_large"
    BINARY_FILE = "binary_file"
    UNSUPPORTED_MEDIA = "unsupported_media"
    UNREADABLE_PDF = "unreadable_pdf"
    INVALID_REGEX = "invalid_regex"
    # edits and patches
    EDIT_NO_MATCH = "edit_no_match"
    EDIT_MULTIPLE_MATCHES = "edit_multiple_matches"
    EDIT_NO_CHANGE = "edit_no_change"
    INVALID_PATCH = "invalid_patch"
    PATCH_CONTEXT_NOT_FOUND = "patch_context_not_found"
    PATCH_AMBIGUOUS = "patch_ambiguous"
    SYNTAX_ERROR = "syntax_error"
    DIAGNOSTICS = "diagnostics"
    # commands and background processes
    SANDBOX_UNAVAILABLE = "sandbox_unavailable"
    TOO_MANY_PROCESSES = "too_many_processes"
    PROCESS_ENDED = "process_ended"
    INPUT_CLOSED = "input_closed"
    INPUT_BLOCKED = "input_blocked"
    # the web
    ADDRESS_REFUSED = "address_refused"
    NETWORK_ERROR = "network_error"
    HTTP_ERROR = "http_error"
    TOO_MANY_REDIRECTS = "too_many_redirects"
    NOT_TEXT = "not_text"
    BAD_RESPONSE = "bad_response"
    CONVERSION_FAILED = "conversion_failed"
    CONVERSION_TIMEOUT = "conversion_timeout"
    CONVERSION_TOO_LARGE = "conversion_too_large"
    # MCP servers
    MCP_UNAVAILABLE = "mcp_unavailable"
    MCP_SERVER_CRASHED = "mcp_server_crashed"
    MCP_ERROR = "mcp_error"
    MCP_TOOL_ERROR = "mcp_tool_error"
    # subagents (`subagent_` + how the child's turn ended)
    SUBAGENT_CANCELLED = "subagent_cancelled"
    SUBAGENT_MAX_STEPS_REACHED = "subagent_max_steps_reached"
    SUBAGENT_ERROR = "subagent_error"
    SUBAGENT_INTERRUPTED = "subagent_interrupted"
    # remote agents (`remote_agent_` + the A2A state a task ended in, where no other kind says more)
    REMOTE_AGENT_CONFIG = "remote_agent_config"
    REMOTE_AGENT_ERROR = "remote_agent_error"
    REMOTE_AGENT_APPROVAL = "remote_agent_approval"
    OUTBOUND_REFUSED = "outbound_refused"
    REMOTE_AGENT_SUBMITTED = "remote_agent_submitted"
    REMOTE_AGENT_WORKING = "remote_agent_working"
    REMOTE_AGENT_FAILED = "remote_agent_failed"
    REMOTE_AGENT_CANCELED = "remote_agent_canceled"
    REMOTE_AGENT_REJECTED = "remote_agent_rejected"
    REMOTE_AGENT_AUTH_REQUIRED = "remote_agent_auth_required"


@dataclass(slots=True)
class ToolError:
    message: str
    type: str = ToolErrorType.TOOL_ERROR.value  # a ToolErrorType value, kept a plain str as stored and sent
    status_code: int | None = None


@dataclass(slots=True)
class ToolCall:
    """A tool call's whole state, sent whole on every update."""

    id: str
    name: str
    args: dict[str, Any]
    kind: ToolKind
    description: str = ""
    status: ToolCallStatus = ToolCallStatus.PENDING
    live_output: str | None = None
    output: ToolOutput | None = None
    error: ToolError | None = None
    confirmation: ConfirmationRequest | None = None
    # Set when the call waits for the client that supplied the tool to run it.
    awaiting_client: bool = False
    # Set for a call a subagent makes: the id of the call it runs under (the parent's `task`
    # call, whose id prefixes this call's own: "task-call/subagent-call"); its description then
    # starts with the subagent's ("fix the tests: Run `pytest`").
    parent_call_id: str | None = None

    def option_ids(self) -> list[str]:
        """The ids of its permission request's options (none when it asks nothing)."""
        return [o.id for o in self.confirmation.options] if self.confirmation is not None else []

    def always_option(self) -> str | None:
        """Its "allow always" option: `proceed_always`, or for an MCP call the per-tool one (its
        per-server option is the other choice), None when it offers none."""
        return next((o for o in self.option_ids() if o.startswith("proceed_always")), None)

    def allow_always(self) -> str:
        """The option a user's "always" answer takes: the call's own, else "allow once"."""
        return self.always_option() or "proceed_once"

    @property
    def question(self) -> QuestionDetails | None:
        """What the call asks the user when it is a question (the `ask_user` tool), else None."""
        details = self.confirmation.details if self.confirmation is not None else None
        return details if isinstance(details, QuestionDetails) else None


# --- events --------------------------------------------------------------------------------------


@dataclass(slots=True)
class TextDelta:
    text: str


@dataclass(slots=True)
class ThoughtDelta:
    """A piece of the model's thinking (an A2A AgentThought, a wire think part).

    `subject` is set when the thought starts with a bold title the way Gemini-style models write
    them; otherwise it is empty."""

    text: str
    subject: str = ""


@dataclass(slots=True)
class StepBegin:
    """A model request starts (wire StepBegin). `n` counts steps within the turn from 1. `answer`
    names the answer the request asks the model for (`transcript.answer_key`): the same when a
    step a crash cut off is asked again, so an adapter can give the text streamed then the
    message ids it gave the first time."""

    n: int
    answer: str = ""


@dataclass(slots=True)
class ToolCallUpdate:
    """A tool call changed: a snapshot of the call. Adapters must not keep the object, since the
    session keeps mutating it; read what you need when you receive it."""

    call: ToolCall


@dataclass(slots=True)
class Notice:
    """Something the user should read that is not model text: a model error, a note from a slash
    command, a warning that a setting was refused."""

    text: str
    level: Literal["info", "warning", "error"] = "info"


@dataclass(slots=True)
class Usage:
    """Tokens of model requests, and what they cost. `input_tokens` is the whole prompt;
    `cache_read_tokens` and `cache_write_tokens` are the parts of it read from and written to the
    provider's prompt cache (reads cost about a tenth of input, Anthropic's writes a quarter
    more). `cost_usd` is the cost of the requests whose model has a price (`agent/models/prices.py`);
    `unpriced_requests` counts those whose model has none (their cost is unknown)."""

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    requests: int = 0
    cost_usd: float = 0.0
    unpriced_requests: int = 0

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.reasoning_tokens += other.reasoning_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.requests += other.requests
        self.cost_usd += other.cost_usd
        self.unpriced_requests += other.unpriced_requests

    def to_json(self) -> dict[str, Any]:
        return {**fields_json(self), "cost_usd": round(self.cost_usd, 9)}

    @classmethod
    def of_response(cls, u: Any) -> Usage:
        """The usage of one model response, from pydantic-ai's RequestUsage (read by attribute);
        its cost is the price table's to set (`PriceTable.charge`)."""
        details = getattr(u, "details", None) or {}
        reasoning = getattr(u, "output_reasoning_tokens", 0) or details.get("reasoning_tokens", 0) or 0
        return cls(
            input_tokens=int(getattr(u, "input_tokens", 0) or 0),
            output_tokens=int(getattr(u, "output_tokens", 0) or 0),
            reasoning_tokens=int(reasoning),
            cache_read_tokens=int(getattr(u, "cache_read_tokens", 0) or 0),
            cache_write_tokens=int(getattr(u, "cache_write_tokens", 0) or 0),
            requests=1,
        )

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Usage:
        data = data or {}
        counts = {k: int(data.get(k, 0) or 0) for k in cls.__dataclass_fields__ if k != "cost_usd"}
        return cls(**counts, cost_usd=float(data.get("cost_usd", 0) or 0))


@dataclass(slots=True)
class StatusUpdate:
    """Token usage after a model step (wire StatusUpdate)."""

    usage: Usage  # usage of this step
    context_tokens: int = 0  # input tokens of the step: how full the context is
    max_context_tokens: int = 0  # the model's context window (0: not known)


@dataclass(slots=True)
class NeedsInput:
    """The session stopped and stored everything: it waits for permission decisions and/or
    client tool results. `calls` are the calls waiting, in call order."""

    calls: list[ToolCall]

    @property
    def permissions(self) -> list[ToolCall]:
        return [c for c in self.calls if not c.awaiting_client]

    @property
    def client_calls(self) -> list[ToolCall]:
        return [c for c in self.calls if c.awaiting_client]


TurnEndReason = Literal["finished", "cancelled", "max_steps_reached", "error", "interrupted"]


@dataclass(slots=True)
class TurnEnd:
    reason: TurnEndReason
    usage: Usage = field(default_factory=Usage)  # usage of the whole turn so far
    error: str | None = None
    # How the provider said the last answer of a finished turn ended ("stop", "length": cut off
    # at the output token limit, "content_filter": the model declined); None when not finished.
    # ACP reports "length" as stopReason `max_tokens` and "content_filter" as `refusal`.
    finish_reason: str | None = None

    @property
    def refusal(self) -> bool:
        return self.reason == "finished" and self.finish_reason == "content_filter"

    @property
    def truncated(self) -> bool:
        return self.reason == "finished" and self.finish_reason == "length"


Event = TextDelta | ThoughtDelta | StepBegin | ToolCallUpdate | Notice | StatusUpdate | NeedsInput | TurnEnd


# --- inputs --------------------------------------------------------------------------------------


@dataclass(slots=True)
class UserPrompt:
    """A prompt, starting a turn. `max_cost_usd`: the caller's cap on what this turn and those
    after it may cost (USD; 0: none of the caller's), within the operator's; None keeps the
    session's."""

    text: str
    max_cost_usd: float | None = None


@dataclass(slots=True)
class Decision:
    """An answer to a permission request or a question. `option` is one of the request's option
    ids; `new_content` replaces what an edit writes or the command a shell call runs ("edit
    first"), or is the text of a question's free answer (option `answer`); `feedback` is what the
    user said with a refusal (or why a question was not answered), passed on to the model."""

    call_id: str
    option: str
    new_content: str | None = None
    feedback: str | None = None


@dataclass(slots=True)
class ClientResult:
    """A client's result for a call it ran. Exactly one of `output` / `error`."""

    call_id: str
    output: Any = None
    error: str | None = None


@dataclass(slots=True)
class Resume:
    """Decisions and/or client results for the calls a session waits on. Answers may come in
    several messages: calls still unanswered keep waiting."""

    decisions: list[Decision] = field(default_factory=list)
    results: list[ClientResult] = field(default_factory=list)


@dataclass(slots=True)
class RunCommand:
    """Run a slash command: `path` is the command and sub-command names (["memory", "add"]),
    `args` the rest of the line."""

    path: list[str]
    args: str = ""


Input = UserPrompt | Resume | RunCommand


class InputError(DevagentError, ValueError):
    """An input the session cannot take (unknown call id, a result for a call not waiting, a
    prompt to a session that is busy). Nothing was changed. Adapters turn it into their
    protocol's error."""

    def __init__(self, message: str, code: str = "invalid_input") -> None:
        super().__init__(message)
        self.code = code
