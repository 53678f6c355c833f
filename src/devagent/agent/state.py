"""The durable state of a session, apart from its transcript.

Everything the session needs to continue after a restart is here or in the transcript:
settings, approvals granted for the session, the todo list, statistics, the tools a client
supplied, and the step that is waiting for input (its calls and the results already computed).
It is a plain dataclass stored as one JSON document per session.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from devagent.agent.events import ToolErrorType, Usage
from devagent.agent.naming.claude import rules_of
from devagent.common.dataclass_json import fields_json

APPROVAL_MODES = ("ask", "auto-edit", "yolo", "plan")


@dataclass(slots=True)
class ClientTool:
    """A tool a client supplied (an A2A DataPart, wire `initialize`): executed by the client."""

    name: str
    description: str
    parameters: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return fields_json(self)


@dataclass(slots=True)
class CallResult:
    """The result of a call of the waiting step, as the model will read it."""

    text: str
    is_error: bool = False
    error_type: str = ""  # for errors: a ToolErrorType value (a plain str, as stored)
    diff: dict[str, Any] | None = None  # a FileDiff's fields, for edits
    data: Any = None  # structured output (client tools, MCP)
    # Files for the model to look at beside the text (read_file's images and PDFs), as
    # {"media_type", "data" (base64)}: kept only until the step's results go to the model.
    files: list[dict[str, str]] = field(default_factory=list)

    @classmethod
    def error(cls, message: str, error_type: ToolErrorType) -> CallResult:
        return cls(message, True, error_type.value)

    def to_json(self) -> dict[str, Any]:
        return fields_json(self, leave_out=() if self.files else ("files",))

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CallResult:
        return cls(
            text=str(d.get("text", "")),
            is_error=bool(d.get("is_error")),
            error_type=str(d.get("error_type") or ""),
            diff=d.get("diff"),
            data=d.get("data"),
            files=[dict(f) for f in d.get("files") or []],
        )


@dataclass(slots=True)
class PendingCall:
    """A call of the waiting step. `result` is set once the call is done (ran, failed, was
    cancelled or answered by the client); the step continues when every call has one."""

    id: str
    name: str
    args: dict[str, Any]
    kind: str
    description: str = ""
    # "" (runs), "permission", "client"; "relay": the call waits for the answers to the questions
    # it relayed (a subagent's), and runs again once they are answered
    needs: str = ""
    granted: bool = False  # runs unasked under a prefix grant ("git status")
    confirmation: dict[str, Any] | None = None  # the ConfirmationRequest, as stored
    status: str = "PENDING"
    result: CallResult | None = None
    # A question relayed from a subagent (never the model's own call): `via` is the id of the call
    # of this session that relayed it (its `task` call), `parent_call` the call a door shows it
    # under, and `answer` the answer given, which `via` passes on when it runs again. Its id is
    # `via` + "/" + the id the subagent knows it by.
    via: str = ""
    parent_call: str = ""
    answer: dict[str, Any] | None = None
    # The tool the model called when it is not `name`: a shell command that is a patch
    # (`shell_patch`) runs as `apply_patch`, and its result answers the model's `run_shell_command`.
    called_as: str = ""

    def to_json(self) -> dict[str, Any]:
        unset = ("via", "parent_call", "answer") if not self.via else ()
        return fields_json(self, leave_out=unset + (() if self.called_as else ("called_as",)))

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PendingCall:
        result = d.get("result")
        return cls(**{**d, "result": None if result is None else CallResult.from_json(result)})


_ONLY_WHEN_SET = (
    "grants_web",
    "trace_context",
    "file_marks",
    "background",
    "subagent_of",
    "max_cost_usd",
    "turn_scope",
    "repository",
)


@dataclass(slots=True)
class TurnScope:
    """What a custom command narrows for the turn it starts (its pauses included): the tools, as
    its `allowed-tools` names them (None: the session's), and the model ("": the session's)."""

    command: str
    tools: list[str] | None = None
    model: str = ""

    def allows(self, tool: str) -> bool:
        return self.tools is None or rules_of(tuple(self.tools)).allows(tool)

    def to_json(self) -> dict[str, Any]:
        return fields_json(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TurnScope:
        tools = d.get("tools")
        return cls(
            str(d.get("command", "")),
            None if tools is None else [str(t) for t in tools],
            str(d.get("model", "")),
        )


@dataclass(slots=True)
class SubagentOf:
    """What makes a session a subagent: the session and the `task` call that started it, its type,
    how deep it is (1: a child of a top-level session), and the tools it may use (fixed at its
    start, never more than its parent had)."""

    session: str
    call: str
    agent: str
    description: str
    depth: int
    tools: list[str]
    refused: list[str] = field(default_factory=list)  # tools the type asked for and did not get
    prompt: str = ""  # the type's instructions
    # The top-level session whose sandbox holds the workspace ("": `session`, a stored child of
    # before): a workspace that is not on this host (a container's volume) is shared that way.
    workspace_of: str = ""

    def to_json(self) -> dict[str, Any]:
        return fields_json(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SubagentOf:
        return cls(
            session=str(d["session"]),
            call=str(d["call"]),
            agent=str(d.get("agent", "")),
            description=str(d.get("description", "")),
            depth=int(d.get("depth", 1)),
            tools=[str(t) for t in d.get("tools", [])],
            refused=[str(t) for t in d.get("refused", [])],
            prompt=str(d.get("prompt", "")),
            workspace_of=str(d.get("workspace_of", "")),
        )

    @property
    def sandbox_session(self) -> str:
        """The session whose sandbox this one works in where its workspace is in a sandbox."""
        return self.workspace_of or self.session


@dataclass(slots=True)
class SessionState:
    workspace_roots: list[str]
    model: str = ""
    approval_mode: str = "ask"
    title: str = ""
    status: str = "idle"  # idle | running | awaiting_input
    # How the last turn ended, once it has (status idle): finished | cancelled | error |
    # max_steps_reached | interrupted (its process died), with the message for the user.
    outcome: str = ""
    outcome_message: str = ""
    turn_label: str = ""  # the adapter's name of the turn that last ran (an A2A taskId)
    grants_tools: list[str] = field(default_factory=list)  # "allow always" per tool name
    grants_shell: list[str] = field(default_factory=list)  # "allow always": shell prefixes, exact commands
    grants_mcp_servers: list[str] = field(default_factory=list)  # "always allow this server"
    grants_web: list[str] = field(default_factory=list)  # "allow always" for web_fetch: origins
    refusals_tools: list[str] = field(default_factory=list)  # "reject always" per tool name
    refusals_shell: list[str] = field(default_factory=list)  # "reject always" per shell root command
    # MCP servers the client named for this session ({name: {command,args,env,cwd} | {url,headers}}),
    # checked against server policy when used; stored so that a restarted process reconnects.
    mcp_servers: dict[str, dict[str, Any]] = field(default_factory=dict)
    todos: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)  # the whole session
    turn_usage: Usage = field(default_factory=Usage)  # the current (or last) turn
    turn_steps: int = 0
    tool_stats: dict[str, dict[str, int]] = field(default_factory=dict)  # name -> {calls, failures}
    client_tools: list[ClientTool] = field(default_factory=list)
    pending: list[PendingCall] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # adapter-owned settings, opaque to the core
    # Who the session's turns are counted against (budgets, usage per caller):
    # the token's name on a server, "" for a local user (terminal, stdio doors).
    identity: str = ""
    # The day the session started (local, YYYY-MM-DD), which its system prompt names: fixed for
    # the session so that the prompt, and the provider's cache of it, stays the same across
    # midnight. "" in sessions stored before it was kept: the first request sets it.
    started_on: str = ""
    # What the prompt says of the environment (OS, roots, git, sandbox), taken at the first
    # request and kept, for the same reason.
    environment: str = ""
    # The W3C traceparent of the span of the turn that last started or resumed (devagent/telemetry.py,
    # only when tracing is on): the turn that resumes after a pause links to it, in any process.
    trace_context: str = ""
    # Set for a subagent's session (the `task` tool's child); None for a session a door opened.
    subagent_of: SubagentOf | None = None
    # What the session last saw of each file it read whole or wrote: real path -> a short hash of
    # the text (tools/freshness.py), so an edit of a file it never read, or one that changed since,
    # is refused, also after a restart. Bounded (freshness.MAX_MARKS); left out when empty.
    file_marks: dict[str, str] = field(default_factory=dict)
    # The background processes this session started ({id, command, started_by}: the registry
    # of the server process that started each, tools/processes.py), newest last: a process lives
    # only in that server process, and the model is told so when it names one that is gone.
    background: list[dict[str, Any]] = field(default_factory=list)
    # Money (devagent/agent/loop/spending.py): the caller's cap on what one task (a turn, across its
    # pauses) may cost in USD, 0: none of the caller's (the operator's ceiling applies anyway;
    # a subagent's: what its parent's task had left when it started); and the part of `usage`
    # (and `turn_usage`) that this session's subagents spent (charged to it as they spend).
    max_cost_usd: float = 0.0
    subagent_usage: Usage = field(default_factory=Usage)
    # Set while a turn a custom command started runs or waits: what it narrows (None otherwise).
    turn_scope: TurnScope | None = None
    # A session started from a repository (devagent/agent/repository/): its remote, the ref and the
    # commit it started from, its workspace, the branch its result is pushed to and what was pushed.
    repository: dict[str, Any] = field(default_factory=dict)

    def turn_client_tools(self) -> list[ClientTool]:
        """The client's tools the running turn may call (a command's `turn_scope` narrows them)."""
        scope = self.turn_scope
        return [t for t in self.client_tools if scope is None or scope.allows(t.name)]

    def record_call(self, name: str, failed: bool) -> None:
        s = self.tool_stats.setdefault(name, {"calls": 0, "failures": 0})
        s["calls"] += 1
        if failed:
            s["failures"] += 1

    def to_json(self) -> dict[str, Any]:
        """Every field; those that are new or seldom set (grants of web origins, a trace context,
        file marks, background processes, money caps and subagents' usage) only when they hold
        something."""
        leave_out = [n for n in _ONLY_WHEN_SET if not getattr(self, n)]
        if not self.subagent_usage.requests:
            leave_out.append("subagent_usage")
        return fields_json(self, leave_out=leave_out)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SessionState:
        return cls(
            workspace_roots=list(d["workspace_roots"]),
            model=d.get("model", ""),
            approval_mode=d.get("approval_mode", "ask"),
            title=d.get("title", ""),
            status=d.get("status", "idle"),
            outcome=d.get("outcome", ""),
            outcome_message=d.get("outcome_message", ""),
            turn_label=d.get("turn_label", ""),
            grants_tools=list(d.get("grants_tools", [])),
            grants_shell=list(d.get("grants_shell", [])),
            grants_mcp_servers=list(d.get("grants_mcp_servers", [])),
            grants_web=list(d.get("grants_web", [])),
            refusals_tools=list(d.get("refusals_tools", [])),
            refusals_shell=list(d.get("refusals_shell", [])),
            mcp_servers=dict(d.get("mcp_servers", {})),
            todos=list(d.get("todos", [])),
            usage=Usage.from_json(d.get("usage")),
            turn_usage=Usage.from_json(d.get("turn_usage")),
            turn_steps=int(d.get("turn_steps", 0)),
            tool_stats=dict(d.get("tool_stats", {})),
            client_tools=[ClientTool(**t) for t in d.get("client_tools", [])],
            pending=[PendingCall.from_json(p) for p in d.get("pending", [])],
            extra=dict(d.get("extra", {})),
            identity=str(d.get("identity", "")),
            started_on=str(d.get("started_on", "")),
            environment=str(d.get("environment", "")),
            trace_context=str(d.get("trace_context", "")),
            subagent_of=SubagentOf.from_json(d["subagent_of"]) if d.get("subagent_of") else None,
            file_marks={str(k): str(v) for k, v in dict(d.get("file_marks") or {}).items()},
            background=[dict(r) for r in d.get("background", []) if isinstance(r, dict)],
            max_cost_usd=float(d.get("max_cost_usd", 0) or 0),
            subagent_usage=Usage.from_json(d.get("subagent_usage")),
            turn_scope=TurnScope.from_json(d["turn_scope"]) if d.get("turn_scope") else None,
            repository=dict(d.get("repository") or {}),
        )
