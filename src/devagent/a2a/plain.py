"""The plain A2A dialect: what a client that did not activate the development-tool extension sees
(an orchestrator delegating to devagent, Gemini CLI's remote agents, any A2A client).

Such a client knows tasks, messages and text, nothing of ToolCalls or thoughts. So:
- no extension content reaches it: no thought or ToolCall DataParts, no metadata under the
  extension URI (devagent's own facts about the task, such as client tool statistics, are under
  the `devagent` metadata key);
- while working it sees `working` updates with the agent's text and a short line per tool call as
  it starts ("Editing demo.txt", "Running `npm test`") or fails;
- a permission request ends the turn `input-required` with a status message that says, in words,
  what the agent wants to do and how to answer: `yes`, `always`, or `no` followed by optional
  feedback for the model; the answer comes back as text (`parse_answer`). The extension's
  ToolCallConfirmation DataPart is accepted too;
- a question the model asks (`ask_user`) ends it `input-required` with the question and its
  choices numbered; the next text message is the answer (`question_answer`). Client-supplied
  tools (their own design, not the extension) keep their DataParts.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from a2a.types import Artifact, Part, TaskArtifactUpdateEvent, TaskState

from devagent.a2a import extension as ext
from devagent.a2a.emitter import Emitter, tool_calls_part
from devagent.agent.api import (
    ToolCall,
    ToolCallStatus,
    ToolErrorType,
    ToolKind,
    how_to_answer,
    question_words,
    request_text,
)

if TYPE_CHECKING:
    from a2a.server.events import EventQueue

META_KEY = "devagent"  # task/event metadata for plain clients (never the extension's URI)

_YES = frozenset(
    "yes y ok okay approve approved proceed allow allowed sure go yeah yep yup confirm confirmed "
    "accept accepted granted continue".split()
)
_ALWAYS = frozenset(("always",))
_NO = frozenset(
    (
        "no",
        "n",
        "deny",
        "denied",
        "cancel",
        "reject",
        "stop",
        "don't",
        "dont",
        "nope",
        "nah",
        "abort",
        "never",
    )
)
_WORD = re.compile(r"[a-z']+")


@dataclass(slots=True)
class Answer:
    """A text answer to waiting permission requests: `option` "proceed_once", "proceed_always" or
    "cancel"; `feedback` the rest of a refusal, for the model."""

    option: str
    feedback: str = ""


def parse_answer(text: str) -> Answer:
    """`yes` / `always` / `no …` in the words people and models write them (case-insensitive;
    "Yes, go ahead", "allow always", "No - use b.txt instead"). Any other text is a refusal with
    those words for the model: nothing runs on a misunderstanding, and the
    conversation goes on with what the user said ("Complete", "what would that do?", "write it
    to b.txt instead") rather than the same question again."""
    stripped = text.strip()
    words = _WORD.findall(stripped.lower()[:200])
    if not words:
        return Answer("cancel", f"the user answered with a message instead: {stripped}" if stripped else "")
    first = words[0]
    if first in _ALWAYS or words[:2] in (["allow", "always"], ["yes", "always"]):
        return Answer("proceed_always")
    if first in _YES:
        return Answer("proceed_once")
    if first in _NO:
        # the feedback: what follows the first word, without the punctuation that joined them
        m = re.match(r"\s*[A-Za-z']+[\s,.;:!\-–—]*", stripped)
        rest = stripped[m.end() :] if m else ""
        return Answer("cancel", rest.strip())
    return Answer("cancel", f"the user answered with a message instead: {stripped}")


def question_answer(call: ToolCall, text: str) -> tuple[ext.Confirmation, str]:
    """A text answer to a waiting question: a choice (its number or its text), else the text as
    the free answer; where the question takes no free answer and the text names no choice, the
    question is dismissed with the user's words for the model. Returns the confirmation and the
    feedback that goes with a dismissal."""
    q = call.question
    got = q.answer_for(text) if q is not None else None
    if got is None:
        said = text.strip()
        return ext.Confirmation(call.id, "cancel"), f"they replied: {said}" if said else ""
    option, content = got
    return ext.Confirmation(call.id, option, content), ""


def _question_text(call: ToolCall) -> str:
    q = call.question
    assert q is not None
    return f"{question_words(q)}\n{how_to_answer(q)}"


def pause_text(calls: list[ToolCall]) -> str:
    asks = [c for c in calls if not c.awaiting_client]
    if not asks:
        return ""
    question = next((c for c in asks if c.question is not None), None)
    if question is not None:  # one question at a time; other requests are asked after it
        return _question_text(question)
    if len(asks) == 1:
        what = f"I want to {request_text(asks[0])}."
    else:
        what = "I want to:\n" + "\n".join(f"- {request_text(c)}" for c in asks)
    return (
        f"{what}\nReply yes to allow it, always to allow calls like this for the rest of this "
        "conversation, or no (optionally followed by what to do instead); anything else is a no "
        "with your words for me."
    )


def progress_text(call: ToolCall) -> str | None:
    """The line a plain client sees when a call starts or fails (None: nothing to say). The
    client's own tools are the client's to report."""
    if call.kind == ToolKind.CLIENT:
        return None
    if call.status == ToolCallStatus.EXECUTING:
        if call.kind == ToolKind.EDIT:
            path = call.args.get("file_path") or call.args.get("path") or call.description
            return f"Editing {path}"
        if call.kind == ToolKind.EXECUTE:
            return f"Running `{call.args.get('command', call.description)}`"
        if call.kind == ToolKind.FETCH:
            return f"Fetching {call.args.get('url', call.description)}"
        return None  # reads, searches, internal tools: not worth a line
    if (
        call.status == ToolCallStatus.FAILED
        and call.error is not None
        and call.error.type != ToolErrorType.CANCELLED
    ):
        return f"{call.name} failed: {call.error.message}"
    return None


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.title() for w in rest)


