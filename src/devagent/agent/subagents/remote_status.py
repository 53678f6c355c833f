"""What a remote A2A agent's status messages say, in the dialect its task speaks
(remote_agents.py reads the stream; this says what each status message means).

- Plain A2A: a status message while the task works is progress. Each line of its text is a
  progress line, shown through the core's events (a `Notice` naming the agent, which every door
  shows: a stream-json `notice` line, wire text, ACP message text, A2A status text), and the
  lines, one per line, are the call's live output. The message of `input-required` is the
  remote's question; that of a final state its last word.
- Gemini CLI's a2a-server (every event's metadata says `coderAgent: {kind}`): `text-content`
  messages are the answer itself, streamed in pieces (joined as they come, the live output); a
  turn ends `input-required`, `final`, with no question: the answer is the text streamed since the
  message that started the turn. A turn that ended in an error (metadata `error`), or with a tool
  call of the remote's waiting for an approval (`tool-call-confirmation` with no later update),
  fails the call: devagent answers no remote agent's permission requests.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from devagent.agent.events import Notice, ToolErrorType
from devagent.agent.tools.failure import ToolFailure

if TYPE_CHECKING:
    from devagent.agent.tools.base import ToolContext

LIVE_CHARS = 2000
LINE_CHARS = 500  # of one progress line shown (the rest of it is left out)
CODER_KEY = "coderAgent"
TEXT_CONTENT = "text-content"
CONFIRMATION = "tool-call-confirmation"
TOOL_UPDATE = "tool-call-update"
_DONE = frozenset(("success", "error", "cancelled"))


@dataclasses.dataclass(slots=True)
class StatusReader:
    """The status messages of one message's stream (one turn of the remote task)."""

    agent: str
    coder: bool = False  # the task speaks Gemini CLI's coderAgent dialect
    streamed: list[str] = dataclasses.field(default_factory=list)  # its answer's pieces
    error: str = ""
    waiting: dict[str, str] = dataclasses.field(default_factory=dict)  # call id -> tool name
    live: str = ""
    quiet: bool = False  # the parent's turn was cancelled: nothing more is shown
    # what of an answer's piece may be held (the exchange's cap on all a remote says)
    keep: Callable[[str], str] = lambda text: text

    async def take(self, update: Any, text: str, ctx: ToolContext) -> str:
        """One status update (a2a-sdk's TaskStatusUpdateEvent) whose message's text is `text`:
        shows what it says, and returns what it says as the task's status text (the question or
        last word; "" for a piece of a coderAgent answer)."""
        from a2a.types import TaskState  # late: the A2A client, for remote agents only
        from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]

        meta = MessageToDict(update.metadata) if update.HasField("metadata") else {}
        coder = meta.get(CODER_KEY)
        if isinstance(coder, dict):
            self.coder = True
            if isinstance(meta.get("error"), str) and meta["error"]:
                self.error = meta["error"]
            return await self._coder(str(coder.get("kind", "")), update, text, ctx)
        if text and update.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING):
            await self._progress(text, ctx)
        return text

    async def _coder(self, kind: str, update: Any, text: str, ctx: ToolContext) -> str:
        if kind == TEXT_CONTENT:
            self.streamed.append(self.keep(text))
            self.live = (self.live + text[-LIVE_CHARS:])[-LIVE_CHARS:]
            if not self.quiet:
                await ctx.live(self.live)
            return ""
        if kind in (CONFIRMATION, TOOL_UPDATE):
            for call in _tool_calls(update.status.message.parts):
                call_id, status = str(call.get("callId", "")), str(call.get("status", ""))
                if kind == CONFIRMATION and status == "awaiting_approval":
                    self.waiting[call_id] = call["name"]
                elif status in _DONE or kind == TOOL_UPDATE:
                    self.waiting.pop(call_id, None)
            return ""
        return text if kind == "state-change" else ""

    async def _progress(self, text: str, ctx: ToolContext) -> None:
        lines = [" ".join(line.split())[:LINE_CHARS] for line in text.splitlines()]
        lines = [line for line in lines if line]
        if not lines or self.quiet:
            return
        self.live = (self.live + "".join(f"{line}\n" for line in lines))[-LIVE_CHARS:]
        await ctx.live(self.live)
        if ctx.emit is not None:
            for line in lines:
                ctx.emit(Notice(f"{self.agent}: {line}"))

    def turn_answer(self, state: int, status_text: str) -> str | None:
        """In the coderAgent dialect, where the stream ended a turn (`input-required`): the
        answer (the text streamed since the message, and a last word the end carried); else
        None. Raises ToolFailure for a turn that ended in an error or waiting for an approval."""
        from a2a.types import TaskState

        if not self.coder or state != TaskState.TASK_STATE_INPUT_REQUIRED:
            return None
        if self.error:
            raise ToolFailure(
                f"the remote agent {self.agent!r} failed: {self.error}", ToolErrorType.REMOTE_AGENT_ERROR
            )
        if self.waiting:
            tools = ", ".join(sorted(set(self.waiting.values())))
            raise ToolFailure(
                f"the remote agent {self.agent!r} waits for approval to run {tools}; devagent does not "
                "approve a remote agent's tools (let the remote approve them itself, e.g. Gemini CLI's "
                "a2a-server with GEMINI_YOLO_MODE=true)",
                ToolErrorType.REMOTE_AGENT_APPROVAL,
            )
        answer = "".join(self.streamed).strip()
        last = status_text.strip()
        return f"{answer}\n\n{last}".strip() if last and last not in answer else answer


def _tool_calls(parts: Any) -> list[dict[str, Any]]:
    """The gemini-core ToolCall objects a coderAgent tool-call message carries (DataParts):
    `{callId, name, status}` each."""
    from google.protobuf.json_format import MessageToDict

    out = []
    for p in parts:
        if not p.HasField("data"):
            continue
        data = MessageToDict(p.data)
        request = data.get("request") if isinstance(data, dict) else None
        if isinstance(request, dict) and request.get("callId"):
            out.append({"callId": request["callId"], "name": str(request.get("name", "")), **data})
    return out
