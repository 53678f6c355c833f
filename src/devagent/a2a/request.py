"""What the request handler hands the executor for one request: one typed
`Handoff` in the SDK's `ServerCallContext.state`, the only channel from a request handler to the
`AgentExecutor` it runs, instead of one string key per item."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from devagent.a2a import client_tools as ct
from devagent.a2a import extension as ext
from devagent.agent.api import ClientResult, Decision, Input, Resume, RunCommand, UserPrompt

if TYPE_CHECKING:
    from a2a.server.context import ServerCallContext

    from devagent.agent.api import ClientTool


@dataclass(slots=True)
class Prepared:
    """What the request handler worked out from a message before the SDK runs it."""

    text: str = ""
    confirmations: list[ext.Confirmation] = field(default_factory=list)
    settings: ext.AgentSettings | None = None
    workspace: str | None = None  # validated AgentSettings.workspace_path
    command: tuple[list[str], str] | None = None  # command/execute: (path, args)
    # The client's tool set (None: the message carries none, the task's set stays), the
    # definitions refused before the core saw them, the results as sent and as matched to calls.
    tools: list[ClientTool] | None = None
    tools_rejected: list[tuple[str, str]] = field(default_factory=list)
    raw_results: list[ct.ResultIn] = field(default_factory=list)
    text_results: ct.TextResults | None = None
    results: list[ClientResult] = field(default_factory=list)
    # The dialect of the request: "rfc" (the extension activated), "legacy" (Gemini CLI's
    # coderAgent) or "plain" (any other A2A client; a2a/plain.py).
    dialect: str = "rfc"
    # the user's words with a refusal, for the model: a plain client's "no, use b.txt", or the
    # TextPart an extension client sends beside a cancel confirmation
    feedback: str = ""

    def to_input(self) -> Input:
        if self.command is not None:
            return RunCommand(self.command[0], self.command[1])
        if self.confirmations or self.results:
            return Resume(
                decisions=[
                    Decision(
                        c.tool_call_id,
                        c.selected_option_id,
                        c.new_content,
                        self.feedback if c.selected_option_id == "cancel" and self.feedback else None,
                    )
                    for c in self.confirmations
                ],
                results=list(self.results),
            )
        return UserPrompt(self.text, self.settings.max_cost_usd if self.settings else None)


@dataclass(slots=True)
class LegacyRequest:
    """What the request handler worked out for a request in Gemini CLI's coderAgent dialect."""

    outcomes: dict[str, str] = field(default_factory=dict)  # call id -> the client's outcome
    # modify_with_editor only: nothing for the core; the waiting calls are announced again,
    # with the content the client edited.
    reannounce: bool = False
    edits: dict[str, str] = field(default_factory=dict)  # call id -> content from modify_with_editor


@dataclass(slots=True)
class Handoff:
    """Everything devagent's edges worked out about a request, for the executor."""

    prepared: Prepared | None = None  # the message, checked and parsed (None: not one of ours)
    legacy: LegacyRequest | None = None  # the request speaks Gemini CLI's coderAgent dialect
    command: tuple[list[str], str] | None = None  # command/execute, /executeCommand: (path, args)
    context_id: str | None = None  # the contextId of the task a taskId-only follow-up names
    new_context: bool = False  # the SDK generated the request's contextId: no session has it yet


_KEY = "devagent.handoff"


def handoff(context: ServerCallContext | None) -> Handoff:
    """The request's hand-off (a fresh one, kept with the context, on first use)."""
    if context is None:
        return Handoff()
    found = context.state.get(_KEY)
    if not isinstance(found, Handoff):
        found = context.state[_KEY] = Handoff()
    return found
