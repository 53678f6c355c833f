"""What a tool is to the core.

A tool has a name, a description and a JSON Schema for its arguments (what the model sees), a
`kind` the approval policy decides on, and three coroutines:

- `describe(args)`: a one-line human description of a call ("Write src/app.py").
- `confirmation(args, ctx)`: the details a permission request shows (a FileDiff for edits, the
  command and working directory for shell, the question for `ask_user`, a description
  otherwise). Called only when policy asks.
- `run(args, ctx)`: does the work and returns a `ToolResult`, or raises `ToolFailure` with a message
  the model and the user read. Long-running tools report live output through `ctx.live(text)`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from devagent.agent.events import (
    ConfirmationDetails,
    Event,
    FileDiff,
    FileDiffs,
    GenericDetails,
    ToolKind,
)
from devagent.agent.sandbox.base import Sandbox
from devagent.agent.sandbox.none import Unsandboxed
from devagent.agent.settings import SHELL_TIMEOUT, SHELL_TIMEOUT_MAX
from devagent.agent.tools.backends import ToolBackends
from devagent.agent.tools.output import HEAD_CHARS, TAIL_CHARS
from devagent.agent.tools.workspace import Workspace
from devagent.common.errors import DevagentError
from devagent.common.netpolicy import IPNetwork

if TYPE_CHECKING:
    from devagent.agent.settings import CoreConfig
    from devagent.agent.state import PendingCall, SessionState
    from devagent.agent.tools.findings import Findings
    from devagent.agent.tools.tty_screen import TtySize


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file a tool gives the model to look at (an image, a PDF), beside its text."""

    media_type: str
    data: bytes


@dataclass(frozen=True, slots=True)
class MediaInput:
    """Which files the session's model takes beside a tool's text (its profile says so)."""

    images: bool = False
    pdf: bool = False


class ToolWaits(DevagentError):
    """A call that cannot finish before questions it relays are answered (its subagent's
    permission requests): `questions` become waiting calls of the session (`PendingCall.via` names
    this call). Once each is answered, the call runs again and finds the answers there."""

    def __init__(self, questions: list[PendingCall]) -> None:
        super().__init__(f"{len(questions)} questions relayed")
        self.questions = questions


class Delegation(Protocol):
    """What runs a `task` call: the session's subagents (`devagent.agent.subagents.runner`)."""

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult: ...


class OutputFileLike(Protocol):
    """One command's whole output as it is saved (`saved_outputs.OutputFile`)."""

    def write(self, data: bytes) -> None: ...

    def finish(self, keep: bool) -> Path | None:
        """Closes the file; kept (its path returned) or removed."""
        ...


class OutputSaver(Protocol):
    """Where the whole output of long commands is saved (`saved_outputs.SavedOutputs`)."""

    def open(self, session_id: str, call_id: str) -> OutputFileLike | None: ...

    def prune(self) -> None: ...


class RunningProcess(Protocol):
    """A background process as the tools see it (`processes.BackgroundProcess`)."""

    @property
    def id(self) -> str: ...

    @property
    def command(self) -> str: ...

    @property
    def sandboxed(self) -> bool: ...

    @property
    def ended(self) -> bool: ...

    @property
    def exit_code(self) -> int | None: ...

    @property
    def tty(self) -> TtySize | None: ...

    @property
    def state(self) -> str: ...

    def summary(self) -> str: ...

    def take_output(self) -> str: ...

    async def wait(self, until: str | None, seconds: float, cancelled: asyncio.Event) -> bool: ...

    async def write(self, text: str, close: bool) -> None: ...

    async def stop(self, why: str) -> None: ...


class BackgroundProcesses(Protocol):
    """One session's background processes, as its tools use them (`processes.SessionProcesses`)."""

    def get(self, pid: str) -> RunningProcess | None: ...

    def all(self) -> Sequence[RunningProcess]: ...

    async def start(
        self, command: str, cwd: str, ctx: ToolContext, guard: dict[str, str], tty: TtySize | None = None
    ) -> RunningProcess: ...

    def gone(self, pid: str, records: list[dict[str, Any]]) -> str: ...


class LanguageServers(Protocol):
    """One session's language servers, as the write tools use them (`lsp.SessionServers`)."""

    async def findings(self, ctx: ToolContext, real: Path, old: str | None, new: str) -> Findings | None: ...


@dataclass(slots=True)
class ToolResult:
    """`text` goes to the model; `diff` and `data` go to clients as the ToolCall output;
    `attachments` go to the model with the text (never to clients)."""

    text: str
    diff: FileDiff | FileDiffs | None = None
    data: Any = None
    attachments: list[Attachment] = field(default_factory=list)