def plain_extra(extra: dict[str, Any]) -> dict[str, Any]:
    """The task metadata the RFC dialect keeps about tools, in A2A's own JSON style (camelCase
    field names, no data as keys; TCK DM-SERIAL-001): `toolStats` a list of
    `{tool, calls, failures}`, `clientTools` `{accepted, rejected}`, `usage`, `taskUsage` and
    `subagentUsage` `{inputTokens, ..., costUsd, unpricedRequests}`.
    Extension clients keep the RFC dialect's `tool_stats` / `client_tools` / `usage` under the
    extension's URI."""
    md: dict[str, Any] = {}
    for key, value in extra.items():
        if key == "tool_stats":
            md["toolStats"] = [{"tool": name, **stats} for name, stats in sorted(value.items())]
        elif key == "client_tools":
            md["clientTools"] = value
        elif key in ("usage", "task_usage", "subagent_usage"):
            md[_camel(key)] = {_camel(k): v for k, v in value.items()}
        else:
            md[key] = value
    return md


CHUNK_CHARS = 200  # a plain client's reply chunk without a line end, at most about this long


class PlainEmitter(Emitter):
    """The events of one execution for a client without the extension, through the one
    `Emitter` interface: no extension content, permission requests in words.

    The answer goes where A2A puts results: the chunks of one `reply` artifact
    (the first with `append: false`, then `append: true`, the last with `lastChunk: true`),
    never as status messages, and the final status message does not repeat it; status updates
    carry state changes, the questions and a line per edit or command. So a client that shows
    everything it receives shows the answer once.

    A chunk is whole lines of the answer (or, in a long line, about `CHUNK_CHARS` characters up
    to a space), not each piece the model streams: clients that draw every chunk as a bubble of
    its own (the A2A Inspector does) then show lines, not words. The text after the last line end
    is held back, so that the last chunk sent carries `lastChunk` and text."""

    __slots__ = ("_artifact_id", "_held", "_said")

    def __init__(self, queue: EventQueue, task_id: str, context_id: str, model: str) -> None:
        super().__init__(queue, task_id, context_id, model)
        self._said: set[tuple[str, str]] = set()  # (call id, status) already told
        self._artifact_id: str | None = None  # this execution's reply artifact, once begun
        self._held = ""  # the latest chunk, not sent yet

    async def text(self, text: str) -> None:
        self._held += text
        held = self._held
        cut = held.rfind("\n", 0, len(held) - 1) + 1  # after the last line end with text after it
        if not cut and len(held) > CHUNK_CHARS:
            cut = held.rfind(" ", 0, len(held) - 1) + 1 or CHUNK_CHARS
        if cut:
            self._held = held[cut:]
            await self._chunk(held[:cut], last=False)

    async def _chunk(self, text: str, *, last: bool) -> None:
        first = self._artifact_id is None
        if self._artifact_id is None:
            self._artifact_id = f"reply-{uuid.uuid4().hex[:12]}"
        artifact = Artifact(artifact_id=self._artifact_id, name="reply", parts=[Part(text=text)])
        await self.queue.enqueue_event(
            TaskArtifactUpdateEvent(
                task_id=self.task_id,
                context_id=self.context_id,
                artifact=artifact,
                append=not first,
                last_chunk=last,
            )
        )

    async def _flush(self, last: bool) -> None:
        """The held chunk out (the reply's last when the execution pauses or ends)."""
        if self._held:
            text, self._held = self._held, ""
            await self._chunk(text, last=last)

    async def emit(self, state: TaskState, *rest: Any, **named: Any) -> None:
        """`Emitter.emit`, after the held chunk of the reply (its last unless still working)."""
        await self._flush(last=state != TaskState.TASK_STATE_WORKING)
        await super().emit(state, *rest, **named)

    async def reply(self, text: str) -> list[Part] | None:
        """The whole reply went out as the artifact's chunks: the last one now, and no final
        status message repeating it."""
        if self._artifact_id is None and not self._held:
            return await super().reply(text)  # (nothing streamed: the whole reply at once)
        await self._flush(last=True)
        return None

    def metadata_of(self, kind: str, error: str | None = None, extra: dict[str, Any] | None = None) -> Any:
        md = plain_extra(extra or {})
        if error:
            md["error"] = error
        return {META_KEY: md} if md else None

    def settled_message(self, calls: list[ToolCall]) -> None:
        return None  # no ToolCall updates in this dialect: nothing a crash could leave open

    def tool_json(self, c: ToolCall) -> dict[str, Any]:
        """Not a ToolCall: the line to show, if any (read by `data`)."""
        line = progress_text(c)
        return {"id": c.id, "status": c.status.value, "line": line}

    async def data(self, kind: str, data: dict[str, Any]) -> None:
        if kind != ext.TOOL_CALL_UPDATE or not data.get("line"):
            return  # thoughts and quiet calls are not for this client
        key = (data["id"], data["status"])
        if key in self._said:
            return
        self._said.add(key)
        await self.emit(TaskState.TASK_STATE_WORKING, ext.TEXT_CONTENT, Part(text=data["line"] + "\n"))

    def pause_parts(self, calls: list[ToolCall]) -> list[Part] | None:
        parts: list[Part] = []
        text = pause_text(calls)
        if text:
            parts.append(Part(text=text))
        client_calls = [c for c in calls if c.awaiting_client]
        if client_calls:
            parts.append(tool_calls_part(client_calls))
        return parts or None
