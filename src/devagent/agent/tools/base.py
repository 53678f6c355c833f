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
import os
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
    ToolErrorType,
    ToolKind,
)
from devagent.agent.sandbox.base import Sandbox
from devagent.agent.sandbox.confine import Located, Outside, locate
from devagent.agent.sandbox.none import Unsandboxed
from devagent.agent.settings import SHELL_TIMEOUT, SHELL_TIMEOUT_MAX
from devagent.agent.tools.backends import ToolBackends
from devagent.agent.tools.output import HEAD_CHARS, TAIL_CHARS
from devagent.common.errors import DevagentError
from devagent.common.netpolicy import IPNetwork

if TYPE_CHECKING:
    from devagent.agent.settings import CoreConfig
    from devagent.agent.state import PendingCall, SessionState
    from devagent.agent.tools.findings import Findings
    from devagent.agent.tools.tty_screen import TtySize


class ToolFailure(DevagentError):
    """A tool call failed in a way the model should read and may recover from."""

    def __init__(self, message: str, type: ToolErrorType = ToolErrorType.TOOL_ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.type = type


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


class Workspace:
    """The workspace roots of a session. Relative paths are taken from the first root; a path
    that leaves every root, directly, by `..` or through a symlink, is refused.

    Every file tool opens files through `locate`: the path is walked from an open
    descriptor of a root, symlinks inside the workspace followed by that same rule, and the result
    is the open parent directory, so the final open (O_NOFOLLOW) or rename happens relative to a
    directory that is certainly inside, whatever is swapped meanwhile (`_confine`). `resolve` gives
    the real path a string names, for display and to name the file again later; it is never
    opened as a string.

    Beside the roots, `read_only_roots`: folders the session may read through `read_file` but
    never write (the saved whole output of its long commands, under the data directory which the
    sandbox hides; the user's skill folders, which it shows read-only). Only the reads that ask for
    them (`readable=True`) reach them; a write there is refused."""

    def __init__(
        self, roots: list[Path], protected: tuple[Path, ...] = (), read_only_roots: tuple[Path, ...] = ()
    ) -> None:
        if not roots:
            raise ValueError("a workspace needs at least one root")
        self.roots = [Path(os.path.realpath(r)) for r in roots]
        self.read_only_roots = [Path(os.path.realpath(r)) for r in read_only_roots]
        # What configures devagent or holds its state (CoreConfig.protected_paths, real paths):
        # never written by a tool, whatever the approval mode.
        self.protected = protected

    @property
    def primary(self) -> Path:
        return self.roots[0]

    def absolute(self, path: str | Path) -> Path:
        """A path argument made absolute (from the first root), checked for the obvious mistakes."""
        if isinstance(path, Path):
            return path if path.is_absolute() else self.primary / path
        if not isinstance(path, str) or not path.strip():
            raise ToolFailure("a path is required", ToolErrorType.INVALID_ARGUMENTS)
        if "\x00" in path:
            raise ToolFailure("the path contains a NUL byte", ToolErrorType.INVALID_ARGUMENTS)
        p = Path(os.path.expanduser(path)) if path.startswith("~") else Path(path)
        return p if p.is_absolute() else self.primary / p

    def _outside(self, path: str | Path, readable: bool) -> ToolFailure:
        if not readable and self.in_read_only_root(path):
            return self._read_only(path)
        return ToolFailure(
            f"path {str(path)!r} is outside the workspace roots ({', '.join(map(str, self.roots))})",
            ToolErrorType.PATH_OUTSIDE_WORKSPACE,
        )

    @staticmethod
    def _read_only(path: str | Path) -> ToolFailure:
        return ToolFailure(
            f"{str(path)!r} is read-only: read it with read_file; no tool writes there",
            ToolErrorType.READ_ONLY_PATH,
        )

    def in_read_only_root(self, path: str | Path) -> bool:
        """Whether `path` names something in a read-only root (by its words: a file there is
        still opened through the confined walk)."""
        try:
            p = Path(os.path.normpath(self.absolute(path)))
        except ToolFailure:
            return False
        return any(p.is_relative_to(r) for r in self.read_only_roots)

    def locate(
        self, path: str | Path, *, create_dirs: bool = False, missing_ok: bool = False, readable: bool = False
    ) -> Located:
        """The open parent directory of `path` and its final name (see `_confine.locate`); the
        caller closes it. Refused with a ToolFailure when the path leaves the roots (with
        `readable`, the read-only roots count as roots); other OSErrors (a missing parent
        directory, a symlink loop) are the caller's to word."""
        roots = [*self.roots, *self.read_only_roots] if readable else self.roots
        try:
            return locate(roots, self.absolute(path), create_dirs=create_dirs, missing_ok=missing_ok)
        except Outside as e:
            raise self._outside(path, readable) from e

    def resolve(self, path: str | Path, *, must_exist: bool = False, readable: bool = False) -> Path:
        """The real path `path` names inside the roots (symlinks inside followed, by the rule of
        `locate`; with `readable`, the read-only roots too), or a ToolFailure."""
        try:
            with self.locate(path, missing_ok=True, readable=readable) as loc:
                exists = loc.lstat() is not None
                real = loc.path
        except OSError as e:
            raise ToolFailure(f"{str(path)!r}: {e.strerror or e}", ToolErrorType.OS_ERROR) from e
        if must_exist and not exists:
            raise ToolFailure(f"{str(path)!r} does not exist", ToolErrorType.NOT_FOUND)
        return real

    def check_writable(self, real: Path, shown: str | Path | None = None) -> None:
        """A ToolFailure when a tool may not change the file at the real path `real`, in any
        approval mode: devagent's own configuration and state (its settings file,
        data folder, database), and git's own files (`.git/`: its config and hooks choose programs
        that later `git` commands run, which would turn an edit into running code), and a file
        named `HEAD`: with it, `config`, `objects/` and `refs/` make any folder a git directory
        whose configuration git would read."""
        what = str(shown if shown is not None else self.display(real))
        if any(real.is_relative_to(r) for r in self.read_only_roots):
            raise self._read_only(what)
        for p in self.protected:
            if real == p or real.is_relative_to(p):
                raise ToolFailure(
                    f"{what!r} configures devagent or holds its data; no tool may change it",
                    ToolErrorType.PROTECTED_PATH,
                )
        inside = next((real.relative_to(r) for r in self.roots if real.is_relative_to(r)), None)
        if inside is not None and ".git" in inside.parts:
            raise ToolFailure(
                f"{what!r} is inside a .git directory, which only git itself may change: "
                "use git commands (run_shell_command) instead",
                ToolErrorType.PROTECTED_PATH,
            )
        if inside is not None and inside.name == "HEAD":
            raise ToolFailure(
                f"{what!r}: a file named HEAD makes its folder a git directory, which only git "
                "itself may create: use git commands (run_shell_command) instead",
                ToolErrorType.PROTECTED_PATH,
            )

    def display(self, path: Path) -> str:
        """A path as the user should read it: relative to its root where possible."""
        for root in self.roots:
            if path == root:
                return "."
            if path.is_relative_to(root):
                return str(path.relative_to(root))
        return str(path)

    def contains(self, path: Path) -> bool:
        """Whether `path` resolves inside the roots (by the rule of `locate`)."""
        try:
            self.resolve(path)
        except ToolFailure as e:
            return e.type != ToolErrorType.PATH_OUTSIDE_WORKSPACE
        return True


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