@dataclass
class ToolContext:
    """What a running tool may use."""

    workspace: Workspace
    state: SessionState
    call_id: str = ""
    # Emits live output: the text passed replaces what was shown before (the call's live_content).
    live: Callable[[str], Awaitable[None]] = field(default=lambda _text: _noop())
    # For edits: the content the user chose instead of the proposed one; for a question: the answer.
    new_content: str | None = None
    # Set when the turn is cancelled; tools that wait (shell) watch it.
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    session_id: str = ""
    # A shell command's timeout when it names none, and the most it may name (CoreConfig).
    shell_timeout: float = SHELL_TIMEOUT
    shell_timeout_max: float = SHELL_TIMEOUT_MAX
    # Where the whole output of a long command is saved (None: nowhere), and the session's
    # background processes (None: none may start here).
    saved_outputs: OutputSaver | None = None
    processes: BackgroundProcesses | None = None
    # What a shell command gets (CoreConfig): the operator's extra environment names, and its
    # limits.
    env_pass: tuple[str, ...] = ()
    command_memory_mb: int = 0
    command_processes: int = 0
    memory_file: str = "AGENTS.md"
    # The call runs unasked under a prefix grant ("git status"): what it starts must be only
    # what was shown (a shell command gets `gitguard.granted_env`).
    granted: bool = False
    # Where files are read and written and commands run (the client's, when a door supplies them).
    backends: ToolBackends = field(default_factory=ToolBackends)
    # The web tools (CoreConfig): the networks web_fetch may reach although they are not public,
    # and the operator's search service with its key.
    outbound_allow: tuple[IPNetwork, ...] = ()
    web_search_url: str = ""
    web_search_key: str = ""
    # What a write does when it would introduce a syntax error: warn | refuse | off
    # (CoreConfig.edit_syntax_check).
    syntax_check: str = "warn"
    # What a write does when the project's checkers find problems it introduced: warn | refuse |
    # off (CoreConfig.edit_diagnostics), and the session's language servers (None: none).
    diagnostics: str = "warn"
    language_servers: LanguageServers | None = None
    # The head and tail of a long command output the model gets, in characters (its family's).
    output_caps: tuple[int, int] = (HEAD_CHARS, TAIL_CHARS)
    # The files the session's model can be given to look at (read_file's images and PDFs).
    media: MediaInput = field(default_factory=MediaInput)
    # The session's subagents (the `task` tool starts one), and the turn's events, into which a
    # subagent's own are shown nested.
    subagents: Delegation | None = None
    emit: Callable[[Event], None] | None = None
    # Where the session's commands run (its sandbox, which the core hands it); by default
    # directly, as plain processes over the workspace roots.
    sandbox: Sandbox = None  # type: ignore[assignment]  # set from the workspace when not given

    def __post_init__(self) -> None:
        if self.sandbox is None:
            self.sandbox = Unsandboxed(self.workspace.roots)
        elif not self.sandbox.files_here:
            # The workspace is not a folder here: every file tool and command goes through the
            # sandbox (over a door's backends: an editor's files and terminal are not where the
            # workspace is).
            from devagent.agent.tools.remote_files import SandboxFiles  # late: only such sessions

            if not isinstance(self.backends.files, SandboxFiles):
                self.backends = ToolBackends(SandboxFiles(self.sandbox, self.workspace))

    @classmethod
    def for_call(
        cls,
        config: CoreConfig,
        workspace: Workspace,
        state: SessionState,
        call: PendingCall,
        cancelled: asyncio.Event,
        backends: ToolBackends,
        **kw: Any,
    ) -> ToolContext:
        """The context a call of a session runs in, with the operator's limits."""
        return cls(
            workspace=workspace,
            state=state,
            call_id=call.id,
            cancelled=cancelled,
            shell_timeout=config.shell_timeout,
            shell_timeout_max=config.shell_timeout_max,
            env_pass=config.env_pass,
            command_memory_mb=config.command_memory_mb,
            command_processes=config.command_processes,
            memory_file=config.memory_file,
            syntax_check=config.edit_syntax_check,
            diagnostics=config.edit_diagnostics,
            backends=backends,
            granted=call.granted,
            outbound_allow=config.outbound_networks(),
            web_search_url=config.web_search if "://" in config.web_search else "",
            web_search_key=config.web_search_key or "",
            **kw,
        )


async def _noop() -> None:
    return None


class Tool:
    """Base class of built-in tools. Subclasses set the class attributes and implement `run`."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}
    kind: ClassVar[ToolKind] = ToolKind.READ

    def describe(self, args: dict[str, Any]) -> str:
        return self.name

    def kind_for(self, args: dict[str, Any]) -> ToolKind:
        """The kind of one call, which the approval policy decides on: the tool's `kind`, unless
        what a call does depends on its arguments."""
        return self.kind

    async def confirmation(self, args: dict[str, Any], ctx: ToolContext) -> ConfirmationDetails:
        return GenericDetails(description=self.describe(args))

    def answer_content(self, args: dict[str, Any], option: str, new_content: str | None) -> str | None:
        """What a call allowed with `option` runs with as `ToolContext.new_content`: the content
        the user sent (an edited file, a changed command), or for a question its answer."""
        return new_content

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        raise NotImplementedError

    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}
